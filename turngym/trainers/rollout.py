"""From env episodes to training rows: grouped rollouts, conversations rebuilt from records,
expert turns tokenized for SFT.

``collect`` runs N rollouts per task with identical starts through ``EnvPool`` (members of a
group share task and seed) and annotates each step with its parsed spans. ``conversation_at``
rebuilds exactly the chat the pool showed the policy before a step (the env's reset messages,
then each action and the env's answer), which is how SFT prompts match RL prompts.
"""

from __future__ import annotations

import time
from typing import Any

from turngym.core.policy import Conversation
from turngym.core.records import Trajectory
from turngym.trainers.spans import parse_spans


def collect(pool, policy, task_ids: list[str], group_size: int, seed: int, max_steps: int,
            tokenizer=None, on_trajectory=None, bar=None) -> list[Trajectory]:
    """Grouped rollouts with parsed spans; ``bar`` (tqdm) shows episodes, turns and tokens/s."""
    if bar is not None:
        done = on_trajectory

        def on_trajectory(traj):
            bar.update(1)
            if done is not None:
                done(traj)
    trajectories = pool.rollout(with_progress(policy, bar), task_ids, group_size=group_size, seed=seed, max_steps=max_steps,
                                on_trajectory=on_trajectory)
    for traj in trajectories:
        for step in traj.steps:
            # spans come from the full reply (think / switch / subgoal / action), which is the
            # decoded completion; the env saw only the extracted action
            reply = tokenizer.decode(step.completion_ids, skip_special_tokens=True) \
                if tokenizer is not None and step.completion_ids else step.action
            step.spans = parse_spans(reply)
    return trajectories


class TurnProgress:
    """A policy wrapper that counts turns and generated tokens, and reports them after each batch.

    Episodes of a long task can take minutes each; a bar that moves only when an episode ends
    looks frozen. ``report(text)`` gets e.g. ``"412 turns, 38 tok/s"`` after every ``act``.
    Everything else (``env_side``, ``prompt``, ...) reads through to the wrapped policy.
    """

    def __init__(self, policy, report):
        self.policy, self.report = policy, report
        self.turns = self.tokens = 0
        self.seconds = 0.0

    def act(self, conversations):
        start = time.perf_counter()
        outs = self.policy.act(conversations)
        self.seconds += time.perf_counter() - start
        self.turns += len(conversations)
        self.tokens += sum(len(getattr(o, "completion_ids", None) or []) for o in outs)
        rate = f", {self.tokens / self.seconds:.0f} tok/s" if self.tokens and self.seconds > 0 else ""
        self.report(f"{self.turns} turns{rate}")
        return outs

    def __getattr__(self, name):
        return getattr(self.policy, name)


def with_progress(policy, bar):
    """``policy`` reporting turns and tokens/s in a tqdm ``bar``'s postfix (unchanged when no bar)."""
    if bar is None or getattr(bar, "disable", False):
        return policy
    return TurnProgress(policy, lambda text: bar.set_postfix_str(text, refresh=True))


def attach_tokens(policy, trajectories: list[Trajectory]) -> int:
    """Give steps that came back as text only (a remote server without token data) the token ids
    the trainer's own model would have seen: the prompt rendered by ``policy`` (an ``HFPolicy``)
    from the recorded conversation, and the reply tokenized plus the end-of-turn token. Log-probs
    stay empty; the trainer recomputes them before the update. Returns the number of steps filled.
    """
    from turngym.agents.prompts import build_messages

    eos = policy.tokenizer.eos_token_id
    filled = 0
    for traj in trajectories:
        for t, step in enumerate(traj.steps):
            if step.completion_ids:
                continue
            conv = conversation_at(traj, t)
            step.prompt_ids = policy.encode(build_messages(conv, policy.prompt), conv.info.get("tools") or None)
            step.completion_ids = policy.encode_text(step.action) + ([eos] if eos is not None else [])
            step.loss_mask = [1] * len(step.completion_ids)
            step.logprobs, step.entropies = [], []
            filled += 1
    return filled


def conversation_at(traj: Trajectory, t: int) -> Conversation:
    """The Conversation the policy saw before step ``t`` (as EnvPool built it)."""
    messages: list[dict[str, Any]] = list(traj.initial_info.get("messages", []))
    info = traj.initial_info
    for step in traj.steps[:t]:
        messages.append({"role": "assistant", "content": step.action})
        messages.extend(step.info.get("messages", []))
        info = step.info
    tools = traj.initial_info.get("tools")
    if tools and not info.get("tools"):  # envs announce tools on reset only; policies keep them
        info = {**info, "tools": tools}
    return Conversation(messages=messages, info=info, env_id=traj.env_id)


def expert_reply(action: str, action_format: str) -> str:
    return f"<action>{action}</action>" if action_format == "tags" else action


def sft_examples(policy, trajectories: list[Trajectory]) -> list[tuple[list[int], list[int]]]:
    """(prompt_ids, completion_ids) per expert turn, tokenized the way ``HFPolicy`` prompts.

    The completion ends with the end-of-turn token so the model learns to stop.
    """
    from turngym.agents.prompts import build_messages

    eos = policy.tokenizer.eos_token_id
    rows = []
    for traj in trajectories:
        if not traj.scorable:
            continue
        for t, step in enumerate(traj.steps):
            conv = conversation_at(traj, t)
            prompt = policy.encode(build_messages(conv, policy.prompt), conv.info.get("tools") or None)
            completion = policy.encode_text(expert_reply(step.action, policy.prompt.action_format))
            rows.append((prompt, completion + ([eos] if eos is not None else [])))
    return rows


def token_offsets(tokenizer, ids: list[int]) -> list[tuple[int, int]]:
    """Character range of each token in the decoded text (by decoding growing prefixes)."""
    offsets, prev = [], 0
    for k in range(1, len(ids) + 1):
        end = len(tokenizer.decode(ids[:k], skip_special_tokens=True))
        offsets.append((prev, max(prev, end)))
        prev = max(prev, end)
    return offsets
