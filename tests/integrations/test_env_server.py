"""`turngym serve-env`, its Gymnasium client and EnvPool's remote backend, against real servers on 127.0.0.1."""

from __future__ import annotations

import gc
import threading
import time

import faulty_env
import gymnasium
import httpx
import psutil
import pytest
from contract_env import CounterEnv
from env_servers import STUCK_COUNTER, env_server, env_server_process, register_stuck_counter
from gymnasium.utils.env_checker import check_env

import turngym
from turngym.agents import ExpertPolicy, RandomPolicy
from turngym.core.servers import free_port
from turngym.integrations.env_client import EnvClient, RemoteEnv, ServerError

COUNTER = "turngym-tests/Counter-v0"
TRAIN = [f"counter-{i}" for i in range(20) if i % 5]


class SleepyCounter(CounterEnv):
    """Counter whose `sleep` action hangs longer than any step timeout in these tests, and whose
    `nap` takes half a second."""

    def _step(self, action):
        if action.strip() == "sleep":
            time.sleep(60)
        if action.strip() == "nap":
            time.sleep(0.5)
        return super()._step(action)


turngym.register("turngym-tests/SleepyCounter-v0", SleepyCounter, max_episode_steps=20, family="tests")
faulty_env.register()
FAULTY = "turngym-tests/Faulty-v0"
register_stuck_counter()


def test_session_lifecycle_over_http():
    with env_server() as (url, store):
        client = EnvClient(url)
        sid = client.create(COUNTER)["session_id"]
        with pytest.raises(ServerError) as e:
            client.step(sid, "inc")
        assert e.value.status == 409 and "reset" in e.value.message
        first = client.reset(sid, seed=3, options={"task_id": "counter-1"})
        assert first["info"]["task_id"] == "counter-1"
        assert set(first["info"]) == set(turngym.STEP_INFO_KEYS)
        assert "counter-1" in client.task_ids(sid) and client.task_ids(sid, "test") == [
            "counter-0",
            "counter-10",
            "counter-15",
            "counter-5",
        ]
        described = client.describe(sid)
        assert described["admissible_actions"] == ["dec", "inc", "submit"]
        assert "Reach the target" in described["instructions"]
        bad = client.step(sid, "jump")
        assert bad["info"]["action_valid"] is False and bad["info"]["state_key"] == first["info"]["state_key"]
        good = client.step(sid, "inc")
        assert good["info"]["turn"] == 2 and good["info"]["state_key"] != first["info"]["state_key"]
        client.close_session(sid)
        with pytest.raises(ServerError) as e:
            client.describe(sid)
        assert e.value.status == 404
        stats = client.stats()
        assert stats["open_sessions"] == 0 and stats["created"] == stats["closed"] == 1
        client.close()


def test_remote_env_replays_the_local_env_exactly():
    actions = ["inc", "dec", "fly", "inc", "inc", "submit"]
    local = turngym.make(COUNTER)
    with env_server() as (url, _):
        remote = RemoteEnv(url, COUNTER)
        for seed in (0, 7):
            assert remote.reset(seed=seed) == local.reset(seed=seed)
            for action in actions:
                assert remote.step(action) == local.step(action)
        remote.close()


def test_remote_env_passes_gymnasium_check_env():
    with env_server() as (url, store):
        env = RemoteEnv(url, COUNTER)
        check_env(env, skip_render_check=True)
        env.close()
        env.close()  # idempotent
        assert store.stats()["open_sessions"] == 0


def test_tools_mode_env_lists_its_tools():
    with env_server() as (url, _):
        env = RemoteEnv(url, "turngym-tests/Counter-tools-v0")
        obs, info = env.reset(seed=0, options={"task_id": "counter-2"})
        assert {t["function"]["name"] for t in info["tools"]} == {"inc", "dec", "submit"}
        assert {t["function"]["name"] for t in env.tools()} == {"inc", "dec", "submit"}
        env.close()


