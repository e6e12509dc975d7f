"""A persistent sandboxed Python that forks once per snippet (``backend="worker"``).

Starting bwrap and a Python interpreter costs 15-25 ms a run; a worker pays that once. The
server (``_worker_server.py``) runs inside the same bwrap sandbox as ``backend="bwrap"`` (its own
unprivileged uid, no network, read-only system dirs, tmpfs work dir) and forks a child per
snippet from a clean template (see the server's docstring: no snippet's memory holds an earlier
snippet's request or reply); after each snippet it kills every process the snippet left and
empties the work dir, /tmp and /dev/shm. Snippets share one sandbox *in turn*, never at once.

What is weaker than a fresh sandbox: a snippet runs as the same uid as the server, so it can kill
or stop the server or its own runner; it cannot ptrace them or read their memory (not dumpable).
When that happens (no reply, a broken reply, a stopped runner or server), every process of the
worker is killed (through the sandbox's init) and the snippet is run again in a fresh one-shot
bwrap sandbox, where it cannot, and that result is returned (``extra["fallback"] == "bwrap"``):
killing the worker never turns a failing program into a sandbox error. A graded run
(``results=True``) comes back without results and with ``extra["worker_failure"]``; its caller
grades again elsewhere (grading.py: a one-shot bwrap sandbox). The worker is not tied to the thread
that started it (no ``--die-with-parent``, whose signal fires when that *thread* ends); it exits
when the host closes its pipe.
"""

from __future__ import annotations

import atexit
import base64
import dataclasses
import json
import os
import queue
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
    python_layout,
    set_rlimits,
)
from turngym.sandbox.native import BWRAP_ISOLATION, _bwrap_argv, run_native
from turngym.sandbox.seccomp import filter_fd
from turngym.sandbox.spawn import is_root
from turngym.sandbox.worker_watch import STOP_CHECK_AFTER_S, Stalled, open_init, read_exact

_SERVER = Path(__file__).with_name("_worker_server.py")
WORKER_ISOLATION = BWRAP_ISOLATION + "; persistent: one sandbox reused by snippets in turn"


