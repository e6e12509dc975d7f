"""``benchmarks/tree_credit.py``'s statistics (no model runs): Holm's correction and the per-arm and
against-GRPO summary of runs paired task by task; and the held-out split the shared SFT stage of
``llm_credit_assignment.py`` evaluates on when a caller names none."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def module(name: str):
    sys.path.insert(0, str(BENCH))
    try:
        return __import__(name)
    finally:
        sys.path.remove(str(BENCH))


def test_holm_multiplies_by_the_rank_and_never_falls():
    holm = module("tree_credit").holm
    assert holm({"a": 0.01, "b": 0.04}) == {"a": 0.02, "b": 0.04}
    # the second is below the first once multiplied: held at the first's
    assert holm({"a": 0.03, "b": 0.035}) == {"a": 0.06, "b": 0.06}
    assert holm({"a": 0.8, "b": 0.9}) == {"a": 1.0, "b": 1.0}


def _run(arm: str, seed: int, wins: list[bool]) -> dict:
    return {
        "arm": arm,
        "estimator": arm,
        "seed": seed,
        "updates": 3,
        "eval": {"3": sum(wins) / len(wins)},
        "outcomes": {"3": [[f"t{i}", w] for i, w in enumerate(wins)]},
        "load_before": [2.0, 2.0, 2.0],
        **{k: 1 for k in ("episodes", "trained_turns", "rl_wall_s", "rl_cpu_s")},
    }


def test_summary_pairs_each_arm_with_grpo_task_by_task():
    tc = module("tree_credit")
    runs = [
        _run("grpo", 0, [False, False, True, False]),
        _run("tree", 0, [True, True, True, False]),  # +2/-0
        _run("gigpo", 0, [False, False, False, False]),  # +0/-1
        _run("grpo", 1, [True, False, False, False]),
        _run("tree", 1, [True, True, False, True]),  # +2/-0
        _run("gigpo", 1, [True, False, False, False]),
    ]
    s = tc.summarize(runs, {"after_sft": 0.25}, ["tree", "grpo", "gigpo"])
    assert [r["arm"] for r in s["rows"]] == ["tree", "grpo", "gigpo"]
    assert s["rows"][0]["final"] == pytest.approx(0.75)
    tree, gigpo = s["versus_grpo"]["tree"], s["versus_grpo"]["gigpo"]
    assert (tree["gained"], tree["lost"], gigpo["gained"], gigpo["lost"]) == (4, 0, 0, 1)
    assert tree["p"] == pytest.approx(0.125)  # 2 * (1/2)^4
    assert tree["p_holm"] == pytest.approx(0.25) and gigpo["p_holm"] == 1.0
    assert tree["mean_difference"] == pytest.approx(0.5)


def test_shared_sft_stage_evaluates_on_a_validation_split_by_default():
    # the demo's own default is the sealed test split, which no benchmark may choose settings on
    lca = module("llm_credit_assignment")
    args = argparse.Namespace(
        model="tiny",
        eval_episodes=4,
        sft_episodes=2,
        max_turns=6,
        shaped_reward=0.5,
        tasks_per_update=2,
        group_size=8,
        lr=3e-4,
        temperature=0.8,
    )
    assert "env.eval_split=valid_unseen" in lca.common(args)
    args.eval_split = "valid_seen"
    assert "env.eval_split=valid_seen" in lca.common(args)
