"""EnvPool: many envs, stepped without lock-step, over inline / thread / process / ray backends.

Each backend runs ``_EnvHost`` objects; a host owns some env slots and runs operations (reset,
step, expert step) on them. A process host takes a batch in one message and answers it in one
message (a shared counter tells which op of the batch is running), so it pays one round trip
per batch, not per env; a Ray actor answers op by op (one actor call each). The rollout loop
hands every slot that is waiting for an action to the policy in one batch, sends the actions
out, and takes results back as soon as any host answers: an episode that ends frees its slot
at once for the next one.

Faults end only the episode at fault, ``scorable=False`` with the reason: an env that raises or
calls ``sys.exit`` is rebuilt; an op past ``step_timeout_s`` or an episode past
``episode_timeout_s`` gets its host (thread, process, actor) replaced, as does a host that dies;
the other episodes of a replaced host start again from their reset. Closing the pool stops
every child.
"""

from __future__ import annotations

import ctypes
import math
import multiprocessing as mp
import numbers
import os
import queue
import signal
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from multiprocessing.connection import wait as wait_connections
from typing import Any

from turngym.core.policy import Completion, Conversation, completion_action, completion_reply
from turngym.core.records import Step, Trajectory, group_id
from turngym.core.registry import TAGS, make, register, registration, spec

BACKENDS = ("inline", "thread", "process", "ray", "remote")
#: extra seconds a host that has not come up yet (spawning a process, starting a Ray actor,
#: importing the env) gets before its first op counts as hung
STARTUP_GRACE_S = 120.0
#: how the reasons of episodes ended by a deadline start (their last step gets done_reason "timeout")
TIMEOUT_REASONS = ("step timed out", "episode timed out")


class StepTimeout(BaseException):
    """Raised inside an env op that ran past its deadline (inline backend, and in an abandoned
    thread). A BaseException so that an env's own ``except Exception`` cannot swallow it."""


class _EnvHost:
    """Owns the envs of some slots and runs operations on them, one at a time.

    An operation is ``("reset", slot, seed, options)``, ``("step", slot, action)`` or
    ``("env_side", slot, policy)``; its result is ``(slot, "ok", payload)`` or
    ``(slot, "error", reason)``.
    """

    def __init__(self, env_registration: dict[str, Any], env_kwargs: dict[str, Any], slots: list[int]):
        if env_registration["id"] not in TAGS:  # a fresh process has only the built-in envs
            register(**env_registration)
        self.env_id = env_registration["id"]
        self.env_kwargs = env_kwargs
        self.envs = {slot: None for slot in slots}

    def _env(self, slot: int):
        if self.envs[slot] is None:
            self.envs[slot] = make(self.env_id, **self.env_kwargs)
        return self.envs[slot]

    def run_one(self, op: tuple) -> tuple:
        kind, slot = op[0], op[1]
        try:
            env = self._env(slot)
            if kind == "reset":
                return (slot, "ok", env.reset(seed=op[2], options=op[3]))
            if kind == "step":
                return (slot, "ok", (op[2], *env.step(op[2])))
            if kind == "env_side":
                action = op[2].act_in_env(env)
                return (slot, "ok", (action, *env.step(action)))
            raise ValueError(f"unknown op {kind!r}")
        except KeyboardInterrupt:
            raise
        # SystemExit and StepTimeout too: an env calling sys.exit() must not take the pool down
        except BaseException as e:  # noqa: BLE001 - the env crashed: rebuild it, episode unscorable
            reason = (f"step timed out: {e}" if isinstance(e, StepTimeout)
                      else traceback.format_exc(limit=8))
            self._discard(slot)
            return (slot, "error", reason)

    def run(self, ops: list[tuple]) -> list[tuple]:
        return [self.run_one(op) for op in ops]

    def ping(self) -> bool:
        """Answers once the host is built (remote backends wait for it before timing ops)."""
        return True

    def _discard(self, slot: int) -> None:
        env, self.envs[slot] = self.envs[slot], None
        try:
            if env is not None:
                env.close()
        except BaseException:  # noqa: BLE001 - a broken env may fail to close too
            pass

    def close(self) -> None:
        for slot in list(self.envs):
            self._discard(slot)


