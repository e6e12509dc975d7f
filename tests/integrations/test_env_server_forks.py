"""Forks over HTTP: serve-env's snapshot and fork routes, the OpenEnv socket's, and the clients'."""

from __future__ import annotations

import pickle

import httpx
import pytest
from env_servers import env_server

import turngym
from turngym.integrations.env_client import EnvClient, RemoteEnv, ServerError

HOUSE = "turngym/Household-v0"
COUNTER = "turngym-tests/Counter-v0"  # no snapshots


def expert_actions(n: int, seed: int = 0) -> list[str]:
    env = turngym.make(HOUSE)
    env.reset(seed=seed)
    actions = []
    for _ in range(n):
        actions.append(env.expert_action())
        env.step(actions[-1])
    return actions


def walk(env, actions: list[str]) -> list[tuple]:
    return [(obs, reward, info["state_key"]) for obs, reward, _, _, info in (env.step(a) for a in actions)]


@pytest.mark.parametrize("isolate_all", [False, True], ids=["light", "isolated"])
def test_a_fork_goes_on_from_the_same_state_and_apart_from_its_origin(isolate_all):
    actions = expert_actions(4) + ["inventory", "look"]  # the expert's episode ends at its 5th step
    local = turngym.make(HOUSE)
    local.reset(seed=0)
    walk(local, actions[:3])
    expected = walk(local, actions[3:])
    with env_server(isolate_all=isolate_all) as (url, store):
        env = RemoteEnv(url, HOUSE)
        env.reset(seed=0)
        walk(env, actions[:3])
        fork = env.fork()
        assert fork.session_id != env.session_id and fork.info["turn"] == 3
        assert walk(fork, actions[3:]) == expected  # the fork plays on exactly as the env would
        env.step("look")  # the origin moves on its own; the fork stays where it was
        assert env.info["turn"] == 4 and fork.info["turn"] == 6
        again = env.fork()
        assert again.info["turn"] == 4 and again.info["state_key"] == env.info["state_key"]
        assert store.stats()["open_sessions"] == 3
        for e in (env, fork, again):
            e.close()


def test_a_kept_snapshot_opens_sessions_in_its_state_and_is_checked():
    actions = expert_actions(4)
    with env_server(max_sessions=3, max_snapshots=2) as (url, store):
        client = EnvClient(url)
        sid = client.create(HOUSE)["session_id"]
        client.reset(sid, seed=0)
        for a in actions[:2]:
            client.step(sid, a)
        kept = client.snapshot(sid)
        assert set(kept) == {"snapshot_id", "env_id", "turn", "nbytes"} and kept["turn"] == 2  # an id, never bytes
        after = [client.step(sid, a)["observation"] for a in actions[2:]]
        other = client.create(HOUSE, snapshot_id=kept["snapshot_id"])
        assert other["info"]["turn"] == 2
        assert [client.step(other["session_id"], a)["observation"] for a in actions[2:]] == after
        # the caller's mistakes: one line naming the field
        with pytest.raises(ServerError, match="^400: env_id: .* is not the snapshot's env") as e:
            client.create(COUNTER, snapshot_id=kept["snapshot_id"])
        with pytest.raises(ServerError, match="^400: env_kwargs: a session from a snapshot takes the snapshot's"):
            client.create(HOUSE, {"kind": "easy"}, snapshot_id=kept["snapshot_id"])
        forged = pickle.dumps(print).hex()  # a client's pickle is only ever an unknown id
        with pytest.raises(ServerError, match="^404: snapshot_id: no snapshot") as e:
            client.create(HOUSE, snapshot_id=forged)
        # a snapshot sent as a reset option is refused by the env, never unpickled
        with pytest.raises(ServerError, match="^400: options: .*snapshot") as e:
            client.reset(sid, options={"snapshot": {"env": HOUSE, "turn": 0, "state": forged}})
        # caps: a fork is a session (max_sessions=3), the oldest snapshot goes past max_snapshots=2
        client.fork(sid)
        with pytest.raises(ServerError) as e:
            client.fork(sid)
        assert e.value.status == 429 and "max_sessions" in e.value.message
        client.snapshot(sid), client.snapshot(sid)
        assert kept["snapshot_id"] not in store.snapshots and len(store.snapshots) == 2
        newest = next(reversed(store.snapshots))
        client.delete_snapshot(newest)
        with pytest.raises(ServerError, match="^404: snapshot_id"):
            client.delete_snapshot(newest)
        client.close()


