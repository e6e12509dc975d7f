"""Credit assignment with a real LLM: GRPO vs RLOO vs GiGPO vs HGPO (and more) on SmolLM2-135M.

    PYTHONPATH=. nohup .venv/bin/python benchmarks/llm_credit_assignment.py > runs/llm-credit.log &
        [--out runs/llm-credit] [--estimators grpo,rloo,gigpo,hgpo] [--seeds 0,1,2,3,4] [--updates 38]

On 2 cores, two processes of one torch thread each finish more runs per hour than one of two
threads (the demo: 31 min each, two side by side, against 19.9 min alone): start the same command
twice with ``--threads 1 --shard 0/2`` and ``--threads 1 --shard 1/2``. Shard 0 runs the SFT
stage; the others wait for it, then each takes every second run of the list.

Every run starts from one shared SFT checkpoint (SmolLM2-135M-Instruct after imitating expert
episodes of Household-Easy, merged and saved once), puts a fresh LoRA adapter on it, and runs the
same number of RL updates with the same episodes per update; only the advantage estimator and the
seed differ. Held-out success (greedy, every one of the 134 valid_unseen tasks by default) is
measured after SFT (shared x = 0) and every ``--eval-every`` updates (19 and 38 by default: three
points with the shared start; 38 updates of 2 x 8 are 608 RL episodes a run). The demo's ``rl.estimator_args`` (advantages not
divided by their group's spread) go to each estimator that takes them (RLOO takes none).

The report pairs every estimator with GRPO task by task at each seed (the same 134 episodes,
greedy): episodes gained and lost, the exact sign test on the changes pooled over seeds, and the
mean difference in success over seeds with its 95% t-interval. Each finished run's compact
result (held-out success per evaluation, every task's outcome, train success per update) is
copied to ``--results`` (``benchmarks/results/llm_credit_assignment_power/`` by default), which
is what the repository keeps of a run.

Resumable: each run writes ``OUT/runs/<estimator>-s<seed>/result.json`` when it finishes and
checkpoints after every update, so rerunning the same command skips finished runs and continues
an interrupted one from its last update. On a fresh checkout the runs kept in ``--results``
count as finished (a machine computing in another dtype refuses to add runs to them), the SFT
stage is made again, and a warning names the held-out episodes where it differs from the kept
one (each result records the libraries it ran with and the SFT start's scores). Runs go
seed by seed (all estimators for seed 0 first), so a partial result still compares every
estimator. ``--report`` only aggregates what exists: a table (mean over seeds with a 95%
t-interval) and a PNG with confidence bands.
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
# one-sided 80% Student t quantiles (power 0.8), same degrees of freedom
T80 = {1: 1.376, 2: 1.061, 3: 0.978, 4: 0.941, 5: 0.920, 6: 0.906, 7: 0.896, 8: 0.889, 9: 0.883}
Z95, Z80 = 1.960, 0.8416
SFT_SCORES = (
    "after_sft",
    "after_sft_return",
)  # what tells two SFT starts apart when their episodes are not kept


def common(args) -> list[str]:
    """The demo's settings (``turngym.demo.demo_overrides``: env, rewards, prompt, model, SFT and
    RL sizes), with this benchmark's sizes; each stage appends its own overrides after these."""
    from turngym import demo

    demo_args = demo.parse(
        [
            "--model",
            args.model,
            "--processes",
            "1",
            "--eval-episodes",
            str(args.eval_episodes),
            "--sft-episodes",
            str(args.sft_episodes),
            "--max-turns",
            str(args.max_turns),
            "--shaped-reward",
            str(args.shaped_reward),
            "--tasks-per-update",
            str(args.tasks_per_update),
            "--group-size",
            str(args.group_size),
            # the demo reports on the sealed test split by default; this benchmark chooses
            # between estimators, which is done on a validation split
            "--eval-split",
            getattr(args, "eval_split", "valid_unseen"),
            "--lr",
            str(args.lr),
            "--temperature",
            str(args.temperature),
            "--no-progress",
            "--curve-episodes",
            "0",
            "--num-envs",
            str(max(args.eval_episodes, args.tasks_per_update * args.group_size)),
        ]
    )
    return [*demo.demo_overrides(demo_args), "tensorboard=false"]


