"""EnvPool's public face: which slots live on which host, the rollout's arguments, closing."""

from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Callable, Iterable
from typing import Any

from turngym.core.pool.backend import Backend, BackendKind, backend_kind
from turngym.core.pool.scheduler import Episode, Rollout
from turngym.core.records import Trajectory, group_id
from turngym.core.registry import registration, spec
from turngym.core.versions import env_hash


class EnvPool:
    """Run episodes of one env id on ``num_envs`` slots.

    Args:
        env_id: a registered id.
        num_envs: how many envs run at once.
        backend: "inline" (this thread), "thread", "process", "ray" or "remote" (a name of
            ``turngym.core.pool.BACKENDS``), or a ``BackendKind`` of your own.
        env_kwargs: passed to ``turngym.make``.
        num_workers: processes / Ray actors (default: min(num_envs, CPU count)); each owns
            ``ceil(num_envs / num_workers)`` envs and steps them in one message.
        ray_address: ``ray.init(address=...)`` for a cluster (default: a local Ray).
        servers, server_token: backend "remote": URLs of ``turngym serve-env`` servers (and their
            bearer token); each worker's envs live on one of them, round robin (default workers:
            one per server). See ``turngym.integrations.remote_pool``.
    """

    def __init__(
        self,
        env_id: str,
        num_envs: int = 4,
        backend: str | BackendKind = "thread",
        env_kwargs: dict[str, Any] | None = None,
        num_workers: int | None = None,
        ray_address: str | None = None,
        servers: list[str] | None = None,
        server_token: str | None = None,
    ):
        kind = backend_kind(backend)
        if num_envs < 1:
            raise ValueError(f"num_envs: must be >= 1, got {num_envs}")
        self.env_id = env_id
        self.spec = spec(env_id)
        self.num_envs = num_envs
        self.backend_name = kind.name
        env_kwargs = dict(env_kwargs or {})
        self.env_kwargs = env_kwargs
        options = {"ray_address": ray_address, "servers": servers, "server_token": server_token}
        workers = kind.hosts(num_envs, num_workers, options)
        per = math.ceil(num_envs / workers)
        slot_lists = [list(range(i, min(i + per, num_envs))) for i in range(0, num_envs, per)]
        self.slot_host = {slot: h for h, slots in enumerate(slot_lists) for slot in slots}
        hosts_args = [(registration(env_id), env_kwargs, slots) for slots in slot_lists]
        self._backend: Backend = kind.start(hosts_args, **options)
        self._closed = False

    def rollout(
        self,
        policy: Any,
        tasks: Iterable[str | dict],
        group_size: int = 1,
        seed: int = 0,
        max_turns: int = 200,
        on_trajectory: Callable[[Trajectory], None] | None = None,
        step_timeout_s: float | None = 300.0,
        episode_timeout_s: float | None = None,
    ) -> list[Trajectory]:
        """Run ``group_size`` episodes per task; members of a group share task and seed.

        Group ``i`` resets with ``seed + i``. Trajectories come back ordered by group, then member.
        ``on_trajectory`` is called as each one ends (for progress bars and streaming writes).

        ``max_turns`` is each episode's turn budget. The pool does not count turns itself: it
        hands the budget to the env (``reset(options={"max_turns": max_turns})``), which
        truncates at the smaller of it and its own limit, with ``done_reason="max_turns"``. The
        last step of every trajectory has ``info["done_reason"]``: the env's (``"success"``,
        ``"max_turns"``, ...), or ``"error"`` / ``"timeout"`` for an episode the pool ended.

        Faults never lose the batch. An env that raises, calls ``sys.exit``, hangs past
        ``step_timeout_s`` (one reset or step, in seconds; None: no limit) or makes its episode
        run past ``episode_timeout_s`` (wall clock from reset; None: no limit; either deadline
        alone bounds a hang) ends that episode with ``scorable=False`` and the reason in
        ``metadata["error"]``. A hung or dead host (thread, process, Ray actor) is replaced; the
        other episodes it held lost their env, so they start again from their reset on the
        fresh host. The inline backend enforces the deadlines with SIGALRM, so only in the main
        thread; nothing in-process (inline, thread) survives ``os._exit`` or a crash: use
        ``backend="process"`` for envs you do not trust.
        """
        episodes = self.plan(tasks, group_size, seed, max_turns, step_timeout_s, episode_timeout_s)
        return Rollout(
            self.env_id,
            self._backend,
            self.slot_host,
            episodes,
            policy,
            on_trajectory,
            step_timeout_s,
            episode_timeout_s,
            self.env_hash,
        ).run()

    def plan(
        self,
        tasks: Iterable[str | dict],
        group_size: int,
        seed: int,
        max_turns: int,
        step_timeout_s: float | None,
        episode_timeout_s: float | None,
    ) -> list[Episode]:
        """The episodes of a rollout (group ``i`` resets with ``seed + i``), its arguments checked."""
        if self._closed:
            raise RuntimeError("the pool is closed")
        if group_size < 1:
            raise ValueError(f"group_size: must be >= 1, got {group_size}")
        if isinstance(max_turns, bool) or not isinstance(max_turns, numbers.Integral) or max_turns < 1:
            raise ValueError(f"max_turns: must be an int >= 1, got {max_turns!r}")
        max_turns = int(max_turns)
        for name, value in (("step_timeout_s", step_timeout_s), ("episode_timeout_s", episode_timeout_s)):
            if value is not None and not value > 0:
                raise ValueError(f"{name}: must be a number of seconds > 0 or None, got {value!r}")
        episodes: list[Episode] = []
        for i, task in enumerate(tasks):
            options = {"task": task} if isinstance(task, dict) else {"task_id": str(task)}
            options["max_turns"] = max_turns  # the env decides truncation (TurnEnv.episode_max_turns)
            task_id = task["task_id"] if isinstance(task, dict) else str(task)
            for m in range(group_size):
                episodes.append(Episode(len(episodes), group_id(task_id, seed + i), m, task_id, seed + i, options))
        return episodes

    @functools.cached_property
    def env_hash(self) -> str:
        """The content hash of the env id with this pool's ``env_kwargs``, stamped into every
        trajectory (``turngym.core.versions``); computed on first use."""
        return env_hash(self.env_id, **self.env_kwargs)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._backend.close()

    def __enter__(self) -> EnvPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass
