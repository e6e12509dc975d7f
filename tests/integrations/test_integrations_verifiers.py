"""verifiers 0.4 (the real package) running a turngym env end to end: its loader finds the taskset
and env, its chat harness plays the tiny model (served by `turngym serve-policy`) for several turns.

verifiers pins mcp==2.0 and openai<3, which the project's own venv does not take, so it lives in
.bench-venvs/verifiers (built here on first use, from PyPI)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

from env_servers import serve_app  # noqa: E402
from policy_models import cache_env, tiny  # noqa: E402
from sse_relay import create_relay  # noqa: E402

from turngym.core.servers import free_port, wait_healthy  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
VERIFIERS_REQUIREMENTS = [
    "verifiers==0.4.0",
    "uv",
    "gymnasium>=1.0",
    "pettingzoo>=1.24",
    "numpy>=1.26",
    "tqdm>=4.60",
    "pyyaml>=6",
    "rapidfuzz>=3",
    "jsonschema>=4",
]


def verifiers_python() -> Path:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from _refenv import reference_python
    finally:
        sys.path.pop(0)
    return reference_python("verifiers", VERIFIERS_REQUIREMENTS)


@pytest.mark.model
def test_verifiers_plays_a_turngym_env_with_a_real_model():
    python = verifiers_python()
    tiny()  # converts the tiny model into the test cache the server reads
    port = free_port()
    env = {**os.environ, **cache_env()}
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "turngym",
            "serve-policy",
            "--model",
            "tiny",
            "--port",
            str(port),
            "--max-tokens",
            "24",
            "--log-level",
            "warning",
        ],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_healthy(f"http://127.0.0.1:{port}", timeout=300, proc=server)
        with serve_app(create_relay(f"http://127.0.0.1:{port}")) as relay:
            run_env = {**os.environ, "PYTHONPATH": str(ROOT)}
            out = subprocess.run(
                [
                    str(python),
                    str(ROOT / "tests" / "support" / "verifiers_episode.py"),
                    f"{relay}/v1",
                    "turngym/Household-v0",
                    "3",
                ],
                capture_output=True,
                text=True,
                timeout=600,
                env=run_env,
                cwd=ROOT,
            )
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["env_class"] == "TurngymEnv" and len(result["tasks"]) == 2
    assert "You are in the middle of a room" in result["prompt"]  # the env's first observation
    assert "household" in result["system_prompt"].lower() or result["system_prompt"]
    assert result["ok"] is True, result["errors"]
    assert result["info"]["turngym_turns"] == 3  # three model replies, each one env step
    assert result["rewards"] == {"turngym_return": 0.0}
    assert "You are in the middle of a room" in result["trace"]  # the first observation reached the model


@pytest.mark.slow
def test_docs_verifiers_snippet_runs(tmp_path):
    import re

    doc = (ROOT / "docs" / "integrations.md").read_text()
    (code,) = [s for s in re.findall(r"```python\n(.*?)```", doc, re.S) if "verifiers.v1" in s]
    script = tmp_path / "snippet.py"
    script.write_text(code)
    out = subprocess.run(
        [str(verifiers_python()), str(script)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["TurngymEnv", "10"]
