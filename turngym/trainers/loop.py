"""The training loop: (optional SFT) -> [collect groups -> advantages -> update -> evaluate]*.

    from turngym.trainers import load_config, train
    train(load_config("examples/train.yaml", overrides=["rl.updates=20"]))

The run (``train``): ``open_run`` (the run folder, Trainer and optimizer, resumed from the latest
checkpoint), ``start_rl`` (update 0: evaluation, SFT, the KL's reference), ``rl_updates`` (each
update, its evaluation when due, ``evaluate_update``, and its checkpoint), ``finish_run`` (the
trained policy, curves and report).

One update (``one_update``):
1. take ``tasks_per_update`` tasks from the shuffled train split, run ``group_size`` rollouts of
   each with identical starts (EnvPool);
2. compute step advantages with the configured estimator (a pure function of the batch),
   optionally reshaped by EMPG (``samples.estimate_advantages``), write them into the records
   (``Step.advantage``, ``samples.write_advantages``) and build the loss rows
   (``samples.loss_rows``);
3. optimise the token-level clipped policy gradient over the agent's completion tokens (plus KL
   to the reference and the value-head loss when configured), in minibatches with gradient
   accumulation over micro-batches (``update.rl_update``);
4. log metrics, write the rollouts, evaluate on the held-out split every ``eval.every`` updates,
   save a checkpoint.

With ``rl.max_lag >= 1`` step 1 runs ahead in a background thread (``async_rollouts``) while
the learner does steps 2-4 (``async_update``); with 0, the default, the loop is exactly the above.

Everything random draws from streams saved in the checkpoint, so a killed run resumed from its
last checkpoint continues exactly as if it had never stopped. The pieces live by role:
``distributed`` (several processes), ``setup`` (model, policies, optimizer, tasks), ``samples``
(advantages -> token rows), ``update`` (RL and SFT steps) and this module (the loop).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch.optim import Optimizer

from turngym.core.collect import collect
from turngym.core.records import Trajectory, write_jsonl
from turngym.core.runs import read_metrics, summary_row
from turngym.trainers import checkpoint as ckpt
from turngym.trainers.async_rollouts import seed_for
from turngym.trainers.config import TrainConfig, dump_yaml
from turngym.trainers.distributed import barrier, gather, init_distributed, share, total, world
from turngym.trainers.metrics import MetricsWriter
from turngym.trainers.rollout import attach_tokens
from turngym.trainers.samples import estimate_advantages, loss_rows, write_advantages
from turngym.trainers.setup import (
    Trainer,
    build_trainer,
    make_optimizer,
    next_tasks,
    progress,
    run_task_ids,
)
from turngym.trainers.state import RunState
from turngym.trainers.update import rl_update, run_sft, sync_server
from turngym.viewer.curves import plot_curves

REFERENCE_FILE = "reference.pt"  # in a checkpoint, with rl.kl_coef > 0: the KL's reference
STREAMS_FILE = "rng_processes.pt"  # with several processes: each one's torch stream, by rank

if TYPE_CHECKING:  # both are imported where they are first needed
    from turngym.core.pool import EnvPool
    from turngym.trainers.async_rollouts import AsyncRollouts

# ----- the run -----------------------------------------------------------------------------


def train(
    cfg: TrainConfig,
    log: Callable[[str], None] = print,
    stop_after: int | None = None,
    rollout_policy: Any = None,
) -> Trainer:
    """Run (or resume) a training run; returns the Trainer (model, policies, state).

    ``stop_after``: return after this many updates as if the process had been killed (tests).
    ``rollout_policy``: generate training rollouts with this policy instead (any object with
    ``act``; replies without token data are re-tokenized and re-scored by the trainer).
    """
    from turngym.core.pool import EnvPool

    init_distributed(cfg)
    main = world()[0] == 0
    tr, optimizer, last = open_run(cfg, log if main else _quiet, rollout_policy)
    metrics = (
        MetricsWriter(
            Path(cfg.run_dir),
            tensorboard=cfg.tensorboard,
            keep_until_update=tr.state.update if last is not None else -1,
        )
        if main
        else _NoMetrics()
    )
    train_ids, eval_ids = run_task_ids(cfg)
    pool = EnvPool(
        cfg.env.id,
        num_envs=cfg.env.num_envs,
        backend=cfg.env.backend,
        env_kwargs=dict(cfg.env.kwargs),
        ray_address=cfg.env.ray_address,
    )
    source = None  # the rollout worker, with rl.max_lag >= 1
    try:
        start_rl(tr, pool, optimizer, metrics, train_ids, eval_ids, last)
        if cfg.rl.max_lag > 0 and tr.state.update < cfg.rl.updates:
            from turngym.trainers.async_rollouts import AsyncRollouts

            source = AsyncRollouts(tr, train_ids, last)
        rl_updates(tr, pool, optimizer, metrics, train_ids, eval_ids, source, stop_after)
    finally:
        if source is not None:
            source.close()
        pool.close()
        metrics.close()
    if main:
        finish_run(tr)
    return tr


def open_run(
    cfg: TrainConfig, log: Callable[[str], None], rollout_policy: Any
) -> tuple[Trainer, Optimizer, Path | None]:
    """The run's folder, Trainer and optimizer, resumed from the latest checkpoint when there is one."""
    run_dir = Path(cfg.run_dir)
    if world()[0] == 0:
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "config.yaml").write_text(dump_yaml(cfg))
    tr = build_trainer(cfg, log)
    if rollout_policy is not None:
        tr.rollout_policy = rollout_policy
    if cfg.rl.max_lag > 0 and (tr.rollout_policy is not tr.policy or world()[1] > 1):
        raise ValueError(
            "rl.max_lag: asynchronous rollouts need in-process generation in one process; use rl.max_lag=0"
        )
    optimizer = make_optimizer(tr, cfg.rl.lr, cfg.rl.weight_decay)
    tr.state = RunState()
    last = ckpt.latest_checkpoint(run_dir) if cfg.resume else None
    if last is not None:
        tr.state = RunState.from_dict(ckpt.load_checkpoint(last, tr.modules, optimizer, tr.np_rng))
        log(f"resumed from {last} (update {tr.state.update})")
    barrier()  # nobody writes a checkpoint before everyone has read theirs
    if world()[1] > 1:
        seed_process(tr, last)
    return tr, optimizer, last