def test_bad_requests_get_one_line_naming_the_field():
    with env_server(max_action_chars=50) as (url, _):
        client = EnvClient(url)
        with pytest.raises(ServerError) as e:
            client.create("turngym/NoSuchEnv-v0")
        assert e.value.status == 404 and e.value.message.startswith("env_id:")
        response = httpx.post(f"{url}/sessions", json={"env_kwargs": {}})
        assert response.status_code == 400 and response.json()["error"].startswith("env_id")
        sid = client.create(COUNTER)["session_id"]
        with pytest.raises(ServerError) as e:
            client.reset(sid, options={"level": 3})
        assert e.value.status == 400 and "allowed: task_id, split, task" in e.value.message
        with pytest.raises(ServerError) as e:  # the caller's mistake, not an env failure
            client.reset(sid, options={"snapshot": {"env": COUNTER}})
        assert e.value.status == 400 and "does not support snapshot()" in e.value.message
        results = client.batch([{"op": "teleport", "session_id": sid}, {"op": "reset", "session_id": sid}])
        assert results[0]["ok"] is False and results[0]["error"].startswith("op:")
        assert results[1]["ok"] is True  # one bad op never fails the others
        # an over-long action is an invalid action for RemoteEnv: nothing changes
        env = RemoteEnv(url, COUNTER)
        _, info = env.reset(seed=0)
        obs, reward, terminated, truncated, after = env.step("inc" * 100)
        assert after["action_valid"] is False and "max_action_chars" in obs
        assert after["state_key"] == info["state_key"] and not (terminated or truncated)
        env.close()
        client.close()


def test_token_auth_and_openapi_schema():
    with env_server(token="s3cret") as (url, _):
        assert httpx.get(f"{url}/health").status_code == 200
        assert httpx.post(f"{url}/sessions", json={"env_id": COUNTER}).status_code == 401
        wrong = httpx.post(f"{url}/sessions", json={"env_id": COUNTER}, headers={"Authorization": "Bearer x"})
        assert wrong.status_code == 401
        schema = httpx.get(f"{url}/openapi.json", headers={"Authorization": "Bearer s3cret"}).json()
        for path in ("/sessions", "/sessions/{session_id}/step", "/sessions/{session_id}/reset", "/batch"):
            assert path in schema["paths"]
        env = RemoteEnv(url, COUNTER, token="s3cret")
        env.reset(seed=0)
        env.close()


def test_env_crash_is_unscorable_and_the_session_recovers():
    with env_server() as (url, store):
        env = RemoteEnv(url, "turngym-tests/CrashyCounter-v0")
        env.reset(seed=0)
        obs, reward, terminated, truncated, info = env.step("dec")
        assert truncated and info["scorable"] is False and reward == 0.0
        assert "simulated env crash" in obs
        env.reset(seed=0)  # a fresh env behind the same session
        assert env.step("inc")[4]["scorable"] is True
        env.close()
        assert store.stats()["env_errors"] == 1


@pytest.mark.slow
def test_hung_step_times_out_unscorable_and_frees_the_session():
    # 5 s: the timeout also bounds building the env in a new process, which took over 0.5 s on a
    # loaded machine
    with env_server(step_timeout_s=5.0) as (url, store):
        env = RemoteEnv(url, "turngym-tests/SleepyCounter-v0")
        env.reset(seed=0)
        started = time.monotonic()
        obs, reward, terminated, truncated, info = env.step("sleep")
        # cut short by the timeout, not waited out (the env sleeps 60 s)
        assert time.monotonic() - started < 30
        assert truncated and info["scorable"] is False and "step_timeout" in obs
        assert store.stats()["open_sessions"] == 0 and store.stats()["timed_out"] == 1
        env.reset(seed=0)  # a new session on the server
        assert env.step("inc")[4]["scorable"] is True
        env.close()


