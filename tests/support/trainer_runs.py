"""Short training runs for the trainer tests: train a config to its end (or to ``stop_after``),
read back its metrics, and compare runs without their wall-clock figures."""

from __future__ import annotations

from pathlib import Path


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
