"""A persistent sandboxed Python that forks once per snippet (``backend="worker"``).

Starting bwrap and a Python interpreter costs 15-25 ms a run; a worker pays that once. The
server (``_worker_server.py``) runs inside the same bwrap sandbox as ``backend="bwrap"`` (its own
unprivileged uid, no network, read-only system dirs, tmpfs work dir) and forks a child per
snippet from a clean template (see the server's docstring: no snippet's memory holds an earlier
snippet's request or reply); after each snippet it kills every process the snippet left and
empties the work dir, /tmp and /dev/shm. Snippets share one sandbox *in turn*, never at once.

What is weaker than a fresh sandbox: a snippet runs as the same uid as the server, so it can kill
the server or its own runner; it cannot ptrace them or read their memory (not dumpable). When that
happens (no reply, a broken reply), the snippet is run again in a fresh one-shot bwrap sandbox,
where it cannot, and that result is returned (``extra["fallback"] == "bwrap"``): killing the
worker never turns a failing program into a sandbox error. The worker is not tied to the thread
that started it (no ``--die-with-parent``, whose signal fires when that *thread* ends); it exits
when the host closes its pipe.
"""

from __future__ import annotations

import atexit
import base64
import json
import os
import queue
import selectors
import signal
import struct
import subprocess
import threading
import time
from pathlib import Path

from turngym.sandbox.common import (
    Limits,
    Result,
    check_files,
    decode,
    fresh_uid,
    looks_out_of_memory,
)
from turngym.sandbox.native import (
    BWRAP_ISOLATION,
    _bwrap_argv,
    is_root,
    run_native,
    sandbox_python,
    set_rlimits,
)
from turngym.sandbox.seccomp import filter_fd

_SERVER = Path(__file__).with_name("_worker_server.py")
WORKER_ISOLATION = BWRAP_ISOLATION + "; persistent: one sandbox reused by snippets in turn"


class Worker:
    """One persistent sandbox. ``run(code, ...)`` is thread-safe (snippets run one at a time)."""

    def __init__(self, preload: tuple[str, ...] = (), memory_mb: int = 2048, disk_mb: int = 64,
                 max_processes: int = 64, precompile: tuple[str, ...] = ()):
        """``preload``: modules the server imports once; ``precompile``: snippet sources it compiles
        once (a snippet whose code is one of them skips compiling)."""
        self.preload = tuple(preload)
        self.precompile = tuple(precompile)
        self.limits = Limits(timeout_s=3600, memory_mb=memory_mb, disk_mb=disk_mb,
                             max_processes=max_processes, max_file_mb=disk_mb, max_open_files=1024)
        self._proc: subprocess.Popen | None = None
        self._lock = threading.Lock()
        self.restarts = 0
        self.uid: int | None = None  # the server's uid on the host (root only: a fresh one)
        self._seq = 0  # snippets sent to the current server

    # ----- lifecycle --------------------------------------------------------------------------
    def start(self) -> None:
        uid = self.uid = fresh_uid() if is_root() else None
        source = _SERVER.read_text()
        seccomp_fd = filter_fd(deny_ipc=True)
        argv = _bwrap_argv([sandbox_python(), "-B", "-c", source], [], self.limits, uid, None,
                           extra_env={"TURNGYM_PRELOAD": json.dumps(list(self.preload)),
                                      "TURNGYM_PRECOMPILE": json.dumps(list(self.precompile))}, seccomp_fd=seccomp_fd,
                           die_with_parent=False)
        self._seq = 0
        limits = self.limits

        def preexec() -> None:
            os.setsid()
            os.umask(0o022)
            # the server lives long: CPU time is limited per snippet, in the child
            set_rlimits(limits, nproc=True, cpu=False)

        try:
            self._proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          stderr=subprocess.DEVNULL, preexec_fn=preexec, env={},
                                          pass_fds=[seccomp_fd] if seccomp_fd is not None else [])
        finally:
            if seccomp_fd is not None:
                os.close(seccomp_fd)
        reply = self._read_reply(time.monotonic() + 60)
        if not reply or not reply.get("ready"):
            self.close()
            raise OSError("the sandboxed worker did not start (is bubblewrap working?)")

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        proc.wait()
        for f in (proc.stdin, proc.stdout):
            f.close()

    # ----- snippets ---------------------------------------------------------------------------
    def run(self, code: str, files: dict[str, str | bytes] | None = None, stdin: str | bytes | None = None,
            limits: Limits | None = None, results: bool = False) -> Result:
        """Run one snippet. ``results``: give it a results pipe at fd 3 (``--results-fd 3`` in its
        argv); what it writes there is in ``Result.extra["results"]`` (bytes), read by the worker's
        runner, not by anything the snippet runs in."""
        limits = limits or Limits()
        limits.validate()
        files = {k: (v.encode() if isinstance(v, str) else bytes(v)) for k, v in check_files(files or {}).items()}
        stdin_data = stdin.encode() if isinstance(stdin, str) else (stdin or b"")
        req = {
            "code": code,
            "files": {k: base64.b64encode(v).decode() for k, v in files.items()},
            "limits": {"timeout_s": limits.timeout_s, "memory_mb": min(limits.memory_mb, self.limits.memory_mb),
                       "max_file_mb": min(limits.max_file_mb, self.limits.max_file_mb),
                       "max_open_files": limits.max_open_files, "max_output_bytes": limits.max_output_bytes},
        }
        if results:
            req["results"] = True
        with self._lock:
            started = time.monotonic()
            try:
                if not self.alive():
                    self.close()
                    self.start()
                self._seq += 1
                self._send(req)
                self._send({"stdin": base64.b64encode(stdin_data).decode()})
                reply = self._read_reply(time.monotonic() + limits.timeout_s + 5, self._seq)
            except (OSError, ValueError) as exc:
                reply, why = None, f"{type(exc).__name__}: {exc}"
            else:
                why = "the worker died or stopped answering during the snippet"
            if reply is None or reply.get("runner_killed"):
                self.restarts += 1
                self.close()  # a fresh worker next time
        if (reply is None or reply.get("runner_killed")) and results:
            # the snippet killed the process that reads its results: it crashed, no results
            return Result(stderr="[the program killed the worker]", exit_code=-9, backend="worker",
                          duration_s=time.monotonic() - started, isolation=WORKER_ISOLATION,
                          extra={"uid": self.uid, "results": b"", "worker_failure": why})
        if reply is None or reply.get("runner_killed"):
            # rerun where the snippet cannot kill its supervisor; its own outcome, never "error"
            res = run_native("bwrap", None, True, {**files, "main.py": code.encode()}, stdin_data, limits, False)
            res.backend = "worker"  # what the caller asked for; extra["fallback"] says what ran
            res.extra["fallback"] = "bwrap"
            res.extra["worker_failure"] = "the snippet killed its runner" if reply else why
            if res.error:
                res.duration_s = time.monotonic() - started
            return res
        err = base64.b64decode(reply["stderr"])
        return Result(stdout=decode(base64.b64decode(reply["stdout"])), stderr=decode(err),
                      exit_code=reply["exit_code"], timed_out=reply["timed_out"],
                      output_truncated=reply["truncated"], duration_s=reply["duration_s"],
                      out_of_memory=looks_out_of_memory(err, reply["exit_code"]), backend="worker",
                      isolation=WORKER_ISOLATION, extra={"uid": self.uid, **(
                          {"results": base64.b64decode(reply.get("results", ""))} if results else {})})

    def _send(self, obj: dict) -> None:
        data = json.dumps(obj).encode()
        self._proc.stdin.write(struct.pack(">I", len(data)) + data)
        self._proc.stdin.flush()

    def _read_reply(self, deadline: float, seq: int | None = None) -> dict | None:
        """The next reply (for snippet ``seq``: stale ones are dropped); None when the worker died,
        went silent or sent something broken."""
        fd = self._proc.stdout.fileno()
        while True:
            header = _read_exact(fd, 4, deadline)
            if header is None:
                return None
            size = struct.unpack(">I", header)[0]
            body = _read_exact(fd, size, deadline) if size <= (256 << 20) else None
            if body is None:
                return None
            try:
                reply = json.loads(body)
            except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
                return None
            if not isinstance(reply, dict):
                return None
            if seq is None or reply.get("seq") == seq:
                return reply
            if not isinstance(reply.get("seq"), int) or reply["seq"] > seq:
                return None