@pytest.mark.slow
def test_idle_sessions_expire_and_their_envs_are_freed():
    # each env's process is read as soon as its session exists: on a loaded machine the first
    # sessions could otherwise expire before the fifth is created
    with env_server(idle_timeout_s=1.0) as (url, store):
        client = EnvClient(url)
        processes = []
        for _ in range(5):
            processes.append(store.sessions[client.create(COUNTER)["session_id"]].process.process)
        deadline = time.monotonic() + 10
        while store.stats()["open_sessions"] and time.monotonic() < deadline:
            time.sleep(0.1)
        assert store.stats()["open_sessions"] == 0 and store.stats()["expired"] == 5
        # an expired env's process is told to stop at once; on a loaded machine it may take a moment
        while any(p.is_alive() for p in processes) and time.monotonic() < deadline + 10:
            time.sleep(0.1)
        assert not any(p.is_alive() for p in processes)
        # a RemoteEnv whose session expired opens a new one at reset
        env = RemoteEnv(url, COUNTER)
        time.sleep(1.0)
        env.reset(seed=0)
        env.close()
        client.close()


@pytest.mark.slow
def test_200_sessions_10000_steps_no_errors_bounded_memory():
    sessions, threads, rounds = 200, 4, 50

    def drive(client: EnvClient, sids: list[str], errors: list) -> None:
        live = {sid: False for sid in sids}  # sid -> needs reset
        for r in range(rounds):
            ops = [
                {"op": "reset", "session_id": s, "seed": r}
                if done
                else {"op": "step", "session_id": s, "action": "inc" if r % 2 else "dec"}
                for s, done in live.items()
            ]
            for (sid, _), result in zip(list(live.items()), client.batch(ops)):
                if not result["ok"]:
                    errors.append(result)
                    continue
                out = result["result"]
                live[sid] = bool(out.get("terminated") or out.get("truncated"))

    with env_server(max_sessions=sessions) as (url, store):
        client = EnvClient(url)
        process = psutil.Process()

        def round_trip():
            created = client.batch([{"op": "create", "env_id": COUNTER}] * sessions)
            sids = [c["result"]["session_id"] for c in created]
            client.batch([{"op": "reset", "session_id": s, "seed": i} for i, s in enumerate(sids)])
            errors: list = []
            per = sessions // threads
            workers = [
                threading.Thread(target=drive, args=(client, sids[i * per : (i + 1) * per], errors))
                for i in range(threads)
            ]
            for w in workers:
                w.start()
            for w in workers:
                w.join()
            over = client.batch([{"op": "create", "env_id": COUNTER}])[0]
            assert over["ok"] is False and over["status"] == 429  # the session limit holds
            client.batch([{"op": "close", "session_id": s} for s in sids])
            return errors

        assert round_trip() == []
        gc.collect()
        rss_after_first = process.memory_info().rss
        assert round_trip() == []
        gc.collect()
        stats = store.stats()
        assert stats["open_sessions"] == 0 and stats["created"] == stats["closed"] == 2 * sessions
        # 2 x 200 sessions x 50 steps or resets; at least 10,000 of them steps
        assert stats["steps"] >= 2 * 10_000 * 0.9
        # a second, equal load must not grow the process by more than a little
        assert process.memory_info().rss - rss_after_first < 64 * 2**20
        client.close()


@pytest.mark.slow
def test_pool_spreads_episodes_over_two_servers():
    with env_server() as (url_a, store_a), env_server() as (url_b, store_b):
        with turngym.EnvPool(COUNTER, num_envs=4, backend="remote", servers=[url_a, url_b]) as pool:
            remote = pool.rollout(ExpertPolicy(), TRAIN, group_size=2, seed=10)
            assert store_a.stats()["open_sessions"] == 2 and store_b.stats()["open_sessions"] == 2
            random_remote = pool.rollout(RandomPolicy(seed=3), TRAIN[:4], group_size=2, seed=1)
        with turngym.EnvPool(COUNTER, num_envs=4, backend="thread") as pool:
            local = pool.rollout(ExpertPolicy(), TRAIN, group_size=2, seed=10)
        assert all(t.success and t.scorable for t in remote)
        # the random policy's draws depend on the order episodes ask (timing), so no step-by-step match
        assert len(random_remote) == 8 and all(t.scorable and t.length >= 1 for t in random_remote)
        for a, b in zip(remote, local):
            assert [s.action for s in a.steps] == [s.action for s in b.steps]
            assert [s.info for s in a.steps] == [s.info for s in b.steps]
            assert a.episode_return == b.episode_return
        assert store_a.stats()["steps"] > 0 and store_b.stats()["steps"] > 0
        assert store_a.stats()["open_sessions"] == store_b.stats()["open_sessions"] == 0  # closed with the pool


