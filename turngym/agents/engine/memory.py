"""Freed memory kept in the process for the next allocation (glibc only): ``keep_freed_memory``.

Every decoding step grows the key/value cache by concatenation and frees the old one, tens of MB
per layer at evaluation's 134 rows. glibc serves each block above its mmap threshold (32 MiB at
most) with a fresh mapping that the kernel zero-fills page by page on first write and unmaps on
free, so the engine paid a page fault per 4 KiB of every such tensor, again at each step. With
mappings off and trimming off, a freed block stays in the heap for the next one: a greedy
evaluation of 134 tasks in float32 took 575 s instead of 745, its kernel time 48 s instead of
217, the same peak RSS (``benchmarks/freed_memory.py``; docs/benchmarks.md).

The cost: the process keeps its peak heap until it exits instead of handing freed memory back.
The processes turngym owns call it (``build_trainer``, ``turngym eval`` with an ``hf`` policy,
``turngym serve-policy``); a library user loading a model into a process of their own keeps
glibc's defaults.
"""

from __future__ import annotations

import ctypes

_M_TRIM_THRESHOLD, _M_MMAP_MAX = -1, -4  # mallopt parameters, from glibc's malloc.h


def keep_freed_memory() -> bool:
    """Turn glibc's mmap for big blocks and heap trimming off in this process; False where the C
    library is not glibc (nothing changed)."""
    try:  # the process's own symbols: the C library it runs on, found without a subprocess
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # noqa: B018 - raises AttributeError outside glibc
    except (OSError, TypeError, AttributeError):  # TypeError: Windows has no CDLL(None)
        return False
    # a trim threshold of INT_MAX: freed memory at the heap's top is never handed back either
    return bool(libc.mallopt(_M_MMAP_MAX, 0)) and bool(libc.mallopt(_M_TRIM_THRESHOLD, 2**31 - 1))