# ----- backends ------------------------------------------------------------------------------
#
# A backend runs one _EnvHost per host index h and speaks four methods:
#
#   submit(h, ops, step_timeout_s)  run ``ops`` in order on host h (one batch in flight per host)
#   poll(timeout) -> [event]        wait up to ``timeout`` s; an event is ``(h, (slot, status,
#                                   payload))`` for one finished op, in op order per host, or
#                                   ``(h, None)`` when host h died (its unanswered ops are lost)
#   replace(h)                      throw host h away (hung or dead) and start a fresh one; no
#                                   event of the old host arrives afterwards
#   close()                         stop every host
#   running_op(h) -> int            optional, for hosts that answer a batch at once: the index,
#                                   among h's unanswered ops, of the op it runs (or died in)
#   ready_at: list[float | None]     per host, time.monotonic() when it came up (None: still
#                                   starting); ops of a host that is starting get STARTUP_GRACE_S
#                                   more before they count as hung
#
# Deadlines are the pool's job: it calls replace(h) when an op runs too long. Only the inline
# backend, which cannot be interrupted from outside, uses step_timeout_s itself.


class _InlineBackend:
    def __init__(self, hosts_args):
        self.hosts = [_EnvHost(*a) for a in hosts_args]
        self.hosts_args = hosts_args
        self.done: deque = deque()
        self.ready_at: list[float | None] = [0.0] * len(hosts_args)

    def submit(self, h: int, ops: list[tuple], step_timeout_s: float | None = None) -> None:
        with _alarm(step_timeout_s) as alarm:
            for op in ops:
                alarm.arm()
                self.done.append((h, self.hosts[h].run_one(op)))

    def poll(self, timeout: float | None) -> list[tuple]:
        out = list(self.done)
        self.done.clear()
        return out

    def replace(self, h: int) -> None:
        self.hosts[h].close()
        self.hosts[h] = _EnvHost(*self.hosts_args[h])

    def close(self) -> None:
        for host in self.hosts:
            host.close()


class _alarm:
    """SIGALRM raises StepTimeout in this thread when an op runs past ``seconds`` (main thread
    only: elsewhere signals cannot be used, and the inline backend then has no step deadline).

    The handler is installed once per batch and each op only re-arms the timer (one system call:
    cheap next to a step). An alarm someone else set (pytest-timeout, a user's own) is kept: if
    it is due first, its handler runs when it fires; on exit it is re-armed with its time left."""

    def __init__(self, seconds: float | None):
        self.seconds = seconds
        self.active = (seconds is not None and seconds > 0 and hasattr(signal, "setitimer")
                       and threading.current_thread() is threading.main_thread())
        self.deadline = 0.0

    def _fire(self, signum, frame):
        if time.monotonic() >= self.deadline - 1e-3:
            raise StepTimeout(f"no answer within step_timeout_s={self.seconds:g}")
        if callable(self.previous):  # the outer alarm was due first: it is its handler's signal
            self.previous(signum, frame)

    def __enter__(self):
        if self.active:
            self.previous = signal.signal(signal.SIGALRM, self._fire)
            left, self.outer_interval = signal.getitimer(signal.ITIMER_REAL)
            self.outer_due = time.monotonic() + left if left > 0 else None
        return self

    def arm(self) -> None:
        """Start the deadline of the next op."""
        if self.active:
            now = time.monotonic()
            self.deadline = now + self.seconds
            delay = self.seconds if self.outer_due is None else min(self.seconds, max(self.outer_due - now, 1e-3))
            signal.setitimer(signal.ITIMER_REAL, delay)

    def __exit__(self, *exc):
        if self.active:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self.previous)
            if self.outer_due is not None:
                signal.setitimer(signal.ITIMER_REAL, max(self.outer_due - time.monotonic(), 1e-3),
                                 self.outer_interval)
        return False


def drain(results: queue.Queue, timeout: float | None) -> list:
    """Wait up to ``timeout`` s for one item of ``results``, then take every item already there."""
    out = []
    try:
        out.append(results.get(timeout=timeout))
        while True:
            out.append(results.get_nowait())
    except queue.Empty:
        pass
    return out


