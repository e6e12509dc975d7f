"""The RL update's attention: the fused sdpa kernel (today) against two matmuls and a softmax,
for the passes that keep a graph (a measured lever, not built into the engine).

    PYTHONPATH=. python benchmarks/update_attention.py --sft runs/sft0 --threads 1

A torch profile of one update of the demo (one process's share: one task x 8 episodes, minibatches
of 16 turns) put a fifth of its CPU time in sdpa, most of it in the backward of the scoring
passes, where few queries (a turn's reply) meet a few hundred keys. This script plays two
updates' rollouts from the demo's SFT checkpoint and runs each update from the same weights and a
fresh optimizer, alternating the two attentions ``--trials`` times. The alternative is used only
with grad enabled and more than one query (the reference's no-grad pass and sampling are
unchanged); it computes scores in bfloat16 and the softmax in float32, like the engine's
decoding step (``agents/engine/attention.py``). It changes the update's rounding, so it is not
bit-identical to sdpa: the first minibatch's ratio statistics (sampler against scorer) are kept
for both.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

USE_MATH = {"on": False}


def math_attention(fallback):
    """``fallback`` (the engine's attention), except with grad and several queries in bfloat16."""
    import torch

    def attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
        if not USE_MATH["on"] or not torch.is_grad_enabled() or query.shape[2] == 1 or query.dtype != torch.bfloat16:
            return fallback(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout, **kwargs)
        batch, heads, queries, dim = query.shape
        kv_heads, keys = key.shape[1], key.shape[2]
        group = heads // kv_heads
        scale = scaling if scaling is not None else dim**-0.5
        # the query heads sharing a key/value head become that head's rows: no copy of the keys
        scores = torch.matmul(query.reshape(batch, kv_heads, group * queries, dim), key.transpose(2, 3))
        scores = scores.float().view(batch, kv_heads, group, queries, keys) * scale
        if attention_mask is None:  # causal, no padding
            rows = torch.arange(queries, device=query.device)[:, None] + keys - queries
            allowed = (torch.arange(keys, device=query.device)[None, :] <= rows)[None, None, None]
        else:  # transformers' boolean sdpa mask [B, 1, queries, keys]
            allowed = attention_mask[:, :, None]
        # a finite floor, not -inf: a row with no key allowed (padding) gets no NaN
        scores = scores.masked_fill(~allowed, torch.finfo(torch.float32).min)
        probs = scores.softmax(-1).to(value.dtype).view(batch, kv_heads, group * queries, keys)
        out = torch.matmul(probs, value).view(batch, heads, queries, dim)
        return out.transpose(1, 2).contiguous(), None

    return attention


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sft", required=True, help="the demo's SFT run folder (see rl_episode_cost.py)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--updates", type=int, default=2)
    p.add_argument("--trials", type=int, default=3)
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "rl_episode_cost"))
    args = p.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    import rl_episode_cost

    from turngym import demo
    from turngym.agents.engine import attention, private
    from turngym.core.collect import collect
    from turngym.core.versions import stamp
    from turngym.trainers import checkpoint as ckpt
    from turngym.trainers.samples import loss_rows
    from turngym.trainers.setup import next_tasks

    # one process's share of the demo's update (it runs two processes of one task each)
    overrides = [
        *demo.demo_overrides(
            demo.parse(["--no-progress", "--processes", "1", "--num-envs", "8", "--tasks-per-update", "1"])
        ),
        "rl.minibatch_size=16",
        "rl.micro_batch_size=16",
        "tensorboard=false",
        "save_rollouts=false",
        "run_dir=/tmp/turngym-update-attention",
    ]
    tr, _, pool, train_ids = rl_episode_cost.from_sft(types.SimpleNamespace(sft=args.sft), overrides)
    # after the model is loaded: loading registers the engine's own attention under the name
    private.register_attention(attention.CPU_ATTENTION, math_attention(attention.cpu_attention))
    cfg = tr.cfg
    rows = []
    for update in range(1, args.updates + 1):
        tr.state.update = update
        tr.policy.reset_history()  # the weights changed: cached keys belong to the old ones (as learn.one_update)
        tasks = next_tasks(tr, train_ids, cfg.rl.tasks_per_update)
        trajectories = collect(
            pool,
            tr.policy,
            tasks,
            group_size=cfg.rl.group_size,
            seed=cfg.seed + 1000 + update,
            max_turns=cfg.env.max_turns,
        )
        samples = loss_rows(tr, trajectories)
        start = ckpt.trainable_state(tr.model)

        rl_episode_cost.timed_update(tr, samples, start)  # warm-up
        row = {"update": update, "turns": len(samples), "sdpa_s": [], "math_s": []}
        for _ in range(args.trials):
            for name in ("sdpa", "math"):
                USE_MATH["on"] = name == "math"
                seconds, metrics = rl_episode_cost.timed_update(tr, samples, start)
                row[f"{name}_s"].append(round(seconds, 2))
                row[f"{name}_metrics"] = {k: round(v, 5) for k, v in metrics.items()}
        USE_MATH["on"] = False  # the next rollout as today (it runs without grad either way)
        print(json.dumps(row), flush=True)
        rows.append(row)
    pool.close()
    out = Path(args.out) / f"{time.strftime('%Y%m%d-%H%M%S')}-update-attention.json"
    out.write_text(
        json.dumps(
            stamp(
                {
                    "command": " ".join(sys.argv),
                    "threads": args.threads,
                    "sft": args.sft,
                    "torch": torch.__version__,
                    "updates": rows,
                },
                cfg.env.id,
                **cfg.env.kwargs,
            ),
            indent=1,
        )
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
