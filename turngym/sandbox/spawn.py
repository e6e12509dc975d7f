"""Starting a sandboxed child and cleaning up after it, for the ``bwrap`` and ``process`` backends:
the spawn itself (namespaces, rlimits, uid, the seccomp filter, its environment), the pipes' reads
and writes (the work dir's files handed back as a capped tar), and the processes of a sandbox uid
(listed, killed)."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import time

from turngym.sandbox.common import UID_RANGE, Limits, Result, decode, looks_out_of_memory, pump, read_tar, set_rlimits
from turngym.sandbox.seccomp import user_namespace_filter

_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 22, 2
# what a backend leaves out of the work dir's files it hands back
COLLECT_EXCLUDE = ("__pycache__", ".pytest_cache")
_CLONE_NEWNET = 0x40000000
_CLONE_NEWNS = 0x00020000
_CLONE_NEWIPC = 0x08000000


def close_fds(*fds: int | None) -> None:
    for fd in fds:
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass


def read_available(fd: int) -> bytes:
    """What a pipe holds now, without waiting (a leftover holding its write end cannot stall us)."""
    os.set_blocking(fd, False)
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


def processes_of_uid(uid: int) -> list[int]:
    """Live (not zombie) processes of ``uid``."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.stat(f"/proc/{entry}").st_uid != uid:
                continue
            with open(f"/proc/{entry}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state not in (b"Z", b"X"):
            pids.append(int(entry))
    return pids


def kill_all_of_uid(uid: int, rounds: int = 50) -> None:
    """SIGKILL every process of ``uid`` (a fork bomb may refill: repeat until none is left)."""
    if not UID_RANGE[0] <= uid < UID_RANGE[1]:  # never the host's own users, never root
        raise ValueError(f"kill_all_of_uid: uid {uid} is not a sandbox uid")
    for _ in range(rounds):
        pids = processes_of_uid(uid)
        if not pids:
            return
        # kill(-1) from a process of that uid reaches every process it may signal: all of uid's
        subprocess.run(
            ["/bin/kill", "-KILL", "-1"],
            user=uid,
            group=uid,
            extra_groups=[],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=False,
        )
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.005)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _seccomp_prog() -> tuple[_SockFprog, ctypes.Array] | None:
    """The user-namespace filter as prctl wants it (built before the fork; the buffer is kept alive)."""
    program = user_namespace_filter()
    if program is None:
        return None
    buffer = ctypes.create_string_buffer(program, len(program))
    return _SockFprog(len(program) // 8, ctypes.addressof(buffer)), buffer


def spawn_child(
    args: list[str],
    stdin: bytes,
    limits: Limits,
    pass_fds: list[int],
    backend: str,
    kill_extra,
    nproc: bool,
    cwd: str | None = None,
    env: dict | None = None,
    new_namespaces: bool = False,
    after_start=None,
) -> Result:
    """Run ``args`` under rlimits with piped stdio; ``after_start`` runs once the child exists
    (to close our copies of the fds only the child should hold)."""
    libc = _libc() if new_namespaces else None
    seccomp = _seccomp_prog() if new_namespaces else None

    def preexec() -> None:
        os.setsid()
        os.umask(0o022)
        if libc is not None and libc.unshare(_CLONE_NEWNET | _CLONE_NEWNS | _CLONE_NEWIPC) != 0:
            os._exit(125)
        if (
            seccomp is not None
            and libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(seccomp[0]), 0, 0) != 0
        ):
            os._exit(125)
        set_rlimits(limits, nproc=nproc)

    started = time.monotonic()
    proc = subprocess.Popen(
        args,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        pass_fds=pass_fds,
        preexec_fn=preexec,
        cwd=cwd,
        env=env if env is not None else {},
        close_fds=True,
    )
    if after_start is not None:
        after_start()

    def kill() -> None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        if kill_extra is not None:
            kill_extra()

    try:
        out, err, timed_out, truncated = pump(proc, stdin, limits, kill, started)
        if not timed_out and not truncated:
            # the pipes closed: let the main process finish exiting before leftovers are killed
            try:
                proc.wait(timeout=max(0.0, started + limits.timeout_s - time.monotonic()))
            except subprocess.TimeoutExpired:
                timed_out = True
    finally:
        kill()  # leftovers (daemons) never outlive the run
        code = proc.wait()
        for f in (proc.stdin, proc.stdout, proc.stderr):
            f.close()
    duration = time.monotonic() - started
    res = Result(
        stdout=decode(out),
        stderr=decode(err),
        exit_code=code,
        timed_out=timed_out,
        output_truncated=truncated,
        duration_s=duration,
        backend=backend,
    )
    res.out_of_memory = looks_out_of_memory(err, code)
    return res


def is_root() -> bool:
    return os.geteuid() == 0


def base_env(home: str, extra_path: list[str]) -> dict[str, str]:
    path = ":".join([*extra_path, "/usr/local/bin", "/usr/bin", "/bin"])
    return {"PATH": path, "HOME": home, "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1", "TMPDIR": "/tmp"}


def collect_from(fd: int, limits: Limits):
    """Read the work dir's tar from ``fd`` in a thread, at most disk_mb bytes. Returns a function
    that waits for the end and gives (bytes, whether the cap was passed)."""
    import threading

    cap = limits.disk_mb << 20
    box: dict = {"chunks": [], "size": 0, "over": False}

    def read() -> None:
        while chunk := os.read(fd, 1 << 20):
            box["size"] += len(chunk)
            if box["size"] > cap:
                box["over"] = True
                return  # closing our end stops the writer (EPIPE)
            box["chunks"].append(chunk)

    thread = threading.Thread(target=read, daemon=True)
    thread.start()

    def finish() -> tuple[bytes, bool]:
        thread.join(5)
        return b"".join(box["chunks"]), box["over"] or thread.is_alive()

    return finish


def collect_into(collector, limits, res) -> None:
    """Put the work dir's files (read from the capped collect pipe) into ``res.files``."""
    blob, over = collector()
    if res.error is None and not res.timed_out:
        res.files = read_tar(blob, limits, res) if not over else None
        if over:
            res.extra["collect_error"] = f"the work dir's files are over disk_mb ({limits.disk_mb} MB)"
