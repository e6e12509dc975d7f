"""TRL's GRPOTrainer on multi-turn turngym episodes (docs/integrations.md).

    python examples/trl_grpo_household.py            # 2 GRPO steps, the tiny model, CPU: 4 min on a busy 2-core machine

Swap "tiny" for "smollm2-135m" (the embedded SmolLM2-135M-Instruct) or any local checkpoint
for a real run, and raise max_steps.
"""

import os

from trl import GRPOConfig, GRPOTrainer

from turngym.agents.models import load_model
from turngym.integrations.trl import GRPORollout, env_reward_func, task_dataset

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
ENV = "turngym/Household-v0"

if __name__ == "__main__":  # the pool may spawn processes; keep the script importable
    model, tokenizer = load_model("tiny", device="cpu")
    tokenizer.padding_side = "left"
    rollout = GRPORollout(ENV, num_envs=4, max_turns=4, max_new_tokens=24)
    config = GRPOConfig(output_dir="runs/trl-household", use_cpu=True, per_device_train_batch_size=4,
                        num_generations=2, max_completion_length=256, learning_rate=1e-5, beta=0.0,
                        max_steps=2, logging_steps=1, save_strategy="no", report_to="none", bf16=False)
    trainer = GRPOTrainer(model=model, processing_class=tokenizer, args=config,
                          train_dataset=task_dataset(ENV, limit=8), reward_funcs=env_reward_func,
                          rollout_func=rollout)
    trainer.train()
    rollout.close()
    print(f"steps: {trainer.state.global_step}, last episodes' returns: "
          f"{[t.episode_return for t in rollout.last_trajectories]}")