def test_kept_snapshots_are_capped_in_bytes_too():
    """A client must not fill the server's memory with snapshots: the bytes kept are capped as well."""
    with env_server(max_snapshot_mb=0.01) as (url, store):  # 10,485 bytes
        client = EnvClient(url)
        sid = client.create(HOUSE)["session_id"]
        client.reset(sid, seed=0)
        kept = [client.snapshot(sid) for _ in range(6)]
        size = kept[0]["nbytes"]
        assert 0 < size <= 10_485
        assert len(store.snapshots) == 10_485 // size < 6  # the oldest were dropped
        assert list(store.snapshots) == [k["snapshot_id"] for k in kept[-len(store.snapshots) :]]
        client.close()
    with env_server(max_snapshot_mb=size / 2**20 / 2) as (url, store):
        client = EnvClient(url)
        sid = client.create(HOUSE)["session_id"]
        client.reset(sid, seed=0)
        with pytest.raises(ServerError, match=r"^413: snapshot: [\d,]+ bytes, more than the server keeps"):
            client.snapshot(sid)
        assert not store.snapshots
        client.close()


def test_envs_without_snapshots_and_sessions_before_reset_get_one_line():
    with env_server() as (url, _):
        client = EnvClient(url)
        counter = client.create(COUNTER)["session_id"]
        client.reset(counter, seed=0)
        with pytest.raises(ServerError) as e:
            client.fork(counter)
        assert e.value.status == 400 and e.value.message.startswith(f"snapshot: {COUNTER} does not support snapshots")
        assert "\n" not in e.value.message
        house = client.create(HOUSE)["session_id"]
        with pytest.raises(ServerError, match="^409: reset needed"):
            client.snapshot(house)
        results = client.batch(
            [{"op": "reset", "session_id": house, "seed": 0}, {"op": "fork", "session_id": house, "timeout_s": 5}]
        )
        assert results[1]["ok"] and results[1]["result"]["info"]["turn"] == 0
        client.close()


def test_fork_routes_need_the_token():
    with env_server(token="tok") as (url, _):
        client = EnvClient(url, token="tok")
        sid = client.create(HOUSE)["session_id"]
        client.reset(sid, seed=0)
        for path in (f"/sessions/{sid}/fork", f"/sessions/{sid}/snapshot"):
            assert httpx.post(url + path).status_code == 401
        assert httpx.post(f"{url}/token/tok/sessions/{sid}/fork").status_code == 201
        client.close()


def test_openenv_sockets_fork_through_a_kept_snapshot():
    from starlette.testclient import TestClient

    from turngym.integrations.env_server.app import create_app

    actions = expert_actions(4)
    with TestClient(create_app(), base_url="http://127.0.0.1") as client:
        with client.websocket_connect(f"ws://127.0.0.1/openenv/{HOUSE}/ws") as ws:
            ws.send_json({"type": "reset", "data": {"seed": 0}})
            ws.receive_json()
            for a in actions[:2]:
                ws.send_json({"type": "step", "data": {"action": a}})
                ws.receive_json()
            ws.send_json({"type": "snapshot"})
            kept = ws.receive_json()
            assert kept["type"] == "snapshot" and set(kept["data"]) == {"snapshot_id", "env_id", "turn", "nbytes"}
            ws.send_json({"type": "step", "data": {"action": actions[2]}})
            here = ws.receive_json()["data"]
        with client.websocket_connect(f"ws://127.0.0.1/openenv/{HOUSE}/ws") as other:
            other.send_json({"type": "reset", "data": {"snapshot_id": kept["data"]["snapshot_id"], "seed": 1}})
            assert other.receive_json()["data"]["message"].startswith("seed: a reset from snapshot_id takes no")
            other.send_json({"type": "reset", "data": {"snapshot_id": kept["data"]["snapshot_id"]}})
            assert other.receive_json()["data"]["observation"]["info"]["turn"] == 2
            other.send_json({"type": "step", "data": {"action": actions[2]}})
            there = other.receive_json()["data"]
            assert there["observation"]["text"] == here["observation"]["text"]
            assert there["observation"]["info"]["state_key"] == here["observation"]["info"]["state_key"]
        with client.websocket_connect(f"ws://127.0.0.1/openenv/{COUNTER}/ws") as counter:
            counter.send_json({"type": "reset", "data": {"seed": 0}})
            counter.receive_json()
            counter.send_json({"type": "snapshot"})
            refused = counter.receive_json()["data"]
            assert "does not support snapshots" in refused["message"] and "\n" not in refused["message"]
