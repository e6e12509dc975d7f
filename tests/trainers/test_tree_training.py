"""Tree rollouts in training: the config's rl.branches and the sibling estimator, the prefix's keys
and values shared by the branches (the cache's own counters), and one update end to end on the
tiny model, from a tree rollout through sibling credit to the loss rows."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

import trainer_envs  # noqa: E402  (registers the branching counter)
from contract_env import TASKS  # noqa: E402
from policy_models import one_torch_thread, tiny  # noqa: E402

import turngym  # noqa: E402
from turngym.core.pool.tree import tree_rollout  # noqa: E402
from turngym.core.records import read_jsonl  # noqa: E402
from turngym.trainers.advantages import sibling  # noqa: E402
from turngym.trainers.config import check_run, load_config  # noqa: E402

TRAIN = sorted(k for k, t in TASKS.items() if t["split"] == "train")


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    with one_torch_thread():
        yield


def test_sibling_credit_without_tree_rollouts_is_one_line_naming_the_field():
    with pytest.raises(ValueError, match=r"^rl\.estimator: 'sibling' needs tree rollouts \(rl\.branches >= 1\); "):
        load_config(None, ["rl.estimator=sibling"])
    with pytest.raises(ValueError) as err:
        load_config(None, ["rl.estimator=sibling", "rl.branches=0"])
    assert "\n" not in str(err.value) and "allowed: grpo, rloo, gigpo" in str(err.value)
    with pytest.raises(
        ValueError, match=r"^rl\.estimator_args\.combine: 'rloo' is not one of \['none', 'gigpo', 'hgpo'\]$"
    ):
        load_config(None, ["rl.estimator=sibling", "rl.branches=2", "rl.estimator_args={combine: rloo}"])
    with pytest.raises(
        ValueError, match=r"^rl\.estimator_args\.alpha: an option of combine: hgpo \(combine is 'none'\)$"
    ):
        load_config(None, ["rl.estimator=sibling", "rl.branches=2", "rl.estimator_args={alpha: 2.0}"])
    cfg = load_config(None, ["rl.estimator=sibling", "rl.branches=2", "rl.estimator_args={combine: gigpo}"])
    assert cfg.rl.branches == 2 and cfg.rl.branch_points == 1
    cfg = load_config(
        None, ["rl.estimator=sibling", "rl.branches=2", "rl.estimator_args={combine: hgpo, max_depth: 2}"]
    )
    assert cfg.rl.estimator_args == {"combine": "hgpo", "max_depth": 2}


@pytest.mark.parametrize("estimator", ["grpo", "rloo", "gigpo", "hgpo", "graph", "turn_gae", "hiper"])
def test_tree_rollouts_with_an_estimator_that_cannot_credit_them_are_refused(estimator):
    """A branch holds only its own turns: GRPO (and every estimator but sibling) would score it by
    them alone. Root A earns 1 then 0, branch B (before turn 1) earns 0: both whole episodes
    return 1, but grpo.advantages([A, B]) gives A +0.71 and B -0.71. Refused at load time."""
    with pytest.raises(
        ValueError,
        match=rf"^rl\.estimator: '{estimator}' cannot credit tree rollouts .*; with rl\.branches=2 allowed: sibling$",
    ):
        load_config(None, [f"rl.estimator={estimator}", "rl.branches=2"])


def test_tree_rollouts_on_an_env_without_snapshots_are_refused_before_the_model_loads():
    cfg = load_config(
        None, ["env.id=turngym-tests/Counter-v0", "env.eval_split=test", "rl.branches=2", "rl.estimator=sibling"]
    )
    with pytest.raises(
        ValueError, match=r"^rl\.branches: tree rollouts need env snapshots, which turngym-tests/Counter-v0"
    ):
        check_run(cfg)


@pytest.mark.model
def test_branches_compute_only_what_their_root_has_not():
    """The roots come out the same with or without branches (the same sampling seed); the branches
    then cost the cache only what their root never encoded: K siblings asking the root's own
    turn-1 prompt compute one position between them (the last, which gives the logits), not K
    encodings of the shared history."""
    from turngym.agents.hf import HFPolicy

    model, tokenizer = tiny()

    def policy():
        return HFPolicy(model, tokenizer, temperature=1.0, max_new_tokens=4, seed=0)

    with turngym.EnvPool(trainer_envs.BRANCHING_ID, num_envs=4, backend="inline") as pool:
        plain = policy()
        roots = pool.rollout(plain, TRAIN[:1], group_size=2, seed=2, max_turns=2)
        grown = policy()
        trajs = tree_rollout(pool, grown, TRAIN[:1], group_size=2, branches=3, points=1, seed=2, max_turns=2)
    assert [[s.completion_ids for s in t.steps] for t in trajs[:2]] == [
        [s.completion_ids for s in t.steps] for t in roots
    ]
    branches = trajs[2:]
    assert len(branches) == 3 and {b.branch_turn for b in branches} == {1}
    shared = trajs[0 if branches[0].parent == trajs[0].trajectory_id else 1].steps[1].prompt_ids
    assert all(b.steps[0].prompt_ids == shared for b in branches)
    spent = grown.kv_cache.computed_tokens - plain.kv_cache.computed_tokens
    assert len(shared) > 20 and spent == 1


@pytest.mark.model
@pytest.mark.slow
def test_one_update_with_tree_rollouts_and_sibling_credit(tmp_path):
    """``turngym train`` with rl.branches=2 and rl.estimator=sibling: its rollouts hold the tree,
    every step has the sibling estimator's advantage, and the loss rows are the trajectories'
    own steps (a branch's shared turns are its root's rows, never trained twice)."""
    from turngym.trainers.loop import train
    from turngym.trainers.samples import loss_rows
    from turngym.trainers.setup import build_trainer

    cfg = load_config(
        None,
        [
            "model.name=tiny",
            f"env.id={trainer_envs.BRANCHING_ID}",
            "env.eval_split=test",
            "env.num_envs=4",
            "env.max_turns=3",
            "rl.updates=1",
            "rl.tasks_per_update=2",
            "rl.group_size=2",
            "rl.branches=2",
            "rl.estimator=sibling",
            "rl.estimator_args={combine: gigpo}",
            "rl.minibatch_size=64",
            "eval.at_start=false",
            "eval.episodes=1",
            "progress=false",
            "tensorboard=false",
            "checkpoint_every=0",
            "generation.max_new_tokens=3",
            f"run_dir={tmp_path / 'run'}",
        ],
    )
    start = build_trainer(cfg, log=lambda _: None)
    train(cfg, log=lambda _: None)
    trajs = read_jsonl(Path(cfg.run_dir) / "rollouts" / "update_0001.jsonl")
    branches = [t for t in trajs if t.parent]
    assert len(trajs) == 2 * (2 + 2) and len(branches) == 4
    ids = {t.trajectory_id for t in trajs}
    assert all(b.parent in ids and b.branch_turn >= 1 for b in branches)
    expected = sibling.advantages(trajs, combine="gigpo")
    for t, adv in zip(trajs, expected):
        np.testing.assert_allclose([s.advantage for s in t.steps], adv, atol=1e-5)
        assert t.metadata["estimator"] == "sibling"
    rows = loss_rows(start, trajs)
    steps = [s for t in trajs for s in t.steps if t.scorable and s.completion_ids]
    assert len(rows) == len(steps)
    for row, s in zip(rows, steps):
        assert row.prompt_ids == s.prompt_ids and row.advantages == [pytest.approx(s.advantage)] * len(s.completion_ids)