def sft_stage(args, out: Path) -> dict:
    """The shared starting point: SFT once, evaluate it, save the merged model."""
    from turngym.agents.models import save_model
    from turngym.core.runs import read_metrics
    from turngym.trainers.config import load_config
    from turngym.trainers.loop import train

    model_dir = out / "sft" / "model"
    result = out / "sft" / "result.json"
    if result.exists() and (model_dir / "config.json").exists():
        return json.loads(result.read_text())
    cfg = load_config(
        None,
        [
            *common(args),
            f"run_dir={out / 'sft'}",
            "seed=0",
            "resume=false",
            "checkpoint_every=0",
            "rl.updates=0",
            "eval.at_start=true",
        ],
    )
    start = time.perf_counter()
    tr = train(cfg, log=lambda line: print(f"  sft: {line}", flush=True))
    save_model(tr.model, tr.tokenizer, model_dir)
    row = read_metrics(out / "sft" / "metrics.jsonl")[0]
    data = {
        "zero_shot": row.get("eval/success_rate"),
        "after_sft": row.get("eval_after_sft/success_rate"),
        "after_sft_return": row.get("eval_after_sft/mean_return"),
        "seconds": time.perf_counter() - start,
        "dtype": compute_dtype(),
        "versions": versions(),
        "episodes": outcomes(out / "sft" / "eval" / "update_0000.jsonl", returns=True),
    }
    result.write_text(json.dumps(data, indent=1))
    return data


def versions() -> dict[str, str]:
    """The libraries whose arithmetic a run depends on: an SFT stage made again with other
    versions need not reproduce the kept one."""
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for name in ("torch", "transformers", "peft"):
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            continue
    return found


def sft_differences(kept: dict, made: dict) -> str | None:
    """How the SFT stage made here differs from the one the kept runs started from: its success
    and mean return, and (where both kept their episodes) the tasks whose outcome or return
    changed; None when they agree."""
    mine, theirs = made.get("episodes"), kept.get("episodes")
    # an episode differs in its task, outcome or return; lists of other lengths are other evaluations
    changed = [] if not (mine and theirs) else [a[0] for a, b in zip(mine, theirs) if list(a) != list(b)]
    other_length = bool(mine and theirs) and len(mine) != len(theirs)
    if all(kept.get(k) == made.get(k) for k in SFT_SCORES) and not changed and not other_length:
        return None
    text = (
        f"this SFT start scores {made['after_sft']} (return {made['after_sft_return']}), the one the kept runs "
        f"started from {kept.get('after_sft')} (return {kept.get('after_sft_return')})"
    )
    if mine and theirs:
        text += f"; {len(changed)} of {len(mine)} held-out episodes differ ({', '.join(changed[:5])})"
        if other_length:
            text += f"; {len(mine)} held-out episodes here, {len(theirs)} there"
    if kept.get("versions", made.get("versions")) != made.get("versions"):
        text += f"; libraries {made.get('versions')} here, {kept.get('versions')} there"
    return text


def compute_dtype() -> str:
    """The dtype the runs compute in (the demo's ``auto``): bfloat16 on a CPU with native
    bfloat16, float32 elsewhere. Runs of one comparison must share it."""
    from turngym.agents.models import native_dtype

    return native_dtype("cpu")


def adopt_kept(args, out: Path) -> None:
    """Runs finished on another machine: the repository keeps only their compact results
    (``--results``), so a fresh checkout adopts those as finished instead of running them again.
    Refuses (one line, exit status 1) when they were computed in another dtype than this
    machine's: the new runs would not compare with them."""
    here = compute_dtype()
    for kept in sorted((Path(args.results) / "runs").glob("*.json")):
        text = kept.read_text()
        data = json.loads(text)
        if data.get("dtype", here) != here:
            sys.exit(
                f"llm_credit_assignment: {kept.name} was computed in {data['dtype']}, this machine computes "
                f"in {here} (a CPU {'with' if here == 'bfloat16' else 'without'} native bfloat16): new runs "
                "would not compare with it; run on a machine like the one that made it, or move the kept "
                "results aside to start a new comparison"
            )
        result = out / "runs" / kept.stem / "result.json"
        if not result.exists():
            result.parent.mkdir(parents=True, exist_ok=True)
            result.write_text(text)


