"""Learning at equal wall time: tree rollouts with sibling credit against GRPO and GiGPO with
independent rollouts, SmolLM2-135M on Household-Easy, paired on the same held-out tasks.

    PYTHONPATH=. setsid nohup .venv/bin/python benchmarks/tree_credit.py --out /work/runs/tree-learn \
        [--split valid_seen] [--seeds 0,1,2,3,4] [--arms tree,grpo,gigpo] [--budget 420] [--nice -10] > LOG &
    PYTHONPATH=. .venv/bin/python benchmarks/tree_credit.py --out ... --split test --seeds 0   # settings frozen
    PYTHONPATH=. .venv/bin/python benchmarks/tree_credit.py --report [--split valid_seen]

The start: ``llm_credit_assignment.py``'s shared SFT stage (the demo's SFT of SmolLM2-135M on 32
expert episodes of Household-Easy, seed 0, merged and saved once), evaluated greedily on every
``valid_seen`` task (140); for the sealed ``test`` split the merged start is evaluated once more
on the demo's first 144 test tasks (``sft_eval``). Every run puts a fresh LoRA adapter on it and
runs RL with the demo's settings (env, rewards, prompt, KL 0.1, learning rate 3e-4 constant,
advantages not divided by the group's spread) and 2 tasks per update. The arms (``ARMS``):

- ``grpo``: 8 independent rollouts per task, GRPO;
- ``gigpo``: 8 independent rollouts per task, GiGPO;
- ``tree``: tree rollouts as ``tree_rollouts.py`` runs them by default (4 roots per task, 2 branch
  points of 2 branches each chosen once the roots have played 2 turns: 8 episodes per task too),
  ``sibling`` credit with ``combine: none``, its default: chosen before any run, not tuned (the
  time allowed no sweep on valid_seen), so the arm measures sibling credit alone.

**Equal wall time.** Each run gets ``--budget`` seconds of RL wall time: the wall seconds of
``loop.one_update`` (rollouts + advantages + the update, no model load, no evaluation), summed;
once they reach the budget no further update starts and the run evaluates (so the last update
overshoots by at most one update). Per run the result records updates done, episodes, trained
turns (completions in the loss), RL wall and CPU seconds, and the load average before and after.

**Fairness on a shared 2-core machine.** Wall time depends on what else runs. The arms of one
seed run side by side, at the same time, each a process of one torch thread, each in a session of
its own (so in an autogroup of its own, whose nice value ``--nice`` sets): they see the same load
and get equal shares of the cores; seeds run one after another. The CPU seconds tell how much
work each arm did inside its wall budget.

**Held-out evaluation.** Greedy, every ``valid_seen`` task (140) after the shared start and at the
end of each run (or the first 144 ``test`` tasks), the same episodes in every run, so runs pair
task by task. The report: per arm the mean held-out success with its 95% t-interval over seeds;
tree and GiGPO each against GRPO task by task at each seed (``llm_credit_assignment.versus``):
gained/lost pooled over seeds, the exact sign test, Holm's correction over the two comparisons,
the mean difference with its 95% t-interval, and the smallest difference detectable with 80%
power at the runs' own spread (``llm_credit_assignment.detectable``). The goal of issue 60 is met
when tree beats GRPO with p < 0.05 after Holm.

Raw results: ``--results`` (``benchmarks/results/tree_credit/<split>/``): ``sft.json`` (the
start's outcome on every task) and ``runs/<arm>-s<seed>.json`` (every task's outcome at the end,
the counts above). Working files stay under ``--out``. A finished run is skipped when the command
is run again; an interrupted one starts over (a wall budget cannot resume).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from llm_credit_assignment import commit, common, compute_dtype, interval, outcomes, versions, versus  # noqa: E402

ARMS = {
    "grpo": ["rl.group_size=8", "rl.estimator=grpo", "rl.estimator_args={scale: false}"],
    "gigpo": ["rl.group_size=8", "rl.estimator=gigpo", "rl.estimator_args={scale: false}"],
    "tree": [
        "rl.group_size=4",
        "rl.branches=2",
        "rl.branch_points=2",
        "rl.branch_after=2",
        "rl.estimator=sibling",
        "rl.estimator_args={scale: false, combine: none}",
    ],
}
BASELINE = "grpo"
MAX_UPDATES = 10_000  # a ceiling the wall budget always stops before


def bench_args(args) -> argparse.Namespace:
    """What ``llm_credit_assignment.common`` reads: the demo's sizes, this run's split."""
    from turngym.demo import EVAL_TASKS

    return argparse.Namespace(
        model=args.model,
        eval_split=args.split,
        eval_episodes=args.eval_episodes or EVAL_TASKS[args.split],
        sft_episodes=args.sft_episodes,
        max_turns=6,
        shaped_reward=0.5,
        tasks_per_update=2,
        group_size=8,
        lr=3e-4,
        temperature=0.8,
    )


def start(args, out: Path) -> dict:
    """The shared SFT start, evaluated on ``--split``: the SFT stage (on valid_seen) or, for
    another split, the saved start evaluated there. Its outcomes are kept in ``--results``."""
    from llm_credit_assignment import sft_stage

    if args.split == "valid_seen":
        data = sft_stage(bench_args(args), out)
    else:
        data = sft_eval(args, out)
    keep = Path(args.results) / args.split / "sft.json"
    keep.parent.mkdir(parents=True, exist_ok=True)
    keep.write_text(json.dumps({"split": args.split, **data}, indent=1))
    return data


def sft_eval(args, out: Path) -> dict:
    """The saved SFT start (merged, as every run starts from it) evaluated greedily on ``--split``."""
    from turngym.core.runs import read_metrics
    from turngym.trainers.config import load_config
    from turngym.trainers.loop import train

    run_dir = out / f"sft-{args.split}"
    result = run_dir / "result.json"
    if result.exists():
        return json.loads(result.read_text())
    cfg = load_config(
        None,
        [
            *common(bench_args(args)),
            f"run_dir={run_dir}",
            "seed=0",
            "resume=false",
            "checkpoint_every=0",
            f"model.name={out / 'sft' / 'model'}",
            "sft.episodes=0",
            "rl.updates=0",
            "eval.at_start=true",
        ],
    )
    start_s = time.perf_counter()
    train(cfg, log=lambda line: print(f"  sft-{args.split}: {line}", flush=True))
    row = read_metrics(run_dir / "metrics.jsonl")[0]
    data = {
        "after_sft": row.get("eval/success_rate"),
        "after_sft_return": row.get("eval/mean_return"),
        "seconds": time.perf_counter() - start_s,
        "dtype": compute_dtype(),
        "versions": versions(),
        "episodes": outcomes(run_dir / "eval" / "update_0000.jsonl", returns=True),
    }
    result.write_text(json.dumps(data, indent=1))
    return data


def watch_budget(budget: float, spent: dict) -> None:
    """Time each ``loop.one_update`` (``rl_updates`` looks it up in the module at every call) and,
    once the updates' wall seconds reach ``budget``, make the current update the run's last:
    ``rl_updates`` then evaluates on every held-out task and stops."""
    from turngym.trainers import loop

    inner = loop.one_update

    def timed(tr, *rest):
        wall, cpu = time.perf_counter(), time.process_time()
        row = inner(tr, *rest)
        spent["wall"] += time.perf_counter() - wall
        spent["cpu"] += time.process_time() - cpu
        if spent["wall"] >= budget:
            tr.cfg.rl.updates = rest[-1]  # the update's number
        return row

    loop.one_update = timed


def rl_run(args, out: Path, arm: str, seed: int) -> dict:
    """One run of ``arm`` at ``seed`` within the wall budget; its result, also kept in ``--results``."""
    import torch

    from turngym.core.records import read_jsonl
    from turngym.core.runs import read_metrics
    from turngym.trainers.config import load_config
    from turngym.trainers.loop import train

    run_dir = out / "runs" / args.split / f"{arm}-s{seed}"
    if (run_dir / "result.json").exists():
        return json.loads((run_dir / "result.json").read_text())
    shutil.rmtree(run_dir, ignore_errors=True)  # an interrupted run starts over
    cfg = load_config(
        None,
        [
            *common(bench_args(args)),
            f"run_dir={run_dir}",
            f"seed={seed}",
            "resume=false",
            "checkpoint_every=0",
            f"model.name={out / 'sft' / 'model'}",
            "sft.episodes=0",
            f"rl.updates={MAX_UPDATES}",
            "rl.lr_schedule=constant",
            "eval.at_start=false",
            "eval.every=0",
            *ARMS[arm],
        ],
    )
    spent = {"wall": 0.0, "cpu": 0.0}
    watch_budget(args.budget, spent)
    load_before, wall0, cpu0 = os.getloadavg(), time.perf_counter(), time.process_time()
    train(cfg, log=lambda line: print(f"  {arm}-s{seed}: {line}", flush=True))
    rows = [r for r in read_metrics(run_dir / "metrics.jsonl") if r.get("update")]
    updates = len(rows)
    trajs = [t for u in range(1, updates + 1) for t in read_jsonl(run_dir / "rollouts" / f"update_{u:04d}.jsonl")]
    final = run_dir / "eval" / f"update_{updates:04d}.jsonl"
    data = {
        "estimator": arm,  # the key llm_credit_assignment.versus pairs on
        "arm": arm,
        "settings": ARMS[arm],
        "seed": seed,
        "split": args.split,
        "budget_s": args.budget,
        "updates": updates,
        "episodes": len(trajs),
        "branches": sum(bool(t.parent) for t in trajs),
        "trained_turns": sum(1 for t in trajs if t.scorable for s in t.steps if s.completion_ids),
        "rl_wall_s": spent["wall"],
        "rl_cpu_s": spent["cpu"],
        "rl_rows_s": sum(r["time/rollout"] + r["time/advantages"] + r["time/update"] for r in rows),
        "eval_s": sum(r.get("time/eval", 0.0) for r in rows),
        "run_wall_s": time.perf_counter() - wall0,
        "run_cpu_s": time.process_time() - cpu0,
        "load_before": load_before,
        "load_after": os.getloadavg(),
        "train_success": [r.get("train/success_rate") for r in rows],
        "threads": torch.get_num_threads(),
        "commit": commit(),
        "dtype": compute_dtype(),
        "versions": versions(),
        "eval": {str(updates): rows[-1].get("eval/success_rate")},
        "outcomes": {str(updates): outcomes(final)},
    }
    (run_dir / "result.json").write_text(json.dumps(data, indent=1))
    keep = Path(args.results) / args.split / "runs" / f"{arm}-s{seed}.json"
    keep.parent.mkdir(parents=True, exist_ok=True)
    keep.write_text(json.dumps(data, indent=1))
    return data


def side_by_side(args, out: Path, seed: int) -> None:
    """The arms of one seed at the same time, each a process of one torch thread in a session
    (and autogroup) of its own, with ``--nice`` written to its autogroup; waits for all."""
    procs = []
    for arm in args.arms:
        if (out / "runs" / args.split / f"{arm}-s{seed}" / "result.json").exists():
            print(f"{arm} seed {seed}: done, skipped", flush=True)
            continue
        log = out / "logs" / f"{args.split}-{arm}-s{seed}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, __file__, "--run", f"{arm}:{seed}", "--threads", "1", *passed_on(args)]
        with log.open("a") as f:
            p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
        if args.nice is not None:
            try:
                Path(f"/proc/{p.pid}/autogroup").write_text(str(args.nice))
            except OSError as e:
                print(f"warning: autogroup nice of {p.pid}: {e}", flush=True)
        print(f"{arm} seed {seed}: started, pid {p.pid}, log {log}", flush=True)
        procs.append((arm, p))
    for arm, p in procs:
        print(f"{arm} seed {seed}: exit status {p.wait()}", flush=True)


def passed_on(args) -> list[str]:
    """The options a run's process needs to make the same run as this command would."""
    return [
        *("--out", str(args.out), "--results", str(args.results), "--split", args.split),
        *("--budget", str(args.budget), "--model", args.model, "--sft-episodes", str(args.sft_episodes)),
        *("--eval-episodes", str(args.eval_episodes)),
    ]