class _ThreadBackend:
    """One thread per host. A hung thread cannot be killed: replace() abandons it (and asks
    Python to raise StepTimeout in it, which ends a pure-Python loop) and starts a new one."""

    def __init__(self, hosts_args):
        self.hosts_args = hosts_args
        self.ready_at: list[float | None] = [0.0] * len(hosts_args)  # a thread starts at once
        self.results: queue.Queue = queue.Queue()
        self.generation = [0] * len(hosts_args)
        self.inboxes: list[queue.Queue] = [None] * len(hosts_args)
        self.threads: list[threading.Thread] = [None] * len(hosts_args)
        for h in range(len(hosts_args)):
            self._start(h)

    def _start(self, h: int) -> None:
        inbox: queue.Queue = queue.Queue()
        thread = threading.Thread(target=self._loop, args=(h, self.generation[h], inbox), daemon=True,
                                  name=f"turngym-env-{h}")
        self.inboxes[h], self.threads[h] = inbox, thread
        thread.start()

    def _loop(self, h: int, generation: int, inbox: queue.Queue) -> None:
        host = None
        try:
            host = _EnvHost(*self.hosts_args[h])
            while (ops := inbox.get()) is not None:
                for op in ops:
                    self.results.put((h, generation, host.run_one(op)))
        except BaseException:  # noqa: BLE001 - report the death instead of leaving the pool waiting
            self.results.put((h, generation, None))
        finally:
            if host is not None:
                host.close()

    def submit(self, h: int, ops: list[tuple], step_timeout_s: float | None = None) -> None:
        self.inboxes[h].put(ops)

    def poll(self, timeout: float | None) -> list[tuple]:
        return [(h, result) for h, generation, result in drain(self.results, timeout)
                if generation == self.generation[h]]

    def replace(self, h: int) -> None:
        old = self.threads[h]
        self.inboxes[h].put(None)
        self.generation[h] += 1
        if old.is_alive() and old.ident is not None:
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(old.ident), ctypes.py_object(StepTimeout))
        self._start(h)

    def close(self) -> None:
        for inbox in self.inboxes:
            inbox.put(None)
        deadline = time.monotonic() + 10
        for t in self.threads:
            t.join(timeout=max(0.0, deadline - time.monotonic()))


def _process_main(conn, host_args, started) -> None:
    host = _EnvHost(*host_args)
    conn.send(READY)
    try:
        while True:
            try:
                ops = conn.recv()
            except EOFError:
                break
            if ops is None:
                break
            results = []
            for i, op in enumerate(ops):
                # shared memory, no message: if this op hangs or kills the process, the parent
                # still knows which op of the batch it was
                started.value = i + 1
                results.append(host.run_one(op))
            conn.send(results)  # one message per batch: what keeps the process backend cheap
    finally:
        host.close()


READY = "ready"  # a process host's first message: it imported everything and can take ops


