"""The ``docker`` backend: one throw-away container per run through the docker SDK.

Used when a Docker engine is reachable (``DOCKER_HOST`` or the default socket) and the sandbox
image exists: ``turngym-sandbox:local``, built on this machine from its own Python without any
registry (``make docker-image``, or ``python -m turngym.sandbox.docker_image``; the Makefile's
set-up does it when it runs as root). The container has no network, a read-only root file system,
a size-limited tmpfs work dir and /tmp, its own IPC namespace, a memory and pids cap, all
capabilities dropped, ``no-new-privileges``, Docker's default seccomp profile (no kernel-keyring
calls) and the ``nobody`` user.
"""

from __future__ import annotations

import base64
import os
import secrets
import socket
import threading
import time
from functools import lru_cache

from turngym.sandbox.common import (
    Limits,
    Result,
    decode,
    looks_out_of_memory,
    might_not_have_started,
    read_tar,
    relative_path,
    tar_of,
)
from turngym.sandbox.docker_image import IMAGE  # any image with python3 and /bin/sh: TURNGYM_DOCKER_IMAGE

WORK = "/sandbox"
DOCKER_ISOLATION = (
    "docker: container with no network, read-only root, tmpfs work dir, own IPC namespace, "
    "memory and pids cgroup caps, no capabilities, no-new-privileges, the engine's seccomp "
    "profile, user nobody under a root pid 1 it cannot signal"
)


@lru_cache(maxsize=1)
def docker_unavailable_reason() -> str | None:
    """None when an engine answers; else why the docker backend cannot run here."""
    try:
        import docker
    except ImportError:
        return "the docker SDK is not installed (pip install 'turngym[docker]')"
    try:
        client = docker.from_env(timeout=3)
        client.ping()
    except Exception as exc:  # noqa: BLE001 - any failure means: no engine
        where = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
        why = (
            "the socket does not exist"
            if where.startswith("unix://") and not os.path.exists(where[len("unix://") :])
            else f"{type(exc).__name__}: {str(exc)[:200]}"
        )
        return (
            f"no Docker engine answers at {where} ({why}); as root, `make system-deps` installs docker.io "
            "and starts dockerd"
        )
    try:
        client.images.get(_image())
    except Exception as exc:  # noqa: BLE001
        return (
            f"the sandbox image {_image()} is not on this engine ({type(exc).__name__}); build it with "
            "`python -m turngym.sandbox.docker_image`"
        )
    try:  # an engine that answers may still be unable to start containers (cgroups, storage, nesting)
        out = client.containers.run(_image(), ["python3", "-c", "print('ok')"], remove=True, network_disabled=True)
        if out.strip() != b"ok":
            return f"a test container printed {out[:100]!r} instead of ok"
    except Exception as exc:  # noqa: BLE001
        return f"the engine cannot run a container here ({type(exc).__name__}: {str(exc)[:300]})"
    return None


def _image() -> str:
    return os.environ.get("TURNGYM_DOCKER_IMAGE", IMAGE)


