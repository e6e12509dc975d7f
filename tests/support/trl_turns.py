"""TurnGRPOTrainer on a Counter with dense, random-looking rewards with the tiny model, recording what each
generation produced and what each loss call trained on (tests/integrations/test_integrations_trl.py checks it).

    accelerate launch --num_processes 2 --cpu tests/support/trl_turns.py OUT_DIR ESTIMATOR

writes OUT_DIR/rank<N>.json on each process.
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

from contract_env import CounterEnv  # noqa: E402

import turngym  # noqa: E402


class ParityCounterEnv(CounterEnv):
    """Counter, plus reward 1 on every turn whose action has an odd number of characters: random
    replies get rewards that differ inside a group and inside an episode."""

    def _step(self, action):
        obs, reward, terminated, truncated, fields = super()._step(action)
        return obs, reward + float(len(action.strip()) % 2), terminated, truncated, fields


ENV = "turngym-tests/ParityCounter-v0"
if ENV not in {s.id for s in turngym.list_envs()}:
    turngym.register(
        ENV,
        "trl_turns:ParityCounterEnv",
        max_episode_steps=20,
        family="tests",
        description="Counter with a reward for odd-length actions (TRL per-turn tests)",
    )


def spy_class():
    from turngym.integrations.trl import TurnGRPOTrainer

    class Spy(TurnGRPOTrainer):
        def _generate_and_score_completions(self, inputs):
            out = super()._generate_and_score_completions(inputs)
            self.generated.append(
                {
                    "trajectories": [t.to_dict() for t in self.rollout_func.last_trajectories],
                    "completion_ids": out["completion_ids"].tolist(),
                    "advantages": out["advantages"].tolist(),
                    "env_mask": out["tool_mask"].tolist(),
                }
            )
            return out

        def _compute_loss(self, model, inputs):
            self.trained.append(
                {
                    "completion_ids": inputs["completion_ids"].tolist(),
                    "advantages": inputs["advantages"].tolist(),
                    "loss_tokens": int((inputs["completion_mask"] * inputs["tool_mask"]).sum()),
                }
            )
            return super()._compute_loss(model, inputs)

    return Spy


def train(model, tokenizer, output_dir: str, estimator: str, rollout_args: dict, **config):
    from trl import GRPOConfig

    from turngym.integrations.trl import GRPORollout, cpu_grpo_options, env_reward_func, task_dataset

    options = cpu_grpo_options(
        output_dir,
        per_device_train_batch_size=4,
        num_generations=2,
        max_completion_length=200,
        temperature=1.0,
        learning_rate=1e-3,
        max_steps=2,
        mask_truncated_completions=True,
    )
    rollout = GRPORollout(ENV, **{"num_envs": 4, "max_turns": 3, "max_new_tokens": 8, "seed": 1, **rollout_args})
    trainer = spy_class()(
        model=model,
        processing_class=tokenizer,
        args=GRPOConfig(**{**options, **config}),
        train_dataset=task_dataset(ENV, limit=4),
        reward_funcs=env_reward_func,
        rollout_func=rollout,
        estimator=estimator,
    )
    trainer.generated, trainer.trained = [], []
    trainer.train()
    rollout.close()
    return trainer


def main() -> None:
    import torch

    from turngym.agents.models import load_model

    out_dir, estimator = sys.argv[1], sys.argv[2]
    torch.set_num_threads(1)
    model, tokenizer = load_model("tiny", device="cpu")
    tokenizer.padding_side = "left"
    # one group of 4 per step, 2 members on each process: every group is split
    trainer = train(
        model,
        tokenizer,
        os.path.join(out_dir, "run"),
        estimator,
        {"num_envs": 2},
        per_device_train_batch_size=2,
        num_generations=4,
    )
    rank = trainer.accelerator.process_index
    record = {
        "rank": rank,
        "world": trainer.accelerator.num_processes,
        "steps": trainer.state.global_step,
        "generated": trainer.generated,
        "trained": trainer.trained,
        "clipped": [
            h["completions/clipped_ratio"] for h in trainer.state.log_history if "completions/clipped_ratio" in h
        ],
    }
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(record, f)


if __name__ == "__main__":
    main()
