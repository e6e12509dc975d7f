"""Sibling credit (turngym/trainers/advantages/sibling.py) on trees computed by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from turngym.core.records import Step, Trajectory
from turngym.trainers.advantages import gigpo, grpo, hgpo, sibling
from turngym.trainers.advantages._common import flatten


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


def visit(name: str, turns: list[tuple[str, str, float]], parent: str | None = None, branch_turn: int | None = None):
    """A node whose steps are (state_key, action, reward) from its first turn on."""
    traj = node(name, [r for _, _, r in turns], parent, branch_turn)
    for step, (state, action, _) in zip(traj.steps, turns):
        step.state_key, step.action = state, action
    return traj


def hgpo_tree() -> list[Trajectory]:
    # Roots A and R of group g; B and C branch from A before turn 1 (state s1, reached by A's
    # action x in s0). R reaches s1 too, by another action (w): same state, another history.
    return [
        visit("A", [("s0", "x", 0), ("s1", "y", 0), ("s2", "z", 1)]),
        visit("R", [("s0", "w", 0), ("s1", "y", 1)]),
        visit("B", [("s1", "v", 0), ("s3", "u", 0)], "A", 1),
        visit("C", [("s1", "y", 2)], "A", 1),
    ]


def test_a_branch_history_runs_through_its_ancestors():
    # rows: A 0-2, B 3-4, D 5 (from B at B's start turn 1: its history is A's turn 0),
    # E 6 (from B before turn 2: B's turn 1), F 7 (from A at turn 0: no history)
    batch = [
        node("A", [0, 0, 0]),
        node("B", [0, 0], "A", 1),
        node("D", [0], "B", 1),
        node("E", [0], "B", 2),
        node("F", [0], "A", 0),
    ]
    previous = sibling.tree_previous(batch, flatten(batch))
    assert previous.tolist() == [-1, 0, 1, 0, 3, 0, 3, -1]


def test_hgpo_levels_over_a_tree_by_hand():
    # gamma 0.5: G_A = 0.25, 0.5, 1; G_R = 0.5, 1; G_B = 0, 0; G_C = 2. Unscaled, max_depth 1.
    # Level 0 (state): s0 {A0 .25, R0 .5} mean 3/8: -1/8, +1/8; s1 {A1 .5, R1 1, B0 0, C0 2}
    # mean 7/8: -3/8, +1/8, -7/8, +9/8; s2, s3 alone.
    # Level 1 (state + the step before): A0 and R0 have no history and stay one group (-1/8, +1/8);
    # A1, B0, C0 all follow (s0, x) (the branches through A's turn 0) mean 5/6: -1/3, -5/6, +7/6;
    # R1 (after (s0, w)) is alone there. Weights (k + 1): 1 and 2.
    # A1 = (-3/8 - 2/3) / 3 = -25/72; B0 = (-7/8 - 5/3) / 3 = -61/72; C0 = (9/8 + 7/3) / 3 = 83/72
    batch = hgpo_tree()
    expected_levels = [[-1 / 8, -25 / 72, 0], [1 / 8, 1 / 8], [-61 / 72, 0], [83 / 72]]
    close(sibling.hierarchy_term(batch, max_depth=1, alpha=1.0, gamma=0.5, scale=False), expected_levels)
    # the whole estimator: the sibling term at (A, 1) is G - 5/6 (-1/3, -5/6, +7/6), at the start
    # the roots' -1/8, +1/8; episode returns R_A 1, R_R 1, R_B 0 + 0, R_C 0 + 2: mean 1, so
    # A_E = 0, 0, -1, +1. A(t) = A_E + A_sib + A_H.
    expected = [
        [-1 / 8 - 1 / 8, -1 / 3 - 25 / 72, 0],
        [1 / 8 + 1 / 8, 0 + 1 / 8],
        [-1 - 5 / 6 - 61 / 72, -1],
        [1 + 7 / 6 + 83 / 72],
    ]
    options = dict(gamma=0.5, scale=False, combine="hgpo", max_depth=1, alpha=1.0)
    close(sibling.advantages(batch, **options), expected)


def test_hgpo_levels_scaled_and_without_a_tree_are_plain_hgpo():
    # scaled, at the branch point's level-1 group {A1 .5, B0 0, C0 2}: std (ddof 1) of
    # (-1/3, -5/6, 7/6) = sqrt((1/9 + 25/36 + 49/36) / 2) = sqrt(13/12); level 0's group
    # {.5, 1, 0, 2}: std = sqrt((9 + 1 + 49 + 81) / 64 / 3) = sqrt(35/48)
    batch = hgpo_tree()
    got = sibling.hierarchy_term(batch, max_depth=1, alpha=1.0, gamma=0.5, eps=1e-12)
    l0, l1 = math.sqrt(35 / 48), math.sqrt(13 / 12)
    np.testing.assert_allclose(got[3], [(9 / 8 / l0 + 2 * (7 / 6) / l1) / 3], atol=1e-5)
    # roots alone: the tree's histories are the episodes' own, as in hgpo
    roots = batch[:2]
    plain = hgpo.advantages(roots, max_depth=2, gamma=0.5, step_weight=1.0)
    episode = grpo.advantages(roots)
    close(sibling.hierarchy_term(roots, max_depth=2, gamma=0.5), [p - e for p, e in zip(plain, episode)])


def test_combine_options_are_checked_in_one_line():
    with pytest.raises(
        ValueError, match=r"^rl\.estimator_args\.combine: 'rloo' is not one of \['none', 'gigpo', 'hgpo'\]$"
    ):
        sibling.advantages(hgpo_tree(), combine="rloo")
    with pytest.raises(ValueError, match=r"^rl\.estimator_args\.max_depth: an option of combine: hgpo"):
        sibling.advantages(hgpo_tree(), combine="gigpo", max_depth=2)
