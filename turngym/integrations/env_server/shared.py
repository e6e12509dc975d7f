"""The env server's light mode: sessions of envs that declare ``shares_process = True`` (pure
Python, no C that can hang, no process-wide state) live as threads in a few shared host
processes instead of a process each, at a small fraction of the memory and with no fork per
session. A call past its deadline abandons that session's thread (only its session pays, as in
isolated mode); an env that ends its process (``os._exit``, a segfault) takes the host's other
sessions with it, each marked unscorable, which is why code and browser envs never declare it."""

import asyncio
import contextlib
import os
import queue
import threading
import uuid
from typing import Any

from turngym.integrations.env_server.errors import EnvDied, EnvRaised, EnvTimeout
from turngym.integrations.env_server.processes import ENV_CALLS, _die_with, _kind, _told, start_process

SESSIONS_PER_HOST = 256
_DECLARED: dict[str, bool] = {}


def declares_shared(env_id: str) -> bool:
    """Whether ``env_id``'s class says it may share a process (``shares_process = True``); an id
    whose env wraps a base env (``base_entry_point``, as tools mode does) needs the base's say too."""
    if env_id not in _DECLARED:
        from gymnasium.envs.registration import load_env_creator

        import turngym

        spec = turngym.spec(env_id)
        entry_points = [
            spec.entry_point,
            *([spec.kwargs["base_entry_point"]] if "base_entry_point" in spec.kwargs else []),
        ]
        try:
            _DECLARED[env_id] = all(
                getattr(e if callable(e) else load_env_creator(e), "shares_process", False) is True
                for e in entry_points
            )
        except Exception:  # noqa: BLE001 - an entry point that cannot load: isolated, which reports why
            _DECLARED[env_id] = False
    return _DECLARED[env_id]


def _host_main(conn, server_pid: int) -> None:
    """A host process: each ``("build", key, registration, kwargs)`` starts a thread owning one
    env, ``("call", key, (name, args))`` queues a call for it, ``("close", key)`` ends it. Answers
    go back as ``(key, answer)``, from whichever thread finished."""
    if hasattr(os, "setpgrp"):
        os.setpgrp()
    _die_with(server_pid)
    threading.stack_size(512 * 1024)  # a session's thread touches little of its stack
    sending = threading.Lock()
    inboxes: dict[str, queue.SimpleQueue] = {}

    def reply(key: str, answer: tuple) -> None:
        with sending, contextlib.suppress(OSError):
            conn.send((key, answer))

    while True:
        try:
            kind, key, *rest = conn.recv()
        except EOFError:  # the server is gone
            break
        if kind == "build":
            inboxes[key] = queue.SimpleQueue()
            threading.Thread(
                target=_session_thread,
                args=(key, *rest, inboxes[key], reply),
                daemon=True,
                name=f"turngym-env-{key[:8]}",
            ).start()
        elif kind == "call" and key in inboxes:
            inboxes[key].put(rest[0])
        elif kind == "close" and key in inboxes:
            inboxes.pop(key).put(None)
    os._exit(0)  # abandoned threads (hung calls) must not hold the exit


def _session_thread(key: str, registration: dict[str, Any], env_kwargs: dict[str, Any], inbox, reply) -> None:
    from turngym.core.registry import TAGS, make, register

    try:
        if registration["id"] not in TAGS:
            register(**registration)
        env = make(registration["id"], **env_kwargs)
    except BaseException as e:  # noqa: BLE001 - the env could not be built
        reply(key, ("build", _told(e)))
        return
    reply(key, ("ok", None))
    try:
        while (request := inbox.get()) is not None:
            name, args = request
            try:
                answer = ("ok", ENV_CALLS[name](env, *args))
            except BaseException as e:  # noqa: BLE001 - SystemExit too: the server decides what it costs
                answer = (_kind(e), _told(e))
            reply(key, answer)
    finally:
        with contextlib.suppress(BaseException):
            env.close()


