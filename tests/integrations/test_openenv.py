"""serve-env's OpenEnv routes (/openenv/{env_id}): the protocol in process, then OpenEnv's real client.

The real client is openenv-core 0.3.0, in its own venv (its pins are not the project's):

    python3 -m venv .bench-venvs/openenv && .bench-venvs/openenv/bin/pip install openenv-core==0.3.0

Tests that need it skip, saying so, when that venv is absent.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import faulty_env
import pytest
from env_servers import env_server
from fastapi.testclient import TestClient

import turngym
from turngym.integrations.env_server.app import create_app
from turngym.integrations.env_server.sessions import ServerLimits, SessionStore

ROOT = Path(__file__).resolve().parents[2]
OPENENV_PYTHON = ROOT / ".bench-venvs" / "openenv" / "bin" / "python"
COUNTER = "turngym-tests/Counter-v0"
faulty_env.register()


def openenv_python() -> Path:
    if not OPENENV_PYTHON.exists():
        pytest.skip(
            "openenv-core is not installed in .bench-venvs/openenv; create it with `python3 -m venv "
            ".bench-venvs/openenv && .bench-venvs/openenv/bin/pip install openenv-core==0.3.0`"
        )
    return OPENENV_PYTHON


def run_openenv_client(episodes: list[dict]) -> list[list[dict]]:
    out = subprocess.run(
        [
            str(openenv_python()),
            str(ROOT / "tests" / "support" / "openenv_episode.py"),
            json.dumps({"episodes": episodes}),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])["episodes"]


def expert_episode(env_id: str, seed: int, task_id: str | None = None):
    """The expert's actions and every (text, reward, done, info) of one episode, in process."""
    env = turngym.make(env_id)
    obs, info = env.reset(seed=seed, options={"task_id": task_id} if task_id else None)
    answers, actions = [(obs, None, False, info)], []
    done = False
    while not done:
        action = env.unwrapped.expert_action()
        obs, reward, terminated, truncated, info = env.step(action)
        done = terminated or truncated
        actions.append(action)
        answers.append((obs, reward, done, info))
    env.close()
    return actions, json.loads(json.dumps(answers))


def test_every_registered_env_has_openenv_routes():
    with TestClient(create_app(SessionStore()), base_url="http://127.0.0.1") as client:
        for spec in turngym.list_envs():  # schema and metadata build no env: cheap for all ~190
            base = f"/openenv/{spec.id}"
            assert client.get(f"{base}/schema").json()["action"]["required"] == ["action"]
            meta = client.get(f"{base}/metadata").json()
            assert meta["name"] == spec.id and client.get(f"{base}/health").json() == {"status": "healthy"}
        missing = client.get("/openenv/turngym/NoSuchEnv-v0/metadata")
        assert missing.status_code == 404 and missing.json()["error"].startswith("env_id:")
        step = client.post(f"/openenv/{COUNTER}/step", json={"action": {"action": "inc"}})
        assert step.status_code == 409 and "/ws" in step.json()["error"]
        first = client.post(f"/openenv/{COUNTER}/reset", json={"seed": 3, "task_id": "counter-1"}).json()
        assert first["observation"]["info"]["task_id"] == "counter-1" and first["done"] is False


