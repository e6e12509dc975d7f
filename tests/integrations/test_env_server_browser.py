"""A browser env (MiniWoB, real Chromium) behind `turngym serve-env` over HTTP: each session's env
runs in a process forked from the server's forkserver, and Chromium starts, steps and dies
with it."""

from __future__ import annotations

import time

import httpx
import psutil
import pytest
from browser_pages import BROWSER_MARKS, bid_of
from env_servers import env_server

from turngym.integrations.env_client import EnvClient, ServerError

pytestmark = [*BROWSER_MARKS, pytest.mark.slow]

ENV = "turngym/miniwob.click-test-v0"


def descendants(store, session_id: str) -> list[psutil.Process]:
    """The session's env process and what it started (Playwright's driver, Chromium)."""
    root = psutil.Process(store.sessions[session_id].process.process.pid)
    return [root, *root.children(recursive=True)]


def gone(processes: list[psutil.Process], within_s: float = 10.0) -> list[psutil.Process]:
    """The processes still running after ``within_s`` (zombies count as gone)."""
    deadline = time.monotonic() + within_s
    while True:
        alive = [p for p in processes if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.1)


def test_browser_session_over_http_steps_a_valid_and_an_invalid_action_and_closes():
    with env_server(step_timeout_s=120) as (url, store):
        client = EnvClient(url)
        sid = client.create(ENV)["session_id"]
        first = client.reset(sid, seed=0)
        assert "Click Me!" in first["observation"] and first["info"]["action_valid"] is True
        procs = descendants(store, sid)
        assert any("chrom" in p.name() for p in procs)  # a real Chromium, under the session's process

        bad = client.step(sid, "explode('1')")
        assert (bad["reward"], bad["terminated"], bad["truncated"]) == (0.0, False, False)
        assert bad["info"]["action_valid"] is False and "explode" in bad["info"]["parse_error"]
        assert bad["info"]["state_key"] == first["info"]["state_key"]  # a refused action changes nothing

        button = bid_of(first["observation"], "Click Me!")
        good = client.step(sid, f"click('{button}')")
        assert good["terminated"] and good["reward"] == 1.0 and good["info"]["is_success"] is True
        with pytest.raises(ServerError) as ended:
            client.step(sid, f"click('{button}')")
        assert ended.value.status == 409

        client.close_session(sid)
        assert gone(procs) == []  # the env's process, the driver and every Chromium process
        stats = client.stats()
        assert stats["open_sessions"] == 0 and stats["env_processes"] == 0 and stats["env_errors"] == 0
        client.close()


def test_browser_step_past_the_deadline_kills_chromium_with_the_session():
    with env_server(step_timeout_s=120) as (url, store):
        client = EnvClient(url)
        sid = client.create(ENV)["session_id"]
        client.reset(sid, seed=0)
        procs = descendants(store, sid)
        store.limits.step_timeout_s = 0.001  # no browser step answers this fast
        response = httpx.post(f"{url}/sessions/{sid}/step", json={"action": "noop()"}, timeout=60)
        assert response.status_code == 504 and response.json()["scorable"] is False
        assert gone(procs) == []  # killed with its process group; Chromium exits with its driver
        store.limits.step_timeout_s = 120
        again = client.create(ENV)["session_id"]  # the server goes on serving browser sessions
        assert "Click Me!" in client.reset(again, seed=1)["observation"]
        client.close_session(again)
        assert client.stats()["timed_out"] == 1
        client.close()