class Worker:
    """One persistent sandbox. ``run(code, ...)`` is thread-safe (snippets run one at a time)."""

    def __init__(
        self,
        preload: tuple[str, ...] = (),
        memory_mb: int = 2048,
        disk_mb: int = 64,
        max_processes: int = 64,
        precompile: tuple[str, ...] = (),
        packages: tuple[str, ...] = (),
    ):
        """``preload``: modules the server imports once; ``precompile``: snippet sources it compiles
        once (a snippet whose code is one of them skips compiling); ``packages``: the top-level
        import names, besides the standard library, the sandbox shows (see ``_bwrap_argv``)."""
        self.preload = tuple(preload)
        self.packages = tuple(packages)
        self.precompile = tuple(precompile)
        self.limits = Limits(
            timeout_s=3600,
            memory_mb=memory_mb,
            disk_mb=disk_mb,
            max_processes=max_processes,
            max_file_mb=disk_mb,
            max_open_files=1024,
        )
        self._proc: subprocess.Popen | None = None
        self._lock = threading.Lock()
        self.restarts = 0
        self.uid: int | None = None  # the server's uid on the host (root only: a fresh one)
        self._seq = 0  # snippets sent to the current server
        self._init: int | None = None  # a pidfd of the sandbox's init (pid 1 inside)
        self._init_host_pid: int | None = None  # its pid as this host sees it
        self._status_fd: int | None = None  # bwrap's JSON status pipe

    # ----- lifecycle --------------------------------------------------------------------------
    def start(self) -> None:
        uid = self.uid = fresh_uid() if is_root() else None
        source = _SERVER.read_text()
        seccomp_fd = filter_fd(deny_ipc=True)
        # bwrap's JSON status names the sandbox's init (pid 1 inside): killing it ends every
        # process of the sandbox, which killing bwrap's own process group does not (--new-session)
        status_r, status_w = os.pipe()
        argv = _bwrap_argv(
            [python_layout().interpreter, "-B", "-c", source],
            [],
            self.limits,
            uid,
            None,
            extra_env={
                "TURNGYM_PRELOAD": json.dumps(list(self.preload)),
                "TURNGYM_PRECOMPILE": json.dumps(list(self.precompile)),
            },
            seccomp_fd=seccomp_fd,
            die_with_parent=False,
            status_fd=status_w,
            packages=self.packages,
        )
        self._seq = 0
        limits = self.limits

        def preexec() -> None:
            os.setsid()
            os.umask(0o022)
            # the server lives long: CPU time is limited per snippet, in the child
            set_rlimits(limits, nproc=True, cpu=False)

        try:
            self._proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                preexec_fn=preexec,
                env={},
                pass_fds=[status_w] + ([seccomp_fd] if seccomp_fd is not None else []),
            )
        except BaseException:
            os.close(status_r)
            raise
        finally:
            os.close(status_w)
            if seccomp_fd is not None:
                os.close(seccomp_fd)
        self._status_fd = status_r  # kept open: bwrap writes its exit status there at the end
        deadline = time.monotonic() + 60
        self._init_host_pid, self._init = open_init(status_r, deadline)
        reply = self._read_reply(deadline)
        if not reply or not reply.get("ready") or self._init is None:
            self.close()
            raise OSError("the sandboxed worker did not start (is bubblewrap working?)")

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def close(self) -> None:
        """End the worker and every process in its sandbox (a stopped or hung server included)."""
        proc, self._proc = self._proc, None
        init, self._init = self._init, None
        if init is not None:  # the namespace's init: when it dies the kernel kills all inside
            try:
                signal.pidfd_send_signal(init, signal.SIGKILL)
            except OSError:
                pass
            os.close(init)
        if proc is not None:
            try:  # bwrap reaps its init and exits by itself: no zombie handed to the host's init
                proc.wait(timeout=2 if init is not None else 0)
            except subprocess.TimeoutExpired:
                pass
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
            proc.wait()
            for f in (proc.stdin, proc.stdout):
                f.close()
        if self._status_fd is not None:
            os.close(self._status_fd)
            self._status_fd = None

    # ----- snippets ---------------------------------------------------------------------------
    def run(
        self,
        code: str,
        files: dict[str, str | bytes] | None = None,
        stdin: str | bytes | None = None,
        limits: Limits | None = None,
        results: bool = False,
    ) -> Result:
        """Run one snippet. ``results``: give it a results pipe at fd 3 (``--results-fd 3`` in its
        argv); what it writes there is in ``Result.extra["results"]`` (bytes), read by the worker's
        runner, not by anything the snippet runs in."""
        limits = limits or Limits()
        limits.validate()
        files = {k: (v.encode() if isinstance(v, str) else bytes(v)) for k, v in check_files(files or {}).items()}
        stdin_data = stdin.encode() if isinstance(stdin, str) else (stdin or b"")
        reply, why, stopped, started, sent = self._exchange(
            self._request(code, files, limits, results), stdin_data, limits
        )
        if reply is not None and not reply.get("runner_killed"):
            return self._reply_result(reply, results)
        if results:
            # no results: the runner that reads them died. The snippet may have killed it, or the
            # OOM killer or an operator may have: the caller reruns it where it cannot (grading.py
            # does, in a fresh one-shot bwrap sandbox); never a verdict from this run
            return Result(
                stderr=f"[no results: {why}]",
                exit_code=-9,
                backend="worker",
                duration_s=time.monotonic() - started,
                isolation=WORKER_ISOLATION,
                extra={"uid": self.uid, "results": b"", "worker_failure": why},
            )
        left = limits.timeout_s - (time.monotonic() - sent)
        if stopped and left < 0.05:
            return Result(
                stderr=f"[{why}; no time left to run it again]",
                exit_code=-9,
                timed_out=True,
                backend="worker",
                duration_s=time.monotonic() - started,
                isolation=WORKER_ISOLATION,
                extra={"uid": self.uid, "worker_failure": why},
            )
        if stopped:
            limits = dataclasses.replace(limits, timeout_s=left)
        # rerun where the snippet cannot kill its supervisor; its own outcome, never "error"
        res = run_native(
            "bwrap",
            None,
            True,
            {**files, "main.py": code.encode()},
            stdin_data,
            limits,
            False,
            packages=self.packages,
        )
        res.backend = "worker"  # what the caller asked for; extra["fallback"] says what ran
        res.extra["fallback"] = "bwrap"
        res.extra["worker_failure"] = why
        if res.error:
            res.duration_s = time.monotonic() - started
        return res

    def _request(self, code: str, files: dict[str, bytes], limits: Limits, results: bool) -> dict:
        """The snippet's request to the server (its stdin follows in a message of its own)."""
        req = {
            "code": code,
            "files": {k: base64.b64encode(v).decode() for k, v in files.items()},
            "limits": {
                "timeout_s": limits.timeout_s,
                "memory_mb": min(limits.memory_mb, self.limits.memory_mb),
                "max_file_mb": min(limits.max_file_mb, self.limits.max_file_mb),
                "max_open_files": limits.max_open_files,
                "max_output_bytes": limits.max_output_bytes,
            },
        }
        if results:
            req["results"] = True
        return req

    def _exchange(self, req: dict, stdin_data: bytes, limits: Limits) -> tuple[dict | None, str, bool, float, float]:
        """Send one request and wait for its reply: (reply or None, why there is none or the runner
        was killed, whether the snippet stopped a process of the worker, when this worker was
        taken, when the snippet's time started). A worker that failed is closed; the next snippet
        starts a fresh one."""
        with self._lock:
            started = sent = time.monotonic()
            stalled = Stalled(None, 0.0)
            try:
                if not self.alive():
                    self.close()
                    self.start()
                sent = time.monotonic()  # the snippet's time starts now, not with a worker's start
                self._seq += 1
                self._send(req)
                self._send({"stdin": base64.b64encode(stdin_data).decode()})
                # past the snippet's own deadline a reply is due soon: from then on a stopped
                # server or runner (SIGSTOP from the snippet, same uid) is noticed within 0.1 s
                # rather than at the hard deadline
                stalled.init_pid = self._init_pid
                stalled.check_from = sent + limits.timeout_s + STOP_CHECK_AFTER_S
                reply = self._read_reply(sent + limits.timeout_s + 5, self._seq, stalled)
            except (OSError, ValueError) as exc:
                reply, why = None, f"{type(exc).__name__}: {exc}"
            else:
                why = (
                    "a process of the worker was stopped (SIGSTOP) during the snippet"
                    if stalled.seen
                    else "the worker died or stopped answering during the snippet"
                )
                if reply is not None and reply.get("runner_killed"):
                    why = (
                        "the snippet stopped its runner"
                        if reply.get("runner_stopped")
                        else "the runner was killed (by the snippet, or from outside)"
                    )
            # a stop is the snippet's doing (an outside kill may not be): its rerun gets only the
            # time it has left, so that stopping the runner never buys time past the timeout
            stopped = stalled.seen or bool(reply and reply.get("runner_stopped"))
            if reply is None or reply.get("runner_killed"):
                self.restarts += 1
                self.close()  # every process of this worker ends; a fresh worker next time
        return reply, why, stopped, started, sent

    def _reply_result(self, reply: dict, results: bool) -> Result:
        err = base64.b64decode(reply["stderr"])
        return Result(
            stdout=decode(base64.b64decode(reply["stdout"])),
            stderr=decode(err),
            exit_code=reply["exit_code"],
            timed_out=reply["timed_out"],
            output_truncated=reply["truncated"],
            duration_s=reply["duration_s"],
            out_of_memory=looks_out_of_memory(err, reply["exit_code"]),
            backend="worker",
            isolation=WORKER_ISOLATION,
            extra={
                "uid": self.uid,
                **({"results": base64.b64decode(reply.get("results", ""))} if results else {}),
            },
        )

    def _send(self, obj: dict) -> None:
        data = json.dumps(obj).encode()
        self._proc.stdin.write(struct.pack(">I", len(data)) + data)
        self._proc.stdin.flush()

    @property
    def _init_pid(self) -> int | None:
        return self._init_host_pid if self._init is not None else None

    def _read_reply(self, deadline: float, seq: int | None = None, stalled=None) -> dict | None:
        """The next reply (for snippet ``seq``: stale ones are dropped); None when the worker died,
        went silent, was found stopped (``stalled``) or sent something broken."""
        fd = self._proc.stdout.fileno()
        while True:
            header = read_exact(fd, 4, deadline, stalled)
            if header is None:
                return None
            size = struct.unpack(">I", header)[0]
            body = read_exact(fd, size, deadline, stalled) if size <= (256 << 20) else None
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


