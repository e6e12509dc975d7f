"""TRL side of train_throughput.py (runs in .bench-venvs/trl): GRPOTrainer steps on CPU.

python _trl_grpo_step.py MODEL_DIR GRPO_OPTIONS_JSON PROMPT_A PROMPT_B ...   -> one JSON line

GRPO_OPTIONS_JSON: GRPOConfig's keyword arguments, made by the caller with
turngym.integrations.trl.cpu_grpo_options (turngym is not installed in this venv).
"""

from __future__ import annotations

import json
import sys
import time

import torch
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
from trl import GRPOConfig, GRPOTrainer


class StepTimer(TrainerCallback):
    def __init__(self):
        self.starts, self.seconds, self.tokens = [], [], []

    def on_step_begin(self, args, state, control, **kwargs):
        self.starts.append(time.perf_counter())

    def on_step_end(self, args, state, control, **kwargs):
        self.seconds.append(time.perf_counter() - self.starts[-1])

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "num_tokens" in logs:
            self.tokens.append(float(logs["num_tokens"]))


def main() -> None:
    model_dir, options, prompts = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3:]
    steps = options["max_steps"]
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tokenizer.padding_side = "left"
    data = Dataset.from_list([{"prompt": [{"role": "user", "content": p}]} for p in prompts] * (steps + 1))
    config = GRPOConfig(**options)
    timer = StepTimer()
    trainer = GRPOTrainer(
        model=model,
        processing_class=tokenizer,
        args=config,
        train_dataset=data,
        reward_funcs=lambda completions, **kw: [float(len(str(c))) / 100 for c in completions],
        callbacks=[timer],
    )
    trainer.train()
    per_step_tokens = [b - a for a, b in zip([0.0, *timer.tokens[:-1]], timer.tokens)]
    print(json.dumps({"seconds": timer.seconds, "tokens": per_step_tokens}))


if __name__ == "__main__":
    main()