class Host:
    """The server's side of one host process: one pipe, read whenever it is readable, each answer
    handed to the call waiting for its key."""

    def __init__(self, process, conn):
        self.process, self.conn = process, conn
        self.waiting: dict[str, asyncio.Future] = {}
        self.keys: set[str] = set()
        self.hung = 0  # sessions whose call never came back (their thread abandoned)
        self.dead = False
        asyncio.get_running_loop().add_reader(conn.fileno(), self._readable)

    def _readable(self) -> None:
        try:
            while self.conn.poll():
                key, answer = self.conn.recv()
                future = self.waiting.pop(key, None)
                if future is not None and not future.done():
                    future.set_result(answer)
        except (EOFError, OSError):
            self._lost()

    def _lost(self) -> None:
        if self.dead:
            return
        self.dead = True
        with contextlib.suppress(Exception):
            asyncio.get_running_loop().remove_reader(self.conn.fileno())
        self.process.join(0.5)
        code = self.process.exitcode
        how = f"was killed by signal {-code}" if code is not None and code < 0 else f"exited with code {code}"
        for future in self.waiting.values():
            if not future.done():
                future.set_exception(EnvDied(f"the env's shared process {how}"))
        self.waiting.clear()

    def send(self, message: tuple) -> None:
        if self.dead:
            raise EnvDied("the env's shared process is gone")
        try:
            self.conn.send(message)
        except OSError:
            self._lost()
            raise EnvDied("the env's shared process is gone") from None

    def kill(self) -> None:
        self.dead = True
        with contextlib.suppress(Exception):
            asyncio.get_running_loop().remove_reader(self.conn.fileno())
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, 9)
        with contextlib.suppress(OSError):
            self.conn.close()


class Hosts:
    """A store's host processes: a session goes to the fullest host with room that has no hung
    call; a host left with no sessions after a hang is killed (its stuck threads with it). The
    next host starts while the last one is half full, so opens never wait on a start in
    between (a start is a second or more on a loaded machine)."""

    def __init__(self):
        self.hosts: list[Host] = []
        self.starting: asyncio.Task | None = None  # the one host start in flight

    async def pick(self) -> Host:
        while True:
            self.hosts = [h for h in self.hosts if not h.dead]
            open_hosts = [h for h in self.hosts if not h.hung and len(h.keys) < SESSIONS_PER_HOST]
            if open_hosts:
                if sum(SESSIONS_PER_HOST - len(h.keys) for h in open_hosts) <= SESSIONS_PER_HOST // 2:
                    self._start_one()
                return max(open_hosts, key=lambda h: len(h.keys))
            await asyncio.shield(self._start_one())

    def _start_one(self) -> asyncio.Task:
        if self.starting is None or self.starting.done():
            self.starting = asyncio.ensure_future(self._start())
        return self.starting

    async def _start(self) -> None:
        self.hosts.append(Host(*await asyncio.to_thread(start_process, _host_main, ())))

    def release(self, host: Host, key: str) -> None:
        host.keys.discard(key)
        if not host.keys and (host.hung or len(self.hosts) > 1):
            host.kill()
            self.hosts = [h for h in self.hosts if h is not host]

    def close(self) -> None:
        for host in self.hosts:
            host.kill()
        self.hosts = []


class SharedEnv:
    """One session's env in a shared host: the same calls as ``EnvProcess``."""

    def __init__(self, hosts: Hosts, host: Host, key: str):
        self.hosts, self.host, self.key = hosts, host, key
        self.closed = False

    @classmethod
    async def start(cls, hosts: Hosts, env_id: str, env_kwargs: dict[str, Any], timeout: float) -> "SharedEnv":
        from turngym.core.registry import registration

        host = await hosts.pick()
        self = cls(hosts, host, uuid.uuid4().hex)
        host.keys.add(self.key)
        try:
            await self._ask(("build", self.key, registration(env_id), env_kwargs), timeout)
        except (EnvRaised, EnvDied):
            self._release()
            raise
        return self

    async def call(self, name: str, *args, timeout: float) -> Any:
        return await self._ask(("call", self.key, (name, args)), timeout)

    async def _ask(self, message: tuple, timeout: float) -> Any:
        future = asyncio.get_running_loop().create_future()
        self.host.waiting[self.key] = future
        self.host.send(message)
        try:
            status, payload = await asyncio.wait_for(future, timeout)
        except TimeoutError:
            self.host.waiting.pop(self.key, None)
            self.host.hung += 1
            self._release()
            raise EnvTimeout(self) from None
        if status != "ok":
            raise EnvRaised(status, payload)
        return payload

    def _release(self) -> None:
        if not self.closed:
            self.closed = True
            with contextlib.suppress(EnvDied):
                self.host.send(("close", self.key))
            self.hosts.release(self.host, self.key)

    # the lifecycle calls of EnvProcess, for the store's close path
    def stop(self) -> None:
        self._release()

    async def join(self, timeout: float) -> bool:
        return True

    async def kill(self) -> bool:
        self._release()
        return True

    def close_pipe(self) -> None:
        pass

    def alive(self) -> bool:
        return not self.closed and not self.host.dead
