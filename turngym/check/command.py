"""`turngym check ENV_ID`: the command line of ``check_env``, a table (or JSON) of its rows and exit
status 1 when a check fails."""

from __future__ import annotations

import argparse
import sys

from turngym.core.commands import CLIError, format_table


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("env", help="env id, e.g. turngym/Household-v0")
    p.add_argument("--episodes", type=int, default=10, help="tasks per policy (default 10)")
    p.add_argument("--split", help="task split (default: the env's)")
    p.add_argument("--seed", type=int, default=0, help="seed of the first task; task i gets seed + i")
    p.add_argument(
        "--checks",
        help="comma-separated subset of: expert, floor, shortcut, invalid, seed, leak (default: all)",
    )
    p.add_argument(
        "--policies",
        help="comma-separated degenerate/shortcut policies to run, named as in "
        "the report's policy column (default: all that apply)",
    )
    p.add_argument("--max-success", type=float, help="floor rule: highest success rate (default 0.15)")
    p.add_argument(
        "--max-reward-ratio",
        type=float,
        help="floor rule: highest mean reward as a share of the expert's (default 0.5)",
    )
    p.add_argument("--expert-min-success", type=float, help="lowest expert success rate (default 1.0)")
    p.add_argument("--json", action="store_true", help="print the report as JSON instead of a table")


def run(args) -> int:
    import json

    from turngym.check import Thresholds, check_env

    def names(text):
        return [n.strip() for n in text.split(",") if n.strip()] if text else None

    limits = {
        k: getattr(args, k)
        for k in ("max_success", "max_reward_ratio", "expert_min_success")
        if getattr(args, k) is not None
    }

    def progress(row):
        if not args.json:
            print(f"  {row['check']:<9} {row['policy']:<32} {row['verdict']}", file=sys.stderr, flush=True)

    try:
        report = check_env(
            args.env,
            episodes=args.episodes,
            split=args.split,
            seed=args.seed,
            thresholds=Thresholds(**limits),
            checks=names(args.checks),
            policies=names(args.policies),
            on_row=progress,
        )
    except ValueError as e:  # "field: why" -> "--field: why" when the field is one of our options
        field, sep, why = str(e).partition(":")
        option = "--" + field.replace("_", "-")
        known = sep and option in {
            "--episodes",
            "--split",
            "--checks",
            "--policies",
            "--max-success",
            "--max-reward-ratio",
            "--expert-min-success",
        }
        raise CLIError(f"{option}:{why}" if known else str(e)) from None
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        shown = [
            {k: "-" if v is None else v for k, v in {**r, "detail": _clip(r["detail"], 90)}.items()}
            for r in report.rows
        ]
        print(
            format_table(
                shown,
                [
                    "check",
                    "policy",
                    "episodes",
                    "mean_return",
                    "success_rate",
                    "threshold",
                    "verdict",
                    "detail",
                ],
            )
        )
        bad = len(report.violations)
        print(
            f"{args.env}: {'OK' if report.ok else f'{bad} violation(s)'} "
            f"({report.episodes} task(s) of split {report.split!r}, seed {report.seed})"
        )
    return 0 if report.ok else 1


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."
