"""What every sandbox backend shares: limits, the result record, rlimits, the output pump and the
tars that carry files in and out."""

from __future__ import annotations

import io
import math
import os
import re
import resource
import selectors
import sys
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path

BACKENDS = ("bwrap", "process", "docker", "worker")

#: sandboxed code runs as a fresh uid from this range when we are root (one uid per run, so the
#: process limit counts only that run and leftovers can be found and killed by uid)
UID_RANGE = (1_100_000, 1_900_000)

# Markers that the code ran out of memory (the address-space limit makes allocations fail).
_OOM_PATTERNS = re.compile(rb"MemoryError|Cannot allocate memory|std::bad_alloc|out of memory", re.I)


class SandboxError(RuntimeError):
    """The sandbox itself failed (not the code inside it)."""


@dataclass
class Limits:
    timeout_s: float = 10.0
    memory_mb: int = 512
    disk_mb: int = 64
    max_processes: int = 64
    max_file_mb: int = 16
    max_open_files: int = 256
    max_output_bytes: int = 1_000_000

    def validate(self) -> None:
        for name in (
            "timeout_s",
            "memory_mb",
            "disk_mb",
            "max_processes",
            "max_file_mb",
            "max_open_files",
            "max_output_bytes",
        ):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(f"{name}: must be a positive number, got {value!r}")

    @property
    def cpu_s(self) -> int:
        # CPU rlimit a little above the wall clock: the wall clock is the real limit, this one
        # catches CPU burners even if the parent is slow to notice.
        return int(math.ceil(self.timeout_s)) + 1


@dataclass
class Result:
    stdout: str = ""
    stderr: str = ""
    exit_code: int | None = None
    timed_out: bool = False
    out_of_memory: bool = False
    duration_s: float = 0.0
    backend: str = ""
    output_truncated: bool = False
    #: the work dir's files after the run (``collect_files=True``); text as str, else bytes
    files: dict[str, str | bytes] | None = None
    #: set when the sandbox failed (not the code): such a run tells nothing about the code
    error: str | None = None
    #: what this backend isolates, in words (see docs/envs/code.md)
    isolation: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.error is None and self.exit_code == 0 and not self.timed_out

    def summary(self, limit: int = 2000) -> str:
        """Short human/agent-readable text: exit status, then the output (tail kept)."""
        if self.error:
            return f"[sandbox error: {self.error}]"
        status = (
            "timed out" if self.timed_out else "out of memory" if self.out_of_memory else f"exit code {self.exit_code}"
        )
        out = self.stdout + (("\n[stderr]\n" + self.stderr) if self.stderr.strip() else "")
        if len(out) > limit:
            out = "...[truncated]...\n" + out[-limit:]
        return f"[{status}]\n{out}".rstrip()


def set_rlimits(limits: Limits, nproc: bool = True, cpu: bool = True) -> None:
    """Called in the child before exec. Address space, CPU, file size, open files, processes."""
    mem = limits.memory_mb << 20
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    if cpu:
        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_s, limits.cpu_s))
    size = limits.max_file_mb << 20
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits.max_open_files, limits.max_open_files))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if nproc:
        resource.setrlimit(resource.RLIMIT_NPROC, (limits.max_processes, limits.max_processes))


def fresh_uid() -> int:
    return UID_RANGE[0] + int.from_bytes(os.urandom(4), "little") % (UID_RANGE[1] - UID_RANGE[0])