def holm(ps: dict[str, float]) -> dict[str, float]:
    """Holm's step-down adjusted p-values: the k-th smallest of m times (m - k + 1), never below
    the one before, capped at 1."""
    adjusted, floor = {}, 0.0
    ranked = sorted(ps.items(), key=lambda kv: kv[1])
    for k, (name, p) in enumerate(ranked):
        floor = max(floor, min(1.0, (len(ranked) - k) * p))
        adjusted[name] = floor
    return adjusted


def load_runs(results: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((results / "runs").glob("*.json"))]


def against_sft(run: dict, sft: dict | None) -> dict | None:
    """The run's final held-out episodes against the shared start's (kept in ``sft.json``), task by
    task: gained, lost, paired; None when the start was not evaluated on these tasks."""
    start = [(t, ok) for t, ok, *_ in (sft or {}).get("episodes") or []]
    final = [tuple(e) for e in run["outcomes"][str(run["updates"])]]
    if not start or [t for t, _ in start] != [t for t, _ in final]:
        return None
    return {
        "gained": sum(b and not a for (_, a), (_, b) in zip(start, final)),
        "lost": sum(a and not b for (_, a), (_, b) in zip(start, final)),
        "episodes": len(final),
    }


def summarize(runs: list[dict], sft: dict | None, arms: list[str]) -> dict:
    """Per arm: seeds, final held-out success (mean, t half-width), budget use; per arm against
    GRPO: ``versus`` with Holm's adjusted p over the comparisons made."""
    rows = []
    for arm in arms:
        mine = [r for r in runs if r["arm"] == arm]
        if not mine:
            continue
        mean, half = interval([r["eval"][str(r["updates"])] for r in mine])
        rows.append(
            {
                "arm": arm,
                "seeds": sorted(r["seed"] for r in mine),
                "final": mean,
                "ci": half,
                "vs_sft": [against_sft(r, sft) for r in mine],
                "load": [r["load_before"][0] for r in mine],
                **{k: [r[k] for r in mine] for k in ("updates", "episodes", "trained_turns", "rl_wall_s", "rl_cpu_s")},
            }
        )
    pairs = {arm: versus(runs, arm, BASELINE) for arm in arms if arm != BASELINE}
    pairs = {arm: v for arm, v in pairs.items() if v is not None}
    for arm, p in holm({arm: v["p"] for arm, v in pairs.items()}).items():
        pairs[arm]["p_holm"] = p
    return {"sft": None if sft is None else sft.get("after_sft"), "rows": rows, "versus_grpo": pairs}


