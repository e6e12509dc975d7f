"""Sibling credit: in tree rollouts, the continuations that branch from one env state form a step group.

A tree rollout (issue 60) restores an env snapshot taken before turn b of an episode and plays
several continuations from it. Each trajectory of the batch is a node of the tree:

- a root has no parent; its steps are turns 0, 1, ... (the roots of one group share their reset
  state: ``EnvPool.rollout`` gives a group identical starts);
- a branch names its parent and the turn it branches at, ``Trajectory.parent`` (the parent's
  ``trajectory_id``) and ``Trajectory.branch_turn`` = b: it shares the parent's turns before b,
  which only the parent holds (no step is trained twice), and its own steps are turns b, b+1, ...

Branch point (p, b): the state before turn b of node p. Its siblings S(p, b) are the branches of p
at b and p itself when p took a step at turn b (its own continuation from the same state). A
branch at the very turn its parent starts at (b = the parent's own branch turn) starts from the
parent's start state, so it joins the parent's branch point; a branch of a root at turn 0 joins
the group's roots. With the discounted return of a node's own continuation from turn t,

    G_j(t) = sum_{l>=0} gamma^l r_j(t + l)                           (gamma = 0.95)

the sibling term of the step taken at a branch point is

    A_sib(j, b) = (G_j(b) - mean_{k in S(p,b)} G_k(b)) / (std_{k in S(p,b)} G_k(b) + eps)

(std with ddof=1; 0 for a branch point with one sibling, so every step where nothing branched
gets 0; ``scale=False`` skips the division). These step groups are exact by construction: every
member acted in the very same env state, the snapshot. GiGPO's groups (equal ``state_key``)
exist only where rollouts happen to revisit a state.

The episode term is GRPO's over full episodes: a node's return is its own rewards plus its
ancestors' before the branch points on its path,

    R_j = R_prefix(j) + sum_t r_j(t),    R_prefix(j) = R_prefix(p) + sum_{t < b} r_p(t)

    A_E(j) = (R_j - mean R) / (std R + eps)      over the nodes of the tree's group (its root's)

    A(t) = A_E(j) + w * A_sib(t)                                      (w = 1)

``sibling_term`` returns A_sib alone, to add to another estimator's step advantages (GiGPO's,
HGPO's): A(t) = A_gigpo(t) + w * A_sib(t). The trainer's ``combine="gigpo"`` does that with
GiGPO's step term over the whole tree (its anchor-state groups: at a branch point the same
siblings, plus states the group's episodes revisit anywhere else):

    A(t) = A_E(j) + w * (A_sib(t) + A_S(t))

and ``combine="hgpo"`` HGPO's level-weighted term A_H over the tree (``max_depth`` K = 4,
``alpha`` = 1, as in hgpo.py), whose level-k context of a step reaches back along the node's
path: a branch's first k steps see their ancestors' last (state, action) pairs before the branch
turn, so the siblings at a branch point share every level of context:

    A(t) = A_E(j) + w * (A_sib(t) + A_H(t))

Unscorable nodes count in no group and get 0.
"""

from __future__ import annotations

import numpy as np

from turngym.core.records import Trajectory
from turngym.trainers.advantages import hgpo
from turngym.trainers.advantages._common import (
    EPS,
    Flat,
    flatten,
    index_of,
    normalize_in_groups,
    step_returns,
    unflatten,
    where_scorable,
)
from turngym.trainers.advantages.estimator import Estimator, step_only
from turngym.trainers.advantages.gigpo import step_term

#: what ``combine`` may add to the sibling term: nothing, GiGPO's anchor-state step term, or
#: HGPO's context hierarchy over the tree's histories
COMBINE = ("none", "gigpo", "hgpo")


def tree_of(trajectories: list[Trajectory]) -> tuple[list[int | None], list[int]]:
    """(parent index or None, first turn) per trajectory; a ValueError naming the field when a
    branch's parent is not in the batch, its branch turn is not an int inside the parent's
    turns, or the parents form a cycle."""
    index: dict[str, int] = {}
    for i, t in enumerate(trajectories):
        if t.trajectory_id:
            if t.trajectory_id in index:
                raise ValueError(f"trajectory_id: {t.trajectory_id!r} appears twice in the batch")
            index[t.trajectory_id] = i
    parents: list[int | None] = []
    for t in trajectories:
        parent = t.parent
        if not parent:
            parents.append(None)
            continue
        if parent not in index:
            raise ValueError(
                f"parent: {parent!r} (of {t.trajectory_id!r}) is not a trajectory_id "
                "in the batch; a branch's parent must be in the same batch"
            )
        parents.append(index[parent])
    starts: list[int | None] = [None] * len(trajectories)

    def start(i: int, seen: tuple[int, ...] = ()) -> int:
        if starts[i] is None:
            t, p = trajectories[i], parents[i]
            if p is None:
                starts[i] = 0
            else:
                if i in seen:
                    raise ValueError(f"parent: the parents of {t.trajectory_id!r} form a cycle")
                b = t.branch_turn
                low = start(p, (*seen, i))
                high = low + len(trajectories[p].steps)
                if isinstance(b, bool) or not isinstance(b, int) or not low <= b <= high:
                    raise ValueError(
                        f"branch_turn: {b!r} (of {t.trajectory_id!r}) must be an int "
                        f"from {low} to {high}, the turns of its parent {trajectories[p].trajectory_id!r}"
                    )
                starts[i] = b
        return starts[i]

    return parents, [start(i) for i in range(len(trajectories))]


