"""serve-env and serve-policy against web pages, careless flags and clients that send too much, too
deep or too slowly (issue 62): each answer is one 4xx/503 line naming what is wrong, never a 500
or a dropped connection; tokens never reach a log; kill -9 of the server leaves no process."""

from __future__ import annotations

import signal
import socket
import threading
import time

import httpx
import psutil
import pytest
from env_servers import STUCK_COUNTER, env_server, env_server_process, register_stuck_counter
from fastapi.testclient import TestClient

from turngym.core.servers import free_port
from turngym.integrations.env_client import EnvClient, RemoteEnv
from turngym.integrations.env_server.app import create_app
from turngym.integrations.env_server.sessions import SessionStore

COUNTER = "turngym-tests/Counter-v0"
register_stuck_counter()


def local_client(**app_args) -> TestClient:
    return TestClient(create_app(SessionStore(), **app_args), base_url="http://127.0.0.1:8100")


def test_loopback_server_without_token_refuses_other_hosts_and_origins():
    from starlette.testclient import WebSocketDenialResponse
    from starlette.websockets import WebSocketDisconnect

    with local_client() as client:
        assert client.post("/sessions", json={"env_id": COUNTER}).status_code == 201
        mine = client.get("/envs", headers={"Origin": "http://localhost:3000"})
        assert mine.status_code == 200  # a page served from this machine is this machine
        rebound = client.get("/envs", headers={"Host": "evil.example:8100"})
        assert rebound.status_code == 403 and rebound.json()["error"].startswith("host: 'evil.example:8100'")
        page = client.post("/sessions", json={"env_id": COUNTER}, headers={"Origin": "http://evil.example"})
        assert page.status_code == 403 and page.json()["error"].startswith("origin:")
        with pytest.raises((WebSocketDenialResponse, WebSocketDisconnect)):
            with client.websocket_connect(
                f"ws://127.0.0.1:8100/openenv/{COUNTER}/ws", headers={"Origin": "http://evil.example"}
            ) as ws:
                ws.send_json({"type": "reset", "data": {"seed": 0}})
                ws.receive_json()
        # a cross-site "simple request" (text/plain, no preflight) cannot reset an OpenEnv env
        plain = client.post(f"/openenv/{COUNTER}/reset", content=b'{"seed": 0}', headers={"Content-Type": "text/plain"})
        assert plain.status_code == 415 and plain.json()["error"].startswith("content-type:")
    with TestClient(create_app(SessionStore(), token="tok"), base_url="http://evil.example") as client:
        # with a token the token decides (a server off loopback is reached by other names)
        assert client.get("/envs", headers={"Authorization": "Bearer tok"}).status_code == 200


def test_fields_are_checked_before_any_env_sees_them():
    with local_client() as client:
        for bad in ("x", 2.5, -3, True):
            made = client.post("/sessions", json={"env_id": COUNTER, "env_kwargs": {"max_turns": bad}})
            assert made.status_code == 400 and made.json()["error"].startswith("env_kwargs.max_turns:"), made.json()
        sid = client.post("/sessions", json={"env_id": COUNTER}).json()["session_id"]
        for options, field in [
            ({"max_turns": "x"}, "options.max_turns:"),
            ({"max_turns": -3}, "options.max_turns:"),
            ({"task": "counter-1"}, "options.task:"),
            ({"task_id": 7}, "options.task_id:"),
        ]:
            reset = client.post(f"/sessions/{sid}/reset", json={"options": options})
            assert reset.status_code == 400 and reset.json()["error"].startswith(field), reset.json()
        seed = client.post(f"/sessions/{sid}/reset", json={"seed": True})
        assert seed.status_code == 400 and seed.json()["error"].startswith("seed:")
        huge = client.post("/sessions", json={"env_id": "x" * 2**20})
        assert huge.status_code == 400 and huge.json()["error"].startswith("env_id:") and len(huge.text) < 500
        garbage = client.post("/sessions", content=b"{not json", headers={"Content-Type": "application/json"})
        assert garbage.status_code == 400 and garbage.json()["error"].startswith("body: not JSON")
        ok = client.post(f"/sessions/{sid}/reset", json={"seed": 0, "options": {"max_turns": 3}})
        assert ok.status_code == 200 and client.post(f"/sessions/{sid}/step", json={"action": "inc"}).status_code == 200


