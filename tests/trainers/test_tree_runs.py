"""Tree rollouts (rl.branches) in the runs that must stay green: exact resume, asynchronous
rollouts (rl.max_lag >= 1) and data-parallel training in 2 processes, on the tiny model and the
branching counter."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")

import trainer_envs  # noqa: E402  (registers the branching counter)
from policy_models import one_torch_thread  # noqa: E402
from trainer_runs import comparable, torchrun_train, train_run  # noqa: E402

from turngym.core.records import Trajectory, read_jsonl  # noqa: E402
from turngym.core.runs import read_metrics  # noqa: E402
from turngym.trainers.advantages import sibling  # noqa: E402
from turngym.trainers.config import load_config  # noqa: E402

# 2 tasks x (2 roots + 2 branches at one branch point), 3 turns, 4 new tokens a turn, no SFT
BASE = [
    "model.name=tiny",
    f"env.id={trainer_envs.BRANCHING_ID}",
    "env.eval_split=test",
    "env.num_envs=4",
    "env.max_turns=3",
    "rl.tasks_per_update=2",
    "rl.group_size=2",
    "rl.branches=2",
    "rl.estimator=sibling",
    "rl.minibatch_size=8",
    "rl.micro_batch_size=4",
    "rl.lr=1e-2",
    "eval.at_start=false",
    "eval.every=0",
    "eval.episodes=2",
    "progress=false",
    "tensorboard=false",
    "generation.max_new_tokens=4",
    "model.lora_rank=4",
]


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    with one_torch_thread():
        yield


def run(tmp_path, name: str, *extra: str, stop_after: int | None = None) -> list[dict]:
    return train_run(tmp_path / name, [*BASE, *extra], stop_after)


def check_trees(trajs: list[Trajectory], groups: int, combine: str) -> None:
    """Each group holds its 2 roots and 2 branches of one root, and every step carries the
    sibling estimator's advantage over the whole batch (the trees never cross groups)."""
    roots = [t for t in trajs if not t.parent]
    branches = [t for t in trajs if t.parent]
    assert len(roots) == 2 * groups and len(branches) == 2 * groups
    by_id = {t.trajectory_id: t for t in trajs}
    assert len(by_id) == len(trajs)
    for b in branches:
        root = by_id[b.parent]
        assert not root.parent and root.group_id == b.group_id and 0 <= b.branch_turn < len(root.steps)
    expected = sibling.advantages(trajs, combine=combine)
    for t, adv in zip(trajs, expected):
        np.testing.assert_allclose([s.advantage for s in t.steps], adv, atol=1e-5)


@pytest.mark.model
@pytest.mark.slow
def test_a_run_with_tree_rollouts_resumes_exactly(tmp_path):
    """Stopped after update 1 and resumed, a run of tree rollouts with sibling credit (combined
    with HGPO) gives the uninterrupted run's update 2: its metrics and its saved trees."""
    extra = ["rl.updates=2", "rl.estimator_args={combine: hgpo}"]
    straight = run(tmp_path, "straight", *extra)
    assert [r["update"] for r in run(tmp_path, "parts", *extra, stop_after=1)] == [0, 1]
    resumed = run(tmp_path, "parts", *extra)
    assert [r["update"] for r in resumed] == [0, 1, 2]
    assert comparable(resumed) == comparable(straight)
    assert resumed[-1]["advantage/nonzero_turns"] > 0 and resumed[-1]["policy/grad_norm"] > 0
    trees = read_jsonl(tmp_path / "parts" / "rollouts" / "update_0002.jsonl")
    assert trees == read_jsonl(tmp_path / "straight" / "rollouts" / "update_0002.jsonl")
    check_trees(trees, groups=2, combine="hgpo")


@pytest.mark.model
@pytest.mark.slow
def test_tree_rollouts_run_asynchronously_and_resume_exactly(tmp_path):
    """rl.max_lag=1: the background worker plays tree rollouts with the weights of one update
    before (branching once every root played a turn, rl.branch_after=1), and a run stopped after
    update 2 resumes to the uninterrupted run's update 3."""
    extra = ["rl.updates=3", "rl.max_lag=1", "rl.branch_after=1", "rl.estimator_args={combine: gigpo}"]
    straight = run(tmp_path, "straight", *extra)
    for r in straight[1:]:
        assert r["rollout/policy_lag"] == min(1, r["update"] - 1)
    assert any(r["policy/is_weight"] != 1.0 for r in straight[2:])
    for u in (1, 2, 3):
        check_trees(read_jsonl(tmp_path / "straight" / "rollouts" / f"update_{u:04d}.jsonl"), 2, "gigpo")
    run(tmp_path, "parts", *extra, stop_after=2)
    resumed = run(tmp_path, "parts", *extra)
    assert comparable(resumed) == comparable(straight)
    assert read_jsonl(tmp_path / "parts" / "rollouts" / "update_0003.jsonl") == read_jsonl(
        tmp_path / "straight" / "rollouts" / "update_0003.jsonl"
    )


@pytest.mark.model
@pytest.mark.slow
def test_two_processes_train_on_tree_rollouts_and_resume_exactly(tmp_path):
    """Data-parallel (torchrun, 2 CPU processes): each process grows the trees of its own tasks,
    rank 0 saves all of them whole (every branch beside its root), and a run stopped after
    update 1 and resumed gives the uninterrupted run's update 2."""

    def cfg(name: str, updates: int):
        return load_config(None, [*BASE, f"run_dir={tmp_path / name}", f"rl.updates={updates}", "eval.every=1"])

    torchrun_train(tmp_path, cfg("whole", 2))
    rows = read_metrics(tmp_path / "whole" / "metrics.jsonl")
    assert [r["update"] for r in rows] == [0, 1, 2] and rows[-1]["processes"] == 2
    assert all(r["policy/grad_norm"] > 0 for r in rows[1:])
    for u in (1, 2):
        # 2 processes x 2 tasks x (2 roots + 2 branches)
        assert rows[u]["train/episodes"] == 16 and rows[u]["train/groups"] == 4
        check_trees(read_jsonl(tmp_path / "whole" / "rollouts" / f"update_{u:04d}.jsonl"), groups=4, combine="none")
    torchrun_train(tmp_path, cfg("parts", 1))
    torchrun_train(tmp_path, cfg("parts", 2))
    assert comparable(read_metrics(tmp_path / "parts" / "metrics.jsonl")) == comparable(rows)
    assert read_jsonl(tmp_path / "parts" / "rollouts" / "update_0002.jsonl") == read_jsonl(
        tmp_path / "whole" / "rollouts" / "update_0002.jsonl"
    )