def test_pool_marks_episodes_unscorable_when_a_server_fails():
    with env_server() as (url, store):
        with turngym.EnvPool("turngym-tests/CrashyCounter-v0", num_envs=2, backend="remote", servers=[url]) as pool:
            trajs = pool.rollout(ExpertPolicy(), ["counter-0", "counter-6"], seed=0)
        by_task = {t.task_id: t for t in trajs}
        assert by_task["counter-0"].scorable is False  # target -3: the expert says `dec`, the env crashes
        assert "simulated env crash" in by_task["counter-0"].metadata["error"]
        assert by_task["counter-6"].scorable and by_task["counter-6"].success
    dead = f"http://127.0.0.1:{free_port()}"
    with turngym.EnvPool(COUNTER, num_envs=1, backend="remote", servers=[dead]) as pool:
        (traj,) = pool.rollout(ExpertPolicy(), ["counter-1"])
        assert traj.scorable is False and "unreachable" in traj.metadata["error"]
        with pytest.raises(RuntimeError, match="is `turngym serve-env` running there"):
            pool.rollout(ExpertPolicy(), ["counter-1", "counter-2", "counter-3"])
    with pytest.raises(ValueError, match="servers:"):
        turngym.EnvPool(COUNTER, backend="remote")


@pytest.mark.slow
def test_cli_serve_env_subprocess_with_token():
    with env_server_process("--env", COUNTER, "--token", "tok") as (url, _):
        env = RemoteEnv(url, COUNTER, token="tok")
        obs, info = env.reset(seed=1, options={"task_id": "counter-3"})
        assert info["task_id"] == "counter-3"
        env.close()
        client = EnvClient(url, token="tok")
        assert client.envs() == [COUNTER]
        with pytest.raises(ServerError) as e:
            client.create("turngym/Household-v0")
        assert e.value.status == 404 and "not served here" in e.value.message
        client.close()


@pytest.mark.slow
def test_cli_rejects_bad_limits_in_one_line():
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "turngym", "serve-env", "--max-sessions", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2
    assert out.stderr.strip() == "turngym serve-env: --max-sessions: must be >= 1, got 0"


@pytest.mark.parametrize("field", ["step_timeout_s", "idle_timeout_s", "max_snapshot_mb"])
@pytest.mark.parametrize("value", [0.0, -1.0, float("nan")])
def test_limits_refuse_non_positive_and_nan(field, value):
    """nan passed a `<= 0` check and then disabled the limit (every comparison with it is false)."""
    from turngym.integrations.env_server.sessions import ServerLimits

    with pytest.raises(ValueError, match=f"^{field}: must be > 0, got {value}$"):
        ServerLimits(**{field: value})


def wait_for(condition, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)
    return condition()


def test_client_mistakes_answer_4xx_naming_the_field():
    with env_server() as (url, _), httpx.Client(base_url=url) as http:
        sid = http.post("/sessions", json={"env_id": COUNTER}).json()["session_id"]
        bad_seed = http.post(f"/sessions/{sid}/reset", json={"seed": -1})
        assert bad_seed.status_code == 400 and bad_seed.json()["error"].startswith("seed:")
        house = http.post("/sessions", json={"env_id": "turngym/Household-v0"}).json()["session_id"]
        bogus = http.get(f"/sessions/{house}/task_ids", params={"split": "bogus"})
        assert bogus.status_code == 400 and bogus.json()["error"].startswith("split:")
        assert "valid_seen" in bogus.json()["error"]  # the allowed values
        # the same connection goes on serving (it was reset after the plain-text 500)
        assert http.get(f"/sessions/{house}/task_ids", params={"split": "train"}).status_code == 200
        results = http.post("/batch", json={"ops": [{"op": "reset", "session_id": sid, "seed": -5}]}).json()
        assert results["results"][0]["status"] == 400 and results["results"][0]["error"].startswith("seed:")
        # a step after the episode ended: 409 saying so, and the env is not stepped
        http.post(f"/sessions/{sid}/reset", json={"seed": 0, "options": {"task_id": "counter-3"}})
        assert http.post(f"/sessions/{sid}/step", json={"action": "submit"}).json()["terminated"] is True
        after = http.post(f"/sessions/{sid}/step", json={"action": "inc"})
        assert after.status_code == 409 and after.json()["error"].startswith("episode over: it ended at turn 1")
        env = RemoteEnv(url, COUNTER)
        env.reset(seed=0, options={"task_id": "counter-3"})
        env.step("submit")
        with pytest.raises(gymnasium.error.ResetNeeded, match="episode over"):
            env.step("inc")
        env.close()


