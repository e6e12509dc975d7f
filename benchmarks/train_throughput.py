"""Train-step throughput (tokens/s) of turngym's trainer vs TRL's GRPOTrainer, same run, CPU.

Same model (SmolLM2-135M-Instruct, float32, full fine-tuning), same batch (2 prompts x 4
completions of at most 32 new tokens, sampled at temperature 1), same optimiser (AdamW, one step
per batch, no KL term). A step is generation + the clipped policy-gradient update. Tokens are
prompt + completion tokens the step processed (TRL's own ``num_tokens`` count on its side).
The first step of each side is a warm-up and is not counted. TRL runs in its own venv
(``.bench-venvs/trl``, trl==1.16.0 with torch==2.13.0 CPU).

    PYTHONPATH=. python benchmarks/train_throughput.py [--steps 3] [--model smollm2-135m]

The raw per-step figures of both sides go to ``--out`` (one JSON file per run).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _refenv import reference_python, run_json  # noqa: E402

from turngym.integrations.trl import cpu_grpo_options  # noqa: E402

PROMPTS = ["Name three things you can find in a kitchen.", "Write one sentence about the sea."]


def model_dir(name: str) -> Path:
    """A save_pretrained directory both sides can load (converts the embedded GGUF once)."""
    from turngym.agents.models import load_model, model_cache_dir, save_model

    if Path(name).is_dir():
        return Path(name)
    model, tokenizer = load_model(name, device="cpu")
    target = model_cache_dir(name) if name != "tiny" else Path("/tmp/turngym-bench-tiny")
    if not (target / "config.json").exists():
        save_model(model, tokenizer, target)
    return target


def ours(path: Path, steps: int) -> dict:
    import numpy as np
    import torch

    from turngym.trainers.config import load_config
    from turngym.trainers.samples import Sample
    from turngym.trainers.setup import build_trainer, make_optimizer
    from turngym.trainers.update import rl_update

    torch.manual_seed(0)
    cfg = load_config(
        None,
        [
            f"model.name={path}",
            "model.lora=false",
            "model.device=cpu",
            "rl.lr=1e-6",
            "rl.minibatch_size=8",
            "rl.micro_batch_size=8",
            "generation.max_new_tokens=32",
            "env.num_envs=8",
            "run_dir=/tmp/turngym-bench-ours",
        ],
    )
    tr = build_trainer(cfg, log=lambda _: None)
    optimizer = make_optimizer(tr, cfg.rl.lr)
    seconds, tokens = [], []
    for _ in range(steps):
        t0 = time.perf_counter()
        prompts = [tr.policy.encode([{"role": "user", "content": p}]) for p in PROMPTS for _ in range(4)]
        generations = tr.policy.generate(prompts)
        rewards = np.array([len(g.text) / 100 for g in generations]).reshape(len(PROMPTS), 4)
        adv = ((rewards - rewards.mean(1, keepdims=True)) / (rewards.std(1, ddof=1, keepdims=True) + 1e-6)).ravel()
        samples = [
            Sample(
                g.prompt_ids,
                g.completion_ids,
                g.logprobs,
                [float(a)] * len(g.completion_ids),
                [1] * len(g.completion_ids),
            )
            for g, a in zip(generations, adv)
        ]
        rl_update(tr, optimizer, samples)
        seconds.append(time.perf_counter() - t0)
        tokens.append(float(sum(len(g.prompt_ids) + len(g.completion_ids) for g in generations)))
    return {"seconds": seconds, "tokens": tokens}


def cpu_name() -> str:
    """The CPU's model name, and whether it computes bfloat16 natively (the model's side is float32)."""
    from turngym.agents.models import native_dtype

    text = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    name = next(
        (line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("model name")),
        platform.machine(),
    )
    return f"{name}, {'with' if native_dtype('cpu') == 'bfloat16' else 'without'} native bfloat16"


def summary(run: dict) -> dict:
    secs, toks = run["seconds"][1:] or run["seconds"], run["tokens"][1:] or run["tokens"]
    return {
        "s_per_step": statistics.median(secs),
        "tokens_per_step": statistics.median(toks),
        "tokens_per_s": sum(toks) / sum(secs),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=3, help="steps per side, the first a warm-up")
    p.add_argument("--model", default="smollm2-135m", help="smollm2-135m, tiny, or a save_pretrained dir")
    p.add_argument("--out", default="benchmarks/results/train_throughput", help="folder for the raw results")
    args = p.parse_args()
    path = model_dir(args.model)
    python = reference_python("trl", ["trl==1.16.0"], torch=True)
    mine_raw = ours(path, args.steps)
    script = str(Path(__file__).resolve().parent / "_trl_grpo_step.py")
    options = cpu_grpo_options(
        "/tmp/turngym-trl-bench",
        per_device_train_batch_size=8,
        num_generations=4,
        max_completion_length=32,
        temperature=1.0,
        learning_rate=1e-6,
        max_steps=args.steps,
    )
    theirs_raw = run_json(python, script, str(path), json.dumps(options), *PROMPTS, timeout=3600)
    mine, theirs = summary(mine_raw), summary(theirs_raw)
    print(f"{'system':10s} {'s/step':>8s} {'tokens/step':>12s} {'tokens/s':>9s}")
    for name, row in (("turngym", mine), ("TRL", theirs)):
        print(f"{name:10s} {row['s_per_step']:8.2f} {row['tokens_per_step']:12.0f} {row['tokens_per_s']:9.1f}")
    print(f"turngym / TRL tokens/s: {mine['tokens_per_s'] / theirs['tokens_per_s']:.2f}x")
    result = {
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "model": args.model,
        "steps": args.steps,
        "cpu": cpu_name(),
        "turngym": {**mine, "raw": mine_raw},
        "trl": {**theirs, "raw": theirs_raw},
    }
    out = Path(args.out) / f"{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    print(json.dumps({"model": args.model, "turngym": mine, "trl": theirs}))
    print(f"written {out}")


if __name__ == "__main__":
    main()
