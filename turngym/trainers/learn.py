"""One RL update: its rollouts (``one_update``, or from the background worker: ``async_update``),
then ``learn``: advantages, loss rows, the gradient step at the scheduled learning rate, and the
update's metrics row (with how much of the batch could teach anything: ``learning_signal``)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from torch.optim import Optimizer

from turngym.core.collect import collect
from turngym.core.records import Trajectory, write_jsonl
from turngym.core.runs import summary_row
from turngym.trainers.config import TrainConfig
from turngym.trainers.distributed import gather, total, world
from turngym.trainers.rollout import attach_tokens
from turngym.trainers.samples import estimate_advantages, loss_rows, write_advantages
from turngym.trainers.setup import Trainer, next_tasks, progress
from turngym.trainers.update import rl_update, sync_server

if TYPE_CHECKING:  # both are imported where they are first needed
    from turngym.core.pool import EnvPool
    from turngym.trainers.async_rollouts import AsyncRollouts


def one_update(tr: Trainer, pool: EnvPool, optimizer: Optimizer, train_ids: list[str], update: int) -> dict[str, Any]:
    """Update ``update``: its rollouts on the next tasks of the train split, then ``learn``."""
    cfg = tr.cfg
    t0 = time.perf_counter()
    rank, size = world()
    # every process draws the whole update's tasks (keeping the task stream in step) and runs its share
    tasks = next_tasks(tr, train_ids, cfg.rl.tasks_per_update * size)[rank::size]
    tr.policy.reset_history()  # each update stands alone: prompts never depend on earlier updates
    per_task = cfg.rl.group_size + cfg.rl.branches * cfg.rl.branch_points
    bar = progress(tr, total=len(tasks) * per_task, desc=f"rollouts {update}")
    trajectories = collect(
        pool,
        tr.rollout_policy,
        tasks,
        group_size=cfg.rl.group_size,
        seed=cfg.seed + 1000 * update,
        max_turns=cfg.env.max_turns,
        bar=bar,
        branches=cfg.rl.branches,
        branch_points=cfg.rl.branch_points,
        branch_after=cfg.rl.branch_after,
    )
    bar.close()
    tr.policy.reset_history()  # the update changes the weights: the cached keys are stale anyway
    retokenized = attach_tokens(tr.policy, trajectories) if tr.rollout_policy is not tr.policy else 0
    return learn(tr, optimizer, trajectories, update, time.perf_counter() - t0, retokenized)


def async_update(tr: Trainer, source: AsyncRollouts, optimizer: Optimizer, update: int) -> dict[str, Any]:
    """``one_update`` with rollouts from the background worker (``rl.max_lag >= 1``): take the
    batch generated for this update (waiting if it is not ready), learn, publish the new weights."""
    trajectories, version, seconds, waited = source.batch(update)
    row = learn(
        tr,
        optimizer,
        trajectories,
        update,
        seconds,
        0,
        {
            "rollout/policy_lag": update - 1 - version,
            "rollout/weights_version": version,
            "time/rollout_wait": waited,
        },
    )
    source.publish(update)
    return row


def learn(
    tr: Trainer,
    optimizer: Optimizer,
    trajectories: list[Trajectory],
    update: int,
    rollout_seconds: float,
    retokenized: int,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Advantages, the RL update and the update's metrics row, from its trajectories."""
    cfg = tr.cfg
    rank, size = world()
    t1 = time.perf_counter()
    advantages = estimate_advantages(tr, trajectories)
    write_advantages(tr, trajectories, advantages)
    samples = loss_rows(tr, trajectories, advantages)
    tr.policy.drop_states()
    lr = scheduled_lr(cfg, update)
    for group in optimizer.param_groups:  # set from the update's number: a resumed run gets the same
        group["lr"] = lr
    t2 = time.perf_counter()
    losses = rl_update(tr, optimizer, samples)
    if tr.cfg.generation.server_sync == "vllm_lora":
        sync_server(tr)
    t3 = time.perf_counter()
    # with several processes each played its share of the update's groups: the metrics, the
    # counters and the saved rollouts cover all of them (gathered on rank 0, which writes and
    # checkpoints; the other processes' rows and counters are their own and never written). The
    # losses stay rank 0's own minibatches'.
    played = gather(trajectories)  # every process must call it
    if rank != 0:
        played = trajectories
    if cfg.save_rollouts and rank == 0:
        write_jsonl(Path(cfg.run_dir) / "rollouts" / f"update_{update:04d}.jsonl", played, append=False)
    steps = sum(t.length for t in played)
    tr.state.env_steps += steps
    tr.state.episodes += len(played)
    entropies = [e for t in played for s in t.steps for e in s.entropies]
    tokens = int(total(sum(len(s.completion_ids) for s in samples)))
    signal = learning_signal(played)
    if signal["advantage/nonzero_turns"] == 0:
        # every group had identical outcomes: the update cannot change the policy
        tr.log(
            f"warning: update {update} had no learning signal (every one of its {signal['train/groups']} "
            "groups had identical returns, every advantage is 0)"
        )
    return {
        "update": update,
        "env_steps": tr.state.env_steps,
        "episodes": tr.state.episodes,
        **summary_row(played, "train"),
        **losses,
        **signal,
        "warning/no_signal": int(signal["advantage/nonzero_turns"] == 0),
        "policy/entropy": float(np.mean(entropies)) if entropies else None,
        "policy/completion_tokens": tokens,
        "policy/lr": lr,
        **({"policy/retokenized_steps": retokenized} if retokenized else {}),
        **({"processes": size} if size > 1 else {}),
        "advantage/mean_abs": float(np.mean([abs(s.advantage or 0.0) for t in played for s in t.steps]))
        if steps
        else None,
        "time/rollout": rollout_seconds,
        "time/advantages": t2 - t1,
        "time/update": t3 - t2,
        "time/update_tokens_per_s": tokens / (t3 - t2) if losses.get("loss/policy") is not None else None,
        **(extra or {}),
    }


def scheduled_lr(cfg: TrainConfig, update: int) -> float:
    """The learning rate of RL update ``update`` (1-based): ``rl.lr``, or with ``linear`` a straight
    line from ``rl.lr`` at update 1 down to ``rl.lr / rl.updates`` at the last (the late updates
    move the weights less, so the policy evaluated at the end is less at the mercy of the last
    few batches)."""
    if cfg.rl.lr_schedule == "linear":
        return cfg.rl.lr * (cfg.rl.updates - update + 1) / cfg.rl.updates
    return cfg.rl.lr


def learning_signal(trajectories: list[Trajectory]) -> dict[str, Any]:
    """How much of an update can teach anything: groups whose members' returns differ, and
    turns with a non-zero advantage (written by ``write_advantages``)."""
    groups: dict[str, set] = {}
    for t in trajectories:
        if t.scorable:
            groups.setdefault(t.group_id, set()).add(round(t.episode_return, 9))
    turns = [s for t in trajectories if t.scorable for s in t.steps if s.completion_ids]
    return {
        "train/groups": len(groups),
        "train/mixed_groups": sum(len(r) > 1 for r in groups.values()),
        "advantage/nonzero_turns": sum(abs(s.advantage or 0.0) > 1e-9 for s in turns),
        "advantage/turns": len(turns),
    }
