"""turngym's step-level estimators on plain columns, as other trainers' batches hold them.

verl-agent, SkyRL (step-wise) and turngym's TRL adapter keep one row per turn. Give
``turn_advantages`` those rows as columns (lists or numpy arrays, one entry per row) and it
returns one advantage per row, in the rows' order:

    episode     the episode's id (verl-agent ``traj_uid``; SkyRL ``trajectory_ids[i]``)
    group       the group's id: episodes from one task and one start (verl-agent ``uid``;
                SkyRL ``trajectory_ids[i].instance_id``)
    reward      the turn's reward
    turn        the turn's index in its episode (default: rows of an episode are in turn order)
    state       the state the turn acted in: turngym's ``state_key``, or verl-agent's
                ``anchor_obs`` (any hashable; numpy arrays hash by content). gigpo, hgpo, graph
    action      the action the turn took (hgpo's deeper contexts)
    next_state  the state after the turn (graph; default: the next turn's ``state``, and a state
                of its own after an episode's last turn)
    done        the turn ended the episode by the task, not by a budget (graph; default False)
    scorable    False for an episode the env or its infrastructure lost (default True): its
                rows get 0 and stay out of every group

The columns become turngym ``Trajectory`` records and go through the estimator itself, so the
numbers are exactly those of turngym's own trainer on the same episodes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from turngym.core.records import Step, Trajectory
from turngym.trainers.advantages import ESTIMATORS, TREE_ESTIMATORS, Batch, Estimator

#: the estimators that need no value head (a value head needs the policy's hidden states) and no
#: tree rollouts (other trainers' batches hold no branches)
VALUE_FREE = tuple(n for n, est in ESTIMATORS.items() if est.value_heads == 0 and n not in TREE_ESTIMATORS)
#: the columns each estimator reads beyond episode, group, reward and turn
NEEDS = {"gigpo": ("state",), "hgpo": ("state", "action"), "graph": ("state",)}


def estimator(name: str | Estimator) -> Estimator:
    """The value-free estimator called ``name`` (or ``name`` itself when it is one)."""
    est = name if isinstance(name, Estimator) else ESTIMATORS.get(name)
    if est is None:
        raise ValueError(f"estimator: {name!r} is not one of {list(VALUE_FREE)}")
    if est.name in TREE_ESTIMATORS:
        raise ValueError(
            f"estimator: {est.name!r} needs tree rollouts, which other trainers' batches do not hold; "
            f"value-free ones: {list(VALUE_FREE)}"
        )
    if est.value_heads:
        raise ValueError(
            f"estimator: {est.name!r} needs a value head, which only turngym's own trainer has; "
            f"value-free ones: {list(VALUE_FREE)}"
        )
    return est


def hashable(x: Any) -> Any:
    """A dict key for a cell: numpy arrays by shape, dtype and content, lists as tuples."""
    if isinstance(x, np.ndarray):
        return (x.shape, str(x.dtype), x.tobytes())
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, (list, tuple)):
        return tuple(hashable(v) for v in x)
    if isinstance(x, dict):
        return tuple(sorted((k, hashable(v)) for k, v in x.items()))
    return x


def to_trajectories(
    episode: Sequence,
    group: Sequence,
    reward: Sequence,
    turn: Sequence | None = None,
    state: Sequence | None = None,
    action: Sequence | None = None,
    next_state: Sequence | None = None,
    done: Sequence | None = None,
    scorable: Sequence | None = None,
) -> tuple[list[Trajectory], list[np.ndarray]]:
    """The rows as Trajectories, and for each one the row index of each of its steps."""
    n = len(reward)
    columns = {
        "episode": episode,
        "group": group,
        "turn": turn,
        "state": state,
        "action": action,
        "next_state": next_state,
        "done": done,
        "scorable": scorable,
    }
    for name, column in columns.items():
        if column is not None and len(column) != n:
            raise ValueError(f"{name}: {len(column)} rows, but reward has {n}")
    rows: dict[Any, list[int]] = {}
    for i, key in enumerate(episode):
        rows.setdefault(hashable(key), []).append(i)
    if turn is not None:
        turns = np.asarray(turn)
        for key, idx in rows.items():
            rows[key] = sorted(idx, key=lambda i: turns[i])
    state_keys = [hashable(s) for s in state] if state is not None else None
    trajectories, index = [], []
    group_names: dict[Any, str] = {}
    for key, idx in rows.items():
        groups = {hashable(group[i]) for i in idx}
        if len(groups) > 1:
            raise ValueError(f"group: episode {key!r} has rows in {len(groups)} groups; an episode is in one group")
        name = group_names.setdefault(groups.pop(), f"g{len(group_names)}")
        steps = []
        for t, i in enumerate(idx):
            here = state_keys[i] if state_keys is not None else ("row", i)
            if next_state is not None:
                after = hashable(next_state[i])
            elif state_keys is not None and t + 1 < len(idx):
                after = state_keys[idx[t + 1]]
            else:
                after = ("end", key)  # a node of its own: nothing is known after the episode's last turn
            steps.append(
                Step(
                    turn=t,
                    observation="",
                    action=str(action[i]) if action is not None else "",
                    reward=float(reward[i]),
                    terminated=bool(done[i]) if done is not None else False,
                    state_key=here,
                    info={"state_key": after},
                )
            )
        ok = all(bool(scorable[i]) for i in idx) if scorable is not None else True
        trajectories.append(
            Trajectory(
                env_id="",
                task_id="",
                seed=None,
                steps=steps,
                group_id=name,
                trajectory_id=str(key),
                scorable=ok,
            )
        )
        index.append(np.asarray(idx, dtype=np.int64))
    return trajectories, index


def turn_advantages(
    estimator_name: str | Estimator,
    *,
    episode: Sequence,
    group: Sequence,
    reward: Sequence,
    turn: Sequence | None = None,
    state: Sequence | None = None,
    action: Sequence | None = None,
    next_state: Sequence | None = None,
    done: Sequence | None = None,
    scorable: Sequence | None = None,
    **options,
) -> np.ndarray:
    """One advantage per row (float32, in the rows' order) from a value-free turngym estimator.

    ``options`` are the estimator's own (``gamma``, ``step_weight``, ``scale``, ...; see
    ``ESTIMATORS[name].options``). The columns are described in this module's docstring.
    """
    est = estimator(estimator_name)
    given = {"state": state, "action": action}
    missing = [c for c in NEEDS.get(est.name, ()) if given[c] is None]
    if missing:
        raise ValueError(f"{missing[0]}: required by {est.name} (one entry per row)")
    unknown = sorted(set(options) - set(est.options))
    if unknown:
        raise ValueError(f"{unknown[0]}: not an option of {est.name}; its options: {list(est.options)}")
    trajectories, index = to_trajectories(episode, group, reward, turn, state, action, next_state, done, scorable)
    out = np.zeros(len(reward), dtype=np.float32)
    for rows, values in zip(index, est.advantages(Batch(trajectories), **options).step):
        out[rows] = values
    return out


def columns(trajectories: Sequence[Trajectory]) -> dict[str, list]:
    """turngym Trajectories as ``turn_advantages``' columns (one row per step)."""
    out: dict[str, list] = {
        k: [] for k in ("episode", "group", "turn", "reward", "state", "action", "next_state", "done", "scorable")
    }
    for i, traj in enumerate(trajectories):
        for t, step in enumerate(traj.steps):
            out["episode"].append(i)  # the position: trajectory ids need not be unique in a batch
            out["group"].append(traj.group_id or f"#{i}")  # the estimators' own rule for a missing group
            out["turn"].append(t)
            out["reward"].append(float(step.reward))
            out["state"].append(step.state_key)
            out["action"].append(step.action)
            out["next_state"].append(step.info.get("state_key", ""))
            out["done"].append(bool(step.terminated))
            out["scorable"].append(bool(traj.scorable))
    return out
