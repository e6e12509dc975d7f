"""`turngym demo`: the main job. Grows with the project: until the trainer lands it lists the
envs and evaluates the expert on every registered env that has one."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--episodes", type=int, default=20, help="episodes per env")
    p.add_argument("--out-dir", default="runs/demo", help="run folder for trajectories and the report")


def run(args) -> int:
    import turngym
    from turngym.agents import ExpertPolicy
    from turngym.cli import _run_list, evaluate, format_table

    _run_list(argparse.Namespace(family=None))
    rows = []
    for s in turngym.list_envs():
        if s.needs or s.family == "tests":
            continue
        out = Path(args.out_dir) / "eval" / f"{s.id.replace('/', '_')}.jsonl"
        _, summary = evaluate(s.id, ExpertPolicy(), episodes=args.episodes, progress=False, out=str(out))
        rows.append({"env": s.id, "policy": "expert", **summary})
    if rows:
        print()
        print(format_table(rows, ["env", "policy", "episodes", "success_rate", "mean_return", "mean_steps"]))
    from turngym.viewer import write_report

    Path(args.out_dir).mkdir(parents=True, exist_ok=True)
    print(f"\nreport: {write_report(args.out_dir)}")
    return 0
