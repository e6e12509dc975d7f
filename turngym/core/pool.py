"""EnvPool: many envs, stepped without lock-step, over inline / thread / process / ray backends.

Each backend runs ``_EnvHost`` objects; a host owns some env slots and answers a batch of
operations (reset, step, expert step) in one message, so process and Ray backends pay one
round trip per batch, not per env. The rollout loop hands every slot that is waiting for an
action to the policy in one batch, sends the actions out, and takes results back as soon as
any host answers: an episode that ends frees its slot at once for the next one.

An env that raises is rebuilt and its episode is kept but marked ``scorable=False``; a host
process that dies is restarted. Closing the pool stops every child.
"""

from __future__ import annotations

import math
import multiprocessing as mp
import os
import queue
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from multiprocessing.connection import wait as wait_connections
from typing import Any

from turngym.core.policy import Completion, Conversation, completion_action
from turngym.core.records import Step, Trajectory
from turngym.core.registry import _REGISTRY, EnvSpec, make, register, spec

BACKENDS = ("inline", "thread", "process", "ray", "remote")


class _EnvHost:
    """Owns the envs of some slots; runs a batch of operations on them."""

    def __init__(self, env_spec: EnvSpec, env_kwargs: dict[str, Any], slots: list[int]):
        if env_spec.id not in _REGISTRY:  # a fresh process has only the built-in envs
            register(**{k: getattr(env_spec, k) for k in EnvSpec.__dataclass_fields__})
        self.env_id = env_spec.id
        self.env_kwargs = env_kwargs
        self.envs = {slot: None for slot in slots}

    def _env(self, slot: int):
        if self.envs[slot] is None:
            self.envs[slot] = make(self.env_id, **self.env_kwargs)
        return self.envs[slot]

    def run(self, ops: list[tuple]) -> list[tuple]:
        results = []
        for op in ops:
            kind, slot = op[0], op[1]
            try:
                env = self._env(slot)
                if kind == "reset":
                    results.append((slot, "ok", env.reset(seed=op[2], options=op[3])))
                elif kind == "step":
                    results.append((slot, "ok", (op[2], *env.step(op[2]))))
                elif kind == "env_side":
                    action = op[2].act_in_env(env)
                    results.append((slot, "ok", (action, *env.step(action))))
                else:
                    raise ValueError(f"unknown op {kind!r}")
            except Exception:  # the env crashed: rebuild it, report the episode unscorable
                results.append((slot, "error", traceback.format_exc(limit=8)))
                self._discard(slot)
        return results

    def _discard(self, slot: int) -> None:
        env, self.envs[slot] = self.envs[slot], None
        try:
            if env is not None:
                env.close()
        except Exception:
            pass

    def close(self) -> None:
        for slot in list(self.envs):
            self._discard(slot)


# ----- backends: submit(host_index, ops) and poll() -> [(host_index, results)] ---------------

class _InlineBackend:
    def __init__(self, hosts_args):
        self.hosts = [_EnvHost(*a) for a in hosts_args]
        self.done: deque = deque()

    def submit(self, h: int, ops: list[tuple]) -> None:
        self.done.append((h, self.hosts[h].run(ops)))

    def poll(self, timeout: float | None) -> list[tuple[int, list]]:
        out = list(self.done)
        self.done.clear()
        return out

    def close(self) -> None:
        for host in self.hosts:
            host.close()


class _ThreadBackend(_InlineBackend):
    def __init__(self, hosts_args):
        super().__init__(hosts_args)
        self.results: queue.Queue = queue.Queue()
        self.inboxes = [queue.Queue() for _ in self.hosts]
        self.threads = [threading.Thread(target=self._loop, args=(h,), daemon=True,
                                         name=f"turngym-env-{h}") for h in range(len(self.hosts))]
        for t in self.threads:
            t.start()

    def _loop(self, h: int) -> None:
        while (ops := self.inboxes[h].get()) is not None:
            self.results.put((h, self.hosts[h].run(ops)))

    def submit(self, h: int, ops: list[tuple]) -> None:
        self.inboxes[h].put(ops)

    def poll(self, timeout: float | None) -> list[tuple[int, list]]:
        out = []
        try:
            out.append(self.results.get(timeout=timeout))
            while True:
                out.append(self.results.get_nowait())
        except queue.Empty:
            pass
        return out

    def close(self) -> None:
        for inbox in self.inboxes:
            inbox.put(None)
        for t in self.threads:
            t.join(timeout=10)
        super().close()


