"""Training through the multi-agent games: one learning seat through SingleAgentView with the
trainer, and several learning agents with per-agent trajectories and credit."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from turngym.agents import RandomPolicy  # noqa: E402
from turngym.core.records import read_jsonl  # noqa: E402
from turngym.envs.multiagent import multiagent_rollout  # noqa: E402
from turngym.trainers.advantages import ESTIMATORS, Batch  # noqa: E402
from turngym.trainers.config import load_config  # noqa: E402
from turngym.trainers.metrics import read_metrics  # noqa: E402


@pytest.fixture
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # shared 2-core machines: one intra-op thread is faster
    yield
    torch.set_num_threads(before)


def test_one_seat_trains_through_single_agent_view(tmp_path, one_thread):
    from turngym.trainers.loop import train

    cfg = load_config(None, [
        "model.name=tiny", "env.id=turngym/Negotiation-buyer-v0", "env.eval_split=test", "env.num_envs=4",
        "env.max_turns=3", "rl.updates=2", "rl.tasks_per_update=2", "rl.group_size=2", "rl.estimator=gigpo",
        "rl.minibatch_size=6", "rl.micro_batch_size=3", "rl.lr=1e-3", "eval.episodes=2", "eval.at_start=false",
        "progress=false", "generation.max_new_tokens=6", "model.lora_rank=4", "checkpoint_every=0",
        "tensorboard=false", "save_rollouts=true", f"run_dir={tmp_path / 'run'}"])
    train(cfg, log=lambda _: None)
    rows = read_metrics(Path(cfg.run_dir) / "metrics.jsonl")
    assert rows[-1]["update"] == 2 and rows[-1]["policy/completion_tokens"] > 0
    trajs = read_jsonl(Path(cfg.run_dir) / "rollouts" / "update_0002.jsonl")
    assert trajs and all(t.env_id == "turngym/Negotiation-buyer-v0" for t in trajs)
    # the learner's steps carry token data and advantages; the seller was played inside the env
    assert all(s.completion_ids and s.advantage is not None for t in trajs for s in t.steps)
    assert all(s.info["extra"]["agent"] == "buyer" for t in trajs for s in t.steps)


@pytest.mark.parametrize("estimator", ["grpo", "gigpo"])
def test_several_learning_agents_get_their_own_credit(estimator):
    result = multiagent_rollout("auction", {"player_0": RandomPolicy(seed=1), "player_1": RandomPolicy(seed=2)},
                                ["auction-train-0", "auction-train-1"], group_size=4, seed=0)
    per_agent = {agent: ESTIMATORS[estimator].advantages(Batch(trajs)).step for agent, trajs in result.items()}
    for agent, trajs in result.items():
        advantages = per_agent[agent]
        assert len(advantages) == len(trajs)
        assert all(len(a) == len(t.steps) for a, t in zip(advantages, trajs))
    # zero-sum game: one agent's credit mirrors the other's at the episode level
    ends = {agent: np.array([t.episode_return for t in trajs]) for agent, trajs in result.items()}
    assert np.allclose(ends["player_0"], -ends["player_1"])
    if estimator == "grpo":
        first = np.array([a[0] for a in per_agent["player_0"]])
        other = np.array([a[0] for a in per_agent["player_1"]])
        assert np.allclose(first, -other, atol=1e-5)
