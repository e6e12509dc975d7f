"""Asynchronous rollouts (``rl.max_lag = L >= 1``): a background thread generates the next
updates' rollouts while the learner optimises.

Versions: weights version ``v`` are the weights after ``v`` RL updates (0: when RL starts).
The rollouts of update ``u`` are generated with version ``max(0, u - 1 - L)``, the oldest the
lag allows, whatever the threads' timing: the learner, training update ``u - 1`` at version
``u - 2``... never waits for a version, and the worker can run up to ``L`` batches ahead.
Fixing the version (rather than taking the newest one available) keeps a run reproducible:

- tasks are drawn in update order, by the main thread, from the same stream as the
  synchronous loop; env seeds are ``seed + 1000 * u`` as there;
- the worker seeds torch's sampling RNG at the start of each batch from ``(seed, u)``, and
  evaluation (which shares that RNG) runs between batches (``rng_lock``) from a seed of its own;
- the worker generates with its own copy of the model (``snapshot``), its own tokenizer and
  EnvPool: it never reads a tensor the learner writes. The learner publishes a copy of the
  trainable tensors after each update (``publish``); the worker loads the version it needs into
  its snapshot before each batch.

What the learner does with a batch is ``learn.learn``, as in the synchronous loop, with the
decoupled-PPO correction in ``update.rl_update`` (see ``losses.truncated_is_weight``).

Checkpoints: the in-flight batches are discarded; the checkpoint stores their tasks and the
weight versions they need (``lag.pt``), so a resumed run regenerates them exactly and continues
as if never stopped (same ``rl.max_lag``). Reproducibility assumes nothing else draws from
torch's global RNG while the worker samples: ``model.lora_dropout = 0`` (the default), as
dropout in the learner would interleave with the worker's draws.
"""

from __future__ import annotations

import copy
import queue
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from turngym.core.collect import collect
from turngym.trainers.setup import Trainer, next_tasks

LAG_FILE = "lag.pt"


def seed_for(seed: int, update: int, stream: int) -> int:
    """A torch seed for one update's sampling (stream 0: rollouts, 1: evaluation)."""
    return int(np.random.SeedSequence([seed, update, stream]).generate_state(1)[0])