def test_system_exit_in_an_env_ends_only_its_episode():
    with env_server() as (url, store):
        faulty, counter = RemoteEnv(url, FAULTY), RemoteEnv(url, COUNTER)
        faulty.reset(seed=0)
        counter.reset(seed=0)
        obs, reward, terminated, truncated, info = faulty.step("exit")  # sys.exit(3) inside the env
        assert truncated and info["scorable"] is False and "SystemExit" in obs
        assert httpx.get(f"{url}/health").json()["status"] == "ok"
        assert counter.step("inc")[4]["scorable"] is True  # the server and other sessions go on
        faulty.reset(seed=0)  # its env is rebuilt
        assert faulty.step("inc")[4]["scorable"] is True
        for env in (faulty, counter):
            env.close()


def test_an_env_that_exits_its_process_ends_only_its_episode():
    """os._exit(3) inside env code: no exception to catch, the env's process is simply gone."""
    with env_server() as (url, store):
        stuck, counter = RemoteEnv(url, STUCK_COUNTER), RemoteEnv(url, COUNTER)
        stuck.reset(seed=0)
        counter.reset(seed=0)
        counter.step("inc")
        obs, reward, terminated, truncated, info = stuck.step("exit3")
        assert truncated and info["scorable"] is False and "exited with code 3" in obs
        assert counter.step("inc")[4]["turn"] == 2  # the other episode goes on where it was
        health = client_health(url)
        assert health["status"] == "ok" and health["env_errors"] == 1 and health["env_processes"] == 1
        stuck.reset(seed=0)  # a fresh process behind the same session
        assert stuck.step("inc")[4]["scorable"] is True
        for env in (stuck, counter):
            env.close()


@pytest.mark.slow
def test_hangs_in_c_are_killed_and_cost_only_their_sessions():
    """Env calls blocked in C for good (os.read on a pipe nobody writes: no Python exception can
    reach it) and a pure-Python hang: each is killed at the step
    timeout, only its session ends (unscorable), another session goes on mid-episode, and
    /health counts the truth: nothing stuck, the timeouts, the live env processes."""
    with env_server(step_timeout_s=1.0) as (url, store):
        other = RemoteEnv(url, COUNTER)
        other.reset(seed=0)
        other.step("inc")
        for env_id, action in [(STUCK_COUNTER, "block"), (FAULTY, "hang"), (STUCK_COUNTER, "block")]:
            env = RemoteEnv(url, env_id)
            env.reset(seed=0)
            process = store.sessions[env.session_id].process.process
            started = time.monotonic()
            obs, reward, terminated, truncated, info = env.step(action)
            assert time.monotonic() - started < 5
            assert truncated and info["scorable"] is False and "step_timeout_s" in obs
            assert not process.is_alive()  # killed, not left blocked
            assert env.session_id is None  # the server closed that session
            env.close()
        assert other.step("inc")[4]["turn"] == 2
        health = httpx.get(f"{url}/health")
        assert health.status_code == 200, health.json()
        body = health.json()
        assert body["stuck_env_processes"] == 0 and body["timed_out"] == 3 and body["env_processes"] == 1
        assert body["running_env_calls"] == 0
        fresh = RemoteEnv(url, STUCK_COUNTER)  # new sessions of the env that hung are served at once
        fresh.reset(seed=0)
        assert fresh.step("inc")[4]["scorable"] is True
        for env in (fresh, other):
            env.close()
        assert store.stats()["env_processes"] == 0


