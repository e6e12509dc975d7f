"""The env server's process supervisor: each session's env in a process of its own, killable
at a deadline whatever the env is doing, waited on by the event loop (no thread per call). The
spawner (``spawner``) forks those processes; ``start_process`` starts the few long-lived ones
(the spawner itself, the light mode's hosts) from multiprocessing's forkserver."""

import asyncio
import contextlib
import multiprocessing as mp
import os
import signal
import threading
import traceback
from typing import Any

from turngym.integrations.env_server.errors import EnvDied, EnvRaised, EnvTimeout


def _kind(error: BaseException) -> str:
    import gymnasium as gym

    if isinstance(error, gym.error.ResetNeeded):  # turngym.ResetNeeded is one
        return "reset_needed"
    if isinstance(error, NotImplementedError):
        return "not_implemented"
    return "value" if isinstance(error, ValueError) else "error"


def _told(error: BaseException) -> tuple[str, str]:
    """An exception as (its last traceback line, its own text), to send to the server."""
    return traceback.format_exception_only(type(error), error)[-1].strip(), str(error)


def _env_reset(env, seed, options):
    return env.reset(seed=seed, options=options)


def _env_step(env, action, expert):
    if expert:
        action = env.unwrapped.expert_action()
    return (action, *env.step(action))


def _env_describe(env, live):
    env = env.unwrapped

    def ask(name: str, default: Any = None) -> Any:  # every TurnEnv has these; other envs may not
        method = getattr(env, name, None) if live or name == "instructions" else None
        return method() if callable(method) else default

    return {
        "turn": getattr(env, "turn", 0) if live else 0,
        "task_id": (getattr(env, "task", None) or {}).get("task_id") if live else None,
        "tools": ask("tools"),
        "admissible_actions": ask("admissible_actions"),
        "instructions": ask("instructions", ""),
    }


def _env_task_ids(env, split):
    env = env.unwrapped
    return {"split": split or env.split, "task_ids": env.task_ids(split or env.split)}


def _env_snapshot(env):
    return env.unwrapped.snapshot()


def _env_restore(env, snapshot):
    return env.reset(options={"snapshot": snapshot})


ENV_CALLS = {
    "reset": _env_reset,
    "step": _env_step,
    "describe": _env_describe,
    "task_ids": _env_task_ids,
    "snapshot": _env_snapshot,
    "restore": _env_restore,
}


_LIBC = []  # the C library, loaded once in the spawner and inherited by every session's process


def _die_with(server_pid: int | None) -> None:
    """End this process (and its group) once the server is gone, even while the env hangs: a
    server killed with SIGKILL leaves no env behind. The kernel tells: the parent-death signal
    covers this process's parent, and with ``server_pid`` a thread blocked on a pidfd of the
    server covers the server itself (for processes whose parent, multiprocessing's forkserver,
    may outlive it). A session's process needs only the first: its parent is the spawner, which
    watches the server."""
    parent = os.getppid()
    with contextlib.suppress(Exception):
        if not _LIBC:
            import ctypes

            _LIBC.append(ctypes.CDLL(None, use_errno=True))
        _LIBC[0].prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # the parent died before the signal was set
        os._exit(1)
    if server_pid is None:
        return
    try:
        pidfd = os.pidfd_open(server_pid)
    except (AttributeError, OSError):  # no pidfd (old kernel, not Linux): the parent-death signal alone
        return

    def watch():
        import select

        select.select([pidfd], [], [])  # readable once the server has exited
        os.killpg(0, signal.SIGKILL)

    threading.Thread(target=watch, daemon=True, name="turngym-env-watch-server").start()


def _env_process_main(conn, env_registration: dict[str, Any], env_kwargs: dict[str, Any]) -> None:
    """A session's process: build the env, then answer ``(name, args)`` requests until ``None``."""
    if hasattr(os, "setpgrp"):
        # its own process group: killing it also ends what the env started (a browser, say), and
        # Ctrl-C at the server's terminal reaches the server only
        os.setpgrp()
    _die_with(None)
    from turngym.core.registry import TAGS, make, register

    # an env may start processes of its own; a daemonic process may not (the server kills this
    # one, daemon or not)
    mp.current_process().daemon = False

    env = None
    try:
        if env_registration["id"] not in TAGS:  # a registration made in the server (tests, --import)
            register(**env_registration)
        env = make(env_registration["id"], **env_kwargs)
        conn.send(("ok", None))
        while True:
            try:
                request = conn.recv()
            except EOFError:  # the server is gone
                break
            if request is None:
                break
            name, args = request
            try:
                answer = ("ok", ENV_CALLS[name](env, *args))
            except BaseException as e:  # noqa: BLE001 - SystemExit too: the server decides what it costs
                answer = (_kind(e), _told(e))
            conn.send(answer)
    except BaseException as e:  # noqa: BLE001 - the env could not be built
        with contextlib.suppress(OSError):
            conn.send(("build", _told(e)))
    finally:
        if env is not None:
            with contextlib.suppress(BaseException):
                env.close()


_START = threading.Lock()  # one process start at a time (multiprocessing's bookkeeping is not thread-safe)


def _process_context():
    """forkserver where there is one: a new session forks from a small process that has already
    imported turngym (see ``forkserver_preload``), instead of importing it afresh as spawn does."""
    if "forkserver" not in mp.get_all_start_methods():
        return mp.get_context("spawn")
    context = mp.get_context("forkserver")
    # no effect once the forkserver runs
    context.set_forkserver_preload(["turngym.integrations.env_server.forkserver_preload"])
    return context


