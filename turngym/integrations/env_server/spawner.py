"""The env server's spawner: one process, started once per server, that has imported turngym (and
each env's module, at that env's first session) and forks a session's env process on request.

A fork from it costs a millisecond or two and the server waits for it on its event loop, so
sessions open in parallel. multiprocessing's forkserver, which started every session before,
prepares each child afresh (the start's pickles, the main module imported again, the env's module
imported in every child) behind a lock in the server: 10-22 sessions a second on two cores.

The spawner is the parent of every env process: it reaps them and tells the server each one's
exit code. It dies with the server, and its children die with it (the parent-death signal)."""

import asyncio
import collections
import contextlib
import gc
import importlib
import multiprocessing as mp
import os
import pickle
import selectors
import signal
import socket
import struct
import time
from multiprocessing import util
from multiprocessing.connection import Connection
from typing import Any

from turngym.integrations.env_server.errors import EnvDied

_LENGTH = struct.Struct("!I")  # a request: its pickle's length, the pickle, then the env's pipe end
WARM_S = 20.0  # the longest an env's warm-up may hold the spawner
_REPLY = struct.Struct("!cii")  # b"F" forked (pid), b"E" exited (pid, exit code), b"X" no fork (errno)


def _read_exactly(sock: socket.socket, n: int, fds: list[int]) -> bytes:
    """``n`` bytes from ``sock`` (b"" at its end), with any file descriptors sent along added to ``fds``."""
    data = b""
    while len(data) < n:
        chunk, received, _, _ = socket.recv_fds(sock, n - len(data), 4)
        fds.extend(received)
        if not chunk:
            return b""
        data += chunk
    return data


def _prepare(registration: dict[str, Any], imported: set[str]) -> None:
    """Import the env's module here, once, so that each session's process finds it imported
    (an env module's import is most of a session's start: 0.1-0.15 s for the household and the
    shop). Any failure is left to the session's process, which reports it as a build error."""
    if registration["id"] in imported:
        return
    imported.add(registration["id"])
    with contextlib.suppress(Exception):
        from turngym.core.registry import TAGS, register

        if registration["id"] not in TAGS:  # registered in the server (tests, --import)
            register(**registration)
        entry = registration.get("entry_point")
        if isinstance(entry, str):
            importlib.import_module(entry.partition(":")[0])
        _warm(registration["id"])
    gc.freeze()  # what was just imported stays shared with the children, untouched by their collector


def _warm(env_id: str) -> None:
    """Build and reset one env here, then close it, so that what an env caches per process (the
    household's generated task set: 1.7 s at its first reset) is inherited, not rebuilt by every
    session. Only envs that declare ``shares_process`` (pure Python, nothing started outside the
    process) run here, and not for longer than WARM_S: past it the spawner goes on without."""
    from turngym.core.registry import make
    from turngym.integrations.env_server.shared import declares_shared

    if not declares_shared(env_id):
        return

    def late(*_):
        raise TimeoutError(f"warming {env_id} took more than {WARM_S} s")

    previous = signal.signal(signal.SIGALRM, late)
    signal.setitimer(signal.ITIMER_REAL, WARM_S)
    try:
        env = make(env_id)
        try:
            env.reset(seed=0)
        finally:
            env.close()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _child(fd: int, registration: dict[str, Any], env_kwargs: dict[str, Any], inherited) -> None:
    """A forked session's process: the spawner's own state dropped, then the env's main."""
    from turngym.integrations.env_server.processes import _env_process_main

    code = 0
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for f in inherited:
            with contextlib.suppress(OSError):
                f.close() if hasattr(f, "close") else os.close(f)
        # what multiprocessing does in a child it forks: an env may start processes of its own
        mp.process._children = set()
        util._finalizer_registry.clear()
        util._run_after_forkers()
        _env_process_main(Connection(fd), registration, env_kwargs)
    except BaseException:  # noqa: BLE001 - nothing may leave this function but the exit below
        # it failed before it could tell the server (out of memory, say): say why on stderr
        with contextlib.suppress(BaseException):
            import traceback

            traceback.print_exc()
        code = 1
    finally:
        os._exit(code)


def _reap(sock: socket.socket) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        sock.sendall(_REPLY.pack(b"E", pid, os.waitstatus_to_exitcode(status)))


def _spawner_main(conn, server_pid: int) -> None:
    """Serve fork requests until the server closes the socket."""
    from turngym.integrations.env_server.processes import _die_with

    if hasattr(os, "setpgrp"):
        os.setpgrp()  # Ctrl-C at the server's terminal reaches the server only
    _die_with(server_pid)
    sock = socket.socket(fileno=os.dup(conn.fileno()))
    conn.close()
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)  # a child's exit wakes the loop below
    signal.signal(signal.SIGCHLD, lambda *_: None)
    imported: set[str] = set()
    selector = selectors.DefaultSelector()
    selector.register(sock, selectors.EVENT_READ)
    selector.register(wake_r, selectors.EVENT_READ)
    while True:
        for key, _ in selector.select():
            if key.fileobj != sock:
                with contextlib.suppress(BlockingIOError):
                    while os.read(wake_r, 512):
                        pass
                _reap(sock)
                continue
            fds: list[int] = []
            header = _read_exactly(sock, _LENGTH.size, fds)
            if not header:  # the server is gone
                os._exit(0)
            registration, env_kwargs = pickle.loads(_read_exactly(sock, _LENGTH.unpack(header)[0], fds))
            fd = fds.pop()  # one per request, sent with its first bytes
            _prepare(registration, imported)
            try:
                pid = os.fork()
            except OSError as e:
                os.close(fd)
                sock.sendall(_REPLY.pack(b"X", 0, e.errno or 0))
                continue
            if pid == 0:
                _child(fd, registration, env_kwargs, (selector, sock, wake_r, wake_w))
            os.close(fd)
            sock.sendall(_REPLY.pack(b"F", pid, 0))