def client_health(url: str) -> dict:
    return httpx.get(f"{url}/health").json()


def test_token_in_the_url_path_and_websockets_need_it_too():
    from fastapi.testclient import TestClient
    from starlette.websockets import WebSocketDisconnect

    from turngym.integrations.env_server.app import create_app
    from turngym.integrations.env_server.sessions import SessionStore

    with TestClient(create_app(SessionStore(), token="s3cret")) as client:
        assert client.post("/token/s3cret/sessions", json={"env_id": COUNTER}).status_code == 201
        assert client.post("/token/wrong/sessions", json={"env_id": COUNTER}).status_code == 401
        with pytest.raises(WebSocketDisconnect):
            with client.websocket_connect(f"/openenv/{COUNTER}/ws") as ws:
                ws.receive_json()
        with client.websocket_connect(f"/token/s3cret/openenv/{COUNTER}/ws") as ws:
            ws.send_json({"type": "reset", "data": {"seed": 0}})
            assert ws.receive_json()["type"] == "observation"


def test_serving_off_loopback_needs_a_token_or_an_explicit_flag(monkeypatch):
    import argparse

    from turngym.core.commands import CLIError
    from turngym.integrations.env_server import cli as env_server

    monkeypatch.delenv("TURNGYM_ENV_TOKEN", raising=False)
    parser = argparse.ArgumentParser()
    env_server.add_arguments(parser)
    with pytest.raises(
        CLIError,
        match=r"^--token: --host 0\.0\.0\.0 is reachable from other machines.*"
        r"--insecure-no-token",
    ):
        env_server.run(parser.parse_args(["--host", "0.0.0.0"]))
    assert env_server.is_loopback("127.0.0.1") and env_server.is_loopback("::1")
    assert env_server.is_loopback("localhost") and not env_server.is_loopback("10.0.0.5")


def test_remote_pool_refuses_env_side_policies_it_cannot_run():
    with env_server() as (url, _):
        with turngym.EnvPool(COUNTER, num_envs=1, backend="remote", servers=[url]) as pool:
            with pytest.raises(ValueError, match="policy: FaultPolicy acts inside the env"):
                pool.rollout(faulty_env.FaultPolicy(only=()), ["counter-1"])


class BlockOnTask:
    """Blocks the env in C on one task (``block``), submits at once on the others."""

    def __init__(self, task_id: str):
        self.task_id = task_id

    def act(self, conversations):
        return ["block" if c.info.get("task_id") == self.task_id else "submit" for c in conversations]


@pytest.mark.slow
def test_remote_pool_blames_the_op_that_hung_not_the_first_of_its_batch():
    """Two slots on one host, one batch: the op that hangs is the second. The pool's step
    timeout (2 s, shorter than the server's 60 s) travels with each op, so the server kills that
    op and fails it alone; the first episode, stepped in the same batch, scores."""
    with env_server() as (url, store):
        with turngym.EnvPool(STUCK_COUNTER, num_envs=2, num_workers=1, backend="remote", servers=[url]) as pool:
            started = time.monotonic()
            fine, hung = pool.rollout(BlockOnTask("counter-2"), ["counter-1", "counter-2"], step_timeout_s=2.0)
            assert time.monotonic() - started < 30
        assert fine.scorable and fine.length == 1 and fine.steps[-1].terminated
        assert not hung.scorable and hung.metadata["error"].startswith("step timed out: ")
        assert "step_timeout_s" in hung.metadata["error"] and store.stats()["timed_out"] == 1


class SetCounter(CounterEnv):
    """Counter whose step info carries a set, which json.dumps refuses and FastAPI's encoder takes."""

    def _step(self, action):
        obs, reward, terminated, truncated, info = super()._step(action)
        return obs, reward, terminated, truncated, {**info, "extra": {"seen": {"inc"}}}


