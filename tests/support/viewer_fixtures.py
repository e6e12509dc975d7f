"""A recorded run for the viewer and report tests, made by really playing the Counter env.

Episodes come from EnvPool rollouts of ``turngym-tests/Counter-v0`` with a noisy greedy policy
(sometimes random, sometimes a made-up command, less so in later updates). Afterwards each step
is dressed the way a trained LLM agent's records look: the command wrapped in
``<think>``/``<action>`` (or a ``<tool_call>`` for ``submit``) with the char spans filled in, tool
results in ``info["messages"]``, a GiGPO-style advantage per step, the estimator's name, a task
type, and, in the eval files, a small PNG screenshot per step.
"""

from __future__ import annotations

import base64
import json
import math
import re
import struct
import zlib
from collections import defaultdict
from pathlib import Path

import contract_env
import numpy as np

import turngym
from turngym.core.records import Trajectory, write_jsonl

ENV_ID = "turngym-tests/Counter-v0"
GAMMA = 0.95


class NoisyGreedyPolicy:
    """Reads target and counter from the chat; plays greedily with probability 1 - eps."""

    def __init__(self, eps: float, invalid: float, seed: int):
        self.eps, self.invalid = eps, invalid
        self.rng = np.random.default_rng(seed)

    def act(self, conversations):
        out = []
        for conv in conversations:
            text = "\n".join(m["content"] for m in conv.messages if m["role"] == "user")
            target = int(re.search(r"Target (-?\d+)", text).group(1))
            value = int(re.findall(r"Counter at (-?\d+)", text)[-1])
            u = self.rng.random()
            if u < self.invalid:
                out.append(str(self.rng.choice(["jump", "inc by two", "reset"])))
            elif u < self.invalid + self.eps:
                out.append(str(self.rng.choice(["inc", "dec", "submit"])))
            else:
                out.append("inc" if value < target else "dec" if value > target else "submit")
        return out


def tiny_png(width: int, height: int, value: int, target: int) -> bytes:
    """A PNG (no imaging library) drawing the counter as a blue bar and the target as a red line."""
    rows = []
    centre = width // 2
    for y in range(height):
        row = bytearray([0])  # filter type 0
        for x in range(width):
            pos = (x - centre) // 12
            if abs(pos - target) == 0 and abs((x - centre) % 12 - 6) < 2:
                pixel = (220, 38, 38)
            elif height // 3 <= y < 2 * height // 3 and min(0, value) <= pos < max(0, value) + (value == 0):
                pixel = (37, 99, 235)
            else:
                pixel = (246, 248, 250)
            row += bytes(pixel)
        rows.append(bytes(row))

    def chunk(kind: bytes, payload: bytes) -> bytes:
        return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", zlib.crc32(kind + payload))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"".join(rows)))
        + chunk(b"IEND", b"")
    )


def dress(traj: Trajectory, screenshots: bool = False) -> None:
    """Give a plain Counter trajectory the look of an LLM agent's records."""
    target = contract_env.TASKS[traj.task_id]["target"]
    traj.initial_info.setdefault("extra", {})["task_type"] = (
        "count_up" if target > 0 else "count_down" if target < 0 else "stay"
    )
    traj.metadata["estimator"] = "gigpo"
    value = int(re.findall(r"Counter at (-?\d+)", traj.initial_observation)[-1])
    for step in traj.steps:
        cmd = step.action.strip()
        seen = re.findall(r"Counter at (-?\d+)", step.observation)
        value = int(seen[-1]) if seen else value  # an invalid action's answer does not say
        think = f"<think>The counter is {value} and the target is {target}.</think>\n"
        if cmd == "submit":
            body = '<tool_call>{"name": "submit", "arguments": {}}</tool_call>'
            result = {
                "role": "tool",
                "name": "submit",
                "tool_call_id": f"call_{step.turn}",
                "content": json.dumps({"correct": step.info["is_success"]}),
            }
            step.info["messages"] = [result, *step.info.get("messages", [])]
        else:
            body = f"<action>{cmd}</action>"
        step.reply = think + body  # the env received only the command (step.action)
        # spans cover the content between the tags of the reply, as the agents' parsers record them
        tag = "tool_call" if cmd == "submit" else "action"
        start = len(think) + len(f"<{tag}>")
        step.spans = {
            "think": [len("<think>"), len(think) - len("</think>\n")],
            tag: [start, len(step.reply) - len(f"</{tag}>")],
        }
        if screenshots:
            png = tiny_png(240, 48, value, target)
            step.info.setdefault("extra", {})["screenshot_png_b64"] = base64.b64encode(png).decode()


