"""RL must learn: a tiny random-init model on a trivially learnable env goes from its chance
success rate to (nearly) always succeeding within a few updates, the same way for a seed.

This is the guard against the silent trainer bugs that ship elsewhere: an inverted or shifted
loss mask, a flipped advantage sign, log-probs scored one token off. Each of those makes this
test fail (checked by breaking them one at a time; see docs/training.md).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import trainer_envs  # noqa: E402  (registers the no-letter-e env)
from policy_models import one_torch_thread  # noqa: E402

from turngym.trainers.config import load_config  # noqa: E402
from turngym.trainers.loop import train  # noqa: E402
from turngym.trainers.metrics import read_metrics  # noqa: E402

UPDATES = 12
# One-turn episodes, 2 tokens a reply, 4 tasks x 8 rollouts an update, GRPO, full fine-tuning of
# the tiny model at a high learning rate (it has to move far in 12 updates).
SETTINGS = ["model.name=tiny", f"env.id={trainer_envs.NO_E_ID}", "env.eval_split=test", "env.num_envs=16",
            "env.max_turns=1", "rl.tasks_per_update=4", "rl.group_size=8", "rl.minibatch_size=32",
            "rl.micro_batch_size=32", "rl.lr=5e-2", "rl.estimator=grpo", "model.lora=false",
            "generation.max_new_tokens=2", "eval.episodes=4", "eval.every=0", "eval.at_start=false",
            "progress=false", "checkpoint_every=0", "save_rollouts=false", "tensorboard=false", "resume=false",
            f"rl.updates={UPDATES}", "seed=0"]


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    with one_torch_thread():
        yield


def run(run_dir) -> list[dict]:
    train(load_config(None, [*SETTINGS, f"run_dir={run_dir}"]), log=lambda _: None)
    return [r for r in read_metrics(run_dir / "metrics.jsonl") if "train/success_rate" in r]


@pytest.mark.slow
def test_rl_must_learn_and_repeat_for_a_seed(tmp_path):
    rows = run(tmp_path / "a")
    success = [r["train/success_rate"] for r in rows]
    assert len(success) == UPDATES
    assert success[0] < 0.5, f"the env is not hard enough to show learning: {success}"
    assert min(success[-3:]) >= 0.9, f"RL did not learn: train success by update {success}"
    assert all(r["advantage/nonzero_turns"] > 0 for r in rows[:3])  # the early updates had signal
    again = run(tmp_path / "b")
    strip = [{k: v for k, v in r.items() if not k.startswith("time/")} for r in rows]
    assert strip == [{k: v for k, v in r.items() if not k.startswith("time/")} for r in again]