turngym.register("turngym-tests/SetCounter-v0", SetCounter, max_episode_steps=20, family="tests")


def test_answers_that_json_cannot_write_take_fastapis_encoder():
    with env_server() as (url, _):
        client = EnvClient(url)
        sid = client.create("turngym-tests/SetCounter-v0")["session_id"]
        client.reset(sid, seed=0)
        assert client.step(sid, "inc")["info"]["extra"] == {"seen": ["inc"]}
        (op,) = client.batch([{"op": "step", "session_id": sid, "action": "inc"}])
        assert op["ok"] and op["result"]["info"]["extra"] == {"seen": ["inc"]}
        client.close()


def test_a_batch_of_steps_runs_them_at_once_and_each_answers_for_itself():
    """One /batch, one step per session (the remote pool's batch): two
    that hang past their timeout_s, one env that raises, one step after its episode ended, one
    session busy with another call, and two fine steps. Each gets its own answer; the hangs
    are killed together (one timeout, not two); the busy one waits for its lock."""
    with env_server(step_timeout_s=30) as (url, store):
        client = EnvClient(url)
        names = ["fine", "hang_a", "hang_b", "raises", "ended", "busy", "fine_2"]
        env_ids = {
            "hang_a": "turngym-tests/SleepyCounter-v0",
            "hang_b": "turngym-tests/SleepyCounter-v0",
            "raises": "turngym-tests/CrashyCounter-v0",
            "busy": "turngym-tests/SleepyCounter-v0",
        }
        sids = {n: client.create(env_ids.get(n, COUNTER))["session_id"] for n in names}
        for n in names:
            client.reset(sids[n], seed=0, options={"task_id": "counter-1"})
        client.step(sids["ended"], "submit")
        actions = {"hang_a": "sleep", "hang_b": "sleep", "raises": "dec", "ended": "inc"}
        napping = threading.Thread(target=client.step, args=(sids["busy"], "nap"))  # another call under way
        napping.start()
        assert wait_for(lambda: store.sessions[sids["busy"]].lock.locked())
        started = time.monotonic()
        results = client.batch(
            [
                {
                    "op": "step",
                    "session_id": sids[n],
                    "action": actions.get(n, "inc"),
                    **({"timeout_s": 1.0} if n.startswith("hang") else {}),
                }
                for n in names
            ]
        )
        took = time.monotonic() - started
        by_name = dict(zip(names, results))
        napping.join()
        for n in ("fine", "fine_2", "busy"):
            assert by_name[n]["ok"] and by_name[n]["result"]["info"]["turn"] == (2 if n == "busy" else 1), by_name[n]
        for n in ("hang_a", "hang_b"):
            assert by_name[n]["status"] == 504 and by_name[n]["scorable"] is False
        assert by_name["raises"]["status"] == 500 and "simulated env crash" in by_name["raises"]["error"]
        assert by_name["ended"]["status"] == 409 and "episode over" in by_name["ended"]["error"]
        assert took < 2.5, took  # the two 1 s timeouts ran side by side
        assert store.stats()["timed_out"] == 2
        assert client.step(sids["fine"], "inc")["info"]["turn"] == 2  # the sessions go on
        client.close()


def test_sessions_name_the_env_version_and_the_pool_warns_when_the_server_has_another(monkeypatch):
    from turngym.core.versions import env_hash
    from turngym.integrations import remote_pool

    with env_server() as (url, store):
        client = EnvClient(url)
        assert client.create(COUNTER)["env_hash"] == env_hash(COUNTER) != ""
        client.close()
        with turngym.EnvPool(COUNTER, num_envs=1, backend="remote", servers=[url]) as pool:
            trajs = pool.rollout(RandomPolicy(seed=0), TRAIN[:2], max_turns=3)
        assert {t.env_hash for t in trajs} == {env_hash(COUNTER)}
        monkeypatch.setattr(remote_pool, "env_hash", lambda *a, **k: "clientside00")
        with pytest.warns(UserWarning, match=f"env hash {env_hash(COUNTER)}, this process has env hash clientside00"):
            with turngym.EnvPool(COUNTER, num_envs=1, backend="remote", servers=[url]) as pool:
                pool.rollout(RandomPolicy(seed=0), TRAIN[:2], max_turns=3)


