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

``reference="verl-agent"``: verl-agent's ``compute_gigpo_outcome_advantage``, ``scale=True`` its
``mode="mean_std_norm"``, ``scale=False`` its ``mode="mean_norm"``. The step term is the one
above (same anchor-state groups inside a group, ddof=1, singletons 0), with G_t accumulated in
float32 as verl-agent does; the episode term is its ``episode_norm_reward``: statistics over the
group's step rows, so long episodes weigh more, and a group of one row keeps R (see grpo.py).
For a one-step success against a three-step failure, both from one state and with w = 1:
turngym [1, -1, -0.5, -0.5], verl-agent mean_norm [1.25, -0.75, -0.25, -0.25].
"""

from __future__ import annotations

import numpy as np

from turngym.core.records import Trajectory
from turngym.trainers.advantages._common import (
    EPS,
    check_reference,
    flatten,
    float32_returns,
    index_of,
    normalize_in_groups,
    row_episode_advantage,
    step_returns,
    unflatten,
    where_scorable,
)
from turngym.trainers.advantages.estimator import Estimator, step_only
from turngym.trainers.advantages.grpo import episode_advantage


def advantages(
    trajectories: list[Trajectory],
    gamma: float = 0.95,
    step_weight: float = 1.0,
    scale: bool = True,
    eps: float = EPS,
    reference: str | None = None,
) -> list[np.ndarray]:
    check_reference(reference)
    flat = flatten(trajectories)
    if reference == "verl-agent":
        episode = row_episode_advantage(trajectories, flat, scale, eps)
        returns = float32_returns(flat, gamma)
    else:
        episode = episode_advantage(trajectories, scale=scale, eps=eps)[flat.traj]
        returns = step_returns(flat, gamma)
    step = anchor_term(flat, returns, scale, eps)
    return unflatten(where_scorable(episode + step_weight * step, flat), flat)


def anchor_term(flat, returns: np.ndarray, scale: bool = True, eps: float = EPS) -> np.ndarray:
    """A_S per step row: the step returns normalised in their anchor-state groups (same group,
    same ``state_key``; singletons 0)."""
    anchors = index_of(zip(flat.group.tolist(), flat.state))
    return normalize_in_groups(returns, anchors, flat.valid, scale=scale, eps=eps)


def step_term(
    trajectories: list[Trajectory], gamma: float = 0.95, scale: bool = True, eps: float = EPS
) -> list[np.ndarray]:
    """A_S alone, per trajectory (0 on unscorable ones): to add to another estimator's advantages."""
    flat = flatten(trajectories)
    return unflatten(where_scorable(anchor_term(flat, step_returns(flat, gamma), scale, eps), flat), flat)


ESTIMATOR = Estimator("gigpo", step_only(advantages), options=("gamma", "step_weight", "scale", "eps", "reference"))