class Child:
    """An env process the spawner forked: its pid, and its exit code once the spawner reaped it."""

    def __init__(self, pid: int):
        self.pid = pid
        self.exitcode: int | None = None
        self.ended = asyncio.get_running_loop().create_future()

    def is_alive(self) -> bool:
        return self.exitcode is None

    def end(self, code: int) -> None:
        if self.exitcode is None:
            self.exitcode = code
            self.ended.set_result(code)

    async def join(self, timeout: float) -> bool:
        """Whether the process has ended within ``timeout`` seconds."""
        if self.exitcode is None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self.ended), timeout)
        return self.exitcode is not None

    def kill(self) -> None:
        """SIGKILL the process and its process group (what the env started)."""
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):  # no group of its own yet
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(self.pid, signal.SIGKILL)


class Spawner:
    """The server's side of its spawner: fork requests go out on one socket, answers come back on
    it, read by the event loop whenever it is readable. Started at the first fork, and again after
    the spawner died."""

    def __init__(self):
        self.process = None
        self.sock: socket.socket | None = None
        self.forks: collections.deque[asyncio.Future] = collections.deque()
        self.outbox: collections.deque[tuple[bytes, Any]] = collections.deque()  # (bytes, pipe end to send)
        self.children: dict[int, Child] = {}
        self.buffer = b""
        self.answered = time.monotonic()  # when the spawner last sent anything
        self.starting = asyncio.Lock()

    async def fork(self, registration: dict[str, Any], env_kwargs: dict[str, Any], timeout: float):
        """A new env process (a Child) and the server's end of its pipe; the env is built there
        from the first message it reads. EnvDied if no process could be forked in time."""
        await self._start()
        payload = pickle.dumps((registration, env_kwargs))
        ours, theirs = mp.Pipe()
        future = asyncio.get_running_loop().create_future()
        self.forks.append(future)
        self.outbox.append((_LENGTH.pack(len(payload)) + payload, theirs))
        self._flush()
        try:
            child = await asyncio.wait_for(asyncio.shield(future), timeout)
        except TimeoutError:
            # only this open fails (its child, if it comes, is killed on arrival): closing the
            # spawner would take every session it forked with it. It goes only when it answered
            # nothing at all for the whole wait (hung), so that the next fork starts another.
            if time.monotonic() - self.answered > timeout:
                self.close()
            ours.close()
            raise EnvDied(f"the env spawner did not fork within {timeout:g} s") from None
        except EnvDied:
            ours.close()
            raise
        return child, ours

    def _flush(self) -> None:
        """Send what the socket takes now, the rest when it is writable: the server never blocks
        on the spawner, which may be busy answering it (a burst of opens fills both ways)."""
        loop = asyncio.get_running_loop()
        while self.outbox and self.sock is not None:
            data, theirs = self.outbox[0]
            try:
                # the request's pipe end travels with its first bytes
                sent = socket.send_fds(self.sock, [data], [theirs.fileno()]) if theirs else self.sock.send(data)
            except BlockingIOError:
                loop.add_writer(self.sock.fileno(), self._flush)
                return
            except OSError:
                self._lost()
                return
            if theirs is not None:
                theirs.close()  # the spawner has its own copy now
            if sent < len(data):
                self.outbox[0] = (data[sent:], None)
            else:
                self.outbox.popleft()
        if self.sock is not None:
            loop.remove_writer(self.sock.fileno())

    async def _start(self) -> None:
        async with self.starting:
            if self.sock is not None:
                return
            from turngym.integrations.env_server.processes import start_process

            process, conn = await asyncio.to_thread(start_process, _spawner_main, ())
            self.process = process
            self.sock = socket.socket(fileno=os.dup(conn.fileno()))
            conn.close()
            self.sock.setblocking(False)
            self.buffer = b""
            self.answered = time.monotonic()
            asyncio.get_running_loop().add_reader(self.sock.fileno(), self._readable)

    def _readable(self) -> None:
        try:
            data = self.sock.recv(1 << 16)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._lost()
            return
        self.answered = time.monotonic()
        self.buffer += data
        while len(self.buffer) >= _REPLY.size:
            kind, pid, value = _REPLY.unpack_from(self.buffer)
            self.buffer = self.buffer[_REPLY.size :]
            if kind == b"E":
                child = self.children.pop(pid, None)
                if child is not None:
                    child.end(value)
                continue
            future = self.forks.popleft()
            if kind == b"X":
                if not future.done():
                    future.set_exception(EnvDied(f"the env spawner could not fork: {os.strerror(value)}"))
                continue
            child = self.children[pid] = Child(pid)
            if future.done():  # its caller gave up (a timeout, a cancel): nobody will use it
                child.kill()
            else:
                future.set_result(child)

    def _lost(self) -> None:
        """The spawner is gone: pending forks fail, and its children die with it (parent-death
        signal), so each counts as killed."""
        if self.sock is None:
            return
        with contextlib.suppress(Exception):
            asyncio.get_running_loop().remove_reader(self.sock.fileno())
            asyncio.get_running_loop().remove_writer(self.sock.fileno())
        with contextlib.suppress(OSError):
            self.sock.close()
        self.sock = None
        for _, theirs in self.outbox:
            if theirs is not None:
                theirs.close()
        self.outbox.clear()
        while self.forks:
            future = self.forks.popleft()
            if not future.done():
                future.set_exception(EnvDied("the env spawner exited"))
        for child in self.children.values():
            child.end(-signal.SIGKILL)
        self.children.clear()

    def close(self) -> None:
        process = self.process
        self._lost()
        if process is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            self.process = None