def test_too_many_too_big_too_deep_answer_one_4xx_line():
    from turngym.core import http_guard

    with local_client() as client:
        sid = client.post("/sessions", json={"env_id": COUNTER}).json()["session_id"]
        many = client.post("/batch", json={"ops": [{"op": "describe", "session_id": sid}] * 5000})
        assert many.status_code == 400 and many.json()["error"].startswith("ops:")
        big = client.post(
            "/batch",
            content=b" " * (http_guard.MAX_BODY_BYTES + 1),
            headers={"Content-Type": "application/json"},
        )
        assert big.status_code == 413 and big.json()["error"].startswith("body:")
        deep_task = {"task": {}}
        inner = deep_task["task"]
        for _ in range(900):
            inner["x"] = {}
            inner = inner["x"]
        deep = client.post(f"/sessions/{sid}/reset", json={"options": deep_task})
        assert deep.status_code == 400 and deep.json()["error"].startswith("options: nested deeper")
        abyss = b'{"seed": 0, "options": {"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}}"
        for url in (f"/sessions/{sid}/reset", f"/openenv/{COUNTER}/reset"):
            answer = client.post(url, content=abyss, headers={"Content-Type": "application/json"})
            assert answer.status_code == 400 and answer.json()["error"].startswith("body:"), (
                url,
                answer.text[:200],
            )
        with client.websocket_connect(f"ws://127.0.0.1:8100/openenv/{COUNTER}/ws") as ws:
            ws.send_text('{"type": "reset", "data": ' + "[" * 100_000 + "]" * 100_000 + "}")
            reply = ws.receive_json()
            assert reply["type"] == "error" and reply["data"]["message"].startswith("message: JSON nested")
            ws.send_json({"type": "reset", "data": {"task": "counter-1"}})
            assert ws.receive_json()["data"]["message"].startswith("options.task:")
            ws.send_json({"type": "reset", "data": {"seed": 0}})  # the socket goes on
            assert ws.receive_json()["type"] == "observation"
        assert client.get("/health").json()["env_errors"] == 0  # none of it counted as an env crash


def test_wrong_websocket_token_is_refused_with_a_reason():
    from starlette.testclient import WebSocketDenialResponse

    with TestClient(create_app(SessionStore(), token="s3cret"), base_url="http://127.0.0.1") as client:
        with pytest.raises(WebSocketDenialResponse) as refused:
            with client.websocket_connect(f"ws://127.0.0.1/token/wrong/openenv/{COUNTER}/ws"):
                pass
        assert refused.value.status_code == 401 and refused.value.json()["error"].startswith("authorization:")


@pytest.mark.slow
def test_token_stays_out_of_the_access_log_and_the_docs_load_with_one(tmp_path):
    token = "t0ken-that-must-not-be-logged"
    log = tmp_path / "server.log"
    with env_server_process("--token", token, "--log-level", "info", log=log) as (url, _):
        assert httpx.get(f"{url}/token/{token}/envs").status_code == 200
        assert httpx.get(f"{url}/token/wrong-{token}/envs").status_code == 401
        remote = RemoteEnv(f"{url}/token/{token}", COUNTER)
        remote.reset(seed=0)
        remote.close()
        docs = httpx.get(f"{url}/docs")
        assert docs.status_code == 200 and "/openapi.json" in docs.text
        assert httpx.get(f"{url}/openapi.json").json()["paths"]["/sessions"]
    text = log.read_text()
    assert "GET /envs" in text and token not in text, text  # the wrong token contains it too


def slow_server():
    """serve-env's app under uvicorn with serve-env's own protocol (header timeout), 1 s limits."""
    import uvicorn

    from turngym.core.http_guard import header_timeout_protocol

    app = create_app(SessionStore())
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", http=header_timeout_protocol())
    )
    threading.Thread(target=server.run, daemon=True).start()
    return server, port


def _answer(sock: socket.socket) -> bytes:
    sock.settimeout(15)
    data = b""
    while True:
        chunk = sock.recv(4096)
        if not chunk:
            return data
        data += chunk


