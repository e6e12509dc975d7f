"""Per-turn credit in TRL, made visible: each turn's GiGPO advantage next to the text of its tokens.

    python examples/trl_turn_credit.py

Started from an untrained model, every episode fails, so every reward, advantage and loss is 0.
Here the policy sometimes succeeds: the tiny model first imitates the expert's episode of one
household task (a short SFT on the same prompts GRPORollout shows), then samples at temperature
1.2, so some episodes of the group finish the task and some do not. One step of TRL's
GRPOTrainer with turngym's per-turn advantages (TurnGRPOTrainer, GiGPO) follows, and the script
prints every episode of that batch with, for each turn, the advantage on that turn's tokens in the
tensor handed to TRL's loss. About a minute of CPU time on one thread (docs/integrations.md
shows the output).
"""

import os
import tempfile

import torch
from datasets import Dataset
from trl import GRPOConfig

import turngym
from turngym.agents import ExpertPolicy
from turngym.agents.engine.scoring import score_completions
from turngym.agents.hf import HFPolicy
from turngym.agents.models import load_model
from turngym.agents.prompts import PromptConfig
from turngym.integrations.trl import GRPORollout, TurnGRPOTrainer, cpu_grpo_options, env_reward_func
from turngym.trainers.losses import sft_loss
from turngym.trainers.rollout import sft_examples

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
ENV = "turngym/Household-Easy-v0"
TASK = "easy/train/kitchen-12/pick_and_place_simple/0000"  # the expert solves it in 4 turns
MAX_TURNS, MAX_NEW_TOKENS, GROUP = 6, 16, 8
SFT_EPOCHS, SFT_LR = 110, 1e-2  # enough for the tiny model to finish the task most times at temperature 1
TEMPERATURE = 1.2  # some episodes stray: a group with both outcomes, so the advantages are not 0


def imitate_expert(model, tokenizer) -> float:
    """Fit the model to the expert's episode of TASK (token-mean NLL of its replies, full batch);
    the prompts are the ones GRPORollout's policy builds (the ``transcript`` history). Returns the last loss."""
    policy = HFPolicy(model, tokenizer, prompt=PromptConfig(history="transcript"))
    with turngym.EnvPool(ENV, num_envs=1) as pool:
        expert = pool.rollout(ExpertPolicy(), [TASK], group_size=1, seed=0, max_turns=MAX_TURNS)
    rows = sft_examples(policy, expert)
    prompts, replies = [p for p, _ in rows], [c for _, c in rows]
    tokens = sum(len(c) for c in replies)
    optimizer = torch.optim.AdamW(model.parameters(), lr=SFT_LR)
    model.train()
    for _ in range(SFT_EPOCHS):
        scores = score_completions(
            model, prompts, replies, with_grad=True, compute_entropy=False, pad_id=tokenizer.pad_token_id or 0
        )
        loss = sft_loss(scores.logprobs, scores.mask, tokens)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    model.eval()
    return loss.item()


def grpo_step(model, tokenizer, output_dir: str):
    """One TurnGRPOTrainer step on one group of GROUP episodes of TASK; returns (trainer, rollout)."""
    rollout = GRPORollout(ENV, num_envs=4, max_turns=MAX_TURNS, max_new_tokens=MAX_NEW_TOKENS)
    config = GRPOConfig(
        **cpu_grpo_options(
            output_dir,
            per_device_train_batch_size=GROUP,
            num_generations=GROUP,
            max_completion_length=1024,
            mask_truncated_completions=True,
            temperature=TEMPERATURE,
            learning_rate=1e-5,
            max_steps=1,
        )
    )
    trainer = TurnGRPOTrainer(
        model=model,
        processing_class=tokenizer,
        args=config,
        train_dataset=Dataset.from_dict({"prompt": [TASK]}),
        reward_funcs=env_reward_func,
        rollout_func=rollout,
        estimator="gigpo",
    )
    trainer.train()
    rollout.close()
    return trainer, rollout


def turn_table(trainer, rollout) -> list[list[tuple[float, int, list[int]]]]:
    """Per episode of the last batch, per turn: (its advantage on its tokens, how many tokens, their ids),
    read from the tensor TRL's loss got; every token of a turn carries the same value."""
    table = []
    for traj, steps, row in zip(rollout.last_trajectories, rollout.last_token_steps, trainer.last_token_advantages):
        turns = []
        for k, step in enumerate(traj.steps):
            on = [j for j, s in enumerate(steps) if s == k]
            values = {float(row[j]) for j in on}
            if len(values) != 1:
                raise RuntimeError(f"turn {k}: its tokens carry {sorted(values)}, not one advantage")
            turns.append((values.pop(), len(on), list(step.completion_ids)))
        table.append(turns)
    return table


def main(output_dir: str | None = None):
    # one thread: the model is tiny, and a second spinning thread on a busy machine only slows it down
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model, tokenizer = load_model("tiny", device="cpu")
    tokenizer.padding_side = "left"
    print(f"SFT on the expert's episode of {TASK}: loss {imitate_expert(model, tokenizer):.4f}")
    trainer, rollout = grpo_step(model, tokenizer, output_dir or tempfile.mkdtemp(prefix="trl-turn-credit-"))
    table = turn_table(trainer, rollout)
    for i, (traj, turns) in enumerate(zip(rollout.last_trajectories, table)):
        print(f"episode {i}: return {traj.episode_return:.0f}, {traj.length} turns")
        for k, (value, count, ids) in enumerate(turns):
            print(f"  turn {k}  A = {value:+.3f} on {count:2d} tokens  {tokenizer.decode(ids)!r}")
    env_tokens = [
        float(v)
        for steps, row in zip(rollout.last_token_steps, trainer.last_token_advantages)
        for s, v in zip(steps, row)
        if s < 0
    ]
    print(
        f"env tokens (observations, out of the loss): {len(env_tokens)}, "
        f"advantage {'0 on all' if not any(env_tokens) else 'NOT 0'}"
    )
    return trainer, rollout, table


if __name__ == "__main__":  # the pool may spawn processes; keep the script importable
    main()
