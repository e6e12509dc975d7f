"""Tool-call plumbing throughput: parse + validate (+ execute) a trivial tool, calls per second.

    taskset -c 0 env PYTHONPATH=. .venv/bin/python benchmarks/tool_calls.py [--seconds 2]

Measured side by side in one run:
  turngym        parse_tool_calls + Executor.prepare (compiled validator per tool), then run()
  naive baseline regex + json.loads + jsonschema.validate per call (compiles the schema each call),
                 the pattern common in RL rollout code; and the same with the validator compiled once
Also: the thread-pool path (per-call timeout), arun(), and tools mode vs text mode env steps.
The target is >= 20,000 parsed-and-validated calls/s on one core.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "support"))

from turngym.tools.executor import Executor  # noqa: E402
from turngym.tools.parsers import parse_tool_calls  # noqa: E402
from turngym.tools.schema import ToolSet, tool  # noqa: E402


@tool(timeout=None)
def add(a: int, b: int = 1) -> int:
    """Add two integers.

    Args:
        a: First.
        b: Second.
    """
    return a + b


@tool(timeout=5.0)
def add_with_timeout(a: int, b: int = 1) -> int:
    """Add two integers (run in the thread pool, with a timeout).

    Args:
        a: First.
        b: Second.
    """
    return a + b


TEXT = 'Let me add.\n<tool_call>{"name": "add", "arguments": {"a": 17, "b": 25}}</tool_call>'


def rate(fn, seconds: float) -> tuple[float, float]:
    """(calls per second, microseconds per call) of fn() over about ``seconds``."""
    n, batch, start = 0, 200, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(batch):
            fn()
        n += batch
    elapsed = time.perf_counter() - start
    return n / elapsed, elapsed / n * 1e6


def random_admissible(env_id: str):
    """One step of a random admissible action (the env resets when an episode ends)."""
    import numpy as np

    import turngym

    env = turngym.make(env_id)
    rng = np.random.default_rng(0)
    state = {"info": env.reset(seed=0)[1]}

    def step():
        actions = state["info"]["admissible_actions"] or ["look"]
        action = actions[int(rng.integers(len(actions)))].replace("<your query>", "red shirt")
        _, _, terminated, truncated, state["info"] = env.step(action)
        if terminated or truncated:
            state["info"] = env.reset()[1]

    return step


def per_call(measured: tuple[float, float], calls: int) -> tuple[float, float]:
    return measured[0] * calls, measured[1] / calls


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument(
        "--envs",
        default="turngym/Household-v0,turngym/Shop-v0",
        help="text envs to time in text mode and tools mode (skipped when not registered)",
    )
    args = ap.parse_args()
    ex = Executor(ToolSet([add, add_with_timeout]), timeout=None)

    def parse_validate():
        parsed = parse_tool_calls(TEXT)
        t, kwargs = ex.prepare(parsed.calls[0])
        assert t is not None

    def parse_validate_execute():
        [result] = ex.run(parse_tool_calls(TEXT))
        assert result.content == "42"

    pool_text = TEXT.replace('"add"', '"add_with_timeout"')

    def thread_pool_execute():
        [result] = ex.run(parse_tool_calls(pool_text))
        assert result.content == "42"

    async def many_async(n: int = 200):
        for _ in range(n):
            [result] = await ex.arun(parse_tool_calls(TEXT))
            assert result.content == "42"

    def async_execute():  # 200 calls in one event loop, counted as one "call" of 200
        asyncio.run(many_async())

    import jsonschema

    schema = add.parameters
    pattern = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)

    def naive():
        obj = json.loads(pattern.search(TEXT).group(1))
        jsonschema.validate(obj["arguments"], schema)
        assert add.fn(**obj["arguments"]) == 42

    compiled = jsonschema.Draft202012Validator(schema)

    def naive_compiled():
        obj = json.loads(pattern.search(TEXT).group(1))
        compiled.validate(obj["arguments"])
        assert add.fn(**obj["arguments"]) == 42

    rows = [
        ("turngym parse + validate", *rate(parse_validate, args.seconds)),
        ("turngym parse + validate + execute (inline)", *rate(parse_validate_execute, args.seconds)),
        ("naive regex + json.loads + jsonschema.validate + execute", *rate(naive, args.seconds)),
        ("same, validator compiled once", *rate(naive_compiled, args.seconds)),
        ("turngym execute with per-call timeout (thread pool)", *rate(thread_pool_execute, args.seconds)),
        ("turngym arun (inside one event loop)", *per_call(rate(async_execute, args.seconds / 2), 200)),
    ]

    import contract_env  # the tests' Counter env, in text and tools mode

    import turngym

    contract_env.register()
    for env_id, action in [
        ("turngym-tests/Counter-v0", "inc"),
        ("turngym-tests/Counter-tools-v0", '<tool_call>{"name": "inc", "arguments": {}}</tool_call>'),
    ]:
        env = turngym.make(env_id)
        env.reset(seed=0)

        def step(env=env, action=action):
            if env.step(action)[2]:
                env.reset()

        env.max_turns = 10**9
        rows.append((f"env.step {env_id}", *rate(step, args.seconds / 2)))
    for base_id in args.envs.split(","):
        if base_id not in {s.id for s in turngym.list_envs()}:
            print(f"({base_id} is not registered here: skipped)")
            continue
        from turngym.tools.registration import tools_id

        for env_id in (base_id, tools_id(base_id)):
            rows.append((f"random admissible steps {env_id}", *rate(random_admissible(env_id), args.seconds / 2)))
    width = max(len(r[0]) for r in rows)
    print(f"{'what':<{width}}  {'calls/s':>10}  {'us/call':>8}")
    for name, per_s, us in rows:
        print(f"{name:<{width}}  {per_s:>10,.0f}  {us:>8.1f}")
    print(f"parse+validate vs naive baseline: {rows[0][1] / rows[2][1]:.1f}x")
    print(json.dumps({r[0]: round(r[1]) for r in rows}))


if __name__ == "__main__":
    main()