def start_process(target, args: tuple):
    """Start ``target(conn, *args, server_pid)`` in a process; its (Process, our end of the pipe).
    Blocking: a handshake with the forkserver, tens of milliseconds on a loaded machine (once per
    spawner or host, never per session)."""
    context = _process_context()
    conn, child = context.Pipe()
    try:
        with _START:
            process = context.Process(
                target=target, daemon=True, name="turngym-env-session", args=(child, *args, os.getpid())
            )
            process.start()
            # the store joins its own processes; left in multiprocessing's set, every later start
            # would poll each of them (quadratic in the sessions open)
            mp.process._children.discard(process)
    except BaseException:
        conn.close()
        raise
    finally:
        child.close()
    return process, conn


class EnvProcess:
    """One session's env in a process of its own: killable at a deadline whatever the env is
    doing, and an env that exits takes only this process with it. Calls are awaited on the
    event loop: a call in flight costs a file descriptor, not a thread."""

    def __init__(self, process, conn):
        self.process, self.conn = process, conn
        self.waiting: asyncio.Future | None = None  # the call waiting for the env's answer
        self.fd: int | None = conn.fileno()
        # watched from the start, once: a call then costs the loop no change to what it polls
        asyncio.get_running_loop().add_reader(self.fd, self._readable)

    def _readable(self) -> None:
        """The env answered, or its process ended (None): hand it to the call waiting for it."""
        try:
            answer = self.conn.recv()
        except (EOFError, OSError):
            answer = None
            self._unwatch()
        if self.waiting is not None and not self.waiting.done():
            self.waiting.set_result(answer)

    def _unwatch(self) -> None:
        if self.fd is not None:
            with contextlib.suppress(Exception):
                asyncio.get_running_loop().remove_reader(self.fd)
            self.fd = None

    @classmethod
    async def start(cls, spawner, env_id: str, env_kwargs: dict[str, Any], timeout: float) -> "EnvProcess":
        """The process with its env built (EnvRaised "build", EnvDied or EnvTimeout if not):
        forked by ``spawner`` (a ``Spawner``) without a thread or a lock, so many start at once."""
        from turngym.core.registry import registration

        self = cls(*await spawner.fork(registration(env_id), env_kwargs, timeout))
        await self.answer(timeout)
        return self

    async def call(self, name: str, *args, timeout: float) -> Any:
        """Run ``ENV_CALLS[name](env, *args)`` in the process; EnvRaised, EnvDied or EnvTimeout."""
        self.send(name, *args)
        return await self.answer(timeout)

    def send(self, name: str, *args) -> None:
        """The request goes out (EnvDied if the process is gone). The env reads its requests as
        soon as it is idle, and a session has one call at a time, so this does not block."""
        try:
            self.conn.send((name, args))
        except OSError:
            raise EnvDied("the env's process is gone") from None

    async def answer(self, timeout: float) -> Any:
        """The env's answer within ``timeout`` seconds; past it the process is killed (EnvTimeout)."""
        if self.fd is None:  # its pipe has ended
            raise await self._died()
        self.waiting = asyncio.get_running_loop().create_future()
        try:
            answer = await asyncio.wait_for(self.waiting, timeout)
        except TimeoutError:
            raise await self.time_out() from None
        finally:
            self.waiting = None
        if answer is None:
            raise await self._died()
        status, payload = answer
        if status != "ok":
            raise EnvRaised(status, payload)
        return payload

    async def time_out(self) -> "EnvTimeout":
        """Kill the process whose call ran past its deadline; the EnvTimeout to raise."""
        await self.kill()
        return EnvTimeout(self)

    async def _died(self) -> EnvDied:
        await self.join(timeout=1)
        code = self.process.exitcode
        how = f"was killed by signal {-code}" if code is not None and code < 0 else f"exited with code {code}"
        return EnvDied(f"the env's process {how}")

    def stop(self) -> None:
        """Ask the process to close its env and exit (``join`` or ``kill`` after)."""
        with contextlib.suppress(OSError):
            self.conn.send(None)

    async def join(self, timeout: float) -> bool:
        """Whether the process has ended within ``timeout`` seconds (the spawner says so)."""
        return await self.process.join(timeout)

    async def kill(self) -> bool:
        """SIGKILL the process (and its process group); whether it is gone a second later."""
        if self.process.exitcode is None:
            self.process.kill()
        gone = await self.join(timeout=1.0)
        self.close_pipe()
        return gone

    def close_pipe(self) -> None:
        self._unwatch()
        with contextlib.suppress(OSError):
            self.conn.close()

    def alive(self) -> bool:
        return self.process.is_alive()


async def close_processes(processes: list[EnvProcess], timeout: float) -> list[EnvProcess]:
    """Close envs together: ask each to exit, wait up to ``timeout`` for all, kill the rest.
    Returns the processes still alive after SIGKILL (stuck in the kernel)."""
    for p in processes:
        p.stop()

    async def close(p: EnvProcess) -> EnvProcess | None:
        if not await p.join(timeout) and not await p.kill():
            return p
        p.close_pipe()
        return None

    return [p for p in await asyncio.gather(*(close(p) for p in processes)) if p is not None]