class _ProcessBackend:
    def __init__(self, hosts_args):
        self.ctx = mp.get_context("spawn")  # fork is unsafe once torch or Playwright threads exist
        self.hosts_args = hosts_args
        self.ready_at: list[float | None] = [None] * len(hosts_args)
        self.procs: list = [None] * len(hosts_args)
        self.conns: list = [None] * len(hosts_args)
        self.expected: dict[int, int] = {}  # host -> batches still to come
        self.started: list = [None] * len(hosts_args)  # host -> ops of its batch started (shared)
        for h in range(len(hosts_args)):
            self._start(h)

    def _start(self, h: int) -> None:
        parent, child = self.ctx.Pipe()
        started = self.ctx.Value("i", 0, lock=False)
        proc = self.ctx.Process(target=_process_main, args=(child, self.hosts_args[h], started), daemon=True,
                                name=f"turngym-env-host-{h}")
        proc.start()
        child.close()
        self.procs[h], self.conns[h], self.started[h] = proc, parent, started
        self.ready_at[h] = None

    def running_op(self, h: int) -> int:
        """Index, among host h's unanswered ops, of the one it is running (or died in)."""
        return max(self.started[h].value - 1, 0)

    def submit(self, h: int, ops: list[tuple], step_timeout_s: float | None = None) -> None:
        self.expected[h] = self.expected.get(h, 0) + 1
        self.started[h].value = 0
        try:
            self.conns[h].send(ops)
        except (BrokenPipeError, OSError):
            pass  # noticed in poll as a dead host

    def poll(self, timeout: float | None) -> list[tuple]:
        busy = {self.conns[h]: h for h in range(len(self.conns))
                if self.expected.get(h) or self.ready_at[h] is None}
        if not busy:
            return []
        out = []
        for conn in wait_connections(list(busy), timeout=timeout):
            h = busy[conn]
            try:
                while (self.expected.get(h) or self.ready_at[h] is None) and conn.poll():
                    message = conn.recv()
                    if message == READY:
                        self.ready_at[h] = time.monotonic()
                        continue
                    out.extend((h, result) for result in message)
                    self.expected[h] -= 1
            except (EOFError, OSError):
                self.procs[h].join(timeout=1)
                out.append((h, None))
                self.expected[h] = 0
        return out

    def replace(self, h: int) -> None:
        proc = self.procs[h]
        proc.join(timeout=0.1)
        if proc.is_alive():
            proc.kill()
            proc.join(timeout=5)
        self.conns[h].close()
        self.expected[h] = 0
        self._start(h)

    def exit_reason(self, h: int) -> str:
        code = self.procs[h].exitcode
        return f"env host process died (exit code {code})"

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
    """One Ray actor per host; a batch of ops is one actor call (Ray's per-call cost is what
    batching saves). Which op of a batch hung or killed the actor cannot be told, so after such
    a failure the fresh actor of that host gets one call per op ("isolated"), whose results
    come back op by op and name the culprit of the next failure exactly."""

    def __init__(self, hosts_args, address: str | None = None, init_timeout_s: float = 120.0):
        import ray

        self.ray = ray
        if not ray.is_initialized():
            # A local Ray gets this process's import path, so envs registered from user code
            # (not installed as packages) import in the actors too.
            runtime_env = None if address else {"env_vars": {"PYTHONPATH": os.pathsep.join(sys.path)}}
            try:
                ray.init(address=address, include_dashboard=False, log_to_driver=False,
                         ignore_reinit_error=True, runtime_env=runtime_env)
            except Exception as e:  # noqa: BLE001 - Ray raises many kinds; the user needs one line
                raise ConnectionError(f"ray_address: could not start or reach Ray at {address or 'a local cluster'}: "
                                   f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from None
        self.actor = ray.remote(num_cpus=0, max_restarts=0)(_EnvHost)
        self.hosts_args = hosts_args
        self.ready_at: list[float | None] = [None] * len(hosts_args)
        self.refs: dict[Any, tuple[int, int]] = {}  # ref -> (host, sequence number)
        self.pings: dict[Any, int] = {}             # ref of a new actor's first call -> host
        self.sequence = 0
        self.batched = [0] * len(hosts_args)        # host -> ops in its batched call in flight
        self.isolated = [False] * len(hosts_args)   # host -> one call per op from now on
        self.hosts = [None] * len(hosts_args)
        for h in range(len(hosts_args)):
            self._start(h)

    def _start(self, h: int) -> None:
        self.hosts[h] = self.actor.remote(*self.hosts_args[h])
        self.ready_at[h] = None
        self.pings[self.hosts[h].ping.remote()] = h

    def submit(self, h: int, ops: list[tuple], step_timeout_s: float | None = None) -> None:
        self.sequence += 1
        if len(ops) > 1 and not self.isolated[h]:
            self.batched[h] = len(ops)
            self.refs[self.hosts[h].run.remote(ops)] = (h, self.sequence)
            return
        for op in ops:
            self.sequence += 1
            self.refs[self.hosts[h].run_one.remote(op)] = (h, self.sequence)

    def running_op(self, h: int) -> int | None:
        """0 (the oldest unanswered op) when the host answers op by op; None inside a batch."""
        return None if self.batched[h] > 1 else 0

    def poll(self, timeout: float | None) -> list[tuple]:
        waiting = list(self.refs) + list(self.pings)
        if not waiting:
            return []
        ready, _ = self.ray.wait(waiting, num_returns=1, timeout=timeout)
        if ready:  # take everything else that is already done too
            more, _ = self.ray.wait([r for r in waiting if r not in ready],
                                    num_returns=len(waiting) - len(ready), timeout=0)
            ready += more
        for ref in [r for r in ready if r in self.pings]:
            h = self.pings.pop(ref)
            try:
                self.ray.get(ref)
                self.ready_at[h] = time.monotonic()
            except Exception:  # noqa: BLE001 - the actor failed to start: its ops will fail too
                self.ready_at[h] = time.monotonic()
        ready = [r for r in ready if r in self.refs]
        out = []
        for ref in sorted(ready, key=lambda r: self.refs[r][1]):
            if ref not in self.refs:  # dropped with its dead host a moment ago
                continue
            h, _ = self.refs[ref]
            try:
                answer = self.ray.get(ref)
                self.refs.pop(ref)
                if isinstance(answer, list):  # a batch
                    self.batched[h] = 0
                    out.extend((h, result) for result in answer)
                else:
                    out.append((h, answer))
            except Exception:  # noqa: BLE001 - the actor died (RayActorError and kin)
                out.append((h, None))
                for r in [r for r, (hh, _) in self.refs.items() if hh == h]:
                    self.refs.pop(r)
        return out

    def replace(self, h: int) -> None:
        if self.batched[h] > 1:  # the culprit was somewhere in a batch: isolate from now on
            self.isolated[h] = True
        self.batched[h] = 0
        for r in [r for r, (hh, _) in self.refs.items() if hh == h]:
            self.refs.pop(r)
        for r in [r for r, hh in self.pings.items() if hh == h]:
            self.pings.pop(r)
        try:
            self.ray.kill(self.hosts[h], no_restart=True)
        except Exception:  # noqa: BLE001 - already gone
            pass
        self._start(h)

    def close(self) -> None:
        for host in self.hosts:
            try:
                self.ray.get(host.close.remote(), timeout=10)
            except Exception:  # noqa: BLE001
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
    conversation: Conversation | None = None  # what the policy sees (Conversation.start / add_turn)
    observation: str = ""
    completion: Any = None   # the policy's output for the step in flight
    started: float | None = None  # time.monotonic() at reset, for episode_timeout_s


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
        hosts_args = [(registration(env_id), env_kwargs, slots) for slots in slot_lists]
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
                step_timeout_s: float | None = 300.0, episode_timeout_s: float | None = None,
                ) -> list[Trajectory]:
        """Run ``group_size`` episodes per task; members of a group share task and seed.

        Group ``i`` resets with ``seed + i``. Trajectories come back ordered by group, then member.
        ``on_trajectory`` is called as each one ends (for progress bars and streaming writes).

        ``max_steps`` is each episode's turn budget. The pool does not count turns itself: it
        hands the budget to the env (``reset(options={"max_turns": max_steps})``), which
        truncates at the smaller of it and its own limit, with ``done_reason="max_turns"``. The
        last step of every trajectory has ``info["done_reason"]``: the env's (``"success"``,
        ``"max_turns"``, ...), or ``"error"`` / ``"timeout"`` for an episode the pool ended.

        Faults never lose the batch. An env that raises, calls ``sys.exit``, hangs past
        ``step_timeout_s`` (one reset or step, in seconds; None: no limit) or makes its episode
        run past ``episode_timeout_s`` (wall clock from reset; None: no limit) ends that episode
        with ``scorable=False`` and the reason in ``metadata["error"]``. A hung or dead host
        (thread, process, Ray actor) is replaced; the other episodes it held lost their env, so
        they start again from their reset on the fresh host. The inline backend enforces
        ``step_timeout_s`` with SIGALRM, so only in the main thread, and nothing in-process
        survives ``os._exit``: use ``backend="process"`` for envs you do not trust.
        """
        if self._closed:
            raise RuntimeError("the pool is closed")
        if group_size < 1:
            raise ValueError(f"group_size: must be >= 1, got {group_size}")
        if isinstance(max_steps, bool) or not isinstance(max_steps, numbers.Integral) or max_steps < 1:
            raise ValueError(f"max_steps: must be an int >= 1, got {max_steps!r}")
        max_steps = int(max_steps)
        for name, value in (("step_timeout_s", step_timeout_s), ("episode_timeout_s", episode_timeout_s)):
            if value is not None and not value > 0:
                raise ValueError(f"{name}: must be a number of seconds > 0 or None, got {value!r}")
        todo: deque[_Episode] = deque()
        for i, task in enumerate(tasks):
            options = {"task": task} if isinstance(task, dict) else {"task_id": str(task)}
            options["max_turns"] = max_steps  # the env decides truncation (TurnEnv.turn_limit)
            task_id = task["task_id"] if isinstance(task, dict) else str(task)
            for m in range(group_size):
                todo.append(_Episode(len(todo), group_id(task_id, seed + i), m, task_id, seed + i, options))
        finished: list[tuple[int, Trajectory]] = []
        free = deque(range(self.num_envs))
        running: dict[int, _Episode] = {}
        waiting: list[int] = []                # slots whose episode waits for an action
        outbox: dict[int, list[tuple]] = {}    # host -> ops not yet sent
        inflight: dict[int, deque] = {}        # host -> ops sent and not answered, in order
        op_started: dict[int, float] = {}      # host -> when its oldest unanswered op started
        deaths = [0] * (max(self.slot_host.values()) + 1)  # host deaths with no answer in between
        env_side = bool(getattr(policy, "env_side", False))
        backend = self._backend

        def finish(slot: int) -> None:
            ep = running.pop(slot)
            traj = ep.trajectory
            traj.episode_return = sum(s.reward for s in traj.steps)
            finished.append((ep.index, traj))
            free.append(slot)
            if on_trajectory is not None:
                on_trajectory(traj)

        def fail(slot: int, reason: str) -> None:
            traj = running[slot].trajectory
            traj.scorable = False
            traj.metadata["error"] = reason
            if traj.steps:
                last = traj.steps[-1]
                last.truncated = True
                timeout = reason.startswith(TIMEOUT_REASONS)
                last.info = {**last.info, "done_reason": "timeout" if timeout else "error"}
            finish(slot)

        def drop_ops(slot: int) -> None:
            h = self.slot_host[slot]
            if h in outbox:
                outbox[h] = [op for op in outbox[h] if op[1] != slot]
            if slot in waiting:
                waiting.remove(slot)

        def host_lost(h: int, culprit: int | None, reason: str) -> None:
            """Host h hung or died: replace it, fail the culprit's episode, restart the others."""
            backend.replace(h)
            inflight.pop(h, None)
            op_started.pop(h, None)
            if culprit is not None and culprit in running:
                drop_ops(culprit)
                fail(culprit, reason)
            for slot in [s for s in running if self.slot_host[s] == h]:
                ep = running.pop(slot)  # its env is gone with the host: run it again from reset
                drop_ops(slot)
                free.append(slot)
                ep.trajectory, ep.conversation, ep.completion, ep.started = None, None, None, None
                todo.appendleft(ep)

        seen_op: dict[int, int] = {}  # host -> the running op index last seen (batched hosts)

        def running_op(h: int) -> int | None:
            """Index among host h's unanswered ops of the one it runs; None: somewhere in a batch."""
            return backend.running_op(h) if hasattr(backend, "running_op") else 0

        def running_slot(h: int) -> int | None:
            """The slot of the op host h is running (None: not known)."""
            index = running_op(h)
            if not inflight.get(h) or index is None:
                return None
            return inflight[h][min(index, len(inflight[h]) - 1)][1]

        def progressed(h: int) -> bool:
            index = running_op(h)
            moved = index is not None and index != seen_op.get(h, 0)
            seen_op[h] = index or 0
            return moved

        def op_deadline(h: int) -> float:
            """When host h's running op counts as hung. A batch whose progress cannot be seen gets
            step_timeout_s per op; a host still starting (spawning a process, importing the env)
            gets STARTUP_GRACE_S on top."""
            budget = step_timeout_s * (len(inflight[h]) if running_op(h) is None else 1)
            ready_at = backend.ready_at[h]
            if ready_at is None:
                return op_started[h] + budget + STARTUP_GRACE_S
            return max(op_started[h], ready_at) + budget

        while todo or running:
            while free and todo:  # start episodes on free slots
                slot, ep = free.popleft(), todo.popleft()
                running[slot] = ep
                ep.started = time.monotonic()
                ep.trajectory = Trajectory(env_id=self.env_id, task_id=ep.task_id, seed=ep.seed,
                                           group_id=ep.group_id,
                                           trajectory_id=f"{ep.group_id}#{ep.member}")
                outbox.setdefault(self.slot_host[slot], []).append(("reset", slot, ep.seed, ep.options))
            if episode_timeout_s is not None:  # episodes out of time that are not inside the env
                now = time.monotonic()
                for slot in [s for s, ep in running.items() if now - ep.started > episode_timeout_s]:
                    if not any(op[1] == slot for op in inflight.get(self.slot_host[slot], ())):
                        drop_ops(slot)
                        fail(slot, f"episode timed out: over episode_timeout_s={episode_timeout_s:g}")
            if waiting:
                if env_side:
                    for slot in waiting:
                        outbox.setdefault(self.slot_host[slot], []).append(("env_side", slot, policy))
                else:
                    convs = [running[s].conversation for s in waiting]
                    outs = policy.act(convs)
                    if len(outs) != len(convs):
                        raise RuntimeError(f"policy returned {len(outs)} completions for {len(convs)} conversations")
                    for slot, out in zip(waiting, outs):
                        running[slot].completion = out  # a str or a Completion with token data
                        outbox.setdefault(self.slot_host[slot], []).append(("step", slot, completion_action(out)))
                waiting = []
            for h in list(outbox):
                if not outbox[h]:
                    del outbox[h]
                elif not inflight.get(h):
                    ops = outbox.pop(h)
                    inflight[h] = deque(ops)
                    op_started[h] = time.monotonic()
                    seen_op[h] = 0
                    backend.submit(h, ops, step_timeout_s)
            if not running:
                continue
            deadlines = []
            for h in inflight:
                if step_timeout_s is not None:
                    deadlines.append(op_deadline(h))
                slot = running_slot(h)
                if episode_timeout_s is not None and slot in running:
                    deadlines.append(running[slot].started + episode_timeout_s)
            wait = max(0.0, min(deadlines) - time.monotonic()) + 0.01 if deadlines else None
            for h, result in backend.poll(timeout=wait):
                if h not in inflight:
                    continue  # a late answer from a host already replaced
                if result is None:  # the host died in the op it was running
                    deaths[h] += 1
                    culprit = running_slot(h)
                    reason = (backend.exit_reason(h) if hasattr(backend, "exit_reason")
                              else "env host died")
                    if deaths[h] > 3:
                        raise RuntimeError(
                            f"env host {h} died {deaths[h]} times in a row ({reason}). Is the env importable "
                            "in a fresh process? A script that uses backend='process' must start the pool "
                            "under `if __name__ == '__main__':` (workers are spawned and import the script).")
                    host_lost(h, culprit, reason)
                    continue
                deaths[h] = 0
                inflight[h].popleft()
                op_started[h] = time.monotonic()
                if not inflight[h]:
                    del inflight[h]
                slot, status, payload = result
                if slot not in running:
                    continue
                self._take_result(running[slot], slot, status, payload, fail, finish, waiting)
            now = time.monotonic()
            for h in list(inflight):  # deadlines of the ops in flight
                culprit = running_slot(h)
                if step_timeout_s is not None and now > op_deadline(h) and progressed(h):
                    op_started[h] = now  # a batched host moved on to its next op: its own deadline
                elif step_timeout_s is not None and now > op_deadline(h):
                    host_lost(h, culprit, f"step timed out: no answer within step_timeout_s={step_timeout_s:g}")
                elif (episode_timeout_s is not None and culprit in running
                      and now - running[culprit].started > episode_timeout_s):
                    host_lost(h, culprit, f"episode timed out: over episode_timeout_s={episode_timeout_s:g}")
        return [traj for _, traj in sorted(finished, key=lambda pair: pair[0])]

    def _take_result(self, ep, slot, status, payload, fail, finish, waiting) -> None:
        traj = ep.trajectory
        if status == "error":
            fail(slot, payload)
            return
        if len(payload) == 2:  # reset
            obs, info = payload
            traj.initial_observation, traj.initial_info = obs, info
            ep.conversation = Conversation.start(self.env_id, info)
            ep.observation = obs
            waiting.append(slot)
            return
        action, obs, reward, terminated, truncated, info = payload
        completion, ep.completion = ep.completion, None
        conv = ep.conversation
        step = Step(turn=len(traj.steps), observation=ep.observation, action=action,
                    reply=action if completion is None else completion_reply(completion),
                    reward=reward, terminated=terminated, truncated=truncated,
                    state_key=conv.info.get("state_key", ""), info=info)
        if isinstance(completion, Completion):
            step.prompt_ids = completion.prompt_ids
            step.completion_ids = completion.completion_ids
            step.logprobs = completion.logprobs
            step.entropies = completion.entropies
            step.loss_mask = [1] * len(completion.completion_ids)
        traj.steps.append(step)
        conv.add_turn(action, info)
        ep.observation = obs
        if terminated or truncated:
            traj.success = bool(info.get("is_success", False))
            traj.scorable = bool(info.get("scorable", True))
            finish(slot)
        else:
            waiting.append(slot)

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