def rl_run(args, out: Path, estimator: str, seed: int) -> dict:
    import torch

    from turngym.core.runs import read_metrics
    from turngym.trainers.config import load_config
    from turngym.trainers.loop import train

    run_dir = out / "runs" / f"{estimator}-s{seed}"
    result = run_dir / "result.json"
    if result.exists():
        return json.loads(result.read_text())
    cfg = load_config(
        None,
        [
            *common(args),
            f"run_dir={run_dir}",
            f"seed={seed}",
            "resume=true",
            "checkpoint_every=1",
            "keep_checkpoints=1",
            f"model.name={out / 'sft' / 'model'}",
            "sft.episodes=0",
            f"rl.estimator={estimator}",
            f"rl.updates={args.updates}",
            f"rl.estimator_args={estimator_args(estimator)}",
            "eval.at_start=false",
            f"eval.every={args.eval_every}",
        ],
    )
    start = time.perf_counter()
    train(cfg, log=lambda line: print(f"  {estimator}-s{seed}: {line}", flush=True))
    rows = read_metrics(run_dir / "metrics.jsonl")
    data = {
        "estimator": estimator,
        "seed": seed,
        "eval": {str(r["update"]): r["eval/success_rate"] for r in rows if r.get("eval/success_rate") is not None},
        "train_success": [r.get("train/success_rate") for r in rows if r.get("update")],
        "mixed_updates": sum(1 for r in rows if r.get("update") and r.get("train/mixed_groups")),
        "updates": sum(1 for r in rows if r.get("update")),
        "episodes": max((r.get("episodes", 0) for r in rows), default=0),
        "seconds": time.perf_counter() - start,
        "threads": torch.get_num_threads(),
        "commit": commit(),
        "dtype": compute_dtype(),
        "versions": versions(),
        "sft_start": sft_start(out),
    }
    from turngym.core.versions import stamp

    data = stamp(data, cfg.env.id, **cfg.env.kwargs)
    data["vs_sft"] = paired_change(out, run_dir, data["updates"])
    data["outcomes"] = {u: outcomes(run_dir / "eval" / f"update_{int(u):04d}.jsonl") for u in data["eval"]}
    result.write_text(json.dumps(data, indent=1))
    keep = Path(args.results) / "runs" / f"{estimator}-s{seed}.json"
    keep.parent.mkdir(parents=True, exist_ok=True)
    keep.write_text(json.dumps(data, indent=1))
    return data


def sft_start(out: Path) -> dict:
    """The SFT start's scores, kept with each run: runs made on different machines may start from
    SFT stages that differ slightly (``sft_differences``)."""
    data = json.loads((out / "sft" / "result.json").read_text())
    return {k: data.get(k) for k in SFT_SCORES}


def commit() -> str | None:
    """The checkout's commit: runs of one comparison should all come from the same code."""
    import subprocess

    done = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() or None


def wait_for_sft(out: Path) -> dict:
    """Shards other than 0: shard 0's SFT stage result, once it exists."""
    result = out / "sft" / "result.json"
    print(f"waiting for shard 0's SFT stage ({result})", flush=True)
    while not (result.exists() and (out / "sft" / "model" / "config.json").exists()):
        time.sleep(10)
    return json.loads(result.read_text())


def estimator_args(estimator: str) -> str:
    """The demo's ``rl.estimator_args``, keeping only the options this estimator declares."""
    from turngym.trainers.advantages import ESTIMATORS

    demo_args = {"scale": "false"}
    kept = {k: v for k, v in demo_args.items() if k in ESTIMATORS[estimator].options}
    return "{" + ", ".join(f"{k}: {v}" for k, v in kept.items()) + "}"


def outcomes(path: Path, returns: bool = False) -> list[list] | None:
    """[task_id, success] (and the return, with ``returns``) of every episode of an evaluation
    file, in order."""
    from turngym.core.records import read_jsonl

    if not path.exists():
        return None
    return [[t.task_id, bool(t.success), *([t.episode_return] if returns else [])] for t in read_jsonl(path)]


