"""The ``bwrap`` and ``process`` backends: a child process under rlimits and an unprivileged uid,
inside bubblewrap's namespaces (``bwrap``) or on the host file system (``process``)."""

from __future__ import annotations

import glob
import os

from turngym.sandbox.common import (
    Limits,
    Result,
    SandboxError,
    fresh_uid,
    might_not_have_started,
    package_paths,
    parent_dirs,
    python_layout,
    relative_path,
    sandbox_python,
)
from turngym.sandbox.process_backend import run_process, world_python
from turngym.sandbox.seccomp import filter_fd
from turngym.sandbox.spawn import (
    COLLECT_EXCLUDE,
    base_env,
    close_fds,
    collect_from,
    collect_into,
    is_root,
    kill_all_of_uid,
    read_available,
    spawn_child,
    write_all,
)

WORK = "/sandbox"  # the work dir inside bwrap
SANDBOX_UID = 65534  # the uid code sees inside bwrap when we are not root (user namespace)
# Debian/Ubuntu merged-/usr layouts make these symlinks; older layouts make them directories.
_SYSTEM_DIRS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# What bwrap shows of /usr: programs, shared libraries, locales and time zones. Not /usr/local,
# /usr/share or the rest of /usr/lib, where system-wide Python packages (and any data a user
# installed with them) live.
_USR_DIRS = (
    "/usr/bin",
    "/usr/sbin",
    "/usr/lib64",
    "/usr/lib32",
    "/usr/libx32",
    "/usr/lib/locale",
    "/usr/share/zoneinfo",
)
_USR_GLOBS = ("/usr/lib/*-linux-gnu*",)  # the multiarch library dir (x86_64-linux-gnu, ...)
_ETC_FILES = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/alternatives",
    "/etc/localtime",
    "/etc/mime.types",
)

BWRAP_ISOLATION = (
    "bwrap: shows only system programs and libraries, the base Python and its standard library, "
    "declared packages and the work dir (read-only except the size-limited tmpfs work dir and "
    "/tmp), new pid/net/ipc/uts/mount namespaces, unprivileged uid, no new user namespaces "
    "(seccomp), rlimits, wall-clock kill of the whole sandbox"
)


def run_native(
    backend: str,
    command: str | list[str] | None,
    is_code: bool,
    files: dict,
    stdin: str | bytes | None,
    limits: Limits,
    collect_files: bool,
    packages: tuple[str, ...] = (),
) -> Result:
    if backend not in ("bwrap", "process"):
        raise ValueError(f"backend: {backend!r} is not a native backend")
    files = {relative_path(k): (v.encode() if isinstance(v, str) else bytes(v)) for k, v in files.items()}
    stdin_data = stdin.encode() if isinstance(stdin, str) else (stdin or b"")
    argv = _argv(command, is_code, backend)
    try:
        if backend == "bwrap":
            res = _run_bwrap(argv, files, stdin_data, limits, collect_files, packages)
        else:
            res = run_process(argv, files, stdin_data, limits, collect_files)
    except OSError as exc:  # the sandbox could not start: an infrastructure failure
        return Result(backend=backend, error=f"{type(exc).__name__}: {exc}")
    if is_code and res.error is None and might_not_have_started(res):
        res.error = python_start_failure(backend, argv[0], packages)
    return res


def python_start_failure(backend: str, python: str, packages: tuple[str, ...] = ()) -> str | None:
    """None when ``python`` starts and runs a line in a fresh ``backend`` sandbox (the same
    layout a program gets); else why not. A program cannot fake this answer: the check runs its
    own code, not the program's."""
    argv, limits = [python, "-c", "print('turngym-python-ok')"], Limits(timeout_s=20)
    try:
        if backend == "bwrap":
            res = _run_bwrap(argv, {}, b"", limits, False, packages)
        else:
            res = run_process(argv, {}, b"", limits, False)
    except OSError as exc:
        return f"the sandbox could not start its Python ({python}): {type(exc).__name__}: {exc}"
    if res.error is None and res.exit_code == 0 and res.stdout.strip() == "turngym-python-ok":
        return None
    detail = res.error or res.stderr.strip()[-300:] or f"exit code {res.exit_code}"
    return f"the {backend} sandbox could not start its Python ({python}): {detail}"


def _argv(command: str | list[str] | None, is_code: bool, backend: str) -> list[str]:
    if is_code:
        python = (
            python_layout().interpreter
            if backend == "bwrap"
            else sandbox_python()
            if not is_root()
            else world_python()[0]
        )
        return [python, "-B", "main.py"]
    if isinstance(command, str):
        return ["/bin/sh", "-c", command]
    if not command or not all(isinstance(a, str) for a in command):
        raise ValueError("command: must be a non-empty str or a list of str")
    return list(command)


# ----- bwrap ------------------------------------------------------------------------------------


