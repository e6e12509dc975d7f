"""HFPolicy generation speed on the embedded SmolLM2-135M-Instruct, and first vs cached load time.

    PYTHONPATH=. .venv/bin/python benchmarks/policy_generation.py [--batches 1,8,32] [--tokens 64]

Generated tokens/s of ``HFPolicy.generate`` (which also records per-token log-probs and
entropies) against the reference: transformers' bare ``model.generate`` on the same model,
prompts and sampling options, in the same run. Load times are measured in fresh processes
against an empty cache (GGUF -> safetensors conversion), then the filled cache.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

LOAD_SNIPPET = """
import json, time
start = time.perf_counter()
from turngym.agents.models import load_model
model, tokenizer = load_model("smollm2-135m", device="cpu")
print(json.dumps({"load_s": time.perf_counter() - start}))
"""

PROMPTS = ["Write a long story about a robot who learns to cook.",
           "Describe, step by step, how to clean a kitchen.",
           "Explain how a refrigerator keeps food cold.",
           "List many household objects and where they are usually kept."]


def timed_load(cache: str) -> float:
    env = {**os.environ, "TURNGYM_CACHE": cache, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", LOAD_SNIPPET], env=env, check=True, capture_output=True,
                         text=True, timeout=900)
    return json.loads(out.stdout.strip().splitlines()[-1])["load_s"]


def reference_generate(model, tokenizer, prompts: list[list[int]], max_new_tokens: int, eos: list[int]) -> int:
    """transformers' own sampling loop, nothing recorded; returns the number of generated tokens."""
    import torch

    width = max(len(p) for p in prompts)
    pad = tokenizer.pad_token_id
    ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=mask, do_sample=True, temperature=1.0, top_p=1.0,
                             top_k=0, max_new_tokens=max_new_tokens, eos_token_id=eos, pad_token_id=pad)
    count = 0
    for row in out[:, width:].tolist():
        n = len(row)
        for i, tok in enumerate(row):
            if tok in eos:
                n = i + 1
                break
        count += n
    return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", default="1,8,32")
    parser.add_argument("--tokens", type=int, default=64, help="max new tokens per reply")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--repeats", type=int, default=2, help="alternating runs per side; the best counts")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="turngym-bench-cache-") as cache:
        first = timed_load(cache)
        cached = timed_load(cache)
        print(f"load: first {first:.1f} s (GGUF -> safetensors), cached {cached:.1f} s", flush=True)

        os.environ["TURNGYM_CACHE"] = cache
        import torch

        from turngym.agents.hf import HFPolicy
        from turngym.agents.models import load_model

        if args.threads:
            torch.set_num_threads(args.threads)
        model, tokenizer = load_model("smollm2-135m", device="cpu")
        policy = HFPolicy(model, tokenizer, temperature=1.0, max_new_tokens=args.tokens, batch_size=64, seed=0)
        encoded = [policy.encode([{"role": "user", "content": p}]) for p in PROMPTS]
        eos = sorted(policy.eos_ids)
        policy.generate(encoded[:1], max_new_tokens=4)  # warm-up
        rows = []
        for batch in [int(b) for b in args.batches.split(",")]:
            prompts = [encoded[i % len(encoded)] for i in range(batch)]
            ours, ref = [], []  # (tokens/s, tokens) per run; runs alternate so load spikes hit both sides
            for repeat in range(args.repeats):
                torch.manual_seed(repeat)
                start = time.perf_counter()
                tokens = sum(len(g.completion_ids) for g in policy.generate(prompts))
                ours.append((tokens / (time.perf_counter() - start), tokens))
                torch.manual_seed(repeat)
                start = time.perf_counter()
                tokens = reference_generate(model, tokenizer, prompts, args.tokens, eos)
                ref.append((tokens / (time.perf_counter() - start), tokens))
            (ours_rate, ours_tokens), (ref_rate, ref_tokens) = max(ours), max(ref)
            row = {"batch": batch, "hfpolicy_tok_s": ours_rate, "hfpolicy_tokens": ours_tokens,
                   "reference_tok_s": ref_rate, "reference_tokens": ref_tokens}
            row["ratio"] = row["hfpolicy_tok_s"] / row["reference_tok_s"]
            rows.append(row)
            print(f"batch {batch:>3}: HFPolicy {row['hfpolicy_tok_s']:7.1f} tok/s ({ours_tokens} tokens)   "
                  f"bare generate {row['reference_tok_s']:7.1f} tok/s ({ref_tokens} tokens)   "
                  f"ratio {row['ratio']:.2f}", flush=True)
    print(json.dumps({"first_load_s": first, "cached_load_s": cached, "threads": torch.get_num_threads(),
                      "repeats": args.repeats,
                      "max_new_tokens": args.tokens, "rows": rows}))


if __name__ == "__main__":
    main()
