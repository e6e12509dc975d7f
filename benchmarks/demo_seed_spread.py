"""How much the demo's RL gain varies from seed to seed, from the kept test-split runs alone.

    python benchmarks/demo_seed_spread.py [--results benchmarks/results/demo]

The demo's target is met at a seed when RL beats SFT on the 134 held-out tasks by at least
``turngym.demo.TARGET_GAIN`` (+0.10, 14 tasks) with the exact sign test at p < 0.05, as the demo's
own verdict decides. Each kept variant (one code and setting, its seeds in
``<variant>-seed<S>/eval_outcomes.json``) gives its per-seed gains. This prints every run (tasks
solved after SFT and after RL, gained / lost, p), then per variant the mean and spread of the
gain, and over the variants with the demo's KL (all but the first, whose seed 3 collapsed):

- the spread of the gain within a variant (pooled standard deviation, in tasks);
- how the gain and RL's end point depend on where SFT started (least squares over every run);
- under a normal model of the per-seed gain with that spread, the mean gain at which a seed
  meets the target in 80% and 95% of seeds: ``need + z * sd``, taking a gain of ``need`` tasks as
  passing the sign test (it prints how many kept runs gained that much and still missed it).

Nothing is run: it reads the committed per-task outcomes. ``--run-dir`` (a demo run's folder,
whose ``eval/*.jsonl`` hold every held-out episode) also counts, after SFT and after RL, the
episodes whose first command goes to a receptacle that the first observation shows holding the
goal's object (on Household-Easy every object is in view from the start, so a wrong first
"go to" is a misreading, not missing information).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# the kept five-seed variants, oldest first (docs/benchmarks-log.md, "`make demo`: phases, float32 and the earlier variants")
VARIANTS = {
    "seed": "16 GiGPO updates, no KL, one process (2026-11-27/28)",
    "kl0.1-seed": "KL 0.1, one process, one thread (520f79f)",
    "head-seed": "KL 0.1, one process, two threads (1ef8012)",
    "dp-seed": "KL 0.1, two processes (a97d51a)",
    "st-seed": "KL 0.1, two processes, update from kept states: today's demo, bfloat16 (52cac36)",
    "f32-seed": "today's demo in float32 on a CPU without native bfloat16 (f8bfbc0)",
}
Z = {0.80: 0.8416, 0.95: 1.6449}


def run_outcomes(folder: Path) -> tuple[int, int, int, int, int]:
    """(tasks, solved after SFT, solved after RL, gained, lost) of one demo run."""
    evals = json.loads((folder / "eval_outcomes.json").read_text())
    names = sorted(evals)
    before = {task: ok for task, ok, *_ in evals[names[0]]}
    after = {task: ok for task, ok, *_ in evals[names[-1]]}
    if set(before) != set(after):
        raise ValueError(f"{folder}: the first and last evaluations hold other tasks")
    gained = sum(after[t] and not before[t] for t in before)
    lost = sum(before[t] and not after[t] for t in before)
    return len(before), sum(before.values()), sum(after.values()), gained, lost


def least_squares(x: list[float], y: list[float]) -> tuple[float, float, float]:
    """(slope, intercept, correlation) of y on x."""
    mx, my = statistics.fmean(x), statistics.fmean(y)
    sxx = sum((a - mx) ** 2 for a in x)
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y))
    syy = sum((b - my) ** 2 for b in y)
    if not sxx or not syy:
        return math.nan, math.nan, math.nan
    return sxy / sxx, my - sxy / sxx * mx, sxy / math.sqrt(sxx * syy)


def first_moves(episodes_file: Path) -> dict[tuple[bool, bool], int]:
    """{(solved, first "go to" names a receptacle holding the goal's object): episodes}."""
    counts: dict[tuple[bool, bool], int] = {}
    for line in episodes_file.read_text().splitlines():
        episode = json.loads(line)
        steps = episode["steps"]
        observation = steps[0]["observation"]
        goal = re.search(r"Your task is to: put (?:some|a|an) (\w+) (?:in|on) ", observation)
        if goal is None:
            continue
        holders = {
            place
            for place, items in re.findall(r"(?:On|In) the (\w+ \d+), you see ([^.]*)\.", observation)
            if re.search(rf"\b{goal.group(1)} \d+", items)
        }
        right = steps[0]["action"] in {f"go to {place}" for place in holders}
        solved = any(s["info"].get("is_success") for s in steps)
        counts[solved, right] = counts.get((solved, right), 0) + 1
    return counts


def main(argv: list[str] | None = None) -> dict:
    from turngym.core.stats import sign_test
    from turngym.demo import TARGET_GAIN, target_met

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", default=str(ROOT / "benchmarks" / "results" / "demo"))
    parser.add_argument("--run-dir", help="a demo run's folder: count its held-out episodes' first moves")
    args = parser.parse_args(argv)
    root = Path(args.results)
    runs, per_variant = [], {}
    print("| variant | seed | solved after SFT | after RL | gained / lost | p | target met |")
    print("|---|---:|---:|---:|---:|---:|---|")
    kept = [
        (m.group(1), int(m.group(2)), folder)
        for folder in root.iterdir()
        if (m := re.fullmatch(r"(.+?)(\d+)", folder.name))
        and m.group(1) in VARIANTS
        and (folder / "eval_outcomes.json").exists()
    ]
    for prefix in VARIANTS:
        for _, seed, folder in sorted(k for k in kept if k[0] == prefix):
            tasks, sft, rl, gained, lost = run_outcomes(folder)
            p = sign_test(gained, lost)
            met = target_met(gained, lost, tasks)
            runs.append(
                {
                    "variant": prefix,
                    "seed": seed,
                    "tasks": tasks,
                    "sft": sft,
                    "rl": rl,
                    "gained": gained,
                    "lost": lost,
                    "p": p,
                    "met": met,
                }
            )
            per_variant.setdefault(prefix, []).append(rl - sft)
            print(f"| {prefix} | {seed} | {sft} | {rl} | +{gained} / -{lost} | {p:.2g} | {'yes' if met else 'no'} |")
    if not runs:
        raise SystemExit(f"no demo runs under {root}")
    tasks = runs[0]["tasks"]
    need = math.ceil(TARGET_GAIN * tasks)
    print("\n| variant | seeds | mean gain (tasks) | sd | met |\n|---|---:|---:|---:|---:|")
    for prefix, gains in per_variant.items():
        met = sum(r["met"] for r in runs if r["variant"] == prefix)
        sd = f"{statistics.stdev(gains):.1f}" if len(gains) > 1 else "-"
        print(
            f"| {prefix} ({VARIANTS[prefix]}) | {len(gains)} | {statistics.fmean(gains):+.1f} | {sd} | "
            f"{met} of {len(gains)} |"
        )
    # the demo's setting since 2026-11-28 (the KL): the summary leaves out the variant without it
    with_kl = {k: v for k, v in per_variant.items() if k != "seed"}
    runs = [r for r in runs if r["variant"] in with_kl]
    # the spread of a seed's gain around its variant's mean, pooled over variants
    within = sum(sum((g - statistics.fmean(gs)) ** 2 for g in gs) for gs in with_kl.values())
    dof = sum(len(gs) - 1 for gs in with_kl.values())
    sd = math.sqrt(within / dof)
    sft = [r["sft"] for r in runs]
    gain_fit = least_squares(sft, [r["rl"] - r["sft"] for r in runs])
    end_fit = least_squares(sft, [r["rl"] for r in runs])
    needed = {level: need + z * sd for level, z in Z.items()}
    # the model takes a gain of `need` tasks as passing; say whether the kept runs bear that out
    big_but_noisy = sum(r["rl"] - r["sft"] >= need and r["p"] >= 0.05 for r in runs)
    print(
        f"\nThe {len(with_kl)} variants with the KL: {len(runs)} runs of {tasks} tasks; the target needs a gain of {need} tasks ({TARGET_GAIN:+.2f}) at p < 0.05; "
        f"met in {sum(r['met'] for r in runs)} runs"
    )
    print(f"gain within a variant: sd {sd:.1f} tasks ({sd / tasks:.3f}), pooled over the {len(with_kl)} variants")
    print(
        f"gain on SFT's tasks solved: slope {gain_fit[0]:+.2f}, r = {gain_fit[2]:+.2f}; "
        f"RL's end point on SFT's: slope {end_fit[0]:+.2f}, r = {end_fit[2]:+.2f}"
    )
    print(f"runs that gained {need} tasks or more but missed p < 0.05: {big_but_noisy}")
    for level, mean in needed.items():
        print(
            f"for the target at {level:.0%} of seeds the mean gain would have to be {mean:.1f} tasks "
            f"(+{mean / tasks:.2f}) at this spread"
        )
    moves = {}
    if args.run_dir:
        files = sorted((Path(args.run_dir) / "eval").glob("update_*.jsonl"))
        for name, file in (("after SFT", files[0]), ("after RL", files[-1])):
            moves[name] = first_moves(file)
            c = moves[name]
            print(
                f"{name} ({file.name}): first 'go to' to where the goal's object lies: solved "
                f"{c.get((True, True), 0)}, failed {c.get((False, True), 0)}; elsewhere: solved "
                f"{c.get((True, False), 0)}, failed {c.get((False, False), 0)}"
            )
    return {
        "runs": runs,
        "sd_within": sd,
        "first_moves": moves,
        "gain_on_sft": gain_fit,
        "end_on_sft": end_fit,
        "needed": needed,
    }


if __name__ == "__main__":
    main()
