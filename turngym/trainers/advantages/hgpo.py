"""HGPO: a hierarchy of step groups by how much of the context the steps share.

For level k = 0..K, the level-k context of step t is its current state and the last k
(state, action) pairs before it:

    c_k(t) = (s_{t-k}, a_{t-k}, ..., s_{t-1}, a_{t-1}, s_t)      (shorter at the episode start:
                                                               steps with t < k keep all of it)

Steps of one group with equal c_k form a level-k group; G_t (discounted return) is normalised
inside it, A_k(t) = (G_t - mean) / (std + eps). Level 0 is GiGPO's step group. Deeper levels
group steps that saw the same history (less biased, fewer members); shallow levels pool more
steps (lower variance). Levels where the step's group has one member carry no information and
are skipped; the rest are averaged with weights (k+1)^alpha:

    A_H(t) = sum_{k: |c_k(t)| > 1} (k+1)^alpha A_k(t) / sum_{k: |c_k(t)| > 1} (k+1)^alpha

    A(t) = A_E(i) + w * A_H(t)          (A_E: GRPO episode term, w = 1)

A step whose level-0 group is a singleton gets A_H = 0. ``hierarchy_term`` takes each step's
predecessor as an argument, so tree rollouts (sibling.py, ``combine="hgpo"``) can give a branch's
first step its ancestors' history.
"""

from __future__ import annotations

import numpy as np

from turngym.core.records import Trajectory
from turngym.trainers.advantages._common import (
    EPS,
    Flat,
    flatten,
    group_stats,
    index_of,
    step_returns,
    unflatten,
    where_scorable,
)
from turngym.trainers.advantages.estimator import Estimator, step_only
from turngym.trainers.advantages.grpo import episode_advantage


def advantages(
    trajectories: list[Trajectory],
    max_depth: int = 4,
    alpha: float = 1.0,
    gamma: float = 0.95,
    step_weight: float = 1.0,
    scale: bool = True,
    eps: float = EPS,
) -> list[np.ndarray]:
    flat = flatten(trajectories)
    episode = episode_advantage(trajectories, scale=scale, eps=eps)[flat.traj]
    previous = np.where(flat.turn > 0, np.arange(len(flat.turn)) - 1, -1)
    step = hierarchy_term(flat, step_returns(flat, gamma), previous, max_depth, alpha, scale, eps)
    return unflatten(where_scorable(episode + step_weight * step, flat), flat)


def hierarchy_term(
    flat: Flat,
    returns: np.ndarray,
    previous: np.ndarray,
    max_depth: int = 4,
    alpha: float = 1.0,
    scale: bool = True,
    eps: float = EPS,
) -> np.ndarray:
    """A_H per step row. ``previous[r]`` is the row of the step taken just before row r's in its
    history, -1 at the history's start: within one episode the row above; in a tree rollout a
    branch's first step continues its parent's history (``sibling.combine="hgpo"``)."""
    n = len(returns)
    # Context ids built level by level: c_k(t) = (c_{k-1}(t), s_{t-k}, a_{t-k}) when the history
    # reaches back k steps, else c_{k-1}(t). Integer ids keep each level one dict pass.
    pair = index_of(zip(flat.state, flat.action))  # id of (s_t, a_t)
    context = index_of(zip(flat.group.tolist(), flat.state))  # level 0
    back = np.arange(n)  # the row k steps back in the history (-1: the history is shorter)
    weighted = np.zeros(n)
    weights = np.zeros(n)
    for k in range(max_depth + 1):
        if k > 0:
            back = np.where(back >= 0, previous[np.maximum(back, 0)], -1)
            context = index_of(zip(context.tolist(), np.where(back >= 0, pair[np.maximum(back, 0)], -1).tolist()))
        count, mean, std = group_stats(returns, context, flat.valid)
        centred = returns - mean
        level = centred / (std + eps) if scale else centred
        use = (count > 1) & flat.valid
        w = (k + 1.0) ** alpha
        weighted += np.where(use, w * level, 0.0)
        weights += np.where(use, w, 0.0)
    return np.divide(weighted, weights, out=np.zeros(n), where=weights > 0)


ESTIMATOR = Estimator(
    "hgpo", step_only(advantages), options=("max_depth", "alpha", "gamma", "step_weight", "scale", "eps")
)
