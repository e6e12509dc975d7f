"""RLOO: REINFORCE with a leave-one-out baseline, one advantage per trajectory.

For a group of N rollouts with returns R_1..R_N, the baseline of rollout i is the mean of the
*other* N-1 returns:

    A_i = R_i - (1 / (N-1)) * sum_{j != i} R_j  =  N / (N-1) * (R_i - mean_j R_j)

No division by the std: the estimate stays unbiased, which behaves better under sparse reward.
A group of one gets 0.
"""

from __future__ import annotations

import numpy as np

from turngym.core.records import Trajectory
from turngym.trainers.advantages._common import group_stats, index_of, trajectory_returns
from turngym.trainers.advantages.estimator import Estimator, step_only


def advantages(trajectories: list[Trajectory]) -> list[np.ndarray]:
    returns = trajectory_returns(trajectories)
    groups = index_of(t.group_id or f"#{i}" for i, t in enumerate(trajectories))
    mask = np.array([t.scorable for t in trajectories], dtype=bool)
    count, mean, _ = group_stats(returns, groups, mask)
    per_traj = np.where((count > 1) & mask, count / np.maximum(count - 1, 1) * (returns - mean), 0.0)
    return [np.full(len(t.steps), a, dtype=np.float32) for t, a in zip(trajectories, per_traj)]


ESTIMATOR = Estimator("rloo", step_only(advantages), options=())