class AsyncRollouts:
    """The rollout worker and the weight versions it reads; ``batch(u)`` hands update u's rollouts
    to the learner, ``publish(u)`` gives the worker the weights after update u."""

    def __init__(self, tr: Trainer, train_ids: list[str], checkpoint: Path | None = None):
        from turngym.agents.hf import HFPolicy
        from turngym.core.pool import EnvPool

        cfg = tr.cfg
        self.tr, self.train_ids, self.lag = tr, train_ids, cfg.rl.max_lag
        self.snapshot = copy.deepcopy(tr.model).eval().requires_grad_(False)
        for p in self.snapshot.parameters():
            p.grad = None  # the copy needs no gradients
        self.trainable = [n for n, p in tr.model.named_parameters() if p.requires_grad]
        sampling = tr.policy.sampling
        self.policy = HFPolicy(
            self.snapshot,
            copy.deepcopy(tr.tokenizer),
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            max_new_tokens=sampling.max_new_tokens,
            prompt=tr.policy.prompt,
            batch_size=tr.policy.batch_size,
        )
        self.pool = EnvPool(
            cfg.env.id,
            num_envs=cfg.env.num_envs,
            backend=cfg.env.backend,
            env_kwargs=dict(cfg.env.kwargs),
            ray_address=cfg.env.ray_address,
        )
        self.rng_lock = threading.Lock()  # torch's sampling RNG: one batch or one evaluation at a time
        self.cond = threading.Condition()  # guards weights, results, stopping
        self.weights: dict[int, dict[str, torch.Tensor]] = {}
        self.results: dict[int, Any] = {}
        self.tasks: dict[int, list[str]] = {}
        self.stopping = False
        self.jobs: queue.Queue[int | None] = queue.Queue()
        done = tr.state.update
        self.submitted = done
        saved = (
            torch.load(checkpoint / LAG_FILE, map_location="cpu", weights_only=False)
            if checkpoint is not None and (checkpoint / LAG_FILE).exists()
            else {}
        )
        device = next(tr.model.parameters()).device
        for version, state in saved.get("weights", {}).items():
            self.weights[int(version)] = {n: t.to(device) for n, t in state.items()}
        self.pending = {int(u): list(t) for u, t in saved.get("tasks", {}).items()}
        self.publish(done)
        self.thread = threading.Thread(target=self._work, name="turngym-rollouts", daemon=True)
        self.thread.start()

    # ----- learner side (main thread) --------------------------------------------------------
    def publish(self, version: int) -> None:
        """Hand the current trainable weights to the worker as ``version``; forget versions no
        batch can need any more (batch u needs u - 1 - lag; the next batches are > version)."""
        params = dict(self.tr.model.named_parameters())
        state = {n: params[n].detach().clone() for n in self.trainable}
        with self.cond:
            self.weights[version] = state
            for old in [v for v in self.weights if v < version - self.lag]:
                del self.weights[old]
            self.cond.notify_all()

    def batch(self, update: int) -> tuple[list, int, float, float]:
        """Update ``update``'s trajectories, the weights version that generated them, the seconds
        the worker took and the seconds the learner waited for them."""
        self._submit_until(update + self.lag)
        start = time.perf_counter()
        with self.cond:
            self.cond.wait_for(lambda: update in self.results)
            result = self.results.pop(update)
        waited = time.perf_counter() - start
        self.tasks.pop(update, None)
        if isinstance(result, BaseException):
            raise RuntimeError(f"rollout worker failed on update {update}: {result!r}") from result
        trajectories, version, seconds = result
        return trajectories, version, seconds, waited

    def _submit_until(self, last: int) -> None:
        """Queue the batches up to ``last``, drawing their tasks in update order."""
        cfg = self.tr.cfg
        while self.submitted < min(last, cfg.rl.updates):
            u = self.submitted + 1
            tasks = self.pending.pop(u, None)
            if tasks is None:
                tasks = next_tasks(self.tr, self.train_ids, cfg.rl.tasks_per_update)
            self.tasks[u] = tasks
            self.submitted = u
            self.jobs.put(u)

    def checkpoint_files(self, update: int) -> dict[str, Any]:
        """What a checkpoint after ``update`` needs to regenerate the in-flight batches: their
        tasks and the weight versions they are generated with (older than the saved weights)."""
        with self.cond:
            weights = {
                v: {n: t.detach().cpu().clone() for n, t in s.items()} for v, s in self.weights.items() if v < update
            }
        tasks = {u: list(t) for u, t in self.tasks.items() if u > update}
        return {LAG_FILE: {"weights": weights, "tasks": tasks}}

    def close(self) -> None:
        """Stop the worker after its current batch (in-flight batches are discarded)."""
        with self.cond:
            self.stopping = True
            self.cond.notify_all()
        self.jobs.put(None)
        self.thread.join()
        self.pool.close()

    # ----- worker side (rollout thread) ------------------------------------------------------
    def _work(self) -> None:
        cfg = self.tr.cfg
        while True:
            update = self.jobs.get()
            if update is None or self.stopping:
                return
            try:
                needed = max(0, update - 1 - self.lag)
                with self.cond:
                    # a resumed run without saved versions starts from the newest weights
                    self.cond.wait_for(lambda needed=needed: self.stopping or max(self.weights) >= needed)
                    if self.stopping:
                        return
                    version = min(v for v in self.weights if v >= needed)
                    state = self.weights[version]
                    tasks = self.tasks[update]
                with torch.no_grad():
                    params = dict(self.snapshot.named_parameters())
                    for name, value in state.items():
                        params[name].copy_(value)
                with self.rng_lock:
                    torch.manual_seed(seed_for(cfg.seed, update, 0))
                    start = time.perf_counter()
                    self.policy.reset_history()
                    trajectories = collect(
                        self.pool,
                        self.policy,
                        tasks,
                        group_size=cfg.rl.group_size,
                        seed=cfg.seed + 1000 * update,
                        max_turns=cfg.env.max_turns,
                        branches=cfg.rl.branches,
                        branch_points=cfg.rl.branch_points,
                        branch_after=cfg.rl.branch_after,
                    )
                    self.policy.reset_history()
                    result: Any = (trajectories, version, time.perf_counter() - start)
            except BaseException as e:  # handed to the learner, which raises it
                result = e
            with self.cond:
                self.results[update] = result
                self.cond.notify_all()
