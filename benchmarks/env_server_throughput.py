"""What the env server costs: steps/s in process vs over HTTP (`turngym serve-env` on this machine).

    python benchmarks/env_server_throughput.py [--episodes 64] [--env turngym/Household-v0]

1. One env, one client: `env.step` in process vs `RemoteEnv.step` (one HTTP request per step).
2. EnvPool with 16 envs and a policy that always says "look" (40 steps an episode):
   the thread backend (in process) vs backend="remote" on 1 and on 2 local servers (one
   `POST /batch` per worker per round).
Servers run as subprocesses bound to 127.0.0.1; every figure shares the machine's cores with
them, so on a 2-core machine this measures overhead, not scale-out.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import httpx

import turngym
from turngym.core.servers import start_server, stop_server
from turngym.integrations.env_client import RemoteEnv

ROOT = Path(__file__).resolve().parents[1]


class Look:
    def act(self, conversations):
        return ["look"] * len(conversations)


def single_env(env, steps: int) -> float:
    env.reset(seed=0)
    start = time.perf_counter()
    for i in range(steps):
        _, _, terminated, truncated, _ = env.step("look")
        if terminated or truncated:
            env.reset(seed=i)
    return steps / (time.perf_counter() - start)


def pool_rate(env_id: str, tasks: list[str], **pool_args) -> float:
    with turngym.EnvPool(env_id, num_envs=16, **pool_args) as pool:
        start = time.perf_counter()
        trajs = pool.rollout(Look(), tasks, max_turns=40)
        seconds = time.perf_counter() - start
    assert all(t.scorable for t in trajs)
    return sum(t.length for t in trajs) / seconds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--env", default="turngym/Household-v0")
    parser.add_argument("--episodes", type=int, default=64)
    parser.add_argument("--single-steps", type=int, default=2000)
    args = parser.parse_args()
    tasks = turngym.make(args.env).task_ids()[: args.episodes]
    servers = [start_server("serve-env", pythonpath=[ROOT], cwd=ROOT, timeout=60) for _ in range(2)]
    try:
        urls = [url for _, url in servers]
        rows = {"env": args.env}
        rows["single_local_steps_s"] = single_env(turngym.make(args.env), args.single_steps)
        remote = RemoteEnv(urls[0], args.env)
        rows["single_http_steps_s"] = single_env(remote, args.single_steps)
        remote.close()
        rows["pool_thread_steps_s"] = pool_rate(args.env, tasks, backend="thread")
        rows["pool_remote_1_server_steps_s"] = pool_rate(
            args.env, tasks, backend="remote", servers=urls[:1], num_workers=2
        )
        rows["pool_remote_2_servers_steps_s"] = pool_rate(args.env, tasks, backend="remote", servers=urls)
        for name, (_, url) in zip(("server_a", "server_b"), servers):
            rows[f"{name}_open_sessions_after"] = httpx.get(f"{url}/stats").json()["open_sessions"]
    finally:
        for proc, _ in servers:
            stop_server(proc)
    for key, value in rows.items():
        print(f"{key:34} {value:,.0f}" if isinstance(value, float) else f"{key:34} {value}")
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