def seed_process(tr: Trainer, last: Path | None) -> None:
    """With several processes, this one's torch stream: the checkpoint's, else a fresh one of its own."""
    rank, size = world()
    # each process samples a stream of its own (the model, built before, is the same in all)
    saved = last is not None and (last / STREAMS_FILE).exists() and torch.load(last / STREAMS_FILE, weights_only=True)
    if saved and len(saved) == size:
        torch.set_rng_state(saved[rank])
    else:
        if saved:
            tr.log(
                f"resume: the checkpoint was written by {len(saved)} processes, this run has {size}: each "
                "process starts a fresh random stream, so the run does not continue exactly"
            )
        torch.manual_seed(seed_for(tr.cfg.seed, tr.state.update, 2 + rank))


def start_rl(
    tr: Trainer,
    pool: EnvPool,
    optimizer: Optimizer,
    metrics: MetricsWriter | _NoMetrics,
    train_ids: list[str],
    eval_ids: list[str],
    last: Path | None,
) -> None:
    """Update 0 (``before_rl``) and the KL's reference, or, resumed past them, the saved reference."""
    cfg = tr.cfg
    if tr.state.phase in ("start", "sft_done"):
        metrics.write({**before_rl(tr, pool, optimizer, train_ids, eval_ids), **env_version(pool)})
        tr.state.phase, tr.state.start_row = "rl", None
        # the KL's reference is the policy RL starts from (after SFT, the SFT policy; with LoRA
        # the adapters switched off would be the model before SFT): only the trainable tensors
        # differ, so a copy of those (the adapter alone with LoRA), as a checkpoint keeps them
        tr.reference = ckpt.trainable_state(tr.model) if cfg.rl.kl_coef > 0 else None
        if cfg.checkpoint_every:
            save(tr, optimizer, 0)
    elif cfg.rl.kl_coef > 0:
        tr.reference = saved_reference(tr, last)


