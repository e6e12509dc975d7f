"""MCP over streamable HTTP: one server, many MCP sessions, one env and episode each (real MCP client)."""

from __future__ import annotations

import time

import httpx
import pytest
from env_servers import serve_app

from turngym.tools.mcp_server import TOOL_STATUS, SessionTable, http_app

pytest.importorskip("mcp")
TASK = "toolqa-arithmetic-0000"


def _play(url: str, sessions: int, headers: dict | None = None):
    """Session i makes i % 6 + 1 calculator calls (episodes last 8), then reads its status; all at once."""
    import anyio
    from mcp import Client

    results: dict[int, tuple] = {}

    async def one(i: int) -> None:
        target = f"{url}/mcp"
        if headers:  # a transport over an HTTP client that sends the token
            import httpx2
            from mcp.client.streamable_http import streamable_http_client

            target = streamable_http_client(target, http_client=httpx2.AsyncClient(headers=headers))
        async with Client(target, mode="legacy", read_timeout_seconds=60) as client:
            texts = [
                (await client.call_tool("calculator", {"expression": f"{i} * {k}"})).content[0].text
                for k in range(i % 6 + 1)
            ]
            status = await client.call_tool(TOOL_STATUS, {})
            results[i] = (texts, status.structured_content)

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            for i in range(sessions):
                tg.start_soon(one, i)

    anyio.run(main)
    return results


@pytest.mark.slow
def test_many_sessions_each_get_their_own_episode():
    table = SessionTable("turngym/ToolQA-v0", task_id=TASK, max_sessions=64)
    with serve_app(http_app(table)) as url:
        results = _play(url, sessions=24)
        assert len(results) == 24
        for i, (texts, status) in results.items():
            assert texts == [str(i * k) for k in range(i % 6 + 1)]
            assert status["turn"] == i % 6 + 1 and status["task_id"] == TASK and not status["done"]
        assert len(table.sessions) == 0 and table.closed == 24  # each client's DELETE freed its env
        assert httpx.get(f"{url}/health").json()["sessions"] == 0


def test_session_limit_and_idle_expiry():
    table = SessionTable("turngym/ToolQA-v0", task_id=TASK, max_sessions=2, idle_timeout_s=0.3)
    first, lock = table.get("a")
    table.get("b")
    with pytest.raises(ValueError, match="max_sessions: 2"):
        table.get("c")
    deadline = time.monotonic() + 5
    while table.sessions and time.monotonic() < deadline:
        table.expire_idle()
        time.sleep(0.1)
    assert not table.sessions and first.env.unwrapped.task is None  # closed
    table.close_all()


@pytest.mark.slow
def test_token_is_required_when_set():
    table = SessionTable("turngym/ToolQA-v0", task_id=TASK)
    with serve_app(http_app(table, token="tok")) as url:
        denied = httpx.post(f"{url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert denied.status_code == 401
        pytest.importorskip("httpx2")
        results = _play(url, sessions=2, headers={"Authorization": "Bearer tok"})
        assert results[1][1]["turn"] == 2


@pytest.mark.slow
def test_cli_serve_tools_http():
    import os
    import subprocess
    import sys

    from turngym.core.servers import free_port, wait_healthy

    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "turngym",
            "serve-tools",
            "turngym/ToolQA-v0",
            "--http",
            "--max-sessions",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2
    assert bad.stderr.strip() == "turngym serve-tools: --max-sessions: must be >= 1, got 0"
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "turngym",
            "serve-tools",
            "turngym/ToolQA-v0",
            "--http",
            "--port",
            str(port),
            "--task-id",
            TASK,
        ],
        env=dict(os.environ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_healthy(url, proc=proc)
        results = _play(url, sessions=3)
        assert [results[i][1]["turn"] for i in range(3)] == [1, 2, 3]
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_stateless_protocol_calls_are_told_to_open_a_session():
    import anyio
    from mcp import Client

    table = SessionTable("turngym/ToolQA-v0", task_id=TASK)

    async def call(url):
        async with Client(f"{url}/mcp", read_timeout_seconds=60) as client:  # negotiates 2026-07-28: no sessions
            return await client.call_tool("calculator", {"expression": "1 + 1"})

    with serve_app(http_app(table)) as url:
        result = anyio.run(call, url)
    assert result.is_error and "mode='legacy'" in result.content[0].text
    assert not table.sessions
