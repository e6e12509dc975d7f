"""GiGPO: group-in-group policy optimisation (episode term + step term).

Episode term: the GRPO advantage of the trajectory, A_E(i) (see grpo.py).

Step term: inside a group, every step taken from the same environment state forms a *step
group* (the "anchor state"), across rollouts and also repeated visits within one rollout. With
the discounted return from step t,

    G_t = sum_{l>=0} gamma^l r_{t+l}                        (gamma = 0.95)

    A_S(t) = (G_t - mean_{t' in S(t)} G_t') / (std_{t' in S(t)} G_t' + eps)   (0 if |S(t)| = 1)

    A(t) = A_E(i) + w * A_S(t)                                (w = 1)

The state identity is the env's canonical ``state_key`` (never the observation text, which
aliases states such as "Nothing happens."), so two steps share a step group only when the true
env state is the same.
"""

from __future__ import annotations

import numpy as np

from turngym.core.records import Trajectory
from turngym.trainers.advantages._common import (
    EPS,
    flatten,
    index_of,
    normalize_in_groups,
    step_returns,
    unflatten,
    where_scorable,
)
from turngym.trainers.advantages.estimator import Estimator, step_only
from turngym.trainers.advantages.grpo import episode_advantage


def advantages(trajectories: list[Trajectory], gamma: float = 0.95, step_weight: float = 1.0,
               scale: bool = True, eps: float = EPS) -> list[np.ndarray]:
    flat = flatten(trajectories)
    episode = episode_advantage(trajectories, scale=scale, eps=eps)[flat.traj]
    returns = step_returns(flat, gamma)
    anchors = index_of(zip(flat.group.tolist(), flat.state))
    step = normalize_in_groups(returns, anchors, flat.valid, scale=scale, eps=eps)
    return unflatten(where_scorable(episode + step_weight * step, flat), flat)


ESTIMATOR = Estimator("gigpo", step_only(advantages), options=("gamma", "step_weight", "scale", "eps"))