def rl_updates(
    tr: Trainer,
    pool: EnvPool,
    optimizer: Optimizer,
    metrics: MetricsWriter | _NoMetrics,
    train_ids: list[str],
    eval_ids: list[str],
    source: AsyncRollouts | None,
    stop_after: int | None,
) -> None:
    """The RL updates left, each with its metrics row, its evaluation when due and its checkpoint."""
    cfg = tr.cfg
    bar = progress(tr, total=cfg.rl.updates, desc="rl", initial=tr.state.update)
    while tr.state.update < cfg.rl.updates:
        if stop_after is not None and tr.state.update >= stop_after:
            break
        update = tr.state.update + 1
        if source is None:
            row = one_update(tr, pool, optimizer, train_ids, update)
        else:
            row = async_update(tr, source, optimizer, update)
        if cfg.eval.every and update % cfg.eval.every == 0 or update == cfg.rl.updates:
            row.update(evaluate_update(tr, pool, eval_ids, update, row, source))
        tr.state.update = update
        metrics.write({**row, **env_version(pool)})
        bar.update(1)
        bar.set_postfix(success=f"{row.get('train/success_rate', 0):.2f}", ret=f"{row.get('train/mean_return', 0):.2f}")
        if cfg.checkpoint_every and (update % cfg.checkpoint_every == 0 or update == cfg.rl.updates):
            save(tr, optimizer, update, source)
    bar.close()


def evaluate_update(
    tr: Trainer,
    pool: EnvPool,
    eval_ids: list[str],
    update: int,
    row: dict[str, Any],
    source: AsyncRollouts | None,
) -> dict[str, Any]:
    """The evaluation after update ``update`` (``row`` is its metrics so far), with its time."""
    cfg = tr.cfg
    # the last evaluation is whole (compared with the one before RL); the others may be a cheaper
    # prefix of the same tasks (eval.curve_episodes)
    episodes = cfg.eval.episodes if update == cfg.rl.updates else cfg.eval.curve_episodes or cfg.eval.episodes
    tr.log(
        f"update {update}: train success {row.get('train/success_rate', 0):.2f}; eval on {episodes} held-out episodes"
    )
    t0 = time.perf_counter()
    if source is None:
        return {
            **evaluate(tr, pool, eval_ids, update, episodes=episodes),
            "time/eval": time.perf_counter() - t0,
        }
    with source.rng_lock:  # between two batches; sampling from a seed of its own
        torch.manual_seed(seed_for(cfg.seed, update, 1))
        return {
            **evaluate(tr, pool, eval_ids, update, episodes=episodes),
            "time/eval": time.perf_counter() - t0,
        }


def finish_run(tr: Trainer) -> None:
    """Rank 0, after the loop: the finished run's policy (a form ``hf:PATH`` loads), curves and report."""
    cfg, run_dir = tr.cfg, Path(tr.cfg.run_dir)
    if tr.state.update >= cfg.rl.updates:
        ckpt.save_policy(run_dir, tr.eval_policy, base=cfg.model.name, seed=cfg.seed)
    if read_metrics(run_dir / "metrics.jsonl"):
        from turngym.viewer import write_report

        plot_curves(run_dir)
        write_report(run_dir)  # run_dir/report.html: curves, success by task type, links into the viewer


def env_version(pool: EnvPool) -> dict[str, str]:
    """What every metrics row says about the env it was measured on: its id and content hash
    (a run resumed after the env changed shows both hashes, and the report says so)."""
    return {"env_id": pool.env_id, "env_hash": pool.env_hash}


def before_rl(
    tr: Trainer, pool: EnvPool, optimizer: Optimizer, train_ids: list[str], eval_ids: list[str]
) -> dict[str, Any]:
    """Update 0's row: zero-shot evaluation, SFT, evaluation after SFT (each when configured).
    A run resumed after SFT (phase ``sft_done``) starts from the saved row, past SFT."""
    cfg, log = tr.cfg, tr.log
    row: dict[str, Any] = dict(tr.state.start_row or {"update": 0, "env_steps": 0, "episodes": 0})
    if tr.state.phase == "start":
        if cfg.eval.at_start and (cfg.eval.zero_shot or cfg.sft.episodes == 0):
            # said before it starts: with an LLM this is minutes, and nothing else moves meanwhile
            log(f"zero-shot eval: {cfg.eval.episodes} held-out episodes ({cfg.env.eval_split})")
            t0 = time.perf_counter()
            # with SFT to follow, update 0 is the policy after SFT: the zero-shot episodes keep a
            # file of their own instead of being overwritten by the evaluation after SFT
            name = "zero_shot" if cfg.sft.episodes > 0 else None
            row.update(evaluate(tr, pool, eval_ids, 0, name), **{"time/eval": time.perf_counter() - t0})
            log(f"update 0: eval success {row.get('eval/success_rate', 0):.2f}")
        if cfg.sft.episodes > 0:
            log(f"sft: imitating {cfg.sft.episodes} expert episodes")
            t0 = time.perf_counter()
            row.update(run_sft(tr, pool, train_ids), **{"time/sft": time.perf_counter() - t0})
            log(
                f"sft: loss {row['sft/loss_first']:.3f} -> {row['sft/loss_last']:.3f} "
                f"on {row['sft/turns']} expert turns"
            )
            if cfg.checkpoint_every and cfg.eval.at_start:
                # keep the SFT weights before the next long evaluation: a run killed
                # during it resumes here instead of redoing SFT
                tr.state.phase, tr.state.start_row = "sft_done", row
                save(tr, optimizer, 0)
    if cfg.sft.episodes > 0 and cfg.eval.at_start:
        log(f"eval after sft: {cfg.eval.episodes} held-out episodes")
        t0 = time.perf_counter()
        after = evaluate(tr, pool, eval_ids, 0)
        row.update(
            {k.replace("eval/", "eval_after_sft/"): v for k, v in after.items()},
            **{"time/eval_after_sft": time.perf_counter() - t0},
        )
    return row


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


