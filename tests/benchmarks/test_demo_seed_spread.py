"""``benchmarks/demo_seed_spread.py``: per-run gains and the spread of the gain, from kept demo runs."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def load():
    spec = importlib.util.spec_from_file_location("demo_seed_spread", ROOT / "benchmarks" / "demo_seed_spread.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_run(folder: Path, before: list[bool], after: list[bool]) -> None:
    folder.mkdir(parents=True)
    rows = lambda outcomes: [[f"task/{i}", ok, 1.0 if ok else -0.5, 4] for i, ok in enumerate(outcomes)]  # noqa: E731
    folder.joinpath("eval_outcomes.json").write_text(
        json.dumps({"update_0000": rows(before), "update_0008": rows(after[::-1]), "update_0016": rows(after)})
    )


def test_gains_spread_and_needed_mean_from_known_runs(tmp_path):
    spread = load()
    n = 20
    # two variants of two seeds each: gains +6, +2 (mean 4) and +3, +5 (mean 4); the last
    # evaluation is the one compared, not the middle one
    for prefix, gains in (("dp-seed", (6, 2)), ("st-seed", (3, 5))):
        for seed, gain in enumerate(gains):
            before = [i < 4 + seed for i in range(n)]
            after = [i < 4 + seed + gain for i in range(n)]
            after[0] = False  # one lost, so one more gained to keep the net gain
            after[4 + seed + gain] = True
            write_run(tmp_path / f"{prefix}{seed}", before, after)
    # the variant without the KL is printed but left out of the summary
    write_run(tmp_path / "seed0", [True] * n, [False] * n)
    out = spread.main(["--results", str(tmp_path)])
    runs = {(r["variant"], r["seed"]): r for r in out["runs"]}
    assert set(runs) == {("dp-seed", 0), ("dp-seed", 1), ("st-seed", 0), ("st-seed", 1)}
    assert (runs["dp-seed", 0]["gained"], runs["dp-seed", 0]["lost"]) == (7, 1)
    assert runs["dp-seed", 0]["rl"] - runs["dp-seed", 0]["sft"] == 6
    # pooled within-variant spread: deviations +-2 and +-1 over 2 degrees of freedom
    assert math.isclose(out["sd_within"], math.sqrt((4 + 4 + 1 + 1) / 2))
    need = math.ceil(0.10 * n)
    assert math.isclose(out["needed"][0.95], need + 1.6449 * out["sd_within"])
    # SFT solved 4, 5, 4, 5 and gained 6, 2, 3, 5: sum (x - 4.5)(y - 4) = -1 over sum (x - 4.5)^2 = 1
    slope, _, _ = out["gain_on_sft"]
    assert math.isclose(slope, -1.0)
    # +7 / -1 over 20 tasks passes the target (+2 needed, p = 0.07 misses p < 0.05)
    assert not runs["dp-seed", 0]["met"]


def test_committed_demo_runs():
    out = load().main([])
    runs = {(r["variant"], r["seed"]): r for r in out["runs"]}
    # today's demo (bfloat16) at its default seed: 0.239 -> 0.425, +31 / -6 (docs/benchmarks.md)
    st0 = runs["st-seed", 0]
    assert (st0["tasks"], st0["sft"], st0["rl"], st0["gained"], st0["lost"]) == (134, 32, 57, 31, 6)
    assert st0["met"] and not runs["st-seed", 1]["met"]
    # seeds 5 and 6 of today's demo (2026-12-02) met it too
    assert runs["st-seed", 5]["met"] and runs["st-seed", 6]["met"]
    # seed 7 (2026-12-02) lost ground: 0.366 -> 0.321
    assert not runs["st-seed", 7]["met"]
    # seed 8 (2026-12-02) met it: 0.396 -> 0.500, +25 / -11
    assert runs["st-seed", 8]["met"] and (runs["st-seed", 8]["gained"], runs["st-seed", 8]["lost"]) == (
        25,
        11,
    )
    # seed 9 (2026-12-02 evening, cb3c942) gained short of it: 0.403 -> 0.455, +19 / -12
    assert not runs["st-seed", 9]["met"] and (runs["st-seed", 9]["gained"], runs["st-seed", 9]["lost"]) == (
        19,
        12,
    )
    assert sum(r["met"] for r in out["runs"]) == 10 and len(out["runs"]) == 30


def test_first_moves_reads_where_the_object_lies(tmp_path):
    seen = (
        "You see a shelf 1 and a desk 1. On the shelf 1, you see a pen 2. In the desk 1, you see a mug 1.\n\n"
        "Your task is to: put some mug on shelf."
    )

    def episode(first: str, solved: bool) -> str:
        steps = [
            {"observation": seen, "action": first, "info": {"is_success": False}},
            {"observation": "...", "action": "look", "info": {"is_success": solved}},
        ]
        return json.dumps({"steps": steps})

    file = tmp_path / "update_0000.jsonl"
    file.write_text(
        "\n".join(
            [
                episode("go to desk 1", True),
                episode("go to desk 1", False),
                episode("go to shelf 1", False),
                episode("take mug 1 from desk 1", True),
            ]
        )
    )
    assert load().first_moves(file) == {
        (True, True): 1,
        (False, True): 1,
        (False, False): 1,
        (True, False): 1,
    }