def test_openenv_websocket_keeps_the_limits_and_names_bad_fields():
    store = SessionStore(ServerLimits(max_sessions=1, max_action_chars=20))
    with TestClient(create_app(store), base_url="http://127.0.0.1") as client:
        with client.websocket_connect(f"ws://127.0.0.1/openenv/{COUNTER}/ws") as ws:
            ws.send_json({"type": "reset", "data": {"seed": 0, "level": 3}})
            bad = ws.receive_json()
            assert bad["type"] == "error" and bad["data"]["message"].startswith("level: not a reset field")
            ws.send_json({"type": "reset", "data": {"seed": 0, "task_id": "counter-3"}})
            first = ws.receive_json()["data"]
            ws.send_json({"type": "step", "data": {"action": "inc" * 10}})
            too_long = ws.receive_json()["data"]  # an invalid action: state unchanged, episode goes on
            assert too_long["observation"]["info"]["action_valid"] is False and not too_long["done"]
            assert too_long["observation"]["info"]["state_key"] == first["observation"]["info"]["state_key"]
            ws.send_json({"type": "step", "data": {"command": "inc"}})
            assert ws.receive_json()["data"]["message"].startswith("command: not an action field")
            with client.websocket_connect(f"ws://127.0.0.1/openenv/{COUNTER}/ws") as second:  # max_sessions=1
                second.send_json({"type": "reset", "data": {}})
                full = second.receive_json()["data"]
                assert full["code"] == "CAPACITY_REACHED" and "max_sessions" in full["message"]
            ws.send_json({"type": "teleport"})
            assert ws.receive_json()["data"]["code"] == "UNKNOWN_TYPE"
        deadline = time.monotonic() + 10  # the server closes the socket's session once it sees the close
        while store.stats()["open_sessions"] and time.monotonic() < deadline:
            time.sleep(0.02)
        assert store.stats()["open_sessions"] == 0


@pytest.mark.slow
def test_openenv_client_plays_turngym_envs_as_in_process():
    """openenv-core's GenericEnvClient over /ws: a household expert episode identical to the env in
    process; crashes and timeouts end the episode unscorable where the client sees it; the token
    rides in the base URL; a step after the end is refused."""
    openenv_python()
    task = turngym.make("turngym/Household-v0").unwrapped.task_ids("train")[0]
    actions, expected = expert_episode("turngym/Household-v0", seed=0, task_id=task)
    with env_server(token="tok", step_timeout_s=1.0) as (url, store):
        base = f"{url}/token/tok/openenv"
        household, crash, hang, no_token, after_end = run_openenv_client(
            [
                {
                    "base_url": f"{base}/turngym/Household-v0",
                    "reset": {"seed": 0, "task_id": task},
                    "actions": actions,
                },
                {
                    "base_url": f"{base}/turngym-tests/CrashyCounter-v0",
                    "reset": {"seed": 0, "task_id": "counter-0"},
                    "actions": ["dec"],
                },
                {"base_url": f"{base}/turngym-tests/Faulty-v0", "reset": {"seed": 0}, "actions": ["hang"]},
                {"base_url": f"{url}/openenv/{COUNTER}", "reset": {}},
                {
                    "base_url": f"{base}/{COUNTER}",
                    "reset": {"seed": 0, "task_id": "counter-3"},
                    "actions": ["dec", "dec", "submit", "inc"],
                    "state": True,
                },
            ]
        )
        assert store.stats()["open_sessions"] == 0
    assert len(household) == len(expected) and household[-1]["done"] and household[-1]["reward"] > 0
    for got, (text, reward, done, info) in zip(household, expected):
        assert got["observation"]["text"] == text and got["observation"]["info"] == info
        assert got["reward"] == reward and got["done"] == done and got["observation"]["scorable"] is True
    crashed = crash[-1]
    assert crashed["done"] and crashed["observation"]["scorable"] is False and crashed["reward"] == 0.0
    assert (
        crashed["observation"]["info"]["done_reason"] == "error"
        and "simulated env crash" in crashed["observation"]["error"]
    )
    timed_out = hang[-1]
    assert timed_out["done"] and timed_out["observation"]["scorable"] is False
    assert (
        timed_out["observation"]["info"]["done_reason"] == "timeout"
        and "step_timeout_s" in timed_out["observation"]["error"]
    )
    assert "401" in no_token[0]["error"]  # no token in the URL: the handshake is refused
    *steps, refused, state = after_end
    assert steps[-1]["done"] and steps[-1]["reward"] == 1.0
    assert "episode over" in refused["error"] and "RESET_NEEDED" in refused["error"]
    assert state["state"]["done"] is True and state["state"]["step_count"] == 3