def gigpo_advantages(trajs: list[Trajectory]) -> None:
    """Episode term (group-normalised return) plus step term (G_t normalised per state_key)."""
    groups: dict[str, list[Trajectory]] = defaultdict(list)
    for t in trajs:
        groups[t.group_id].append(t)
    for members in groups.values():
        returns = np.array([t.episode_return for t in members])
        episode_term = (returns - returns.mean()) / (returns.std() + 1e-6)
        togo: dict[str, list[float]] = defaultdict(list)
        per_step = []
        for t in members:
            g, gs = 0.0, []
            for s in reversed(t.steps):
                g = s.reward + GAMMA * g
                gs.append(g)
            gs.reverse()
            per_step.append(gs)
            for s, g in zip(t.steps, gs):
                togo[s.state_key].append(g)
        for t, a_ep, gs in zip(members, episode_term, per_step):
            for s, g in zip(t.steps, gs):
                peers = np.array(togo[s.state_key])
                a_step = 0.0 if len(peers) < 2 else (g - peers.mean()) / (peers.std() + 1e-6)
                s.advantage = float(a_ep + a_step)
                assert math.isfinite(s.advantage)


def rollout(
    tasks: list[str], eps: float, invalid: float, seed: int, group_size: int, screenshots: bool = False
) -> list[Trajectory]:
    contract_env.register()
    with turngym.EnvPool(ENV_ID, num_envs=4, backend="inline") as pool:
        trajs = pool.rollout(NoisyGreedyPolicy(eps, invalid, seed), tasks, group_size=group_size, seed=seed)
    gigpo_advantages(trajs)
    for t in trajs:
        dress(t, screenshots)
    return trajs


def make_run_dir(root: Path, updates: int = 3) -> Path:
    """A training run's folder as the trainer leaves it: config, metrics, rollouts per update, and
    an evaluation every second update (``eval/update_XXXX.jsonl``, with screenshots)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.yaml").write_text(
        f"env:\n  id: {ENV_ID}\n  train_split: train\n  eval_split: test\n"
        f"rl:\n  estimator: gigpo\n  group_size: 4\nupdates: {updates}\n"
    )
    train_tasks = contract_env.CounterEnv().task_ids("train")[:5]
    test_tasks = contract_env.CounterEnv().task_ids("test")
    metrics = []
    for u in range(updates):
        eps, invalid = 0.6 * 0.5**u, 0.25 * 0.5**u
        trajs = rollout(train_tasks, eps, invalid, seed=100 * u, group_size=4)
        write_jsonl(root / "rollouts" / f"update_{u:04d}.jsonl", trajs, append=False)
        scorable = [t for t in trajs if t.scorable]
        row = {
            "update": u,
            "env_steps": sum(t.length for t in trajs) * (u + 1),
            "episodes": len(trajs) * (u + 1),
            "train/success_rate": sum(t.success for t in scorable) / len(scorable),
            "train/mean_return": sum(t.episode_return for t in scorable) / len(scorable),
            "loss/policy": 0.4 / (u + 1),
            "loss/kl": 0.01 * u,
            "time/update_s": 1.5 + 0.1 * u,
        }
        if u % 2 == 0:
            evals = rollout(test_tasks, eps=eps / 2, invalid=invalid / 2, seed=7, group_size=2, screenshots=True)
            write_jsonl(root / "eval" / f"update_{u:04d}.jsonl", evals, append=False)
            row["eval/success_rate"] = sum(t.success for t in evals) / len(evals)
        metrics.append(row)
    (root / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in metrics))
    return root
