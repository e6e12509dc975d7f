"""The trees of a file of tree rollouts, as the viewer's tree view shows them: per group, each root
with its branches, the turn each branched at and each branch's outcome.

A branch's return in the view is its whole episode's: its own rewards plus its root's before the
branch turn (the root alone holds those turns), so a branch compares with its root and siblings.
"""

from __future__ import annotations

from typing import Any

from turngym.core.records import Trajectory


def has_branches(trajectories: list[Trajectory]) -> bool:
    return any(t.parent for t in trajectories)


def _outcome(t: Trajectory) -> str:
    return "unscorable" if not t.scorable else "success" if t.success else "failure"


def tree_view(trajectories: list[Trajectory]) -> list[dict[str, Any]]:
    """One entry per group with branches (file order): ``{"group_id", "task_id", "roots": [...]}``,
    every root of the group ``{"index", "trajectory_id", "turns", "episode_return", "outcome",
    "branches"}``, and under it each branch of its tree (branches of branches too, file order):
    the same plus ``parent``, ``branch_turn`` and ``first_action`` (what it did at the branch turn)."""
    by_id = {t.trajectory_id: i for i, t in enumerate(trajectories) if t.trajectory_id}
    prefixes: dict[int, float] = {}

    def parent_of(i: int) -> int | None:
        parent = trajectories[i].parent
        return by_id.get(parent) if parent else None

    def prefix(i: int, depth: int = 0) -> float:
        """The rewards of the turns before its branch turn, which its ancestors hold."""
        if i not in prefixes:
            p, b = parent_of(i), trajectories[i].branch_turn or 0
            if p is None or depth > len(trajectories):  # a root (or a broken chain of parents)
                prefixes[i] = 0.0
            else:
                prefixes[i] = prefix(p, depth + 1) + sum(s.reward for s in trajectories[p].steps if s.turn < b)
        return prefixes[i]

    def root_of(i: int) -> int:
        for _ in range(len(trajectories)):
            p = parent_of(i)
            if p is None:
                break
            i = p
        return i

    def node(i: int) -> dict[str, Any]:
        t = trajectories[i]
        return {
            "index": i,
            "trajectory_id": t.trajectory_id,
            "turns": len(t.steps),
            "episode_return": prefix(i) + float(sum(s.reward for s in t.steps)),
            "outcome": _outcome(t),
        }

    branched = {trajectories[root_of(i)].group_id for i, t in enumerate(trajectories) if t.parent}
    groups: dict[str, dict[str, Any]] = {}
    roots: dict[int, dict[str, Any]] = {}
    for i, t in enumerate(trajectories):
        if not t.parent and t.group_id in branched:
            group = groups.setdefault(t.group_id, {"group_id": t.group_id, "task_id": t.task_id, "roots": []})
            roots[i] = {**node(i), "branches": []}
            group["roots"].append(roots[i])
    for i, t in enumerate(trajectories):
        if t.parent and root_of(i) in roots:
            first = t.steps[0].action if t.steps else ""
            branch = {**node(i), "parent": t.parent, "branch_turn": t.branch_turn, "first_action": first}
            roots[root_of(i)]["branches"].append(branch)
    return list(groups.values())