class SharedCounter(SleepyCounter):
    """SleepyCounter that declares it may share a process (serve-env's light mode)."""

    shares_process = True


turngym.register("turngym-tests/SharedCounter-v0", SharedCounter, max_episode_steps=20, family="tests")


def test_envs_that_declare_it_share_a_process_and_a_hang_costs_only_its_session():
    with env_server(step_timeout_s=2.0) as (url, store):
        envs = [RemoteEnv(url, "turngym-tests/SharedCounter-v0") for _ in range(3)]
        for env in envs:
            env.reset(seed=0)
        assert len(store.hosts.hosts) == 1 and len(store.hosts.hosts[0].keys) == 3  # one process, three sessions
        obs, reward, terminated, truncated, info = envs[0].step("sleep")
        assert truncated and info["scorable"] is False and "step_timeout_s" in obs
        assert [env.step("inc")[4]["turn"] for env in envs[1:]] == [1, 1]  # the others go on
        envs[0].reset(seed=0)  # a fresh session, in a new host (the old one has a hung thread)
        assert envs[0].step("inc")[4]["scorable"] is True and len(store.hosts.hosts) == 2
        for env in envs:
            env.close()
    with env_server(isolate_all=True) as (url, store):
        env = RemoteEnv(url, "turngym-tests/SharedCounter-v0")
        env.reset(seed=0)
        assert not store.hosts.hosts and store.sessions[env.session_id].process.process.is_alive()
        env.close()


def test_the_pure_python_families_run_in_light_mode_and_code_browser_and_games_do_not():
    from turngym.integrations.env_server.shared import declares_shared

    light = ["turngym/Household-v0", "turngym/Household-tools-v0", "turngym/Shop-100-v0", "turngym/Shop-HTML-v0"]
    isolated = ["turngym/ToolQA-v0", "turngym/CodeRepair-v0", "turngym/ShopPages-v0", "turngym/Auction-v0"]
    assert [declares_shared(e) for e in light + isolated] == [True] * len(light) + [False] * len(isolated)
    with env_server() as (url, store):
        envs = [RemoteEnv(url, env_id) for env_id in light[::2]]
        for env in envs:
            assert env.reset(seed=0)[1]["scorable"] is True
        assert len(store.hosts.hosts) == 1 and len(store.hosts.hosts[0].keys) == 2  # one process, both sessions
        for env in envs:
            env.close()


class Nap:
    def act(self, conversations):
        return ["nap"] * len(conversations)


@pytest.mark.slow
def test_remote_pool_over_three_servers_one_killed_ends_every_episode_once():
    """3 serve-env processes, one killed with SIGKILL mid-run: every episode comes back exactly
    once, finished (on a live server, or opened elsewhere after the kill) or unscorable (it was
    running on the dead one), and the rollout goes on."""
    import contextlib
    import signal

    tasks = [f"counter-{i}" for i in range(20)] * 2
    with contextlib.ExitStack() as stack:
        servers = [
            stack.enter_context(env_server_process("--import", "env_servers:register_stuck_counter")) for _ in range(3)
        ]
        with turngym.EnvPool(STUCK_COUNTER, num_envs=12, backend="remote", servers=[u for u, _ in servers]) as pool:
            threading.Timer(1.5, servers[1][1].send_signal, args=(signal.SIGKILL,)).start()
            trajs = pool.rollout(Nap(), tasks, max_turns=4)
    assert sorted(t.task_id for t in trajs) == sorted(tasks)  # each once: none lost, none twice
    lost = [t for t in trajs if not t.scorable]
    assert all("unreachable" in t.metadata["error"] for t in lost), [t.metadata for t in lost]
    assert len(lost) <= 4 and sum(t.scorable for t in trajs) >= len(tasks) - 4  # only those running there