def _bwrap_argv(
    argv: list[str],
    file_fds: list[tuple[int, str]],
    limits: Limits,
    uid: int | None,
    collect_fd: int | None,
    extra_env: dict[str, str] | None = None,
    seccomp_fd: int | None = None,
    die_with_parent: bool = True,
    status_fd: int | None = None,
    exit_fd: int | None = None,
    packages: tuple[str, ...] = (),
) -> list[str]:
    """bwrap's command line. The sandbox sees only what ``_USR_DIRS`` names, the base Python
    (``python_layout``), the ``packages`` declared (top-level import names, on PYTHONPATH) and
    the files. ``collect_fd``: a pipe the work dir's tar is written to after the
    command (the command itself runs with it closed); ``status_fd``: bwrap's JSON status;
    ``exit_fd`` (root only): a root shell inside, which the code's uid cannot signal, writes
    ``exit N`` there when the command ends (bwrap reports a killed init as exit code 137, the
    same as a command killed by SIGKILL: this line tells them apart)."""
    args = ["bwrap", "--new-session", "--clearenv", "--hostname", "sandbox"]
    if die_with_parent:
        args.append("--die-with-parent")
    if status_fd is not None:
        args += ["--json-status-fd", str(status_fd)]
    if seccomp_fd is not None:  # no user namespaces inside (see seccomp.py)
        args += ["--seccomp", str(seccomp_fd)]
    args += _namespace_args(uid)
    python = python_layout()
    shown, site_dirs = package_paths(packages)
    env = {**base_env(WORK, [os.path.dirname(python.interpreter)]), **(extra_env or {})}
    if site_dirs:
        env["PYTHONPATH"] = ":".join(site_dirs)
    for key, value in env.items():
        args += ["--setenv", key, value]
    disk = str(limits.disk_mb << 20)
    args += _mount_args(disk, python, shown)
    args += _work_file_args(file_fds)
    args += ["--remount-ro", "/", "--chdir", WORK, "--"]
    return args + _command_args(argv, uid, collect_fd, exit_fd)


def _namespace_args(uid: int | None) -> list[str]:
    if uid is None:  # not root: a user namespace maps us to an unprivileged uid
        return [
            "--unshare-all",
            "--unshare-user",
            "--disable-userns",
            "--uid",
            str(SANDBOX_UID),
            "--gid",
            str(SANDBOX_UID),
        ]
    # root: no user namespace; setpriv (``_command_args``) drops to a real unprivileged uid
    return [
        "--unshare-ipc",
        "--unshare-pid",
        "--unshare-net",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--cap-drop",
        "ALL",
        "--cap-add",
        "CAP_SETUID",
        "--cap-add",
        "CAP_SETGID",
    ]


def _mount_args(disk: str, python, shown: list[str]) -> list[str]:
    """The file system inside: size-capped tmpfs work dir, /tmp and /dev/shm, and read-only binds
    of the system dirs, the base Python and the declared packages."""
    # tmpfs mounts first: a bind below (a Python under /tmp, say) then shows through them
    args = [
        "--perms",
        "0777",
        "--size",
        disk,
        "--tmpfs",
        WORK,
        "--perms",
        "1777",
        "--size",
        disk,
        "--tmpfs",
        "/tmp",
        "--perms",
        "0755",
        "--dir",
        "/etc",
    ]
    made = {"/etc", "/tmp", WORK}  # dirs that exist inside
    bound: list[str] = []  # host paths shown inside

    def bind(path: str) -> None:
        if any(path == b or path.startswith(b + "/") for b in bound):
            return
        for parent in parent_dirs(path):
            if parent not in made and not os.path.islink(parent):
                args.extend(["--perms", "0755", "--dir", parent])
                made.add(parent)
        args.extend(["--ro-bind", path, path])
        bound.append(path)

    for d in [*_USR_DIRS, *sorted(p for g in _USR_GLOBS for p in glob.glob(g))]:
        if os.path.isdir(d) and not os.path.islink(d):
            bind(d)
    for d in _SYSTEM_DIRS:
        if os.path.islink(d):
            args += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            bind(d)
    for f in _ETC_FILES:
        if os.path.exists(f):
            args += ["--ro-bind", f, f]
    for path in (python.interpreter, python.stdlib, *python.libraries, *shown):
        bind(path)
    bindir = os.path.dirname(python.interpreter)
    if not any(bindir == b or bindir.startswith(b + "/") for b in bound):  # python, python3 for shells
        for alias in ("python", "python3"):
            if alias != os.path.basename(python.interpreter):
                args += ["--symlink", os.path.basename(python.interpreter), os.path.join(bindir, alias)]
    for hidden in python.hidden:  # the base Python's own site dirs: shown empty
        args += ["--perms", "0755", "--tmpfs", hidden, "--remount-ro", hidden]
    # bwrap's /dev is an unbounded tmpfs with a world-writable shm dir: cap that one too
    args += ["--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--size", disk, "--tmpfs", "/dev/shm"]
    return args