def pump(proc, stdin_data: bytes, limits: Limits, kill, started: float) -> tuple[bytes, bytes, bool, bool]:
    """Feed stdin, read stdout/stderr until both close or a limit is hit.

    ``proc`` is a ``subprocess.Popen`` with all three pipes. Returns (stdout, stderr, timed_out,
    output_truncated). ``kill()`` stops the whole sandbox: on the wall-clock deadline, when the
    output passes its cap, and once the main process has exited (leftover daemons holding the
    pipes open are not waited for).
    """
    out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
    sel = selectors.DefaultSelector()
    chunks: dict[int, list[bytes]] = {out_fd: [], err_fd: []}
    sizes = {out_fd: 0, err_fd: 0}
    for fd in (out_fd, err_fd):
        os.set_blocking(fd, False)
        sel.register(fd, selectors.EVENT_READ)
    pending = memoryview(stdin_data)
    writing = bool(stdin_data)
    if writing:
        os.set_blocking(proc.stdin.fileno(), False)
        sel.register(proc.stdin.fileno(), selectors.EVENT_WRITE)
    else:
        proc.stdin.close()
    deadline = started + limits.timeout_s
    timed_out = truncated = False
    exited_at = None
    open_fds = 2
    while open_fds:
        now = time.monotonic()
        if now >= deadline:
            timed_out = True
            kill()
            break
        if exited_at is None and proc.poll() is not None:
            exited_at = now
        elif exited_at is not None and now - exited_at > 0.05:
            kill()  # the main process is gone; whatever still holds the pipes is a leftover
            exited_at = float("inf")
        for key, _ in sel.select(timeout=min(deadline - now, 0.05)):
            fd = key.fd
            if writing and fd == proc.stdin.fileno():
                try:
                    n = os.write(fd, pending[:65536])
                    pending = pending[n:]
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:  # the code closed its stdin: fine
                    pending = pending[:0]
                if not pending:
                    sel.unregister(fd)
                    proc.stdin.close()
                    writing = False
                continue
            try:
                data = os.read(fd, 65536)
            except (BlockingIOError, InterruptedError):
                continue
            if not data:
                sel.unregister(fd)
                open_fds -= 1
                continue
            room = limits.max_output_bytes - sizes[fd]
            if room > 0:
                chunks[fd].append(data[:room])
            sizes[fd] += len(data)
            if sizes[fd] > limits.max_output_bytes and not truncated:
                truncated = True
                kill()  # a flood of output: stop it now rather than at the deadline
    if writing:
        sel.unregister(proc.stdin.fileno())
        proc.stdin.close()
    sel.close()
    return b"".join(chunks[out_fd]), b"".join(chunks[err_fd]), timed_out, truncated


def might_not_have_started(res: Result) -> bool:
    """Did the interpreter perhaps never start? An exec that fails ends with 126 or 127 (setpriv,
    a shell, the dynamic loader) or bwrap's own execvp message. The program can end like that
    too, so this only says when to ask ``python_start_failure``, whose answer it cannot forge."""
    return not res.timed_out and (res.exit_code in (126, 127) or "bwrap: execvp" in res.stderr[-2000:])


def looks_out_of_memory(stderr: bytes, exit_code: int | None) -> bool:
    return bool(_OOM_PATTERNS.search(stderr[-4000:])) and exit_code not in (0, None)


def decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def relative_path(path: str) -> str:
    """A safe path inside the work dir, or ValueError."""
    norm = os.path.normpath(path)
    if not path or os.path.isabs(path) or norm.startswith("..") or norm == ".":
        raise ValueError(f"files: {path!r} must be a relative path inside the work dir")
    return norm


def check_files(files: dict) -> dict:
    """``files`` with normalised relative paths; ValueError when a path is not a str inside the
    work dir, its content is not str or bytes, or two paths collide (the same path twice, or a
    file where another path needs a directory). Such input is the caller's mistake, never a
    sandbox failure."""
    out: dict = {}
    for path, content in files.items():
        if not isinstance(path, str):
            raise ValueError(f"files: path {path!r} must be a str")
        if not isinstance(content, (str, bytes, bytearray)):
            raise ValueError(f"files: the content of {path!r} must be str or bytes, got {type(content).__name__}")
        norm = relative_path(path)
        if norm in out:
            raise ValueError(f"files: {path!r} is given twice (as {norm!r})")
        out[norm] = content
    for norm in out:
        parent = os.path.dirname(norm)
        while parent:
            if parent in out:
                raise ValueError(f"files: {parent!r} is a file but {norm!r} needs it to be a directory")
            parent = os.path.dirname(parent)
    return out


def sandbox_python() -> str:
    """The interpreter the ``process`` backend runs code with: this process's own (its venv
    included: that backend shows the host's files anyway)."""
    return sys.executable