def versus(results: list[dict], estimator: str, baseline: str = "grpo") -> dict | None:
    """``estimator`` against ``baseline`` on the final evaluations of the seeds both finished:
    episodes gained/lost task by task (pooled), the exact sign test on them, and the mean
    difference in success over seeds with its 95% t-interval."""
    from turngym.core.stats import sign_test

    final = {(r["estimator"], r["seed"]): r for r in results}
    gained = lost = paired = 0
    diffs = []
    for (est, seed), r in final.items():
        other = final.get((baseline, seed))
        if est != estimator or other is None:
            continue
        mine, theirs = (
            r.get("outcomes", {}).get(str(r["updates"])),
            other.get("outcomes", {}).get(str(other["updates"])),
        )
        if not mine or not theirs or [t for t, _ in mine] != [t for t, _ in theirs]:
            continue
        gained += sum(a and not b for (_, a), (_, b) in zip(mine, theirs))
        lost += sum(b and not a for (_, a), (_, b) in zip(mine, theirs))
        paired += len(mine)
        diffs.append(sum(a for _, a in mine) / len(mine) - sum(b for _, b in theirs) / len(theirs))
    if not diffs:
        return None
    mean, half = interval(diffs)
    return {
        "seeds": len(diffs),
        "gained": gained,
        "lost": lost,
        "p": sign_test(gained, lost),
        "mean_difference": mean,
        "ci": half,
        **detectable(gained + lost, paired, diffs),
    }


def detectable(changed: int, paired: int, diffs: list[float]) -> dict:
    """The smallest difference in success these runs would detect with 80% power (two-sided 5%),
    by the normal approximations of the two tests reported:

    - the sign test on the pooled episodes: ``(z_.975 + z_.8) * sqrt(d / n)``, with ``n`` paired
      episodes of which a share ``d`` changed outcome (the variance of a paired difference of
      0/1 outcomes is ``d - delta^2``, about ``d`` for small ``delta``);
    - the t-test over seeds: ``(t_.975 + t_.8) * sd / sqrt(k)``, with ``sd`` the spread of the
      per-seed differences over ``k`` seeds (it also counts run-to-run variation, which the
      pooled test does not: each seed's episodes share one trained policy).
    """
    by_episodes = (Z95 + Z80) * math.sqrt(changed) / paired if paired else float("nan")  # sqrt(d / n)
    k = len(diffs)
    if k < 2:
        return {"detectable_episodes": by_episodes, "detectable_seeds": float("nan")}
    mean = sum(diffs) / k
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (k - 1))
    return {
        "detectable_episodes": by_episodes,
        "detectable_seeds": (T95.get(k - 1, Z95) + T80.get(k - 1, Z80)) * sd / math.sqrt(k),
    }