def _work_file_args(file_fds: list[tuple[int, str]]) -> list[str]:
    """The program's files, each read from an fd into the work dir (its folders made first)."""
    args: list[str] = []
    dirs = set()
    for fd, rel in file_fds:
        for parent in parent_dirs("/" + rel):
            if parent not in dirs:
                args += ["--perms", "0777", "--dir", f"{WORK}{parent}"]
                dirs.add(parent)
        args += ["--perms", "0666", "--file", str(fd), f"{WORK}/{rel}"]
    return args


def _command_args(argv: list[str], uid: int | None, collect_fd: int | None, exit_fd: int | None) -> list[str]:
    """What runs inside: as root, the exit-line shell and setpriv to ``uid`` first; with
    ``collect_fd``, the command wrapped so that the work dir's tar follows it."""
    args: list[str] = []
    if uid is not None:
        if exit_fd is not None:
            args += [
                "/bin/bash",
                "-c",
                f'"$@" {exit_fd}>&-; rc=$?; echo "exit $rc" >&{exit_fd}; exit $rc',
                "bash",
            ]
        args += [
            "/usr/bin/setpriv",
            "--reuid",
            str(uid),
            "--regid",
            str(uid),
            "--clear-groups",
            "--no-new-privs",
            "--",
        ]
    if collect_fd is not None:
        excludes = " ".join(f"--exclude={e}" for e in COLLECT_EXCLUDE)
        script = f'"$@" {collect_fd}>&-; rc=$?; tar -cf - {excludes} . 2>/dev/null >&{collect_fd}; exit $rc'
        argv = ["/bin/bash", "-c", script, "sh", *argv]  # dash refuses fds above 9
    return args + argv


def _run_bwrap(
    argv: list[str],
    files: dict[str, bytes],
    stdin: bytes,
    limits: Limits,
    collect_files: bool,
    packages: tuple[str, ...] = (),
) -> Result:
    uid = fresh_uid() if is_root() else None
    if uid is not None and not os.path.exists("/usr/bin/setpriv"):
        raise SandboxError("bwrap as root needs /usr/bin/setpriv (util-linux) to drop to an unprivileged uid")
    fds = []
    seccomp_fd = filter_fd()
    status_r, status_w = os.pipe()
    exit_r, exit_w = os.pipe() if uid is not None else (None, None)
    collect_r, collect_w = os.pipe() if collect_files else (None, None)
    try:
        for rel, data in files.items():
            fd = os.memfd_create("turngym-file", 0)
            os.write(fd, data) if len(data) < (1 << 20) else write_all(fd, data)
            os.lseek(fd, 0, os.SEEK_SET)
            fds.append((fd, rel))
        args = _bwrap_argv(
            argv,
            fds,
            limits,
            uid,
            collect_w,
            seccomp_fd=seccomp_fd,
            status_fd=status_w,
            exit_fd=exit_w,
            packages=packages,
        )
        pass_fds = [fd for fd, _ in fds] + [status_w] + ([seccomp_fd] if seccomp_fd is not None else [])
        pass_fds += [fd for fd in (collect_w, exit_w) if fd is not None]
        collector = collect_from(collect_r, limits) if collect_r is not None else None
        res = spawn_child(
            args,
            stdin,
            limits,
            pass_fds,
            backend="bwrap",
            kill_extra=None,
            nproc=True,
            after_start=lambda: close_fds(status_w, collect_w, exit_w),
        )
        status_w = collect_w = exit_w = None
        res.isolation = BWRAP_ISOLATION
        res.extra["uid"] = uid if uid is not None else os.getuid()
        if res.error is None and not res.timed_out and not res.output_truncated:
            exit_line = read_available(exit_r) if exit_r is not None else None
            res.error = _bwrap_failure(read_available(status_r), exit_line, res)
        if collector is not None:
            collect_into(collector, limits, res)
        return res
    finally:
        for fd, _ in fds:
            os.close(fd)
        close_fds(seccomp_fd, status_r, status_w, collect_r, collect_w, exit_r, exit_w)
        if uid is not None:  # the pid namespace is dying already; wait until it is gone
            kill_all_of_uid(uid)


def _bwrap_failure(status: bytes, exit_line: bytes | None, res: Result) -> str | None:
    """bwrap reports on its status fd when the command started and how it ended, and (root) our
    root shell inside reports the command's exit; without all of them the sandbox failed (bwrap
    could not set up, its init was killed, it died silently)."""
    started = b'"child-pid"' in status
    ended = b'"exit-code"' in status and (exit_line is None or exit_line.startswith(b"exit "))
    if started and ended:
        return None
    what = "could not start the command" if not started else "ended without the command's exit status"
    detail = res.stderr.strip()[-500:] or f"exit code {res.exit_code}"
    return f"bwrap {what} ({detail})"