@dataclass(frozen=True)
class PythonLayout:
    """What a sealed sandbox shows of this machine's Python: the base interpreter (never a venv's
    launcher), its standard library with the site dirs inside it hidden, and its shared library."""

    interpreter: str  # real path, no symlink or ``..`` on the way
    stdlib: str
    hidden: tuple[str, ...]  # site dirs inside the standard library: shown empty
    libraries: tuple[str, ...]  # libpython, when the interpreter links it


def python_layout() -> PythonLayout:
    import sysconfig

    interpreter = os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)
    stdlib = os.path.realpath(
        sysconfig.get_paths(vars={"installed_base": sys.base_prefix, "base": sys.base_prefix})["stdlib"]
    )
    hidden = tuple(
        os.path.join(stdlib, d) for d in ("site-packages", "dist-packages") if os.path.isdir(os.path.join(stdlib, d))
    )
    libraries = []
    soname, libdir = sysconfig.get_config_var("INSTSONAME"), sysconfig.get_config_var("LIBDIR")
    if sysconfig.get_config_var("Py_ENABLE_SHARED") and soname and libdir:
        lib = os.path.join(libdir, soname)
        if os.path.exists(lib) and not lib.startswith("/usr/lib/"):  # /usr/lib/<arch> is shown whole
            libraries.append(os.path.realpath(lib))
    return PythonLayout(interpreter, stdlib, hidden, tuple(libraries))


def package_paths(packages: tuple[str, ...] | list[str]) -> tuple[list[str], list[str]]:
    """(paths to show, dirs to put on PYTHONPATH) for the top-level import names ``packages``,
    taken from this process's environment: each package's directory (or module file) and a
    ``NAME.libs`` directory beside it (where wheels keep their shared libraries). ValueError names
    a package that is not installed here."""
    import importlib.util

    shown: list[str] = []
    path: list[str] = []
    for name in packages:
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"packages: {name!r} is not a top-level import name")
        spec = importlib.util.find_spec(name)
        if spec is None or (spec.origin in (None, "built-in", "frozen") and not spec.submodule_search_locations):
            raise ValueError(f"packages: {name!r} is not installed here (or is part of the standard library)")
        places = list(spec.submodule_search_locations or []) or [spec.origin]
        for place in places:
            place = os.path.realpath(place)
            site = os.path.dirname(place)
            libs = os.path.join(site, name + ".libs")
            shown += [place] + ([libs] if os.path.isdir(libs) else [])
            if site not in path:
                path.append(site)
    return shown, path


def tar_of(files: dict[str, bytes], mode: int, owner: int = 0) -> bytes:
    """An uncompressed tar of ``files`` (relative path -> bytes): how files enter a sandbox."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for rel, data in files.items():
            info = tarfile.TarInfo(rel)
            info.size = len(data)
            info.mode = mode
            info.uid = info.gid = owner
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def read_tar(blob: bytes, limits: Limits, res: Result | None = None) -> dict[str, str | bytes] | None:
    """Regular files of a tar, at most disk_mb in all. Sparse members (a few KB that unpack to
    gigabytes), links, devices and fifos are rejected (listed in ``res.extra["collect_rejected"]``)."""
    if not blob:
        return None
    out: dict[str, str | bytes] = {}
    rejected: list[str] = []
    budget = limits.disk_mb << 20
    try:
        with tarfile.open(fileobj=io.BytesIO(blob), mode="r:") as tar:
            for member in tar:
                name = os.path.normpath(member.name)
                if member.isdir():
                    continue
                if (
                    not member.isreg()
                    or member.issparse()
                    or member.size > (limits.max_file_mb << 20)
                    or member.size > budget
                    or name.startswith("..")
                    or os.path.isabs(name)
                ):
                    rejected.append(member.name[:200])
                    continue
                budget -= member.size
                out[name] = text_or_bytes(tar.extractfile(member).read(member.size))
    except (tarfile.TarError, OSError, EOFError):
        return None
    if rejected and res is not None:
        res.extra["collect_rejected"] = rejected[:50]
    return out


def text_or_bytes(data: bytes) -> str | bytes:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data


def parent_dirs(path: str) -> list[str]:
    parts = Path(path).parts[1:-1]
    return ["/" + "/".join(parts[: i + 1]) for i in range(len(parts))]