def paired_change(out: Path, run_dir: Path, update: int) -> dict | None:
    """Held-out episodes the run solved that the SFT checkpoint failed (gained) and the reverse
    (lost), task by task: both evaluations are greedy on the same tasks, so this pairs them."""
    from turngym.core.stats import paired_outcomes

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
        rows.append(
            {
                "estimator": est,
                "seeds": len(mine),
                "final": mean,
                "ci": half,
                "gain_over_sft": mean - base if base is not None else None,
                "paired": paired_text([paired_of(out, r) for r in mine]),
                "mixed_updates": f"{sum(r['mixed_updates'] for r in mine)}/{sum(r['updates'] for r in mine)}",
                "episodes": mine[0]["episodes"],
                "minutes": sum(r["seconds"] for r in mine) / 60 / len(mine),
            }
        )
    print(f"\nafter SFT (shared start): {base}   zero-shot: {sft.get('zero_shot') if sft else None}")
    print(
        "| estimator | seeds | held-out success after RL (mean, 95% t-CI) | gain over SFT | "
        "episodes gained / lost vs SFT | updates with mixed groups | RL episodes per run | min per run |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        ci = "n/a" if math.isnan(r["ci"]) else f"+- {r['ci']:.2f}"
        gain = "-" if r["gain_over_sft"] is None else f"{r['gain_over_sft']:+.2f}"
        print(
            f"| {r['estimator']} | {r['seeds']} | {r['final']:.2f} {ci} | {gain} | {r['paired']} | {r['mixed_updates']} | "
            f"{r['episodes']} | {r['minutes']:.1f} |"
        )
    print("\nagainst GRPO, final evaluations, seed by seed on the same held-out episodes:")
    print(
        "| estimator | seeds | mean difference in success (95% t-CI) | episodes gained / lost (pooled) | "
        "exact sign test p | detectable at 80% power: sign test / t over seeds |"
    )
    print("|---|---|---|---|---|---|")
    pairs = {}
    for est in args.estimators:
        v = versus(results, est) if est != "grpo" else None
        if v is None:
            continue
        pairs[est] = v
        ci = "n/a" if math.isnan(v["ci"]) else f"+- {v['ci']:.3f}"
        power = " / ".join(
            "n/a" if math.isnan(v[k]) else f"{v[k]:.3f}" for k in ("detectable_episodes", "detectable_seeds")
        )
        print(
            f"| {est} | {v['seeds']} | {v['mean_difference']:+.3f} {ci} | +{v['gained']}/-{v['lost']} | {v['p']:.3g} "
            f"| {power} |"
        )
    if results:
        plot(args, results, base, out)
    summary = json.dumps({"sft": sft, "rows": rows, "versus_grpo": pairs}, indent=1)
    (out / "summary.json").write_text(summary)
    Path(args.results).mkdir(parents=True, exist_ok=True)
    (Path(args.results) / "summary.json").write_text(summary)
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
        (line,) = ax.plot(px, py, "o-", label=f"{est} ({len(mine)} seeds)")
        ax.fill_between(
            px,
            [y - h for y, h in zip(py, ph)],
            [y + h for y, h in zip(py, ph)],
            color=line.get_color(),
            alpha=0.15,
        )
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
    parser.add_argument(
        "--results",
        default=str(ROOT / "benchmarks" / "results" / "llm_credit_assignment_power"),
        help="where each finished run's compact result and the summary are kept (committed)",
    )
    parser.add_argument("--estimators", default="grpo,rloo,gigpo,hgpo")
    parser.add_argument("--seeds", default="0,1,2,3,4")
    # 38 updates of 2 x 8 = 608 RL episodes a run, all from one SFT start
    parser.add_argument("--updates", type=int, default=38)
    parser.add_argument("--tasks-per-update", type=int, default=2)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--lr", type=float, default=3e-4, help="RL learning rate (default: the demo's, 3e-4)")
    parser.add_argument("--eval-every", type=int, default=19)
    parser.add_argument(
        "--shard",
        default="0/1",
        help="K/N: this process takes runs K, K+N, K+2N... of the "
        "list (seed by seed); shard 0 runs the SFT stage, the others wait for it (default: 0/1)",
    )
    parser.add_argument(
        "--eval-episodes", type=int, default=134, help="held-out episodes (134: every valid_unseen task)"
    )
    parser.add_argument("--sft-episodes", type=int, default=32)
    parser.add_argument("--max-turns", type=int, default=6)
    parser.add_argument("--shaped-reward", type=float, default=0.5)
    parser.add_argument(
        "--temperature",
        type=float,
        default=0.8,
        help="sampling temperature of training rollouts (default: 0.8, that of the recorded runs)",
    )
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
    shard, _, shards = args.shard.partition("/")
    if not (shard.isdigit() and shards.isdigit() and int(shard) < int(shards)):
        parser.error(f"--shard: K/N with 0 <= K < N, got {args.shard!r}")
    shard, shards = int(shard), int(shards)
    adopt_kept(args, out)
    if shard == 0:
        print(f"sft stage -> {out / 'sft'}", flush=True)
        sft = sft_stage(args, out)
    else:
        sft = wait_for_sft(out)
    print(f"sft: zero-shot {sft['zero_shot']}, after SFT {sft['after_sft']}", flush=True)
    kept_summary = Path(args.results) / "summary.json"
    before = json.loads(kept_summary.read_text()).get("sft") if kept_summary.exists() else None
    differ = sft_differences(before, sft) if before else None
    if differ:
        print(
            f"warning: {differ}: the SFT stage did not reproduce it exactly, so new runs start from a slightly "
            "different policy",
            flush=True,
        )
    runs = [(seed, est) for seed in seeds for est in args.estimators]
    for seed, est in runs[shard::shards]:
        done = (out / "runs" / f"{est}-s{seed}" / "result.json").exists()
        print(f"{est} seed {seed}: {'done, skipped' if done else 'running'}", flush=True)
        r = rl_run(args, out, est, seed)
        print(f"{est} seed {seed}: eval {r['eval']} ({r['seconds'] / 60:.1f} min)", flush=True)
        report(args, out, sft)


if __name__ == "__main__":
    main()