def evaluate(
    tr: Trainer,
    pool: EnvPool,
    eval_ids: list[str],
    update: int,
    name: str | None = None,
    episodes: int | None = None,
) -> dict[str, float]:
    """Greedy episodes on the first ``episodes`` (default ``eval.episodes``) held-out tasks,
    written to ``eval/<name or update_NNNN>.jsonl``. Every process calls it: with several, each
    plays a contiguous block of the episodes and rank 0 gathers them (the others get {})."""
    cfg = tr.cfg
    tasks = [eval_ids[i % len(eval_ids)] for i in range(episodes or cfg.eval.episodes)]
    lo, hi = share(len(tasks))
    tr.eval_policy.reset_history()
    bar = progress(tr, total=hi - lo, desc=f"eval {update}")
    # a fixed seed: every evaluation sees the same episodes, so curves compare like with like
    # (episode i resets with seed + i, whichever process plays it)
    mine = (
        collect(
            pool,
            tr.eval_policy,
            tasks[lo:hi],
            group_size=1,
            seed=cfg.seed + 100_003 + lo,
            max_turns=cfg.env.max_turns,
            bar=bar,
        )
        if hi > lo
        else []
    )
    bar.close()
    tr.eval_policy.reset_history()  # free the key/value cache (gigabytes) until the next evaluation
    trajectories = gather(mine)
    if world()[0] != 0:
        return {}
    write_jsonl(Path(cfg.run_dir) / "eval" / f"{name or f'update_{update:04d}'}.jsonl", trajectories, append=False)
    return summary_row(trajectories, "eval")


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


def save(tr: Trainer, optimizer: Optimizer, update: int, source: AsyncRollouts | None = None) -> None:
    """A checkpoint of the trainable weights, the optimizer, the RNG streams and the loop's state
    (and, with asynchronous rollouts, what regenerates the in-flight batches). Every process
    calls it: rank 0 writes, with every process's torch stream when there are several."""
    streams = gather([torch.get_rng_state()])
    if world()[0] != 0:
        return
    extra = source.checkpoint_files(update) if source is not None else {}
    if len(streams) > 1:
        extra[STREAMS_FILE] = streams
    if tr.reference is not None:
        extra[REFERENCE_FILE] = tr.reference
    ckpt.save_checkpoint(
        tr.cfg.run_dir,
        update,
        tr.modules,
        optimizer,
        tr.state.to_dict(),
        tr.np_rng,
        tr.cfg.keep_checkpoints,
        extra=extra,
    )


def saved_reference(tr: Trainer, checkpoint: Path) -> dict[str, torch.Tensor]:
    """The KL's reference of a resumed run: the one its checkpoint kept, or, in a checkpoint taken
    as RL starts (update 0), the weights just loaded, which are the weights RL starts from."""
    path = checkpoint / REFERENCE_FILE
    if path.exists():
        return torch.load(path, map_location="cpu", weights_only=True)
    if tr.state.update == 0:
        return ckpt.trainable_state(tr.model)
    raise ValueError(
        f"rl.kl_coef: checkpoint {checkpoint} holds no KL reference ({REFERENCE_FILE}; its run had "
        "rl.kl_coef = 0), so this run cannot resume with a KL; resume it with rl.kl_coef=0"
    )


def _quiet(_: str) -> None:
    pass


class _NoMetrics:
    """What processes other than rank 0 write metrics to."""

    def write(self, row) -> None:
        pass

    def close(self) -> None:
        pass
