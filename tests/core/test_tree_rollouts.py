"""Tree rollouts (turngym/core/pool/tree.py): branches restore their root's snapshot, records keep
the tree, the default branch rule, and the error for an env without snapshots."""

from __future__ import annotations

import hashlib

import pytest

import turngym
from turngym.core.pool.tree import branch_turns, tree_rollout
from turngym.core.records import Step, Trajectory, read_jsonl, write_jsonl

HOUSEHOLD = "turngym/Household-v0"


class ConversationHash:
    """Picks an admissible action from a hash of the whole conversation: the same conversation
    always gets the same action, so a branch that restores its root's state and history plays on
    exactly as the root did."""

    def act(self, convs):
        out = []
        for conv in convs:
            options = conv.info.get("admissible_actions") or ["look"]
            digest = hashlib.sha256(repr(conv.messages).encode()).digest()
            out.append(options[digest[0] % len(options)])
        return out


def _household_tasks(n: int) -> list[str]:
    env = turngym.make(HOUSEHOLD)
    try:
        return env.task_ids("train")[:n]
    finally:
        env.close()


@pytest.mark.parametrize("backend,after", [("inline", 0), ("thread", 0), ("process", 0), ("inline", 2), ("thread", 3)])
def test_a_branch_that_acts_as_its_root_repeats_the_roots_continuation(backend, after):
    with turngym.EnvPool(HOUSEHOLD, num_envs=3, backend=backend) as pool:
        trajs = tree_rollout(
            pool,
            ConversationHash(),
            _household_tasks(2),
            group_size=2,
            branches=2,
            points=2,
            seed=3,
            max_turns=6,
            after=after,
        )
    roots = [t for t in trajs if not t.parent]
    branches = [t for t in trajs if t.parent]
    assert len(roots) == 4 and len(branches) == 2 * 2 * 2
    by_id = {t.trajectory_id: t for t in roots}
    for b in branches:
        root = by_id[b.parent]
        assert b.scorable and b.group_id == root.group_id and b.task_id == root.task_id
        assert b.trajectory_id.startswith(root.trajectory_id + "/")
        assert 0 < b.branch_turn < root.length
        own = root.steps[b.branch_turn :]
        assert [s.turn for s in b.steps] == [s.turn for s in own]
        for mine, theirs in zip(b.steps, own, strict=True):
            assert (mine.observation, mine.action, mine.reward, mine.state_key) == (
                theirs.observation,
                theirs.action,
                theirs.reward,
                theirs.state_key,
            )
            assert mine.info == theirs.info
        assert b.success == root.success
    # ordered by group: its roots, then its branches
    groups = [t.group_id for t in trajs]
    assert groups == sorted(groups, key=groups.index)
    for g in set(groups):
        kinds = [bool(t.parent) for t in trajs if t.group_id == g]
        assert kinds == sorted(kinds)


class CountingCalls(ConversationHash):
    def __init__(self):
        self.calls: list[int] = []

    def act(self, convs):
        self.calls.append(len(convs))
        return super().act(convs)


def test_branches_chosen_early_play_in_the_roots_calls():
    """With ``after``, a group's branches join the policy calls of its roots' remaining turns
    instead of running in calls of their own once the roots ended."""
    calls = {}
    for after in (0, 2):
        policy = CountingCalls()
        with turngym.EnvPool(HOUSEHOLD, num_envs=12, backend="inline") as pool:
            trajs = tree_rollout(
                pool, policy, _household_tasks(2), group_size=2, branches=2, points=2, seed=3, max_turns=6, after=after
            )
        branches = [t for t in trajs if t.parent]
        assert len(branches) == 8
        if after:
            assert {b.branch_turn for b in branches} == {1}  # turns played by then: 0 and 1; 0 comes last
        calls[after] = policy.calls
    assert len(calls[2]) < len(calls[0])  # fewer calls: no wave of branches after the roots
    assert max(calls[2]) > 4  # a call held roots and branches together


def test_branches_of_a_random_policy_start_from_the_roots_state(tmp_path):
    from turngym.agents import RandomPolicy

    with turngym.EnvPool(HOUSEHOLD, num_envs=2, backend="inline") as pool:
        trajs = tree_rollout(
            pool, RandomPolicy(seed=4), _household_tasks(1), group_size=2, branches=3, seed=1, max_turns=5
        )
    by_id = {t.trajectory_id: t for t in trajs}
    branches = [t for t in trajs if t.parent]
    assert len(branches) == 3
    for b in branches:
        root = by_id[b.parent]
        first = root.steps[b.branch_turn]
        assert b.steps[0].state_key == first.state_key
        assert b.steps[0].observation == first.observation
        assert b.initial_observation == first.observation
    # the records keep the tree through a JSONL file
    write_jsonl(tmp_path / "tree.jsonl", trajs, append=False)
    again = read_jsonl(tmp_path / "tree.jsonl")
    assert [(t.parent, t.branch_turn) for t in again] == [(t.parent, t.branch_turn) for t in trajs]


def test_old_records_load_as_roots():
    old = Trajectory(env_id="e", task_id="t", seed=0, trajectory_id="a").to_dict()
    del old["parent"], old["branch_turn"]
    loaded = Trajectory.from_dict(old)
    assert loaded.parent == "" and loaded.branch_turn is None


def test_an_env_without_snapshots_is_named():
    with turngym.EnvPool("turngym-tests/Counter-v0", num_envs=1, backend="inline") as pool:
        with pytest.raises(ValueError, match=r"turngym-tests/Counter-v0 does not support snapshots"):
            tree_rollout(pool, ConversationHash(), ["counter-1"], group_size=2)


@pytest.mark.parametrize(
    "name,value,low", [("branches", 0, 1), ("points", 0, 1), ("branches", 1.5, 1), ("after", -1, 0)]
)
def test_bad_tree_arguments_are_named(name, value, low):
    with turngym.EnvPool(HOUSEHOLD, num_envs=1, backend="inline") as pool:
        with pytest.raises(ValueError, match=rf"{name}: must be an int >= {low}"):
            tree_rollout(pool, ConversationHash(), _household_tasks(1), **{name: value})


def _root(actions: list[str], keys: list[str], entropies: list[float], scorable: bool = True) -> Trajectory:
    steps = [
        Step(turn=t, observation="", action=a, state_key=k, entropies=[e, e])
        for t, (a, k, e) in enumerate(zip(actions, keys, entropies))
    ]
    return Trajectory(env_id="e", task_id="t", seed=0, steps=steps, scorable=scorable)


def test_branch_turns_prefer_divergence_then_entropy_and_never_turn_zero():
    group = [
        # state s1 before turn 1 is shared and the two took different actions there: divergence
        _root(["a", "b", "c"], ["s0", "s1", "x2"], [9.0, 0.1, 5.0]),
        _root(["a", "z", "d"], ["s0", "s1", "y2"], [9.0, 0.3, 0.2]),
    ]
    # turn 0 has the highest entropy but comes last; divergent turns before the rest, by entropy
    assert branch_turns(group, points=3) == [(1, 1), (0, 1), (0, 2)]
    assert branch_turns(group, points=1) == [(1, 1)]
    assert branch_turns(group, points=7)[-2:] == [(0, 0), (1, 0)]
    # unscorable members are never branched
    group[1].scorable = False
    assert branch_turns(group, points=2) == [(0, 2), (0, 1)]
