"""`turngym demo`: the main job. Grows with the project: until the trainer lands it lists the
envs and evaluates the expert on every registered env that has one."""

from __future__ import annotations

import argparse


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--episodes", type=int, default=20, help="episodes per env")


def run(args) -> int:
    import turngym
    from turngym.agents import ExpertPolicy
    from turngym.cli import _run_list, evaluate, format_table

    _run_list(argparse.Namespace(family=None))
    rows = []
    for s in turngym.list_envs():
        if s.needs or s.family == "tests":
            continue
        _, summary = evaluate(s.id, ExpertPolicy(), episodes=args.episodes, progress=False)
        rows.append({"env": s.id, "policy": "expert", **summary})
    if rows:
        print()
        print(format_table(rows, ["env", "policy", "episodes", "success_rate", "mean_return", "mean_steps"]))
    return 0
