"""Credit assignment with a real LLM: GRPO vs RLOO vs GiGPO vs HGPO (and more) on SmolLM2-135M.

    PYTHONPATH=. .venv/bin/python benchmarks/llm_credit_assignment.py \
        [--out runs/llm-credit] [--estimators gigpo,grpo,rloo,hgpo] [--seeds 0,1,2] [--updates 4]

Every run starts from one shared SFT checkpoint (SmolLM2-135M-Instruct after imitating expert
episodes of Household-Easy, merged and saved once), puts a fresh LoRA adapter on it, and runs the
same number of RL updates with the same episodes per update; only the advantage estimator and the
seed differ. Held-out success (valid_unseen, greedy) is measured after SFT (shared x = 0) and
every ``--eval-every`` updates.

Resumable: each run writes ``OUT/runs/<estimator>-s<seed>/result.json`` when it finishes and
checkpoints after every update, so rerunning the same command skips finished runs and continues
an interrupted one from its last update. Runs go seed by seed (all estimators for seed 0 first),
so a partial result still compares every estimator. ``--report`` only aggregates what exists:
a table (mean over seeds with a 95% t-interval) and a PNG with confidence bands.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

ENV_ID = "turngym/Household-Easy-v0"
# two-sided 95% Student t quantiles by degrees of freedom (seeds - 1)
T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}


def common(args) -> list[str]:
    """The demo's settings (``turngym.demo.demo_overrides``: env, rewards, prompt, model, SFT and
    RL sizes), with this benchmark's sizes; each stage appends its own overrides after these."""
    from turngym import demo

    parser = argparse.ArgumentParser()
    demo.add_arguments(parser)
    demo_args = parser.parse_args([
        "--model", args.model, "--eval-episodes", str(args.eval_episodes), "--sft-episodes", str(args.sft_episodes),
        "--max-turns", str(args.max_turns), "--shaped-reward", str(args.shaped_reward),
        "--tasks-per-update", str(args.tasks_per_update), "--group-size", str(args.group_size),
        "--lr", str(args.lr), "--temperature", str(args.temperature), "--no-progress"])
    return [*demo.demo_overrides(demo_args), "tensorboard=false"]


def sft_stage(args, out: Path) -> dict:
    """The shared starting point: SFT once, evaluate it, save the merged model."""
    from turngym.agents.models import save_model
    from turngym.trainers.config import load_config
    from turngym.trainers.loop import train
    from turngym.trainers.metrics import read_metrics

    model_dir = out / "sft" / "model"
    result = out / "sft" / "result.json"
    if result.exists() and (model_dir / "config.json").exists():
        return json.loads(result.read_text())
    cfg = load_config(None, [*common(args), f"run_dir={out / 'sft'}", "seed=0", "resume=false",
                             "checkpoint_every=0", "rl.updates=0", "eval.at_start=true"])
    start = time.perf_counter()
    tr = train(cfg, log=lambda line: print(f"  sft: {line}", flush=True))
    save_model(tr.model, tr.tokenizer, model_dir)
    row = read_metrics(out / "sft" / "metrics.jsonl")[0]
    data = {"zero_shot": row.get("eval/success_rate"), "after_sft": row.get("eval_after_sft/success_rate"),
            "after_sft_return": row.get("eval_after_sft/mean_return"), "seconds": time.perf_counter() - start}
    result.write_text(json.dumps(data, indent=1))
    return data


