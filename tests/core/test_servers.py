"""turngym.core.servers: a server command that cannot start says why, quoting its own output."""

from __future__ import annotations

import pytest

from turngym.core.servers import serving, start_server


@pytest.mark.slow
def test_a_server_that_exits_at_start_raises_with_its_output():
    with pytest.raises(RuntimeError) as failed:
        start_server("serve-env", "--max-sessions", "0", timeout=60)
    assert "exited with 2" in str(failed.value)
    assert "--max-sessions: must be >= 1, got 0" in str(failed.value)


@pytest.mark.slow
def test_serving_writes_the_log_and_stops_the_server(tmp_path):
    import httpx

    log = tmp_path / "serve.log"
    with serving("serve-env", "--log-level", "info", log=log) as (url, proc):
        assert httpx.get(f"{url}/health").status_code == 200
    assert proc.returncode is not None  # stopped at exit
    assert "GET /health" in log.read_text()
