"""The generated tables in README.md and docs/ equal what benchmarks/docs_tables.py writes from the
raw results, so a figure in the docs cannot drift from its file."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def load():
    spec = importlib.util.spec_from_file_location("docs_tables", ROOT / "benchmarks" / "docs_tables.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_docs_tables_match_the_raw_files():
    stale = load().differing()
    assert not stale, "run `python benchmarks/docs_tables.py`; these differ from the raw files:\n" + "\n".join(stale)


def test_a_hand_edited_figure_is_caught(tmp_path):
    tables = load()
    page = tmp_path / "page.md"
    page.write_text(f"x\n<!-- table: demo-valid-unseen -->\n{tables.demo_valid_unseen()}\n<!-- /table -->\n")
    assert tables.differing([page]) == []
    page.write_text(page.read_text().replace("| 7 | 134 | 0.366 | 0.321 |", "| 7 | 134 | 0.366 | 0.421 |"))
    assert [line.split(": ")[1] for line in tables.differing([page])] == ["demo-valid-unseen"]


def test_the_readme_and_benchmarks_page_carry_the_demo_tables():
    readme = (ROOT / "README.md").read_text()
    bench = (ROOT / "docs" / "benchmarks.md").read_text() + (ROOT / "docs" / "benchmarks-log.md").read_text()
    assert "<!-- table: demo-readme -->" in readme
    for name in (
        "demo-valid-unseen",
        "demo-valid-unseen-summary",
        "demo-sealed",
        "estimators-final",
        "estimators-vs-grpo",
    ):
        assert f"<!-- table: {name} -->" in bench, name


def test_t_interval_matches_tabled_quantiles():
    tables = load()
    assert abs(tables.t_quantile(0.975, 9) - 2.262) < 1e-3
    assert abs(tables.t_quantile(0.975, 4) - 2.776) < 1e-3
    mean, low, high, p = tables.t_interval([1.0, 2.0, 3.0])
    assert (mean, round(low, 3), round(high, 3), round(p, 3)) == (2.0, -0.484, 4.484, 0.074)


def test_the_sealed_split_table_follows_the_seeds_present(tmp_path, monkeypatch):
    import shutil

    tables = load()
    monkeypatch.setattr(tables, "DEMO", tmp_path)
    assert "no seed has run" in tables.demo_readme()
    kept = ROOT / "benchmarks" / "results" / "demo"
    for seed in (0, 1, 2):
        shutil.copytree(kept / f"st-seed{seed}", tmp_path / f"sealed-seed{seed}")
        shutil.copytree(kept / f"st-seed{seed}", tmp_path / f"st-seed{seed}")
    table = tables.demo_sealed()
    assert table.count("\n| ") == 3  # a row per seed
    assert "met at 2 of 3 seeds (seeds 0, 2)" in table and "95% t-interval" in table
    assert "RL met the target at 2 of 3 seeds, mean gain +0.122" in tables.demo_readme()


def test_a_loss_and_an_interval_holding_zero_are_said_plainly():
    plainly = load().plainly
    runs = [{"seed": 0, "sft": 0.3, "rl": 0.45, "p": 0.01}, {"seed": 7, "sft": 0.35, "rl": 0.23, "p": 0.008}]
    text = plainly(runs, low=-0.02)
    assert "lost beyond noise (p < 0.05) at seed 7" in text and "includes 0" in text
    assert plainly(runs[:1], low=0.03) == ""


def test_the_front_pages_stay_short():
    """The README orients (<= 900 words); docs/benchmarks.md holds today's figures (<= 700 lines),
    history goes to benchmarks-log.md."""
    words = len((ROOT / "README.md").read_text().split())
    lines = len((ROOT / "docs" / "benchmarks.md").read_text().splitlines())
    assert words <= 900, f"README.md has {words} words"
    assert lines <= 700, f"docs/benchmarks.md has {lines} lines"