def _branch_point(
    node: int, turn: int, parents: list[int | None], starts: list[int], trajectories: list[Trajectory]
) -> tuple:
    """The key of the state before ``turn`` of ``node``, moved up to the node where that state
    first occurs (a branch at its parent's own start turn shares the parent's start state)."""
    while parents[node] is not None and turn == starts[node]:
        node = parents[node]
    if parents[node] is None and turn == 0:
        return ("start", trajectories[node].group_id or f"#{node}")
    return ("node", node, turn)


def sibling_term(
    trajectories: list[Trajectory], gamma: float = 0.95, scale: bool = True, eps: float = EPS
) -> list[np.ndarray]:
    """A_sib per step (see the module docstring): non-zero only on the steps taken at a branch
    point with two or more siblings."""
    parents, starts = tree_of(trajectories)
    flat = flatten(trajectories)
    keys = []
    for i, t in enumerate(trajectories):
        for k in range(len(t.steps)):
            node, turn = i, starts[i] + k
            if k == 0 and parents[i] is not None:
                node = parents[i]  # its first step continues from the parent's state at that turn
            keys.append(_branch_point(node, turn, parents, starts, trajectories))
    returns = step_returns(flat, gamma)
    groups = index_of(keys)
    return unflatten(where_scorable(normalize_in_groups(returns, groups, flat.valid, scale=scale, eps=eps), flat), flat)


def episode_returns(trajectories: list[Trajectory]) -> np.ndarray:
    """R_j: each node's own rewards plus its ancestors' before the branch points on its path."""
    parents, starts = tree_of(trajectories)
    own = [np.array([s.reward for s in t.steps], dtype=np.float64) for t in trajectories]
    prefix: list[float | None] = [None] * len(trajectories)

    def prefix_of(i: int) -> float:
        if prefix[i] is None:
            p = parents[i]
            prefix[i] = 0.0 if p is None else prefix_of(p) + float(own[p][: starts[i] - starts[p]].sum())
        return prefix[i]

    return np.array([prefix_of(i) + float(own[i].sum()) for i in range(len(trajectories))])


def tree_previous(trajectories: list[Trajectory], flat: Flat) -> np.ndarray:
    """Per step row, the row of the step before it on its node's path from the root (-1 at turn
    0): the row above, except at a branch's first step (turn b), whose history is its ancestors'
    steps before b."""
    parents, starts = tree_of(trajectories)

    def row_at(node: int | None, turn: int) -> int:
        while node is not None and turn < starts[node]:
            node = parents[node]
        return -1 if node is None or turn < 0 else int(flat.starts[node]) + turn - starts[node]

    previous = np.arange(len(flat.turn)) - 1
    for i, t in enumerate(trajectories):
        if t.steps:
            previous[flat.starts[i]] = row_at(parents[i], starts[i] - 1)
    return previous


def hierarchy_term(
    trajectories: list[Trajectory],
    max_depth: int = 4,
    alpha: float = 1.0,
    gamma: float = 0.95,
    scale: bool = True,
    eps: float = EPS,
) -> list[np.ndarray]:
    """HGPO's A_H over a tree: level-k contexts reach back along each node's path, through its
    ancestors' steps before its branch turn, so the siblings at a branch point share every level."""
    flat = flatten(trajectories)
    returns = step_returns(flat, gamma)
    term = hgpo.hierarchy_term(flat, returns, tree_previous(trajectories, flat), max_depth, alpha, scale, eps)
    return unflatten(where_scorable(term, flat), flat)


def check_options(combine: str = "none", max_depth=None, alpha=None, **_) -> None:
    """One-line errors for ``rl.estimator_args``: ``combine`` among COMBINE; HGPO's options
    only with ``combine: hgpo``."""
    if combine not in COMBINE:
        raise ValueError(f"rl.estimator_args.combine: {combine!r} is not one of {list(COMBINE)}")
    for name, value in (("max_depth", max_depth), ("alpha", alpha)):
        if value is not None and combine != "hgpo":
            raise ValueError(f"rl.estimator_args.{name}: an option of combine: hgpo (combine is {combine!r})")


def advantages(
    trajectories: list[Trajectory],
    gamma: float = 0.95,
    step_weight: float = 1.0,
    scale: bool = True,
    eps: float = EPS,
    combine: str = "none",
    max_depth: int | None = None,
    alpha: float | None = None,
) -> list[np.ndarray]:
    check_options(combine, max_depth, alpha)
    parents, _ = tree_of(trajectories)

    def root(i: int) -> int:
        while parents[i] is not None:
            i = parents[i]
        return i

    groups = index_of(trajectories[root(i)].group_id or f"#{root(i)}" for i in range(len(trajectories)))
    mask = np.array([t.scorable for t in trajectories], dtype=bool)
    episode = normalize_in_groups(episode_returns(trajectories), groups, mask, scale=scale, eps=eps)
    sibling = sibling_term(trajectories, gamma=gamma, scale=scale, eps=eps)
    if combine == "gigpo":
        sibling = [a + b for a, b in zip(sibling, step_term(trajectories, gamma=gamma, scale=scale, eps=eps))]
    elif combine == "hgpo":
        depth, weight = 4 if max_depth is None else max_depth, 1.0 if alpha is None else alpha  # hgpo's defaults
        levels = hierarchy_term(trajectories, max_depth=depth, alpha=weight, gamma=gamma, scale=scale, eps=eps)
        sibling = [a + b for a, b in zip(sibling, levels)]
    return [np.where(m, a + step_weight * s, 0.0).astype(np.float32) for a, s, m in zip(episode, sibling, mask)]


ESTIMATOR = Estimator(
    "sibling",
    step_only(advantages),
    options=("gamma", "step_weight", "scale", "eps", "combine", "max_depth", "alpha"),
)