def show(summary: dict, split: str) -> None:
    """The two tables, in Markdown."""
    print(f"\n{split}: shared SFT start {summary['sft']}")
    print("| arm | seeds | held-out success (mean, 95% t-CI) | gained / lost vs SFT | updates | episodes | "
          "trained turns | RL wall s | RL CPU s | load average at start |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in summary["rows"]:
        ci = "n/a" if r["ci"] != r["ci"] else f"+- {r['ci']:.3f}"
        vs = ", ".join("?" if c is None else f"+{c['gained']}/-{c['lost']}" for c in r["vs_sft"])
        span = {
            k: f"{min(r[k]):.0f}-{max(r[k]):.0f}"
            for k in ("updates", "episodes", "trained_turns", "rl_wall_s", "rl_cpu_s")
        }
        print(
            f"| {r['arm']} | {len(r['seeds'])} | {r['final']:.3f} {ci} | {vs} | {span['updates']} | "
            f"{span['episodes']} | {span['trained_turns']} | {span['rl_wall_s']} | {span['rl_cpu_s']} | "
            f"{min(r['load']):.1f}-{max(r['load']):.1f} |"
        )
    print("\nagainst GRPO, task by task at each seed, pooled:")
    print("| arm | seeds | mean difference (95% t-CI) | gained / lost | sign test p | Holm p | "
          "detectable at 80% power: sign test / t over seeds |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for arm, v in summary["versus_grpo"].items():
        ci = "n/a" if v["ci"] != v["ci"] else f"+- {v['ci']:.3f}"
        power = " / ".join(
            "n/a" if v[k] != v[k] else f"{v[k]:.3f}" for k in ("detectable_episodes", "detectable_seeds")
        )
        print(
            f"| {arm} | {v['seeds']} | {v['mean_difference']:+.3f} {ci} | +{v['gained']}/-{v['lost']} | "
            f"{v['p']:.3g} | {v['p_holm']:.3g} | {power} |"
        )
    tree = summary["versus_grpo"].get("tree")
    met = tree is not None and tree["mean_difference"] > 0 and tree["p_holm"] < 0.05
    print(f"\ngoal (tree beats GRPO, pooled paired test p < 0.05 after Holm): {'met' if met else 'not met'}")


def report(args) -> dict:
    results = Path(args.results) / args.split
    sft_file = results / "sft.json"
    sft = json.loads(sft_file.read_text()) if sft_file.exists() else None
    summary = summarize(load_runs(results), sft, args.arms)
    show(summary, args.split)
    (results / "summary.json").write_text(json.dumps(summary, indent=1))
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/tree-credit", help="working files (outside the repository)")
    parser.add_argument("--results", default=str(ROOT / "benchmarks" / "results" / "tree_credit"))
    parser.add_argument("--split", default="valid_seen", choices=("valid_seen", "test"))
    parser.add_argument("--arms", default="tree,grpo,gigpo")
    parser.add_argument("--seeds", default="0,1,2,3,4")
    parser.add_argument("--budget", type=float, default=420.0, help="RL wall seconds per run")
    parser.add_argument("--eval-episodes", type=int, default=0, help="0: every valid_seen task, the demo's 144 test")
    parser.add_argument("--sft-episodes", type=int, default=32)
    parser.add_argument("--model", default="smollm2-135m", help="start model (tiny: a smoke test of the script)")
    parser.add_argument("--threads", type=int, default=0, help="torch threads of this process (0: torch's choice)")
    parser.add_argument("--nice", type=int, default=None, help="autogroup nice value of each run's process")
    parser.add_argument("--run", default=None, help="ARM:SEED: make this one run in this process")
    parser.add_argument("--report", action="store_true", help="only print the tables of the kept results")
    args = parser.parse_args()
    args.arms = [a for a in args.arms.split(",") if a]
    if unknown := [a for a in args.arms if a not in ARMS]:
        parser.error(f"--arms: {', '.join(unknown)} unknown; allowed: {', '.join(ARMS)}")
    if args.report:
        report(args)
        return
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.run:
        arm, _, seed = args.run.partition(":")
        r = rl_run(args, out, arm, int(seed))
        print(f"{arm} seed {seed}: {r['updates']} updates, {r['episodes']} episodes, eval {r['eval']}", flush=True)
        return
    if args.split == "valid_seen":  # the runs start from the SFT stage's model
        sft = start(args, out)
        print(f"start on {args.split}: {sft['after_sft']} ({sft['seconds']:.0f} s)", flush=True)
    for seed in [int(s) for s in args.seeds.split(",") if s]:
        side_by_side(args, out, seed)
    if args.split != "valid_seen":  # the start's evaluation on this split: context, after the runs
        start(args, out)
    report(args)


if __name__ == "__main__":
    main()
