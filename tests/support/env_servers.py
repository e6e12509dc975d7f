"""Real ``turngym serve-env`` servers for tests: uvicorn on 127.0.0.1, in a thread of the test process
(so test-registered envs are served) or as a `turngym serve-env` subprocess."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from pathlib import Path

from contract_env import CounterEnv

from turngym.core.servers import free_port, serving, wait_healthy

SUPPORT = Path(__file__).resolve().parent


@contextlib.contextmanager
def serve_app(app):
    """Run an ASGI app with uvicorn on a free local port; yields its base URL."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True, name=f"uvicorn-{port}")
    thread.start()
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url)
        yield url
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@contextlib.contextmanager
def env_server(token: str | None = None, **limits):
    """An in-process env server; yields (url, store)."""
    from turngym.integrations.env_server.app import create_app
    from turngym.integrations.env_server.sessions import ServerLimits, SessionStore

    store = SessionStore(ServerLimits(**limits))
    with serve_app(create_app(store, token=token)) as url:
        yield url, store


@contextlib.contextmanager
def env_server_process(*args: str, log: Path | None = None):
    """`turngym serve-env ARGS` as a subprocess that can serve the test envs (``--import`` of this
    folder's modules); yields (url, process). Its output goes to ``log`` when given."""
    with serving("serve-env", "--import", "contract_env:register", *args, pythonpath=[SUPPORT], log=log) as served:
        yield served


class StuckCounter(CounterEnv):
    """Counter whose ``block`` action blocks in C for good: ``os.read`` on a pipe whose write end
    the env keeps open, so no EOF comes and no Python-level exception can reach the call. Its
    ``exit3`` action ends the process with ``os._exit(3)``: no exception, no cleanup. ``nap``
    takes 0.3 s (a slow step)."""

    def _step(self, action):
        if action.strip() == "nap":
            time.sleep(0.3)
        if action.strip() == "block":
            read_end, self.write_end = os.pipe()
            os.read(read_end, 1)
        if action.strip() == "exit3":
            os._exit(3)
        return super()._step(action)


STUCK_COUNTER = "turngym-tests/StuckCounter-v0"


def register_stuck_counter() -> None:
    import turngym

    turngym.register(STUCK_COUNTER, "env_servers:StuckCounter", max_episode_steps=20, family="tests")