def _process_main(conn, host_args) -> None:
    host = _EnvHost(*host_args)
    try:
        while True:
            try:
                ops = conn.recv()
            except EOFError:
                break
            if ops is None:
                break
            conn.send(host.run(ops))
    finally:
        host.close()


class _ProcessBackend:
    def __init__(self, hosts_args):
        self.ctx = mp.get_context("spawn")  # fork is unsafe once torch or Playwright threads exist
        self.hosts_args = hosts_args
        self.procs: list = [None] * len(hosts_args)
        self.conns: list = [None] * len(hosts_args)
        self.pending: dict[int, list[tuple]] = {}
        self.deaths = [0] * len(hosts_args)  # consecutive deaths per host
        for h in range(len(hosts_args)):
            self._start(h)

    def _start(self, h: int) -> None:
        parent, child = self.ctx.Pipe()
        proc = self.ctx.Process(target=_process_main, args=(child, self.hosts_args[h]), daemon=True,
                                name=f"turngym-env-host-{h}")
        proc.start()
        child.close()
        self.procs[h], self.conns[h] = proc, parent

    def submit(self, h: int, ops: list[tuple]) -> None:
        self.pending[h] = ops
        try:
            self.conns[h].send(ops)
        except (BrokenPipeError, OSError):
            pass  # noticed in poll as a dead host

    def poll(self, timeout: float | None) -> list[tuple[int, list]]:
        busy = {self.conns[h]: h for h in self.pending}
        out = []
        for conn in wait_connections(list(busy), timeout=timeout):
            h = busy[conn]
            ops = self.pending.pop(h)
            try:
                out.append((h, conn.recv()))
                self.deaths[h] = 0
            except (EOFError, OSError):  # the host process died: restart it, fail its episodes
                self.deaths[h] += 1
                if self.deaths[h] > 3:
                    raise RuntimeError(
                        f"env host process {h} died {self.deaths[h]} times in a row. Is the env importable "
                        "in a fresh process? A script that uses backend='process' must start the pool "
                        "under `if __name__ == '__main__':` (workers are spawned and import the script).") from None
                self._restart(h)
                out.append((h, [(op[1], "error", "env host process died") for op in ops]))
        return out

    def _restart(self, h: int) -> None:
        proc = self.procs[h]
        proc.join(timeout=1)
        if proc.is_alive():
            proc.kill()
        self.conns[h].close()
        self._start(h)

    def close(self) -> None:
        for conn in self.conns:
            try:
                conn.send(None)
            except (BrokenPipeError, OSError):
                pass
        deadline = time.monotonic() + 10
        for proc in self.procs:
            proc.join(timeout=max(0.0, deadline - time.monotonic()))
            if proc.is_alive():
                proc.kill()
                proc.join()
        for conn in self.conns:
            conn.close()


class _RayBackend:
    def __init__(self, hosts_args, address: str | None = None):
        import ray

        self.ray = ray
        if not ray.is_initialized():
            # A local Ray gets this process's import path, so envs registered from user code
            # (not installed as packages) import in the actors too.
            runtime_env = None if address else {"env_vars": {"PYTHONPATH": os.pathsep.join(sys.path)}}
            ray.init(address=address, include_dashboard=False, log_to_driver=False,
                     ignore_reinit_error=True, runtime_env=runtime_env)
        actor = ray.remote(num_cpus=0)(_EnvHost)
        self.hosts = [actor.remote(*a) for a in hosts_args]
        self.refs: dict[Any, int] = {}

    def submit(self, h: int, ops: list[tuple]) -> None:
        self.refs[self.hosts[h].run.remote(ops)] = h

    def poll(self, timeout: float | None) -> list[tuple[int, list]]:
        if not self.refs:
            return []
        ready, _ = self.ray.wait(list(self.refs), num_returns=1, timeout=timeout)
        if ready:  # take everything else that is already done too
            more, _ = self.ray.wait([r for r in self.refs if r not in ready],
                                    num_returns=len(self.refs) - len(ready), timeout=0)
            ready += more
        out = []
        for ref in ready:
            h = self.refs.pop(ref)
            out.append((h, self.ray.get(ref)))
        return out

    def close(self) -> None:
        for host in self.hosts:
            try:
                self.ray.get(host.close.remote(), timeout=10)
            except Exception:
                pass
            self.ray.kill(host)


