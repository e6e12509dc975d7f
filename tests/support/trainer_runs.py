"""Short training runs for the trainer tests: train a config to its end (or to ``stop_after``),
in this process or as ``torchrun`` processes, read back its metrics, and compare runs without
their wall-clock figures."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SUPPORT = Path(__file__).resolve().parent
REPO = SUPPORT.parents[1]


def train_run(run_dir: Path, overrides: list[str], stop_after: int | None = None) -> list[dict]:
    """``turngym.trainers.loop.train`` on ``overrides`` plus ``run_dir``; the metrics rows it wrote."""
    from turngym.core.runs import read_metrics
    from turngym.trainers.config import load_config
    from turngym.trainers.loop import train

    cfg = load_config(None, [*overrides, f"run_dir={run_dir}"])
    train(cfg, log=lambda _: None, stop_after=stop_after)
    return read_metrics(Path(cfg.run_dir) / "metrics.jsonl")


def comparable(rows: list[dict]) -> list[dict]:
    """Metrics without wall-clock figures (``time/...``): what two equal runs must share."""
    return [{k: v for k, v in r.items() if not k.startswith("time/")} for r in rows]


def torchrun_train(tmp_path: Path, cfg, processes: int = 2) -> str:
    """``turngym train`` of ``cfg`` under ``torch.distributed.run`` with ``processes`` ranks (one
    thread each, the test envs importable); its stdout. Fails the test on a non-zero exit."""
    config_file = tmp_path / f"{Path(cfg.run_dir).name}-{cfg.rl.updates}.yaml"
    config_file.write_text(json.dumps(cfg.to_dict()))
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": os.pathsep.join([str(REPO), str(SUPPORT), os.environ.get("PYTHONPATH", "")]),
    }
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(processes)]
    argv += ["-m", "turngym", "train", "--config", str(config_file), "--env-module", "trainer_envs"]
    out = subprocess.run(argv, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=400)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout
