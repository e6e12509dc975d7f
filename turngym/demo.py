"""`turngym demo` (`make demo`): train the embedded SmolLM2-135M on an easy household preset, on CPU.

1. evaluate the untrained model zero-shot on held-out tasks (valid_unseen, greedy);
2. imitate a few dozen expert episodes (SFT, LoRA);
3. reinforce with GiGPO (step-level credit from the env's state keys) for a few updates;
4. evaluate again, print a before/after table and write the learning curves (PNG).

The numbers are whatever this run measures. Everything goes to ``--run-dir`` (default
``runs/demo``) in the layout ``turngym train`` uses, so ``turngym view``/reports read it too.
The settings below are sized for about ten minutes on two CPU cores.
"""

from __future__ import annotations

import argparse
import time

ENV_ID = "turngym/Household-Easy-v0"
SYSTEM_PROMPT = "You are an agent in a household. Each turn, pick one of the admissible actions."


def demo_overrides(args) -> list[str]:
    """The demo's training config, as `turngym train` overrides (print with --show-config)."""
    return [
        f"run_dir={args.run_dir}", f"seed={args.seed}", "resume=false", "checkpoint_every=0",
        f"env.id={ENV_ID}", "env.eval_split=valid_unseen", "env.backend=inline", "env.num_envs=10",
        f"env.max_turns={args.max_turns}",
        f"model.name={args.model}", "model.lora=true", "model.lora_rank=16", "model.lora_alpha=32",
        "generation.max_new_tokens=16", "generation.temperature=1.0", "generation.eval_temperature=0",
        # the preset lists admissible actions in every observation already; the goal stays in the
        # first message and only the last turn is shown, which keeps prompts near 300 tokens (on
        # CPU, prompt tokens are most of the cost of both generation and training)
        "prompt.history=last_k", "prompt.history_k=1", "prompt.show_admissible=false",
        f"prompt.system_prompt={SYSTEM_PROMPT}",
        f"sft.episodes={args.sft_episodes}", "sft.epochs=1", "sft.lr=1e-3", "sft.batch_size=8",
        "sft.micro_batch_size=8",
        f"rl.updates={args.updates}", "rl.estimator=gigpo", "rl.tasks_per_update=2", f"rl.group_size={args.group_size}",
        "rl.lr=5e-4", "rl.minibatch_size=16", "rl.micro_batch_size=8", "rl.kl_coef=0",
        f"eval.episodes={args.eval_episodes}", "eval.every=0", "eval.at_start=true",
        f"progress={'false' if args.no_progress else 'true'}",
    ]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--run-dir", default="runs/demo", help="output folder (default: runs/demo)")
    p.add_argument("--model", default="smollm2-135m", help="smollm2-135m (default) or tiny (a smoke test)")
    p.add_argument("--updates", type=int, default=3, help="GiGPO updates (default: 3)")
    p.add_argument("--group-size", type=int, default=4, help="rollouts per task in a GiGPO group (default: 4)")
    p.add_argument("--sft-episodes", type=int, default=16, help="expert episodes to imitate (default: 16)")
    p.add_argument("--eval-episodes", type=int, default=10, help="held-out episodes per evaluation (default: 10)")
    p.add_argument("--max-turns", type=int, default=6, help="turn limit per episode (default: 6; the expert needs 4)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1,
                   help="torch CPU threads (default 1: measured within budget, and robust when other "
                        "processes share the cores; 0 = torch's choice)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.add_argument("--show-config", action="store_true", help="print the training config and exit")


def run(args) -> int:
    from turngym.trainers.config import dump_yaml, load_config

    cfg = load_config(None, demo_overrides(args))
    if args.show_config:
        print(dump_yaml(cfg), end="")
        return 0
    import torch

    from turngym.cli import format_table
    from turngym.trainers.loop import train
    from turngym.trainers.metrics import read_metrics

    if args.threads:
        torch.set_num_threads(args.threads)
    if torch.cuda.is_available():
        cfg.model.device = "cpu"  # the demo is the CPU run; `turngym train` uses a GPU when there is one
    print(f"turngym demo: {args.model} on {ENV_ID}: zero-shot eval -> SFT on {args.sft_episodes} expert "
          f"episodes -> {args.updates} GiGPO updates -> eval; writing {cfg.run_dir}/", flush=True)
    start = time.perf_counter()
    train(cfg, log=lambda line: print(f"  {line}", flush=True))
    minutes = (time.perf_counter() - start) / 60
    rows = read_metrics(f"{cfg.run_dir}/metrics.jsonl")
    first, last = rows[0], rows[-1]
    table = [stage_row("zero-shot", first, "eval/"),
             stage_row(f"after SFT ({first.get('sft/turns', 0)} expert turns)", first, "eval_after_sft/"),
             stage_row(f"after SFT + {last.get('update', 0)} GiGPO updates", last, "eval/")]
    print()
    print(f"Held-out tasks ({ENV_ID}, valid_unseen, {args.eval_episodes} episodes, greedy):")
    print(format_table(table, ["policy", "success_rate", "mean_return", "mean_steps"]))
    print()
    print(f"learning curves: {cfg.run_dir}/curves.png   metrics: {cfg.run_dir}/metrics.jsonl   "
          f"total {minutes:.1f} min")
    print(f"report: {cfg.run_dir}/report.html   (browse the episodes: turngym view {cfg.run_dir})")
    return 0


def stage_row(name: str, row: dict, prefix: str) -> dict:
    return {"policy": name, **{k: row.get(f"{prefix}{k}", "-") for k in ("success_rate", "mean_return",
                                                                          "mean_steps")}}