# ----- the pool ----------------------------------------------------------------------------

@dataclass
class _Episode:
    index: int          # position in the rollout's output
    group_id: str
    member: int
    task_id: str
    seed: int
    options: dict[str, Any]
    trajectory: Trajectory | None = None
    messages: list[dict] = field(default_factory=list)
    observation: str = ""
    info: dict[str, Any] = field(default_factory=dict)
    completion: Any = None   # the policy's output for the step in flight


class EnvPool:
    """Run episodes of one env id on ``num_envs`` slots.

    Args:
        env_id: a registered id.
        num_envs: how many envs run at once.
        backend: "inline" (this thread), "thread", "process" or "ray".
        env_kwargs: passed to ``turngym.make``.
        num_workers: processes / Ray actors (default: min(num_envs, CPU count)); each owns
            ``ceil(num_envs / num_workers)`` envs and steps them in one message.
        ray_address: ``ray.init(address=...)`` for a cluster (default: a local Ray).
        servers, server_token: backend "remote": URLs of ``turngym serve-env`` servers (and their
            bearer token); each worker's envs live on one of them, round robin (default workers:
            one per server). See ``turngym.integrations.remote_pool``.
    """

    def __init__(self, env_id: str, num_envs: int = 4, backend: str = "thread",
                 env_kwargs: dict[str, Any] | None = None, num_workers: int | None = None,
                 ray_address: str | None = None, servers: list[str] | None = None,
                 server_token: str | None = None):
        if backend not in BACKENDS:
            raise ValueError(f"backend: {backend!r} is not one of {list(BACKENDS)}")
        if num_envs < 1:
            raise ValueError(f"num_envs: must be >= 1, got {num_envs}")
        self.env_id = env_id
        self.spec = spec(env_id)
        self.num_envs = num_envs
        self.backend_name = backend
        env_kwargs = dict(env_kwargs or {})
        self.env_kwargs = env_kwargs
        if backend == "thread":
            workers = num_envs
        elif backend == "inline":
            workers = 1
        elif backend == "remote":
            workers = min(num_envs, num_workers or len(servers or ()) or 1)
        else:
            workers = min(num_envs, num_workers or os.cpu_count() or 1)
        per = math.ceil(num_envs / workers)
        slot_lists = [list(range(i, min(i + per, num_envs))) for i in range(0, num_envs, per)]
        self.slot_host = {slot: h for h, slots in enumerate(slot_lists) for slot in slots}
        hosts_args = [(self.spec, env_kwargs, slots) for slots in slot_lists]
        if backend == "inline":
            self._backend: Any = _InlineBackend(hosts_args)
        elif backend == "thread":
            self._backend = _ThreadBackend(hosts_args)
        elif backend == "process":
            self._backend = _ProcessBackend(hosts_args)
        elif backend == "remote":  # envs on other machines; imported only here, core needs no httpx
            from turngym.integrations.remote_pool import RemoteBackend

            self._backend = RemoteBackend(hosts_args, list(servers or ()), token=server_token)
        else:
            self._backend = _RayBackend(hosts_args, ray_address)
        self._closed = False

    def rollout(self, policy: Any, tasks: Iterable[str | dict], group_size: int = 1, seed: int = 0,
                max_steps: int = 200, on_trajectory: Callable[[Trajectory], None] | None = None,
                ) -> list[Trajectory]:
        """Run ``group_size`` episodes per task; members of a group share task and seed.

        Group ``i`` resets with ``seed + i``. Trajectories come back ordered by group, then member.
        ``on_trajectory`` is called as each one ends (for progress bars and streaming writes).
        """
        if self._closed:
            raise RuntimeError("the pool is closed")
        if group_size < 1:
            raise ValueError(f"group_size: must be >= 1, got {group_size}")
        todo: deque[_Episode] = deque()
        for i, task in enumerate(tasks):
            options = {"task": task} if isinstance(task, dict) else {"task_id": str(task)}
            task_id = task["task_id"] if isinstance(task, dict) else str(task)
            for m in range(group_size):
                todo.append(_Episode(len(todo), f"{task_id}@{seed + i}", m, task_id, seed + i, options))
        finished: list[tuple[int, Trajectory]] = []
        free = deque(range(self.num_envs))
        running: dict[int, _Episode] = {}
        waiting: list[int] = []                # slots whose episode waits for an action
        outbox: dict[int, list[tuple]] = {}    # host -> ops not yet sent
        busy: set[int] = set()                 # hosts with a batch in flight
        env_side = bool(getattr(policy, "env_side", False))

        def finish(slot: int) -> None:
            ep = running.pop(slot)
            traj = ep.trajectory
            traj.episode_return = sum(s.reward for s in traj.steps)
            finished.append((ep.index, traj))
            free.append(slot)
            if on_trajectory is not None:
                on_trajectory(traj)

        while todo or running:
            while free and todo:  # start episodes on free slots
                slot, ep = free.popleft(), todo.popleft()
                running[slot] = ep
                ep.trajectory = Trajectory(env_id=self.env_id, task_id=ep.task_id, seed=ep.seed,
                                           group_id=ep.group_id,
                                           trajectory_id=f"{ep.group_id}#{ep.member}")
                outbox.setdefault(self.slot_host[slot], []).append(("reset", slot, ep.seed, ep.options))
            if waiting:
                if env_side:
                    for slot in waiting:
                        outbox.setdefault(self.slot_host[slot], []).append(("env_side", slot, policy))
                else:
                    convs = [Conversation(messages=running[s].messages, info=running[s].info,
                                          env_id=self.env_id) for s in waiting]
                    outs = policy.act(convs)
                    if len(outs) != len(convs):
                        raise RuntimeError(f"policy returned {len(outs)} completions for {len(convs)} conversations")
                    for slot, out in zip(waiting, outs):
                        running[slot].completion = out  # a str or a Completion with token data
                        outbox.setdefault(self.slot_host[slot], []).append(("step", slot, completion_action(out)))
                waiting = []
            for h in list(outbox):
                if h not in busy:
                    self._backend.submit(h, outbox.pop(h))
                    busy.add(h)
            for h, results in self._backend.poll(timeout=None):
                busy.discard(h)
                for slot, status, payload in results:
                    ep = running[slot]
                    traj = ep.trajectory
                    if status == "error":
                        traj.scorable = False
                        traj.metadata["error"] = payload
                        if traj.steps:
                            traj.steps[-1].truncated = True
                        finish(slot)
                        continue
                    if len(payload) == 2:  # reset
                        obs, info = payload
                        traj.initial_observation, traj.initial_info = obs, info
                        ep.messages = list(info.get("messages", []))
                        ep.observation, ep.info = obs, info
                        waiting.append(slot)
                        continue
                    action, obs, reward, terminated, truncated, info = payload
                    completion, ep.completion = ep.completion, None
                    if len(traj.steps) + 1 >= max_steps and not terminated:
                        truncated = True
                    step = Step(turn=len(traj.steps), observation=ep.observation, action=action,
                                reward=reward, terminated=terminated, truncated=truncated,
                                state_key=ep.info.get("state_key", ""), info=info)
                    if isinstance(completion, Completion):
                        step.prompt_ids = completion.prompt_ids
                        step.completion_ids = completion.completion_ids
                        step.logprobs = completion.logprobs
                        step.entropies = completion.entropies
                        step.loss_mask = [1] * len(completion.completion_ids)
                    traj.steps.append(step)
                    ep.messages.append({"role": "assistant", "content": action})
                    ep.messages.extend(info.get("messages", []))
                    ep.observation, ep.info = obs, info
                    if terminated or truncated:
                        traj.success = bool(info.get("is_success", False))
                        traj.scorable = bool(info.get("scorable", True))
                        finish(slot)
                    else:
                        waiting.append(slot)
        return [traj for _, traj in sorted(finished, key=lambda pair: pair[0])]

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

