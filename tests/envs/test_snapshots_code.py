"""Snapshots of the code envs: the random-walk property test (tests/support/snapshot_walks.py) on
CodeHumanEval and CodeRepair, whose steps may run the sandbox.

A sandbox run costs 0.1-1 s, so the fast subset walks 8 times per env and the ``slow`` marker
the rest of 1,000 walks over the family (500 an env). The walks mostly send commands that stay in
memory (reading, writing and patching a repair task's files, junk); some run the sandbox (tests,
shell commands that change files, runs, submissions).
"""

from __future__ import annotations

import pytest
from snapshot_walks import check_walk

import turngym
from turngym import sandbox

pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.skipif(not sandbox.available_backends(), reason="no sandbox backend"),
]

HUMANEVAL_OWN = [
    "run",
    "submit",
    "run\nno code block",
    "hello",
    "list_files",
    "help",
    "run\n```python\nreturn 1\n```",
    "run\n```python\n    return None\n```",
    "submit\n```python\n    return []\n```",
]
REPAIR_OWN = [
    "list_files",
    "list_files",
    "read_file README.md",
    "read_file tests/nope.py",
    "read_file ../etc/passwd",
    "write_file NOTES.md\n```\nnotes\n```",
    "write_file README.md\n```\nrewritten\n```",
    "write_file\n```\nno path\n```",
    "apply_patch\n```diff\n--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-x\n+y\n```",
    "apply_patch\nnot a diff",
    "run_tests",
    "shell ls",
    "shell echo more >> README.md",
    "submit",
    "frobnicate",
]
ENVS = [("turngym/CodeHumanEval-v0", HUMANEVAL_OWN), ("turngym/CodeRepair-v0", REPAIR_OWN)]


def _run(env_id: str, own: list[str], walks: range) -> list[dict]:
    env = turngym.make(env_id)
    try:
        sizes = [
            check_walk(lambda: turngym.make(env_id), env, w, own, max_prefix=6, max_continuation=4, expert_share=0.1)
            for w in walks
        ]
    finally:
        env.close()
    assert sum(s["steps"] > 0 for s in sizes) >= len(sizes) / 3, sizes  # most go on past the snapshot
    return sizes


@pytest.mark.parametrize("env_id,own", ENVS, ids=["humaneval", "repair"])
def test_code_walks(env_id, own):
    sizes = _run(env_id, own, range(0, 8))
    assert any(s["turn"] > 2 for s in sizes)


@pytest.mark.slow
@pytest.mark.parametrize("first", range(8, 500, 82))  # six parts: each well inside the 600 s timeout
@pytest.mark.parametrize("env_id,own", ENVS, ids=["humaneval", "repair"])
def test_code_walks_rest(env_id, own, first):
    _run(env_id, own, range(first, min(first + 82, 500)))


def test_a_repair_snapshot_holds_the_files():
    env = turngym.make("turngym/CodeRepair-v0")
    env.reset(seed=0)
    env.step("write_file NOTES.md\n```\nfirst\n```")
    snap = env.snapshot()
    env.step("write_file NOTES.md\n```\nsecond\n```")
    env.step("shell echo third >> NOTES.md")  # a change made in the sandbox, copied back
    assert "second\nthird" in env.step("read_file NOTES.md")[0]
    env.restore(snap)
    assert env.step("read_file NOTES.md")[0].strip().endswith("first")
    other = turngym.make("turngym/CodeRepair-v0")
    other.restore(snap)
    assert "NOTES.md" in other.step("list_files")[0]
