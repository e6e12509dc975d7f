"""Watching a worker from the host: reads with a deadline, the check for a stopped process of its
sandbox, and the pid of the sandbox's init from bwrap's status."""

from __future__ import annotations

import json
import os
import selectors
import time


def read_exact(fd: int, n: int, deadline: float, stalled=None) -> bytes | None:
    buf = bytearray()
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while len(buf) < n:
            now = time.monotonic()
            left = deadline - now
            if left <= 0:
                return None
            if stalled is not None:
                left = min(left, max(stalled.check_from - now, STOP_CHECK_EVERY_S))
            if not sel.select(timeout=left):
                if stalled is not None and stalled():
                    return None
                continue
            chunk = os.read(fd, n - len(buf))
            if not chunk:
                return None
            buf += chunk
    return bytes(buf)


#: a reply not in this long after the snippet's deadline: check whether the worker was stopped
STOP_CHECK_AFTER_S = 0.5


STOP_CHECK_EVERY_S = 0.1


class Stalled:
    """Is a process of the worker's sandbox stopped? Asked only from ``check_from`` on. The
    server and its runners share the process group of the sandbox's init (``init_pid``, as the
    host sees it); the snippets run in sessions of their own and are the runner's to time."""

    def __init__(self, init_pid: int | None, check_from: float):
        self.init_pid, self.check_from, self.seen = init_pid, check_from, False

    def __call__(self) -> bool:
        if self.init_pid is None or time.monotonic() < self.check_from:
            return False
        self.seen = self.seen or _group_stopped(self.init_pid)
        return self.seen


def _group_stopped(pgid: int) -> bool:
    """True when a process of process group ``pgid`` is stopped (state T or t in /proc)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        if len(fields) > 3 and int(fields[3]) == pgid and fields[0] in (b"T", b"t"):
            return True
    return False


def open_init(status_fd: int, deadline: float) -> tuple[int | None, int | None]:
    """(pid, pidfd) of the sandbox's init, from the first line of bwrap's JSON status
    ({"child-pid": N}); (None, None) when bwrap did not say. Signals go through the pidfd, which
    can never name a reused pid."""
    line = bytearray()
    while not line.endswith(b"\n"):
        byte = read_exact(status_fd, 1, deadline)
        if byte is None:
            return None, None
        line += byte
    try:
        pid = int(json.loads(line)["child-pid"])
        return pid, os.pidfd_open(pid)
    except (ValueError, KeyError, TypeError, OSError):
        return None, None
