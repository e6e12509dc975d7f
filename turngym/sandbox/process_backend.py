"""The ``process`` backend: the command as a child on the host file system, under rlimits and an
unprivileged uid (as root: in fresh mount and network namespaces, with every directory that uid
could write to covered by a size-limited tmpfs)."""

from __future__ import annotations

import os
import shutil
import stat
import sys
import tempfile
from pathlib import Path

from turngym.sandbox.common import (
    Limits,
    Result,
    fresh_uid,
    parent_dirs,
    sandbox_python,
    tar_of,
    text_or_bytes,
)
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

PROCESS_ISOLATION = (
    "process: rlimits, unprivileged uid, network and mount namespaces with size-limited "
    "tmpfs over the work dir and the host's shared writable dirs, no new user namespaces "
    "(root only); the host file system and processes are visible (world-readable files "
    "can be read)"
)


def _accessible_to_others(path: str) -> bool:
    """Can an unrelated unprivileged uid execute ``path`` (every parent dir searchable)?"""
    real = os.path.realpath(path)
    for parent in parent_dirs(real) + [os.path.dirname(real)]:
        if not os.stat(parent).st_mode & stat.S_IXOTH:
            return False
    return bool(os.stat(real).st_mode & stat.S_IXOTH)


def world_python() -> tuple[str, list[str]]:
    """An interpreter an unprivileged uid can run, and the site dirs to add to its path."""
    python = sandbox_python()
    if _accessible_to_others(python):
        return python, []
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in (f"/usr/bin/{version}", f"/usr/local/bin/{version}", "/usr/bin/python3"):
        if os.path.exists(candidate) and _accessible_to_others(candidate):
            sites = [p for p in sys.path if p.endswith("site-packages") and os.path.isdir(p)]
            return candidate, [p for p in sites if _accessible_to_others(p)]
    return python, []


# Root only: runs as root inside fresh mount and network namespaces, covers every directory the
# unprivileged uid could write to on the host with a size-limited tmpfs, unpacks the files (a tar
# on fd $4) into the work dir, says "ready" on the status fd $6 (closed before the command runs,
# so the command cannot fake it), then drops to the uid. $1 uid, $2 tmpfs bytes, $3 work dir,
# $4 files fd, $5 collect pipe fd or "-", $6 status fd; then the command. (An IPC namespace of its
# own comes from the parent's unshare.)
_PROCESS_SCRIPT = r"""
fail() { echo "turngym: sandbox setup failed: $1" >&2; exit 125; }
mount --make-rprivate / || fail "private mounts"
for d in /tmp /var/tmp /dev/shm /run/lock /var/lock; do
  if [ -d "$d" ] && [ ! -L "$d" ]; then
    mount -t tmpfs -o "size=$2,mode=1777,nosuid,nodev" tmpfs "$d" || fail "tmpfs on $d"
  fi
done
mkdir -m 0700 "$3" || fail "work dir"
tar -xf - -C "$3" --no-same-owner <&"$4" || fail "unpacking files"
chown -R "$1:$1" "$3" || fail "chown"
eval "exec $4<&-"
cd "$3" || fail "cd"
echo ready >&"$6" || fail "status"
eval "exec $6>&-"
uid=$1; collect=$5; shift 6
drop() { /usr/bin/setpriv --reuid "$uid" --regid "$uid" --clear-groups --no-new-privs -- "$@"; }
if [ "$collect" = - ]; then
  exec /usr/bin/setpriv --reuid "$uid" --regid "$uid" --clear-groups --no-new-privs -- "$@"
fi
eval "drop \"\$@\" $collect>&-"
rc=$?
eval "drop tar -cf - --exclude=__pycache__ --exclude=.pytest_cache . >&$collect"
exit $rc
"""


PROCESS_WORK = "/tmp/sandbox"


def run_process(argv: list[str], files: dict[str, bytes], stdin: bytes, limits: Limits, collect_files: bool) -> Result:
    if not is_root():
        return _run_process_unprivileged(argv, files, stdin, limits, collect_files)
    uid = fresh_uid()
    env = base_env(PROCESS_WORK, [])
    _python, sites = world_python()
    if sites:
        env["PYTHONPATH"] = ":".join(sites)
    files_fd = os.memfd_create("turngym-files", 0)
    status_r, status_w = os.pipe()
    collect_r, collect_w = os.pipe() if collect_files else (None, None)
    try:
        write_all(files_fd, tar_of(files, mode=0o644))
        os.lseek(files_fd, 0, os.SEEK_SET)
        args = [
            "/bin/bash",
            "-c",
            _PROCESS_SCRIPT,
            "sandbox",
            str(uid),
            str(limits.disk_mb << 20),
            PROCESS_WORK,
            str(files_fd),
            "-" if collect_w is None else str(collect_w),
            str(status_w),
            *argv,
        ]
        pass_fds = [files_fd, status_w] + ([collect_w] if collect_w is not None else [])
        collector = collect_from(collect_r, limits) if collect_r is not None else None

        def kill_uid() -> None:
            kill_all_of_uid(uid)

        res = spawn_child(
            args,
            stdin,
            limits,
            pass_fds,
            backend="process",
            kill_extra=kill_uid,
            nproc=True,
            cwd="/",
            env=env,
            new_namespaces=True,
            after_start=lambda: close_fds(status_w, collect_w),
        )
        status_w = collect_w = None
        res.isolation = PROCESS_ISOLATION
        res.extra["uid"] = uid
        if res.error is None and b"ready" not in read_available(status_r) and not res.timed_out:
            res.error = res.stderr.strip()[-500:] or f"the sandbox set-up failed (exit code {res.exit_code})"
        if collector is not None:
            collect_into(collector, limits, res)
        return res
    finally:
        close_fds(files_fd, status_r, status_w, collect_r, collect_w)
        kill_all_of_uid(uid)


def _run_process_unprivileged(
    argv: list[str], files: dict[str, bytes], stdin: bytes, limits: Limits, collect_files: bool
) -> Result:
    """Not root: no uid drop and no namespaces, only rlimits and a private temp work dir."""
    work = tempfile.mkdtemp(prefix="turngym-sbx-")
    try:
        for rel, data in files.items():
            target = Path(work, rel)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        os.chmod(work, 0o700)
        res = spawn_child(
            argv,
            stdin,
            limits,
            [],
            backend="process",
            kill_extra=None,
            nproc=True,
            cwd=work,
            env=base_env(work, []),
        )
        res.isolation = PROCESS_ISOLATION + "; not root here: no uid drop, no namespaces, no tmpfs"
        res.extra["uid"] = os.getuid()
        if collect_files and res.error is None and not res.timed_out:
            res.files = _read_dir(work, limits)
        return res
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _read_dir(work: str, limits: Limits) -> dict[str, str | bytes]:
    out: dict[str, str | bytes] = {}
    for dirpath, dirs, names in os.walk(work, followlinks=False):
        dirs[:] = [d for d in dirs if d not in COLLECT_EXCLUDE]
        for n in names:
            full = os.path.join(dirpath, n)
            st = os.lstat(full)
            if stat.S_ISREG(st.st_mode) and st.st_size <= (limits.max_file_mb << 20):
                out[os.path.relpath(full, work)] = text_or_bytes(Path(full).read_bytes())
    return out
