"""A tiny seccomp filter: no new user namespaces inside the sandbox.

Run as root, bwrap has no user namespace around the code (the code gets a real unprivileged uid
instead), so without this filter the code could create its own user namespace, where recent
kernels' local privilege escalations usually start. The filter refuses the kernel-keyring calls
(``add_key``, ``request_key``, ``keyctl``: keys belong to a uid and outlive any namespace), makes ``unshare`` and ``clone``
with ``CLONE_NEWUSER`` fail with EPERM, ``clone3`` (whose flags sit in memory a filter cannot
read) fail with ENOSYS so that libc falls back to ``clone``, and x32 or i386 system calls fail. Everything
else is allowed. The program is classic BPF, as bwrap's ``--seccomp FD`` expects.
"""

from __future__ import annotations

import errno
import os
import platform
import struct

_CLONE_NEWUSER = 0x10000000
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_LD_ABS_W, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
# offsets in struct seccomp_data: nr, arch, then args[0] (low word first on little-endian)
_NR, _ARCH, _ARG0 = 0, 4, 16
# machine -> (AUDIT_ARCH, unshare, clone, clone3)
_ARCHES = {"x86_64": (0xC000003E, 272, 56, 435), "aarch64": (0xC00000B7, 97, 220, 435)}
# kernel keyrings outlive a run (they belong to the uid, not to a namespace): add_key,
# request_key, keyctl
_KEYS = {"x86_64": (248, 249, 250), "aarch64": (217, 218, 219)}
# System V and POSIX message-queue IPC objects (for the persistent worker, whose IPC namespace
# outlives each snippet): shmget, semget, msgget, mq_open
_IPC = {"x86_64": (29, 64, 68, 240), "aarch64": (194, 190, 186, 180)}


def _ins(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def user_namespace_filter(deny_ipc: bool = False) -> bytes | None:
    """The compiled filter for this machine, or None where the architecture is not known.
    ``deny_ipc``: also refuse to create System V and POSIX message-queue IPC objects."""
    machine = platform.machine()
    arch = _ARCHES.get(machine)
    if arch is None:
        return None
    audit_arch, unshare, clone, clone3 = arch
    denied = _KEYS[machine] + (_IPC[machine] if deny_ipc else ())
    program = [
        _ins(_LD_ABS_W, 0, 0, _ARCH),
        _ins(_JEQ, 1, 0, audit_arch),
        _ins(_RET, 0, 0, _RET_ERRNO | errno.ENOSYS),  # another ABI (i386 via int 0x80): refused
        _ins(_LD_ABS_W, 0, 0, _NR),
        _ins(_JGE, 0, 1, 0x40000000),  # x32 numbers alias the x86_64 ones
        _ins(_RET, 0, 0, _RET_ERRNO | errno.ENOSYS),
        _ins(_JEQ, 0, 1, clone3),
        _ins(_RET, 0, 0, _RET_ERRNO | errno.ENOSYS),
    ]
    for nr in denied:
        program += [_ins(_JEQ, 0, 1, nr), _ins(_RET, 0, 0, _RET_ERRNO | errno.EPERM)]
    program += [
        _ins(_JEQ, 2, 0, unshare),  # -> load flags
        _ins(_JEQ, 1, 0, clone),  # -> load flags
        _ins(_RET, 0, 0, _RET_ALLOW),
        _ins(_LD_ABS_W, 0, 0, _ARG0),
        _ins(_JSET, 0, 1, _CLONE_NEWUSER),
        _ins(_RET, 0, 0, _RET_ERRNO | errno.EPERM),
        _ins(_RET, 0, 0, _RET_ALLOW),
    ]
    return b"".join(program)


def filter_fd(deny_ipc: bool = False) -> int | None:
    """A memfd holding the filter, positioned at its start (the caller closes it), or None."""
    program = user_namespace_filter(deny_ipc)
    if program is None:
        return None
    fd = os.memfd_create("turngym-seccomp", 0)
    os.write(fd, program)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd
