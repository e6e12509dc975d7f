"""Start a `turngym` server command (serve-env, serve-policy) as a subprocess on a free local port
and wait until its ``/health`` answers: for scripts that run several servers and for tests."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now (the OS picks it)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _output(proc: subprocess.Popen) -> str:
    """The end of what the server wrote so far (its log file), for an error message."""
    log = getattr(proc, "log", None)
    if log is None:  # a process started elsewhere: its stderr, where that is a pipe
        err = proc.stderr.read() if proc.stderr else ""
        return err.decode(errors="replace") if isinstance(err, bytes) else err
    log.flush()
    return Path(log.name).read_text(errors="replace")[-4000:]


def wait_healthy(url: str, proc: subprocess.Popen | None = None, timeout: float = 60.0) -> None:
    """Return once ``GET url/health`` answers 200; raise if ``proc`` exits first or time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{url}: server exited with {proc.returncode}:\n{_output(proc)}")
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    raise TimeoutError(f"{url} did not come up in {timeout:g} s")


def start_server(
    command: str,
    *flags: str,
    env: dict | None = None,
    pythonpath: list[str] | None = None,
    cwd: str | Path | None = None,
    log: str | Path | None = None,
    timeout: float = 60.0,
) -> tuple[subprocess.Popen, str]:
    """``python -m turngym COMMAND --port P FLAGS`` on a free port, up and healthy; returns the
    process and its base URL. Its output (stdout and stderr) goes to ``log``, or to a temporary
    file that error messages quote; ``pythonpath`` entries go before the inherited PYTHONPATH
    (for ``--import`` of modules outside the package); ``env`` overrides variables."""
    port = free_port()
    environ = {**os.environ, **(env or {})}
    if pythonpath:
        environ["PYTHONPATH"] = os.pathsep.join([*map(str, pythonpath), environ.get("PYTHONPATH", "")])
    handle = open(log, "w") if log is not None else tempfile.NamedTemporaryFile("w", suffix=".log")  # noqa: SIM115
    proc = subprocess.Popen(
        [sys.executable, "-m", "turngym", command, "--port", str(port), *flags],
        env=environ,
        cwd=cwd,
        stdout=handle,
        stderr=subprocess.STDOUT,
    )
    proc.log = handle  # closed by stop_server; keeps a temporary log alive while the server runs
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc, timeout)
    except BaseException:
        stop_server(proc)
        raise
    return proc, url


def stop_server(proc: subprocess.Popen, timeout: float = 10.0) -> None:
    """SIGTERM, then SIGKILL after ``timeout`` seconds; closes its log."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    log = getattr(proc, "log", None)
    if log is not None:
        log.close()


@contextlib.contextmanager
def serving(command: str, *flags: str, **options):
    """`start_server` as a context manager: yields (url, process) and stops the server at exit."""
    proc, url = start_server(command, *flags, **options)
    try:
        yield url, proc
    finally:
        stop_server(proc)
