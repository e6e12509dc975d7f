"""serve-env against openenv-core's own server at the concurrency users train at, side by side.

    PYTHONPATH=. .venv/bin/python benchmarks/env_server_scaling.py [--sizes 16,32,...,1024] [--pool]

Both servers are started here, on 127.0.0.1: `turngym serve-env` with its default flags, and
openenv-core 0.3.0's ``create_app`` under uvicorn in its own venv (.bench-venvs/openenv, made as
tests/integrations/test_openenv.py says). N concurrent WebSocket sessions each connect, reset, and take 5 steps of an env whose
step sleeps 1 s. Per N and server: success (every reply an observation, scorable), per-step
overhead (round trip minus the 1 s sleep) p50/p99, open latency (connect to the reset's answer)
p50/p99 and opens per second, and PSS per session (the server and every process under it, with
all N sessions open, minus before, over N).

``--pool``: 3 serve-env processes behind EnvPool's remote backend, one killed with SIGKILL
mid-run: every episode must come back exactly once, finished or marked unscorable.
Results go to benchmarks/results/env_server_scaling/.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import psutil

from turngym.core.servers import free_port, start_server, wait_healthy

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"
OUT = BENCH / "results" / "env_server_scaling"
STEPS, SLEEP_S = 5, 1.0


def start_serve_env(extra_env: dict | None = None, *flags: str) -> tuple[subprocess.Popen, int]:
    """`turngym serve-env` serving the sleeping env; its output is dropped (as OpenEnv's)."""
    proc, url = start_server(
        "serve-env",
        "--import",
        "_sleep_env:register",
        *flags,
        env=extra_env,
        pythonpath=[BENCH, ROOT],
        cwd=ROOT,
        log=os.devnull,
        timeout=120,
    )
    return proc, int(url.rsplit(":", 1)[1])


def openenv_python() -> Path:
    """openenv-core's venv, as the OpenEnv tests use it (made by hand: its pins are not ours)."""
    python = ROOT / ".bench-venvs" / "openenv" / "bin" / "python"
    if not python.exists():
        sys.exit(
            "openenv-core is not installed: python3 -m venv .bench-venvs/openenv && "
            ".bench-venvs/openenv/bin/pip install openenv-core==0.3.0"
        )
    return python


def start_openenv(max_sessions: int) -> tuple[subprocess.Popen, int]:
    port = free_port()
    proc = subprocess.Popen(
        [str(openenv_python()), str(BENCH / "_openenv_sleep_server.py"), str(port), str(max_sessions)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_healthy(f"http://127.0.0.1:{port}", proc, timeout=120)
    return proc, port


def pss_mb(pid: int) -> float:
    """PSS of a process and everything under it, in MB."""
    total = 0
    try:
        root = psutil.Process(pid)
        for p in [root, *root.children(recursive=True)]:
            try:
                total += p.memory_full_info().pss
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                pass
    except psutil.NoSuchProcess:
        pass
    return total / 2**20


async def one_session(url: str, opened: list, overheads: list, failures: list, all_open: asyncio.Event, n: int) -> None:
    import websockets

    started = time.perf_counter()
    try:
        async with websockets.connect(url, max_size=None, open_timeout=120, ping_interval=None, close_timeout=5) as ws:
            await ws.send(json.dumps({"type": "reset", "data": {"seed": 0}}))
            check(json.loads(await asyncio.wait_for(ws.recv(), 120)))
            opened.append(time.perf_counter() - started)
            if len(opened) == n:
                all_open.set()
            for _ in range(STEPS):
                sent = time.perf_counter()
                await ws.send(json.dumps({"type": "step", "data": {"action": "go"}}))
                check(json.loads(await asyncio.wait_for(ws.recv(), 120)))
                overheads.append(time.perf_counter() - sent - SLEEP_S)
            await ws.send(json.dumps({"type": "close"}))
    except Exception as e:  # noqa: BLE001 - a failed session is counted, with why
        failures.append(f"{type(e).__name__}: {e}"[:200])


def check(reply: dict) -> None:
    if reply.get("type") != "observation":
        raise RuntimeError(f"reply: {str(reply)[:150]}")
    observation = reply["data"].get("observation")
    if isinstance(observation, dict) and observation.get("scorable") is False:
        raise RuntimeError(f"unscorable: {observation.get('error')}")


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


async def run_n(url: str, n: int, pid: int) -> dict:
    opened, overheads, failures = [], [], []
    all_open = asyncio.Event()
    before = await asyncio.to_thread(pss_mb, pid)
    peak = [None]

    async def sample():
        await all_open.wait()
        peak[0] = await asyncio.to_thread(pss_mb, pid)

    sampler = asyncio.create_task(sample())
    started = time.perf_counter()
    await asyncio.gather(*(one_session(url, opened, overheads, failures, all_open, n) for _ in range(n)))
    wall = time.perf_counter() - started
    sampler.cancel()
    ms = 1000
    return {
        "n": n,
        "success_pct": round(100 * (n - len(failures)) / n, 1),
        "wall_s": round(wall, 1),
        "overhead_p50_ms": round(pct(overheads, 0.5) * ms, 1) if overheads else None,
        "overhead_p99_ms": round(pct(overheads, 0.99) * ms, 1) if overheads else None,
        "open_p50_ms": round(pct(opened, 0.5) * ms, 1) if opened else None,
        "open_p99_ms": round(pct(opened, 0.99) * ms, 1) if opened else None,
        "opens_per_s": round(len(opened) / max(opened), 1) if opened else None,
        "pss_per_session_mb": round((peak[0] - before) / n, 2) if peak[0] is not None else None,
        "failures": sorted(set(failures))[:5],
        "failed": len(failures),
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],  # the machine is shared: say how loaded
    }


def settle(port: int, timeout: float = 60.0) -> None:
    """Wait until the turngym server has closed every session of the last run."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).json()["open_sessions"] == 0:
                return
        except (httpx.TransportError, ValueError):
            pass
        time.sleep(0.2)


def scaling(sizes: list[int]) -> list[dict]:
    from _sleep_env import SLEEP_ENV

    started: list[subprocess.Popen] = []  # all stopped at the end, also when a later one fails to start
    try:
        light, light_port = start_serve_env()
        started.append(light)
        isolated, isolated_port = start_serve_env(None, "--isolate-all")
        started.append(isolated)
        openenv_proc, openenv_port = start_openenv(max(sizes))
        started.append(openenv_proc)
        servers = [
            ("turngym (default: light)", light, f"ws://127.0.0.1:{light_port}/openenv/{SLEEP_ENV}/ws"),
            ("turngym --isolate-all", isolated, f"ws://127.0.0.1:{isolated_port}/openenv/{SLEEP_ENV}/ws"),
            ("openenv-core 0.3.0", openenv_proc, f"ws://127.0.0.1:{openenv_port}/ws"),
        ]
        return measure(sizes, servers, (light_port, isolated_port))
    finally:
        for proc in started:
            proc.terminate()
            proc.wait(30)


def measure(sizes: list[int], servers: list[tuple], settle_ports: tuple[int, ...]) -> list[dict]:
    rows = []
    for _name, proc, url in servers:  # warm up: the spawner, the first host, imports
        asyncio.run(run_n(url, 2, proc.pid))
    for n in sizes:
        for name, proc, url in servers:
            row = {"server": name, **asyncio.run(run_n(url, n, proc.pid))}
            print(json.dumps(row), flush=True)
            rows.append(row)
            for port in settle_ports:
                settle(port)
            time.sleep(2)
    return rows


def alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


class Talk:
    def act(self, conversations):
        return ["go"] * len(conversations)


def pool_with_a_kill(episodes: int = 96, num_envs: int = 48) -> dict:
    """3 serve-env processes behind the remote pool (episodes of 10 steps of 0.2 s); the second
    server is killed (SIGKILL) mid-run."""
    from _sleep_env import SLEEP_ENV, register

    import turngym

    register()
    servers = [start_serve_env({"BENCH_SLEEP_S": "0.2"}) for _ in range(3)]
    urls = [f"http://127.0.0.1:{port}" for _, port in servers]
    victim = servers[1][0]
    killed_at = []

    under = []  # every process under the 3 servers just before the kill: none may outlive them

    def kill_later():
        time.sleep(3.0)  # mid-way through the second round of 2 s episodes
        for proc, _ in servers:
            with contextlib.suppress(psutil.NoSuchProcess):
                under.extend(psutil.Process(proc.pid).children(recursive=True))
        victim.send_signal(signal.SIGKILL)
        killed_at.append(time.monotonic())

    try:
        with turngym.EnvPool(SLEEP_ENV, num_envs=num_envs, backend="remote", servers=urls) as pool:
            tasks = [f"sleep-{i}" for i in range(episodes)]
            started = time.monotonic()
            threading.Thread(target=kill_later, daemon=True).start()
            trajs = pool.rollout(Talk(), tasks, max_turns=10)
            wall = time.monotonic() - started
    finally:
        for proc, _ in servers:
            proc.kill()
            proc.wait(30)
    time.sleep(3)
    left = [p for p in under if alive(p)]
    ids = [t.task_id for t in trajs]  # one task per episode: each must come back once
    finished = sum(1 for t in trajs if t.scorable)
    return {
        "episodes": episodes,
        "returned": len(trajs),
        "distinct_episodes": len(set(ids)),
        "all_episodes_back_once": sorted(ids) == sorted(tasks),
        "finished": finished,
        "unscorable": len(trajs) - finished,
        "unscorable_errors": sorted({(t.metadata.get("error") or "")[:80] for t in trajs if not t.scorable})[:5],
        "killed_after_s": round(killed_at[0] - started, 1) if killed_at else None,
        "wall_s": round(wall, 1),
        "processes_under_the_servers": len(under),
        "processes_left": len(left),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="16,32,64,128,256,512,1024")
    parser.add_argument("--pool", action="store_true", help="only the 3-server remote pool run with a kill")
    args = parser.parse_args()
    sys.path.insert(0, str(BENCH))
    OUT.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y-%m-%dT%H%M")
    load = os.getloadavg()
    if args.pool:
        result = {"pool_with_a_kill": pool_with_a_kill(), "loadavg_before": load}
    else:
        result = {"scaling": scaling([int(n) for n in args.sizes.split(",")]), "loadavg_before": load}
    result["cores"] = os.cpu_count()
    print(json.dumps(result, indent=1))
    (OUT / f"{stamp}{'-pool' if args.pool else ''}.json").write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
