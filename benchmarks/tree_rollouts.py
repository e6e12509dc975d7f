"""Tree rollouts against today's independent rollouts with the embedded model, side by side in one
run: RL episodes and trained turns per minute, and the prompt positions the prefix reuse saves.

    PYTHONPATH=. .venv/bin/python benchmarks/tree_rollouts.py [--out runs/tree-bench] \
        [--sft-dir runs/llm-credit] [--tasks 2] [--group-size 8] [--roots 4] [--branches 2] \
        [--points 2] [--after 0,2] [--updates 1] [--repeats 1] [--threads 1]

Both sides train from the same start: SmolLM2-135M after the demo's SFT (the shared SFT stage of
``llm_credit_assignment.py``, reused from ``--sft-dir`` when it is there), a fresh LoRA adapter,
the demo's env, prompt and sampling, ``--updates`` updates of ``--tasks`` tasks. Independent:
``--group-size`` rollouts per task, GiGPO. Tree: ``--roots`` rollouts per task and ``--points``
branch points with ``--branches`` continuations each (``rl.branches``), sibling credit, once per
value of ``--after`` (``rl.branch_after``: 0 chooses the branch points when the roots have ended,
n once they have played n turns); with the defaults every side plays 8 episodes per task. Sides
alternate ``--repeats`` times.

Per side it reports the wall seconds of the RL updates (rollouts + advantages + the update; no
model load, no evaluation) and this process's CPU seconds in them (with ``--threads 1`` and the
inline backend, the work done: on a shared machine the wall time mostly measures the other
processes), RL episodes and trained turns (loss rows) per minute of each, and prompt
positions: what the prompts hold (what a policy without a key/value cache computes) and what the
policy's prefix cache actually computed (``PrefixCache.computed_tokens``). The machine's load
average is recorded before and after. The last line is JSON (kept under
``benchmarks/results/tree_rollouts/``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def cpu_timed(module, name: str, key: str) -> None:
    """Wrap ``module.name`` so that each call adds its CPU seconds to ``CPU[key]``."""
    inner = getattr(module, name)

    def timed(*args, **kwargs):
        start = time.process_time()
        out = inner(*args, **kwargs)
        CPU[key] = CPU.get(key, 0.0) + time.process_time() - start
        return out

    setattr(module, name, timed)


CPU: dict[str, float] = {}


def run_side(args, sft_model: Path, side: str, repeat: int, after: int = 0) -> dict:
    from llm_credit_assignment import common

    from turngym.core.records import read_jsonl
    from turngym.core.runs import read_metrics
    from turngym.trainers.config import load_config
    from turngym.trainers.loop import train

    run_dir = (
        Path(args.out) / f"{side}{repeat}" if side == "independent" else Path(args.out) / f"tree-after{after}-{repeat}"
    )
    if side == "tree":
        shape = [
            f"rl.group_size={args.roots}",
            f"rl.branches={args.branches}",
            f"rl.branch_points={args.points}",
            f"rl.branch_after={after}",
            "rl.estimator=sibling",
        ]
    else:
        shape = [f"rl.group_size={args.group_size}", "rl.estimator=gigpo"]
    cfg = load_config(
        None,
        [
            *common(args),
            f"run_dir={run_dir}",
            "seed=0",
            "resume=false",
            "checkpoint_every=0",
            f"model.name={sft_model}",
            "sft.episodes=0",
            f"rl.updates={args.updates}",
            f"rl.tasks_per_update={args.tasks}",
            "eval.at_start=false",
            "eval.every=0",
            "eval.episodes=1",
            "save_rollouts=true",
            *shape,
        ],
    )
    CPU.clear()
    tr = train(cfg, log=lambda line: print(f"  {side}: {line}", flush=True))
    cpu = CPU.get("one_update", 0.0)
    rows = [r for r in read_metrics(run_dir / "metrics.jsonl") if r.get("update")]
    seconds = sum(r["time/rollout"] + r["time/advantages"] + r["time/update"] for r in rows)
    trajs = [t for u in range(1, args.updates + 1) for t in read_jsonl(run_dir / "rollouts" / f"update_{u:04d}.jsonl")]
    trained = sum(1 for t in trajs if t.scorable for s in t.steps if s.completion_ids)
    prompt_positions = sum(len(s.prompt_ids) for t in trajs for s in t.steps)
    return {
        "side": side if side == "independent" else f"tree (after {after})",
        "repeat": repeat,
        "episodes": len(trajs),
        "branches": sum(bool(t.parent) for t in trajs),
        "turns_played": sum(t.length for t in trajs),
        "trained_turns": trained,
        "rollout_s": sum(r["time/rollout"] for r in rows),
        "update_s": sum(r["time/advantages"] + r["time/update"] for r in rows),
        "rl_s": seconds,
        "rollout_cpu_s": CPU.get("collect", 0.0),
        "rl_cpu_s": cpu,
        "episodes_per_cpu_min": 60 * len(trajs) / cpu if cpu else None,
        "trained_turns_per_cpu_min": 60 * trained / cpu if cpu else None,
        "episodes_per_min": 60 * len(trajs) / seconds,
        "trained_turns_per_min": 60 * trained / seconds,
        "generated_tokens": sum(r.get("policy/completion_tokens", 0) for r in rows),
        "prompt_positions": prompt_positions,
        "computed_positions": tr.policy.kv_cache.computed_tokens,
        "train_success": sum(t.success for t in trajs) / len(trajs),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/tree-bench")
    parser.add_argument("--sft-dir", default=None, help="an llm_credit_assignment.py --out folder whose SFT to reuse")
    parser.add_argument("--tasks", type=int, default=2)
    parser.add_argument("--group-size", type=int, default=8, help="independent: rollouts per task")
    parser.add_argument("--roots", type=int, default=4, help="tree: roots per task")
    parser.add_argument("--branches", type=int, default=2, help="tree: continuations per branch point")
    parser.add_argument("--points", type=int, default=2, help="tree: branch points per group")
    parser.add_argument("--after", default="0,2", help="tree: rl.branch_after values, one tree side each")
    parser.add_argument("--updates", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--sft-episodes", type=int, default=32)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's choice)")
    parser.add_argument("--model", default="smollm2-135m", help="tiny: a smoke test of the script")
    args = parser.parse_args()
    # what llm_credit_assignment.common reads: the demo's sizes for SFT, and this run's for RL
    args.eval_episodes, args.max_turns, args.shaped_reward = 4, 6, 0.5
    args.tasks_per_update, args.lr, args.temperature = args.tasks, 1e-4, 0.8
    import torch
    from llm_credit_assignment import sft_stage

    from turngym.trainers import loop

    # the CPU seconds of each update and of its rollouts (rl_updates and one_update look these
    # names up in the module when they call them)
    cpu_timed(loop, "one_update", "one_update")
    cpu_timed(loop, "collect", "collect")

    if args.threads:
        torch.set_num_threads(args.threads)
    load_before = os.getloadavg()
    sft_out = Path(args.sft_dir or args.out)
    sft_out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    sft = sft_stage(args, sft_out)
    print(f"start: after SFT {sft['after_sft']} held-out success ({time.perf_counter() - start:.0f} s)", flush=True)
    rows = []
    for repeat in range(args.repeats):
        rows.append(run_side(args, sft_out / "sft" / "model", "independent", repeat))
        for after in [int(a) for a in args.after.split(",") if a]:
            rows.append(run_side(args, sft_out / "sft" / "model", "tree", repeat, after))
    load_after = os.getloadavg()
    print(
        "| side | episodes (branches) | trained turns | RL wall s | RL CPU s (rollouts) | episodes/CPU min | "
        "trained turns/CPU min | episodes/wall min | prompt positions | computed | computed per episode |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['side']} | {r['episodes']} ({r['branches']}) | {r['trained_turns']} | {r['rl_s']:.1f} | "
            f"{r['rl_cpu_s']:.1f} ({r['rollout_cpu_s']:.1f}) | {r['episodes_per_cpu_min']:.1f} | "
            f"{r['trained_turns_per_cpu_min']:.1f} | {r['episodes_per_min']:.1f} | {r['prompt_positions']} | "
            f"{r['computed_positions']} | {r['computed_positions'] / r['episodes']:.0f} |"
        )
    print(f"load average before {load_before}, after {load_after}")
    print(
        json.dumps(
            {
                "args": vars(args),
                "threads": torch.get_num_threads(),
                "load_before": load_before,
                "load_after": load_after,
                "sft": sft,
                "rows": rows,
            }
        )
    )


if __name__ == "__main__":
    main()