def rl_run(args, out: Path, estimator: str, seed: int) -> dict:
    from turngym.trainers.config import load_config
    from turngym.trainers.loop import train
    from turngym.trainers.metrics import read_metrics

    run_dir = out / "runs" / f"{estimator}-s{seed}"
    result = run_dir / "result.json"
    if result.exists():
        return json.loads(result.read_text())
    cfg = load_config(None, [*common(args), f"run_dir={run_dir}", f"seed={seed}", "resume=true",
                             "checkpoint_every=1", "keep_checkpoints=1", f"model.name={out / 'sft' / 'model'}",
                             "sft.episodes=0", f"rl.estimator={estimator}", f"rl.updates={args.updates}",
                             "eval.at_start=false", f"eval.every={args.eval_every}"])
    start = time.perf_counter()
    train(cfg, log=lambda line: print(f"  {estimator}-s{seed}: {line}", flush=True))
    rows = read_metrics(run_dir / "metrics.jsonl")
    data = {"estimator": estimator, "seed": seed,
            "eval": {str(r["update"]): r["eval/success_rate"] for r in rows if r.get("eval/success_rate") is not None},
            "train_success": [r.get("train/success_rate") for r in rows if r.get("update")],
            "mixed_updates": sum(1 for r in rows if r.get("update") and r.get("train/mixed_groups")),
            "updates": sum(1 for r in rows if r.get("update")),
            "episodes": max((r.get("episodes", 0) for r in rows), default=0),
            "seconds": time.perf_counter() - start}
    data["vs_sft"] = paired_change(out, run_dir, data["updates"])
    result.write_text(json.dumps(data, indent=1))
    return data


def paired_change(out: Path, run_dir: Path, update: int) -> dict | None:
    """Held-out episodes the run solved that the SFT checkpoint failed (gained) and the reverse
    (lost), task by task: both evaluations are greedy on the same tasks, so this pairs them."""
    from turngym.demo import paired_outcomes

    pair = paired_outcomes(out / "sft" / "eval" / "update_0000.jsonl", run_dir / "eval" / f"update_{update:04d}.jsonl")
    return None if pair is None else dict(zip(("gained", "lost", "episodes"), pair))


def paired_of(out: Path, result: dict) -> dict | None:
    """A run's gained/lost episodes: from its result, or from its evaluation files (then written
    into the result, which is what ``benchmarks/results`` keeps of a run)."""
    if result.get("vs_sft") is None:
        run_dir = out / "runs" / f"{result['estimator']}-s{result['seed']}"
        result["vs_sft"] = paired_change(out, run_dir, result["updates"])
        if result["vs_sft"] is not None:
            (run_dir / "result.json").write_text(json.dumps(result, indent=1))
    return result["vs_sft"]


def paired_text(changes: list[dict | None]) -> str:
    """'+1/-0, +2/-1' per seed, '?' where a run's evaluation files are gone."""
    return ", ".join("?" if c is None else f"+{c['gained']}/-{c['lost']}" for c in changes)


def interval(values: list[float]) -> tuple[float, float]:
    """(mean, half-width of the 95% t-interval over seeds); half-width nan for one seed."""
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, float("nan")
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    return mean, T95.get(n - 1, 1.96) * sd / math.sqrt(n)


