"""Sibling credit (turngym/trainers/advantages/sibling.py) on trees computed by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from turngym.core.records import Step, Trajectory
from turngym.trainers.advantages import gigpo, sibling


def node(
    name: str,
    rewards: list[float],
    parent: str | None = None,
    branch_turn: int | None = None,
    group: str = "g",
    scorable: bool = True,
) -> Trajectory:
    start = branch_turn or 0
    steps = [
        Step(turn=start + k, observation="", action=f"{name}{k}", reward=r, state_key=f"{name}{k}")
        for k, r in enumerate(rewards)
    ]
    return Trajectory(
        env_id="e",
        task_id="t",
        seed=0,
        steps=steps,
        group_id=group,
        trajectory_id=name,
        scorable=scorable,
        parent=parent or "",
        branch_turn=None if parent is None else branch_turn,
    )


def close(actual: list[np.ndarray], expected: list[list[float]]) -> None:
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        np.testing.assert_allclose(a, e, atol=1e-5)


def test_three_siblings_at_one_branch_point():
    # A: turns 0,1,2 with rewards 0,0,1; B and C branch from A's state before turn 1.
    # gamma = 0.5. At (A, 1): G_A = 0 + 0.5 * 1 = 0.5, G_B = 0 + 0.5 * 0 = 0, G_C = 1.
    # mean 0.5, std (ddof 1) = sqrt((0 + 0.25 + 0.25) / 2) = 0.5: A_sib = 0, -1, +1.
    batch = [node("A", [0, 0, 1]), node("B", [0, 0], "A", 1), node("C", [1], "A", 1)]
    close(sibling.sibling_term(batch, gamma=0.5, eps=1e-12), [[0, 0, 0], [-1, 0], [1]])
    # full-episode returns: R_A = 1, R_B = 0 (A's turn-0 reward 0 + own 0), R_C = 1
    np.testing.assert_allclose(sibling.episode_returns(batch), [1, 0, 1])
    # A_E: mean 2/3, std sqrt(1/3): A and C +(1/3)/sqrt(1/3) = 1/sqrt(3), B -2/sqrt(3)
    e = 1 / math.sqrt(3)
    close(sibling.advantages(batch, gamma=0.5, eps=1e-12), [[e, e, e], [-2 * e - 1, -2 * e], [e + 1]])
    close(sibling.advantages(batch, gamma=0.5, eps=1e-12, step_weight=0.0), [[e, e, e], [-2 * e, -2 * e], [e]])


def test_the_prefix_reward_counts_in_a_branch_return():
    # A earns 1 at turn 0, then 0; B branches before turn 1 and earns 2: R_B = 1 + 2 = 3
    batch = [node("A", [1, 0]), node("B", [2], "A", 1)]
    np.testing.assert_allclose(sibling.episode_returns(batch), [1, 3])
    # unscaled: G_A(1) = 0, G_B(1) = 2, mean 1: A's turn 1 gets -1, B's only step +1
    close(sibling.sibling_term(batch, gamma=0.9, scale=False), [[0, -1], [1]])


def test_roots_of_a_group_are_siblings_and_branches_at_a_start_join_them():
    # R1, R2: roots of group g (identical reset state). D branches from R1 before turn 0, i.e. from
    # the reset state, and E branches from D at D's own start turn 0: all four are siblings at the
    # start. F (group h) is alone in its group. Rewards are the returns (one step each, gamma moot).
    batch = [
        node("R1", [1]),
        node("R2", [0]),
        node("D", [0], "R1", 0),
        node("E", [3], "D", 0),
        node("F", [5], group="h"),
    ]
    # start of g: returns 1, 0, 0, 3: mean 1, centred 0, -1, -1, 2; F alone: 0
    close(sibling.sibling_term(batch, scale=False), [[0], [-1], [-1], [2], [0]])


def test_nested_branch_points_are_separate_groups():
    # A: rewards 0,0,0,1 (turns 0-3). B branches before turn 1 (rewards 0,1,0 at turns 1-3);
    # C branches from B before turn 2 (reward 0 at turn 2, 0 at turn 3). gamma = 1, unscaled.
    # (A, 1): G_A = 1, G_B = 1: centred 0, 0.  (B, 2): G_B(2) = 1 + 0 = 1, G_C = 0: +0.5, -0.5.
    batch = [node("A", [0, 0, 0, 1]), node("B", [0, 1, 0], "A", 1), node("C", [0, 0], "B", 2)]
    close(sibling.sibling_term(batch, gamma=1.0, scale=False), [[0, 0, 0, 0], [0, 0.5, 0], [-0.5, 0]])
    np.testing.assert_allclose(sibling.episode_returns(batch), [1, 1, 0])


def test_an_unscorable_sibling_counts_nowhere():
    batch = [node("A", [0, 1]), node("B", [0], "A", 1), node("C", [5], "A", 1, scorable=False)]
    # (A, 1) without C: G_A = 1, G_B = 0, mean 0.5: +0.5, -0.5 (unscaled)
    close(sibling.sibling_term(batch, scale=False), [[0, 0.5], [-0.5], [0]])
    assert not sibling.advantages(batch)[2].any()


def test_it_adds_to_gigpo():
    batch = [node("A", [0, 0, 1]), node("B", [0, 0], "A", 1), node("C", [1], "A", 1)]
    base = gigpo.advantages(batch, gamma=0.5)
    combined = [b + s for b, s in zip(base, sibling.sibling_term(batch, gamma=0.5))]
    assert combined[2][0] > base[2][0] and combined[1][0] < base[1][0]


@pytest.mark.parametrize(
    "batch,match",
    [
        ([node("A", [0]), node("B", [0], "Z", 1)], r"parent: 'Z'.*not a trajectory_id"),
        ([node("A", [0, 0]), node("B", [0], "A", 3)], r"branch_turn: 3 .* from 0 to 2"),
        ([node("A", [0, 0]), node("B", [0], "A", None)], r"branch_turn: None"),
        (
            [node("A", [0, 0, 0]), node("B", [0], "A", 2), node("C", [0], "B", 1)],
            r"branch_turn: 1 .* from 2 to 3",
        ),
        ([node("A", [0]), node("A", [1])], "trajectory_id: 'A' appears twice"),
    ],
)
def test_malformed_trees_are_named(batch, match):
    with pytest.raises(ValueError, match=match):
        sibling.sibling_term(batch)


def test_a_cycle_is_named():
    a, b = node("A", [0], "B", 0), node("B", [0], "A", 0)
    with pytest.raises(ValueError, match="form a cycle"):
        sibling.advantages([a, b])
