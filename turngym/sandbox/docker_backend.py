"""The ``docker`` backend: one throw-away container per run through the docker SDK.

Used when a Docker engine is reachable (``DOCKER_HOST`` or the default socket). The container
has no network, a read-only root file system, a size-limited tmpfs work dir and /tmp, a memory
and pids cap, all capabilities dropped, ``no-new-privileges`` and the ``nobody`` user.
"""

from __future__ import annotations

import io
import os
import tarfile
import threading
import time
from functools import lru_cache

from turngym.sandbox.common import Limits, Result, decode, looks_out_of_memory, relative_path

IMAGE = "python:3.11-slim"  # any image with python3 and /bin/sh; override with TURNGYM_DOCKER_IMAGE
WORK = "/sandbox"
DOCKER_ISOLATION = ("docker: container with no network, read-only root, tmpfs work dir, memory and pids "
                    "cgroup caps, all capabilities dropped, no-new-privileges, user nobody")


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
        return f"no Docker engine is reachable ({type(exc).__name__})"
    return None


def _image() -> str:
    return os.environ.get("TURNGYM_DOCKER_IMAGE", IMAGE)


def run_docker(command: str | list[str] | None, is_code: bool, files: dict, stdin: str | bytes | None,
               limits: Limits, collect_files: bool) -> Result:
    files = {relative_path(k): (v.encode() if isinstance(v, str) else bytes(v)) for k, v in files.items()}
    reason = docker_unavailable_reason()
    if reason is not None:
        return Result(backend="docker", error=reason, isolation=DOCKER_ISOLATION)
    import docker

    if is_code:
        argv = ["python3", "-B", "main.py"]
    elif isinstance(command, str):
        argv = ["/bin/sh", "-c", command]
    else:
        argv = list(command)
    # tmpfs mounts exist only once the container runs: the files go in through a tar stream after
    # start, and the code waits for the archive's last member before it begins
    stdin_data = stdin.encode() if isinstance(stdin, str) else (stdin or b"")
    argv = ["/bin/sh", "-c", 'while [ ! -e .ready ]; do sleep 0.01; done; rm -f .ready; exec "$@" < .stdin',
            "sh", *argv]
    files = {**files, ".stdin": stdin_data, ".ready": b""}
    client = docker.from_env()
    started = time.monotonic()
    disk = f"size={limits.disk_mb}m"
    try:
        container = client.containers.create(
            _image(), argv, working_dir=WORK, user="65534:65534", network_disabled=True, read_only=True,
            tmpfs={WORK: disk + ",mode=1777", "/tmp": disk + ",mode=1777"}, mem_limit=f"{limits.memory_mb}m",
            memswap_limit=f"{limits.memory_mb}m", pids_limit=limits.max_processes, cap_drop=["ALL"],
            security_opt=["no-new-privileges"], environment={"HOME": WORK},
            ulimits=[docker.types.Ulimit(name="fsize", soft=limits.max_file_mb << 20, hard=limits.max_file_mb << 20),
                     docker.types.Ulimit(name="nofile", soft=limits.max_open_files, hard=limits.max_open_files)])
    except Exception as exc:  # noqa: BLE001 - the engine refused: infrastructure failure
        return Result(backend="docker", error=f"{type(exc).__name__}: {exc}", isolation=DOCKER_ISOLATION)
    try:
        container.start()
        container.put_archive(WORK, _tar(files))
        timed_out = False
        waiter: dict = {}

        def wait() -> None:
            waiter["status"] = container.wait()

        thread = threading.Thread(target=wait, daemon=True)
        thread.start()
        thread.join(limits.timeout_s)
        if thread.is_alive():
            timed_out = True
            container.kill()
            thread.join(10)
        status = waiter.get("status", {}).get("StatusCode")
        out = container.logs(stdout=True, stderr=False)[: limits.max_output_bytes]
        err = container.logs(stdout=False, stderr=True)[: limits.max_output_bytes]
        collected = None
        if collect_files and not timed_out:
            stream, _ = container.get_archive(WORK + "/.")
            collected = _untar(b"".join(stream))
        return Result(stdout=decode(out), stderr=decode(err), exit_code=status, timed_out=timed_out,
                      out_of_memory=looks_out_of_memory(err, status) or (status == 137 and not timed_out),
                      duration_s=time.monotonic() - started, backend="docker", files=collected,
                      isolation=DOCKER_ISOLATION)
    finally:
        container.remove(force=True)


def _tar(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for rel, data in files.items():
            info = tarfile.TarInfo(rel)
            info.size = len(data)
            info.mode = 0o666
            info.uid = info.gid = 65534  # the container's user owns its files
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _untar(blob: bytes) -> dict[str, str | bytes]:
    out: dict[str, str | bytes] = {}
    with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
        for member in tar:
            name = member.name.split("/", 1)[-1]
            if member.isfile() and "__pycache__" not in member.name and name not in (".stdin", ".ready"):
                data = tar.extractfile(member).read()
                try:
                    out[name] = data.decode()
                except UnicodeDecodeError:
                    out[name] = data
    return out