def report(args, out: Path, sft: dict | None) -> list[dict]:
    results = [json.loads(p.read_text()) for p in sorted((out / "runs").glob("*/result.json"))]
    base = sft.get("after_sft") if sft else None
    rows = []
    for est in args.estimators:
        mine = [r for r in results if r["estimator"] == est]
        if not mine:
            continue
        final = [r["eval"][str(r["updates"])] for r in mine if str(r["updates"]) in r["eval"]]
        mean, half = interval(final)
        rows.append({"estimator": est, "seeds": len(mine), "final": mean, "ci": half,
                     "gain_over_sft": mean - base if base is not None else None,
                     "paired": paired_text([paired_of(out, r) for r in mine]),
                     "mixed_updates": f"{sum(r['mixed_updates'] for r in mine)}/{sum(r['updates'] for r in mine)}",
                     "episodes": mine[0]["episodes"], "minutes": sum(r["seconds"] for r in mine) / 60 / len(mine)})
    print(f"\nafter SFT (shared start): {base}   zero-shot: {sft.get('zero_shot') if sft else None}")
    print("| estimator | seeds | held-out success after RL (mean, 95% t-CI) | gain over SFT | "
          "episodes gained / lost vs SFT | updates with mixed groups | RL episodes per run | min per run |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        ci = "n/a" if math.isnan(r["ci"]) else f"+- {r['ci']:.2f}"
        gain = "-" if r["gain_over_sft"] is None else f"{r['gain_over_sft']:+.2f}"
        print(f"| {r['estimator']} | {r['seeds']} | {r['final']:.2f} {ci} | {gain} | {r['paired']} | {r['mixed_updates']} | "
              f"{r['episodes']} | {r['minutes']:.1f} |")
    if results:
        plot(args, results, base, out)
    (out / "summary.json").write_text(json.dumps({"sft": sft, "rows": rows}, indent=1))
    return rows


def plot(args, results: list[dict], base: float | None, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for k, est in enumerate(args.estimators):
        # a small sideways shift per estimator: equal means would otherwise hide each other
        shift = (k - (len(args.estimators) - 1) / 2) * 0.04
        mine = [r for r in results if r["estimator"] == est]
        if not mine:
            continue
        xs = sorted({int(k) for r in mine for k in r["eval"]})
        points = [(0, base, 0.0)] if base is not None else []
        for x in xs:
            vals = [r["eval"][str(x)] for r in mine if str(x) in r["eval"]]
            mean, half = interval(vals)
            points.append((x, mean, 0.0 if math.isnan(half) else half))
        px, py, ph = zip(*points)
        px = [x + shift for x in px]
        line, = ax.plot(px, py, "o-", label=f"{est} ({len(mine)} seeds)")
        ax.fill_between(px, [y - h for y, h in zip(py, ph)], [y + h for y, h in zip(py, ph)],
                        color=line.get_color(), alpha=0.15)
    ax.set_xlabel("RL update (0 = the shared SFT checkpoint; estimators shifted apart slightly)")
    ax.set_ylabel("held-out success (greedy)")
    ax.set_title(f"SmolLM2-135M + LoRA on {ENV_ID}\nheld-out success, mean over seeds with 95% t-bands", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    target = Path(args.figure)
    target.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(target, dpi=100)
    plt.close(fig)
    print(f"figure: {target}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/llm-credit")
    parser.add_argument("--estimators", default="gigpo,grpo,rloo,hgpo")
    parser.add_argument("--seeds", default="0,1,2")
    # 4 updates of 4 x 8: about 11 min a run on 2 idle cores (the demo's phase times), 12 runs < 3 h
    parser.add_argument("--updates", type=int, default=4)
    parser.add_argument("--tasks-per-update", type=int, default=4)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--eval-every", type=int, default=4)
    parser.add_argument("--eval-episodes", type=int, default=50)
    parser.add_argument("--sft-episodes", type=int, default=32)
    parser.add_argument("--max-turns", type=int, default=6)
    parser.add_argument("--shaped-reward", type=float, default=0.5)
    parser.add_argument("--temperature", type=float, default=0.8,
                        help="sampling temperature of training rollouts (default: 0.8, that of the recorded runs)")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's choice)")
    parser.add_argument("--model", default="smollm2-135m", help="start model (tiny: a smoke test of the script)")
    parser.add_argument("--figure", default=str(ROOT / "docs" / "figures" / "llm_credit_assignment.png"))
    parser.add_argument("--report", action="store_true", help="only aggregate the finished runs")
    args = parser.parse_args()
    args.estimators = [e for e in args.estimators.split(",") if e]
    seeds = [int(s) for s in args.seeds.split(",") if s]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    if args.report:
        sft_file = out / "sft" / "result.json"
        report(args, out, json.loads(sft_file.read_text()) if sft_file.exists() else None)
        return
    print(f"sft stage -> {out / 'sft'}", flush=True)
    sft = sft_stage(args, out)
    print(f"sft: zero-shot {sft['zero_shot']}, after SFT {sft['after_sft']}", flush=True)
    for seed in seeds:
        for est in args.estimators:
            done = (out / "runs" / f"{est}-s{seed}" / "result.json").exists()
            print(f"{est} seed {seed}: {'done, skipped' if done else 'running'}", flush=True)
            r = rl_run(args, out, est, seed)
            print(f"{est} seed {seed}: eval {r['eval']} ({r['seconds'] / 60:.1f} min)", flush=True)
            report(args, out, sft)


if __name__ == "__main__":
    main()
