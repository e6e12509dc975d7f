"""``benchmarks/llm_credit_assignment.py`` end to end on the tiny model: every run starts from the
shared SFT stage, a rerun skips finished runs, and the report pairs each run's held-out episodes
with the SFT checkpoint's."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from turngym.core.records import Step, Trajectory, write_jsonl

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "llm_credit_assignment.py"
SMALL = [
    "--model",
    "tiny",
    "--estimators",
    "grpo,rloo,gigpo",
    "--seeds",
    "0",
    "--updates",
    "1",
    "--eval-every",
    "1",
    "--eval-episodes",
    "3",
    "--sft-episodes",
    "2",
    "--tasks-per-update",
    "1",
    "--group-size",
    "2",
    "--threads",
    "1",
]


def bench(out: Path, *extra: str) -> str:
    done = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--out",
            str(out),
            "--figure",
            str(out / "fig.png"),
            "--results",
            str(out / "kept"),
            *SMALL,
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.mark.slow
def test_runs_resume_and_report(tmp_path):
    first = bench(tmp_path)
    assert "gigpo seed 0: running" in first and "grpo seed 0: running" in first and "rloo seed 0: running" in first
    results = {p.parent.name: json.loads(p.read_text()) for p in (tmp_path / "runs").glob("*/result.json")}
    assert set(results) == {"gigpo-s0", "grpo-s0", "rloo-s0"}
    for r in results.values():
        assert r["updates"] == 1 and r["episodes"] == 2  # equal episodes for every estimator
        assert r["vs_sft"]["episodes"] == 3
        assert len(r["outcomes"]["1"]) == 3  # every held-out task's outcome is kept
        assert r["versions"]["torch"] and set(r["sft_start"]) == {"after_sft", "after_sft_return"}
    sft = json.loads((tmp_path / "sft" / "result.json").read_text())
    assert len(sft["episodes"]) == 3 and all(len(e) == 3 for e in sft["episodes"])  # task, success, return
    # the compact results the repository keeps, and the pairing with GRPO
    assert {p.stem for p in (tmp_path / "kept" / "runs").glob("*.json")} == {"gigpo-s0", "grpo-s0", "rloo-s0"}
    assert "against GRPO" in first and "| gigpo | 1 |" in first.split("against GRPO")[-1]
    config = (tmp_path / "runs" / "rloo-s0" / "config.yaml").read_text()
    assert "scale" not in config.split("estimator_args")[1].split("\n")[0]  # RLOO takes no options
    again = bench(tmp_path)
    assert "gigpo seed 0: done, skipped" in again and "grpo seed 0: done, skipped" in again
    assert (tmp_path / "fig.png").exists()
    table = bench(tmp_path, "--report")
    assert "| gigpo | 1 |" in table and "+0/-0" in table
    # a fresh checkout: only the kept compact results are left; they count as finished runs
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    (fresh / "kept").symlink_to(tmp_path / "kept")
    again = bench(fresh)
    assert "gigpo seed 0: done, skipped" in again and "rloo seed 0: done, skipped" in again
    assert (fresh / "sft" / "result.json").exists()  # the shared start is made again
    # kept runs of another dtype: new runs would not compare with them
    grpo = tmp_path / "kept" / "runs" / "grpo-s0.json"
    other = {**json.loads(grpo.read_text()), "dtype": "float16"}
    grpo.write_text(json.dumps(other))
    done = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--out",
            str(tmp_path / "third"),
            "--results",
            str(tmp_path / "kept"),
            *SMALL,
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"},
    )
    assert done.returncode == 1 and "grpo-s0.json was computed in float16" in done.stderr


@pytest.mark.slow
def test_shards_split_the_runs_and_wait_for_the_shared_sft(tmp_path):
    import threading

    second = {}  # shard 1, started first, waits for shard 0's SFT stage
    waiting = threading.Thread(target=lambda: second.update(out=bench(tmp_path, "--shard", "1/2")))
    waiting.start()
    first = bench(tmp_path, "--shard", "0/2")
    waiting.join(timeout=600)
    assert "waiting for shard 0's SFT stage" in second["out"]
    assert "grpo seed 0: running" in first and "gigpo seed 0: running" in first and "rloo" not in first
    assert "rloo seed 0: running" in second["out"] and "grpo seed 0" not in second["out"]
    results = [json.loads(p.read_text()) for p in (tmp_path / "runs").glob("*/result.json")]
    assert sorted(r["estimator"] for r in results) == ["gigpo", "grpo", "rloo"]
    assert all(r["commit"] and r["threads"] == 1 for r in results)


def script_module():
    """The benchmark script imported as a module, for its helpers."""
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import llm_credit_assignment
    finally:
        sys.path.remove(str(SCRIPT.parent))
    return llm_credit_assignment


def _episodes(path: Path, outcomes: list[tuple[str, bool]]) -> None:
    write_jsonl(
        path,
        [
            Trajectory(
                env_id="e",
                task_id=task,
                seed=0,
                success=ok,
                steps=[Step(turn=0, observation="", action="a", reward=float(ok))],
            )
            for task, ok in outcomes
        ],
        append=False,
    )


def test_paired_change_counts_flips_task_by_task(tmp_path):
    bench_module = script_module()
    run = tmp_path / "runs" / "gigpo-s0"
    _episodes(
        tmp_path / "sft" / "eval" / "update_0000.jsonl",
        [("a", True), ("b", False), ("c", False), ("d", True)],
    )
    _episodes(run / "eval" / "update_0004.jsonl", [("a", True), ("b", True), ("c", True), ("d", False)])
    assert bench_module.paired_change(tmp_path, run, 4) == {"gained": 2, "lost": 1, "episodes": 4}
    # another task order: not the same episodes, so nothing is paired
    _episodes(run / "eval" / "update_0004.jsonl", [("b", True), ("a", True), ("c", True), ("d", False)])
    assert bench_module.paired_change(tmp_path, run, 4) is None
    result = {"estimator": "gigpo", "seed": 0, "updates": 4}
    (run / "result.json").write_text(json.dumps(result))
    assert bench_module.paired_text([bench_module.paired_of(tmp_path, result), {"gained": 1, "lost": 0}]) == "?, +1/-0"


def test_detectable_difference_follows_the_power_formulas():
    bench_module = script_module()
    # 5 seeds x 134 tasks with a fifth of the outcomes changed: (1.96 + 0.8416) * sqrt(0.2 / 670)
    out = bench_module.detectable(134, 670, [0.02, -0.03, 0.05, 0.0, 0.01])
    assert out["detectable_episodes"] == pytest.approx(0.0484, abs=1e-4)
    # sd of the five differences 0.02915: (2.776 + 0.941) * 0.02915 / sqrt(5)
    assert out["detectable_seeds"] == pytest.approx(0.04846, abs=1e-4)
    assert math.isnan(bench_module.detectable(10, 134, [0.1])["detectable_seeds"])  # one seed: no spread


def test_sft_differences_name_the_episodes_that_changed():
    bench_module = script_module()
    kept = {
        "after_sft": 0.5,
        "after_sft_return": 0.4,
        "versions": {"torch": "2.13.0"},
        "episodes": [["a", True, 1.0], ["b", False, -0.2]],
    }
    assert bench_module.sft_differences(kept, dict(kept)) is None
    made = {
        **kept,
        "after_sft_return": 0.3,
        "versions": {"torch": "2.14.1"},
        "episodes": [["a", True, 1.0], ["b", False, -0.4]],
    }
    text = bench_module.sft_differences(kept, made)
    assert "1 of 2 held-out episodes differ (b)" in text and "2.14.1" in text and "return 0.3" in text
    # another list of episodes (here: one more) is another evaluation, even where the scores agree
    longer = {**kept, "episodes": [*kept["episodes"], ["c", True, 1.0]]}
    assert "3 held-out episodes here, 2 there" in bench_module.sft_differences(kept, longer)
    # a kept start from before episodes were recorded: the scores alone
    old = {"after_sft": 0.5, "after_sft_return": 0.4}
    assert "episodes differ" not in bench_module.sft_differences(old, made)