class WorkerPool:
    """Several persistent workers; ``run`` takes whichever is free (call it from several threads
    to use several cores: each snippet still runs alone in its worker's sandbox)."""

    def __init__(
        self,
        size: int | None = None,
        preload: tuple[str, ...] = (),
        precompile: tuple[str, ...] = (),
        packages: tuple[str, ...] = (),
    ):
        self.size = size or os.cpu_count() or 1
        self._free: queue.SimpleQueue[Worker] = queue.SimpleQueue()
        self._all = [Worker(preload=preload, precompile=precompile, packages=packages) for _ in range(self.size)]
        for worker in self._all:
            self._free.put(worker)

    def run(
        self,
        code: str,
        files: dict[str, str | bytes] | None = None,
        stdin: str | bytes | None = None,
        limits: Limits | None = None,
        results: bool = False,
    ) -> Result:
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


def shared_worker(
    preload: tuple[str, ...] = (), precompile: tuple[str, ...] = (), packages: tuple[str, ...] = ()
) -> Worker:
    """This process's worker for ``preload``, ``precompile`` and ``packages`` (started on first
    use, closed at exit)."""
    key = (
        (os.getpid(), tuple(preload))
        + ((tuple(precompile),) if precompile else ())
        + ((("packages", *packages),) if packages else ())
    )
    with _SHARED_LOCK:
        worker = _SHARED.get(key)
        if worker is None:
            worker = _SHARED[key] = Worker(preload=preload, precompile=precompile, packages=packages)
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
