"""Where a run's numbers go: metrics.jsonl (one object per line), TensorBoard, curves.png.

``read_metrics`` and ``summarize`` live in ``turngym.core.runs`` (the viewer and the CLI read
runs without the trainer); they are importable from here as before."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from turngym.core.runs import read_metrics, summarize

__all__ = ["MetricsWriter", "eval_points", "plot_curves", "read_metrics", "summarize", "truncate_metrics"]


class MetricsWriter:
    """Appends one JSON object per line to ``run_dir/metrics.jsonl``, mirrors scalars to TensorBoard.

    On resume, lines written after the checkpoint (by the killed run) are dropped first, so the
    file always matches the state the run continues from.
    """

    def __init__(self, run_dir: str | Path, tensorboard: bool = True, keep_until_update: int | None = None):
        self.path = Path(run_dir) / "metrics.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if keep_until_update is not None:
            truncate_metrics(self.path, keep_until_update)
        self.tb = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter

                self.tb = SummaryWriter(str(Path(run_dir) / "tb"))
            except ImportError:  # tensorboard is optional; JSONL is the record
                self.tb = None

    def write(self, row: dict[str, Any]) -> None:
        clean = {k: _plain(v) for k, v in row.items()}
        with open(self.path, "a") as f:
            f.write(json.dumps(clean) + "\n")
            f.flush()
            os.fsync(f.fileno())
        if self.tb is not None:
            step = int(clean.get("env_steps", clean.get("update", 0)))
            for k, v in clean.items():
                if isinstance(v, (int, float)) and not isinstance(v, bool) and k not in ("env_steps",):
                    self.tb.add_scalar(k, v, step)
            self.tb.flush()

    def close(self) -> None:
        if self.tb is not None:
            self.tb.close()


def _plain(v: Any) -> Any:
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def truncate_metrics(path: Path, last_update: int) -> None:
    """Keep rows whose ``update`` is <= last_update (rows of a killed run's lost work go)."""
    if not path.exists():
        return
    rows = [r for r in read_metrics(path) if r.get("update", 0) <= last_update]
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    os.replace(tmp, path)


def eval_points(rows: list[dict[str, Any]], metric: str) -> list[tuple[float, float, str]]:
    """Every held-out evaluation of a run as (x, value, stage), x in updates.

    The zero-shot evaluation sits at x = -1 when SFT ran (SFT occupies -1..0, before RL's first
    update), the after-SFT one at 0, RL's at their update; without SFT, zero-shot is at 0.
    """
    points = []
    sft = any(r.get("sft/turns") for r in rows)
    for r in rows:
        update = r.get("update", 0)
        if r.get(f"eval/{metric}") is not None:
            at_start = update == 0
            points.append((-1.0 if at_start and sft else float(update), r[f"eval/{metric}"],
                           "zero-shot" if at_start else "rl"))
        if r.get(f"eval_after_sft/{metric}") is not None:
            points.append((0.0, r[f"eval_after_sft/{metric}"], "after sft"))
    return sorted(points)


def eval_episodes(rows: list[dict[str, Any]]) -> dict[float, int]:
    """Episodes of each RL-phase held-out evaluation, by its x in ``eval_points`` (after SFT at 0)."""
    out = {}
    for r in rows:
        if r.get("eval_after_sft/episodes"):
            out[0.0] = r["eval_after_sft/episodes"]
        elif r.get("update") and r.get("eval/episodes"):
            out[float(r["update"])] = r["eval/episodes"]
    return out


def plot_curves(run_dir: str | Path, out: str | Path | None = None, title: str | None = None) -> Path:
    """Success rate and mean return against updates: training rollouts, and every held-out
    evaluation at its true position (zero-shot, after SFT, during RL), the SFT phase shaded and
    updates with no learning signal marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    run_dir = Path(run_dir)
    rows = read_metrics(run_dir / "metrics.jsonl")
    out = Path(out) if out else run_dir / "curves.png"
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    sft = any(r.get("sft/turns") for r in rows)
    for ax, metric, label in ((axes[0], "success_rate", "success rate"), (axes[1], "mean_return", "mean return")):
        if sft:
            ax.axvspan(-1, 0, color="tab:orange", alpha=0.15, label="SFT")
        train = [(r["update"], r[f"train/{metric}"]) for r in rows
                 if r.get(f"train/{metric}") is not None and r.get("update")]
        if train:
            xs, ys = zip(*train)
            ax.plot(xs, ys, "-", color="tab:blue", alpha=0.7, label="train rollouts")
            silent = [(r["update"], r[f"train/{metric}"]) for r in rows
                      if r.get("warning/no_signal") and r.get(f"train/{metric}") is not None]
            if silent:
                sx, sy = zip(*silent)
                ax.plot(sx, sy, "x", color="tab:red", label="no learning signal")
        points = eval_points(rows, metric)
        if points:
            xs, ys, _ = zip(*points)
            ax.plot(xs, ys, "o-", color="tab:green", label="held-out eval")
            counts = eval_episodes(rows)
            if len(set(counts.values())) > 1:  # e.g. a cheaper curve between whole evaluations
                for x, y in zip(xs, ys):
                    if x in counts:
                        ax.annotate(f"{counts[x]} ep.", (x, y), textcoords="offset points", xytext=(0, 6),
                                    ha="center", fontsize=7, color="tab:green")
        ax.set_xlabel("RL update (SFT before 0)" if sft else "RL update")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title or run_dir.name)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out