def test_slow_clients_are_answered_408_and_closed(monkeypatch):
    from turngym.core import http_guard

    monkeypatch.setattr(http_guard, "HEADER_TIMEOUT_S", 1.0)
    monkeypatch.setattr(http_guard, "BODY_TIMEOUT_S", 1.0)
    server, port = slow_server()
    try:
        deadline = time.monotonic() + 30
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.05)
        with socket.create_connection(("127.0.0.1", port)) as headers_only:
            headers_only.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # never finished
            assert _answer(headers_only).startswith(b"HTTP/1.1 408")
        with socket.create_connection(("127.0.0.1", port)) as slow_body:
            slow_body.sendall(
                b"POST /sessions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b'Content-Length: 100\r\n\r\n{"env_id"'
            )
            answer = _answer(slow_body)
            assert answer.startswith(b"HTTP/1.1 408") and b"body: not received" in answer
        assert httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200  # the server goes on
    finally:
        server.should_exit = True


@pytest.mark.slow
def test_hung_env_calls_never_delay_another_session():
    """40 steps hang (each killed at the 20 s step timeout); a step on another session answers
    while every one of them is still hanging (with a pool of 32 threads it waited its turn)."""
    with env_server(step_timeout_s=20.0) as (url, store):
        client = EnvClient(url)
        hung = [client.create(STUCK_COUNTER)["session_id"] for _ in range(40)]
        other = client.create(COUNTER)["session_id"]
        for sid in [*hung, other]:
            client.reset(sid, seed=0)
        answered: list = []
        threads = [threading.Thread(target=lambda s=sid: answered.append(_step(url, s, "block"))) for sid in hung]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 15
        while store.running < 40 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert store.running == 40
        assert client.step(other, "inc")["info"]["turn"] == 1
        assert answered == [] and store.running == 40  # every hang still hanging
        for t in threads:
            t.join()
        assert sorted(set(answered)) == [504]
        client.close()


def _step(url: str, sid: str, action: str) -> int:
    try:
        return httpx.post(f"{url}/sessions/{sid}/step", json={"action": action}, timeout=60).status_code
    except httpx.TransportError:  # the server was killed under it
        return 0


@pytest.mark.slow
def test_kill_9_of_the_server_leaves_no_process():
    """An env hung in C, the forkserver, the resource tracker, a shared host: all gone within a
    few seconds of SIGKILL to serve-env."""
    with env_server_process("--import", "env_servers:register_stuck_counter") as (url, proc):
        client = EnvClient(url)
        sid = client.create(STUCK_COUNTER)["session_id"]
        client.reset(sid, seed=0)
        threading.Thread(target=_step, args=(url, sid, "block"), daemon=True).start()
        children = psutil.Process(proc.pid).children(recursive=True)
        time.sleep(0.5)
        assert len(children) >= 2  # the forkserver and the hung env, at least
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        deadline = time.monotonic() + 10
        while any(_alive(c) for c in children) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [c for c in children if _alive(c)]


def _alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_serve_policy_refuses_an_open_host_without_a_key(monkeypatch, capsys):
    from turngym.cli import main

    monkeypatch.delenv("TURNGYM_API_KEY", raising=False)
    code = main(["serve-policy", "--model", "no-such-model", "--host", "0.0.0.0"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.count("\n") == 0 and "--api-key: --host 0.0.0.0 is reachable" in err


def test_serve_policy_checks_host_origin_and_compares_its_key_in_constant_time(monkeypatch):
    import hmac

    from turngym.agents import serve

    with TestClient(serve.create_app(object(), "m", generator_thread=False), base_url="http://localhost") as client:
        assert client.get("/health").status_code == 200
        assert client.get("/health", headers={"Origin": "http://evil.example"}).status_code == 403
        assert client.get("/v1/models", headers={"Host": "evil.example"}).status_code == 403
    compared = []
    real = hmac.compare_digest
    monkeypatch.setattr(hmac, "compare_digest", lambda a, b: compared.append(1) or real(a, b))
    with TestClient(
        serve.create_app(object(), "m", api_key="k3y", generator_thread=False), base_url="http://evil.example"
    ) as client:
        assert client.get("/v1/models", headers={"Authorization": "Bearer nope"}).status_code == 401
        assert client.get("/v1/models", headers={"Authorization": "Bearer k3y"}).status_code == 200
    assert len(compared) == 2