def run_docker(
    command: str | list[str] | None,
    is_code: bool,
    files: dict,
    stdin: str | bytes | None,
    limits: Limits,
    collect_files: bool,
) -> Result:
    files = {relative_path(k): (v.encode() if isinstance(v, str) else bytes(v)) for k, v in files.items()}
    reason = docker_unavailable_reason()
    if reason is not None:
        return Result(backend="docker", error=reason, isolation=DOCKER_ISOLATION)
    import docker

    stdin_data = stdin.encode() if isinstance(stdin, str) else (stdin or b"")
    mark = "turngym-files-" + secrets.token_hex(16)
    argv = _container_argv(command, is_code, collect_files)
    files = {**files, ".stdin": stdin_data}
    out_cap = limits.max_output_bytes + (((limits.disk_mb << 20) * 4 // 3 + (1 << 20)) if collect_files else 0)
    client = docker.from_env()
    started = time.monotonic()
    try:
        container = _create_container(client, argv, limits, mark)
    except Exception as exc:  # noqa: BLE001 - the engine refused: infrastructure failure
        return Result(backend="docker", error=f"{type(exc).__name__}: {exc}", isolation=DOCKER_ISOLATION)
    try:
        streams, timed_out, truncated, status = _attach_and_wait(container, files, limits, started, out_cap)
        res, blob = _container_result(
            streams, status, timed_out, truncated, limits, started, mark if collect_files else None
        )
        if status is None and not timed_out:
            res.error = "the container ended without an exit status"
        elif is_code and might_not_have_started(res):
            res.error = _python_start_failure(client)
        if collect_files and not timed_out and not res.output_truncated and res.error is None:
            if blob is not None:
                try:
                    res.files = _untar(base64.b64decode(blob), limits, res)
                except ValueError:
                    res.files = None
            else:
                res.extra["collect_error"] = f"the work dir's files are over disk_mb ({limits.disk_mb} MB)"
        return res
    except Exception as exc:  # noqa: BLE001 - the engine failed mid-run: infrastructure
        return Result(
            backend="docker",
            error=f"{type(exc).__name__}: {exc}",
            isolation=DOCKER_ISOLATION,
            duration_s=time.monotonic() - started,
        )
    finally:
        container.remove(force=True)


def _container_argv(command: str | list[str] | None, is_code: bool, collect_files: bool) -> list[str]:
    """The container's command line around the program's own ``argv``.

    The engine refuses archives into a read-only container (tmpfs or not), so the files, the
    code's stdin among them, arrive as a tar on the container's stdin. pid 1 is a root shell
    holding only CAP_SETUID/CAP_SETGID, which starts the command as nobody (so the code cannot
    signal it) and returns its exit status. A stopped container's tmpfs is gone, so collected
    files leave through stdout: after the command, a per-run marker line (``TURNGYM_MARK``), then
    the work dir's tar in base64 (what the code could forge there is only its own files, which it
    controls anyway)."""
    if is_code:
        argv = ["python3", "-B", "main.py"]
    elif isinstance(command, str):
        argv = ["/bin/sh", "-c", command]
    else:
        argv = list(command)
    inner = "tar -xf - || exit 125; exec 0<.stdin; rm -f .stdin; M=$TURNGYM_MARK; unset TURNGYM_MARK; "
    if collect_files:
        inner += (
            '"$@"; rc=$?; exec 0</dev/null; printf "\\n%s\\n" "$M"; '
            "tar -cf - --exclude=__pycache__ --exclude=.pytest_cache . | base64; exit $rc"
        )
    else:
        inner += 'exec "$@"'
    outer = 'setpriv --reuid 65534 --regid 65534 --clear-groups --inh-caps=-all -- /bin/sh -c "$0" sh "$@"; exit $?'
    return ["/bin/sh", "-c", outer, inner, *argv]


def _create_container(client, argv: list[str], limits: Limits, mark: str):
    """A created, not yet started, container with the limits and without network or capabilities
    but the two the root shell needs to drop to nobody."""
    import docker

    disk = f"size={limits.disk_mb}m"
    return client.containers.create(
        _image(),
        argv,
        working_dir=WORK,
        user="0:0",
        network_disabled=True,
        read_only=True,
        tmpfs={WORK: disk + ",mode=1777", "/tmp": disk + ",mode=1777"},
        mem_limit=f"{limits.memory_mb}m",
        memswap_limit=f"{limits.memory_mb}m",
        pids_limit=limits.max_processes + 2,
        cap_drop=["ALL"],
        cap_add=["SETUID", "SETGID"],
        security_opt=["no-new-privileges"],
        environment={"HOME": WORK, "TURNGYM_MARK": mark},
        ipc_mode="private",
        stdin_open=True,
        log_config=docker.types.LogConfig(type="none", config={}),
        ulimits=[
            docker.types.Ulimit(name="fsize", soft=limits.max_file_mb << 20, hard=limits.max_file_mb << 20),
            docker.types.Ulimit(name="nofile", soft=limits.max_open_files, hard=limits.max_open_files),
        ],
    )


def _attach_and_wait(
    container, files: dict[str, bytes], limits: Limits, started: float, out_cap: int
) -> tuple[dict[int, bytes], bool, bool, int | None]:
    """Start the container, hand it the files' tar and read its output until it ends or the
    deadline passes: (streams, timed out, truncated, exit status)."""
    sock = container.attach_socket(params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1})
    raw = getattr(sock, "_sock", sock)
    container.start()
    raw.sendall(tar_of(files, mode=0o666, owner=65534))  # the container's user owns its files
    raw.shutdown(socket.SHUT_WR)
    killer: list[threading.Thread] = []

    def kill() -> None:
        # in a thread: the engine finishes a kill only once its output stream is drained, and
        # draining is what this thread does meanwhile
        killer.append(threading.Thread(target=_quietly, args=(container.kill,), daemon=True))
        killer[-1].start()

    streams, timed_out, truncated = _read_frames(
        raw, started + limits.timeout_s, out_cap, limits.max_output_bytes, kill
    )
    for thread in killer:
        thread.join(30)
    sock.close()
    status = container.wait(timeout=30).get("StatusCode")
    return streams, timed_out, truncated, status


def _container_result(
    streams: dict[int, bytes],
    status: int | None,
    timed_out: bool,
    truncated: bool,
    limits: Limits,
    started: float,
    mark: str | None,
) -> tuple[Result, bytes | None]:
    """The run's Result from its output, and the base64 tar of the work dir that follows ``mark``
    in stdout (None: no mark, so no files; ``mark`` None: files not collected)."""
    out, err = streams[1], streams[2]
    blob = None
    if mark is not None:
        out, found, encoded = out.rpartition(f"\n{mark}\n".encode())
        if not found:
            out = encoded
        blob = encoded if found else None
    truncated = truncated or len(out) > limits.max_output_bytes
    out = out[: limits.max_output_bytes]
    res = Result(
        stdout=decode(out),
        stderr=decode(err),
        exit_code=status,
        timed_out=timed_out,
        out_of_memory=looks_out_of_memory(err, status) or (status == 137 and not timed_out),
        duration_s=time.monotonic() - started,
        backend="docker",
        output_truncated=truncated,
        isolation=DOCKER_ISOLATION,
    )
    return res, blob


def _python_start_failure(client) -> str | None:
    """None when the image's python3 starts (asked afresh: a program cannot fake the answer)."""
    try:
        out = client.containers.run(
            _image(), ["python3", "-c", "print('turngym-python-ok')"], remove=True, network_disabled=True
        )
    except Exception as exc:  # noqa: BLE001 - the engine or the image failed
        return f"the docker sandbox could not start its Python (python3 in {_image()}): {str(exc)[:300]}"
    if out.strip() != b"turngym-python-ok":
        return f"the docker sandbox's python3 printed {out[:100]!r} instead of starting"
    return None


def _quietly(call) -> None:
    try:
        call()
    except Exception:  # noqa: BLE001 - the container may be gone already
        pass


def _read_frames(sock, deadline: float, out_cap: int, err_cap: int, kill) -> tuple[dict[int, bytes], bool, bool]:
    """Read the engine's multiplexed output (8-byte headers: stream 1 or 2, then the length) until
    the container ends, the deadline passes (timed out) or a stream passes its cap (truncated);
    ``kill()`` stops the container in both cases."""
    import selectors

    buf = bytearray()
    streams = {1: bytearray(), 2: bytearray()}
    caps = {1: out_cap, 2: err_cap}
    timed_out = truncated = False
    killed_at = None
    with selectors.DefaultSelector() as sel:
        sel.register(sock, selectors.EVENT_READ)
        while True:
            now = time.monotonic()
            if killed_at is None and now >= deadline:
                timed_out = True
                kill()
                killed_at = now
            if killed_at is not None and now - killed_at > 10:
                break  # the engine did not close the stream after the kill
            if not sel.select(timeout=0.5):
                continue
            chunk = sock.recv(1 << 16)
            if not chunk:
                break
            if killed_at is not None:
                continue  # keep draining after a kill: an unread stream stalls the engine's kill
            buf += chunk
            while len(buf) >= 8:
                size = int.from_bytes(buf[4:8], "big")
                if len(buf) < 8 + size:
                    break
                kind, data = buf[0], bytes(buf[8 : 8 + size])
                del buf[: 8 + size]
                if kind in streams:
                    room = caps[kind] - len(streams[kind])
                    streams[kind] += data[: max(room, 0)]
                    if len(data) > room and killed_at is None:
                        truncated = True
                        kill()
                        killed_at = time.monotonic()
                        break
    return {k: bytes(v) for k, v in streams.items()}, timed_out, truncated


def _untar(blob: bytes, limits: Limits, res: Result) -> dict[str, str | bytes] | None:
    """The archive's regular files (checked as the native backends' are), but the code's stdin."""
    files = read_tar(blob, limits, res)
    if files is None:
        return None
    return {name: data for name, data in files.items() if name != ".stdin"}