def _read_exact(fd: int, n: int, deadline: float) -> bytes | None:
    buf = bytearray()
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while len(buf) < n:
            left = deadline - time.monotonic()
            if left <= 0 or not sel.select(timeout=left):
                return None
            chunk = os.read(fd, n - len(buf))
            if not chunk:
                return None
            buf += chunk
    return bytes(buf)


class WorkerPool:
    """Several persistent workers; ``run`` takes whichever is free (call it from several threads
    to use several cores: each snippet still runs alone in its worker's sandbox)."""

    def __init__(self, size: int | None = None, preload: tuple[str, ...] = (), precompile: tuple[str, ...] = ()):
        self.size = size or os.cpu_count() or 1
        self._free: queue.SimpleQueue[Worker] = queue.SimpleQueue()
        self._all = [Worker(preload=preload, precompile=precompile) for _ in range(self.size)]
        for worker in self._all:
            self._free.put(worker)

    def run(self, code: str, files: dict[str, str | bytes] | None = None, stdin: str | bytes | None = None,
            limits: Limits | None = None, results: bool = False) -> Result:
        worker = self._free.get()
        try:
            return worker.run(code, files=files, stdin=stdin, limits=limits, results=results)
        finally:
            self._free.put(worker)

    def map(self, codes: list[str], limits: Limits | None = None) -> list[Result]:
        """Run each snippet (in parallel across the pool), results in order."""
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(self.size) as pool:
            return list(pool.map(lambda code: self.run(code, limits=limits), codes))

    def close(self) -> None:
        for worker in self._all:
            worker.close()


# keyed by pid too: a forked child (an EnvPool process) must not talk to its parent's worker
_SHARED: dict[tuple, Worker] = {}
_SHARED_LOCK = threading.Lock()


def shared_worker(preload: tuple[str, ...] = (), precompile: tuple[str, ...] = ()) -> Worker:
    """This process's worker for ``preload`` and ``precompile`` (started on first use, closed at
    exit)."""
    key = (os.getpid(), tuple(preload)) + ((tuple(precompile),) if precompile else ())
    with _SHARED_LOCK:
        worker = _SHARED.get(key)
        if worker is None:
            worker = _SHARED[key] = Worker(preload=preload, precompile=precompile)
        return worker


def _reset_after_fork() -> None:
    global _SHARED_LOCK
    _SHARED_LOCK = threading.Lock()  # it may have been held by another thread at the fork


os.register_at_fork(after_in_child=_reset_after_fork)


@atexit.register
def _close_shared() -> None:
    for key, worker in _SHARED.items():
        if key[0] == os.getpid():
            worker.close()
