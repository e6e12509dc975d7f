"""Writes the demo's and the estimator benchmark's tables in README.md and docs/ from the raw files.

    python benchmarks/docs_tables.py            # rewrite every generated table in place
    python benchmarks/docs_tables.py --check    # exit 1 naming each table that differs

A generated table sits between two marker comments in a page:

    <!-- table: demo-valid-unseen -->
    ...
    <!-- /table -->

and everything between them is what ``TABLES[name]()`` returns, computed from
``benchmarks/results/`` alone (the demo runs' ``eval_outcomes.json`` and ``stdout.txt``, the
estimator runs' ``runs/*.json``). Nothing is run. tests/docs/test_docs_tables.py fails when a
page differs from what this script writes, so a figure in the docs cannot drift from its file.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import re
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from scaling_tables import scaling_table  # noqa: E402

DEMO = ROOT / "benchmarks" / "results" / "demo"
ESTIMATORS = ROOT / "benchmarks" / "results" / "llm_credit_assignment_power"
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
MARKER = re.compile(r"(<!-- table: ([\w.-]+) -->\n)(.*?)(<!-- /table -->)", re.S)
# demo runs made on valid_unseen while the settings were chosen (issue 61; not all were kept)
VALID_UNSEEN_RUNS = 39
CURVE = ("update_0004", "update_0008", "update_0012")  # the demo's held-out curve during RL
# estimator runs whose minutes are not a run's own: they lay stopped between sessions, resumed
# from a checkpoint, or shared the cores with a demo (benchmarks/results/llm_credit_assignment_power/NOTES.md)
NOT_OWN_TIME = {
    "gigpo-s1": "stopped between sessions",
    "hgpo-s1": "stopped between sessions",
    "grpo-s2": "stopped between sessions",
    "rloo-s2": "stopped between sessions",
    "gigpo-s2": "a demo beside it",
    "hgpo-s2": "a demo beside it",
    "gigpo-s3": "resumed",
    "hgpo-s3": "resumed",
}


# ---- statistics over seeds ----------------------------------------------------------------


def t_cdf(x: float, df: int) -> float:
    """Student's t distribution function, by Simpson's rule on its density (no scipy here)."""
    c = math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)) / math.sqrt(df * math.pi)
    n, a = 2000, abs(x)
    h = a / n
    f = [c * (1 + (i * h) ** 2 / df) ** (-(df + 1) / 2) for i in range(n + 1)]
    half = h / 3 * (f[0] + f[-1] + 4 * sum(f[1:-1:2]) + 2 * sum(f[2:-1:2]))
    return 0.5 + half if x >= 0 else 0.5 - half


def t_quantile(q: float, df: int) -> float:
    """The ``q`` quantile (q > 0.5) of Student's t, by bisection on ``t_cdf``."""
    lo, hi = 0.0, 100.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if t_cdf(mid, df) < q else (lo, mid)
    return (lo + hi) / 2


def t_interval(values: list[float]) -> tuple[float, float, float, float]:
    """(mean, low, high, p) of the one-sample t-test of mean 0 with its 95% interval."""
    n, mean = len(values), statistics.fmean(values)
    se = statistics.stdev(values) / math.sqrt(n)
    half = t_quantile(0.975, n - 1) * se
    p = 2 * (1 - t_cdf(abs(mean) / se, n - 1)) if se else 0.0
    return mean, mean - half, mean + half, p


# ---- the demo's runs ----------------------------------------------------------------------


def minutes(folder: Path) -> float | None:
    """A run's wall minutes: `/usr/bin/time -v`'s elapsed time, else the demo's own total."""
    text = (folder / "stdout.txt").read_text() if (folder / "stdout.txt").exists() else ""
    m = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (?:(\d+):)?(\d+):([\d.]+)", text)
    if m:
        return int(m.group(1) or 0) * 60 + int(m.group(2)) + float(m.group(3)) / 60
    m = re.search(r"total ([\d.]+) min", text)
    return float(m.group(1)) if m else None


def demo_run(folder: Path) -> dict:
    """One demo run from its folder: the paired first and last evaluations, the curve, minutes."""
    from demo_seed_spread import run_outcomes

    from turngym.core.stats import sign_test
    from turngym.demo import target_met

    tasks, solved_sft, solved_rl, gained, lost = run_outcomes(folder)
    evals = json.loads((folder / "eval_outcomes.json").read_text())
    names = sorted(evals)
    curve = None
    if all(name in evals for name in CURVE):
        first = [ok for _, ok, *_ in evals[names[0]][: len(evals[CURVE[0]])]]
        curve = [sum(first) / len(first)] + [sum(ok for _, ok, *_ in evals[n]) / len(evals[n]) for n in CURVE]
    return {
        "seed": int(re.search(r"(\d+)$", folder.name).group(1)),
        "tasks": tasks,
        "sft": solved_sft / tasks,
        "rl": solved_rl / tasks,
        "gained": gained,
        "lost": lost,
        "p": sign_test(gained, lost),
        "met": target_met(gained, lost, tasks),
        "curve": curve,
        "minutes": minutes(folder),
    }


def demo_runs(prefix: str) -> list[dict]:
    """Every kept run ``<prefix><seed>/`` with its evaluations, by seed."""
    folders = [
        f
        for f in DEMO.glob(f"{prefix}*")
        if re.fullmatch(re.escape(prefix) + r"\d+", f.name) and (f / "eval_outcomes.json").exists()
    ]
    return sorted((demo_run(f) for f in folders), key=lambda r: r["seed"])


def p_text(p: float) -> str:
    """A p-value as the docs write it: 0.024, 4.1e-5."""
    if p >= 1e-3:
        return f"{p:.2g}"
    mantissa, exponent = f"{p:.1e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def seed_table(runs: list[dict], curve: bool, time: bool) -> str:
    """A markdown table of demo runs, one row per seed; after RL in bold where the target is met."""
    head = ["seed", "tasks", "after SFT", "after RL", "gained / lost", "p", "target met"]
    if curve:
        head.append("held-out curve on the first 34 tasks (SFT; updates 4, 8, 12)")
    if time:
        head.append("minutes")
    lines = [
        "| " + " | ".join(head) + " |",
        "|" + "|".join("---:" if h not in ("target met",) and "curve" not in h else "---" for h in head) + "|",
    ]
    for r in runs:
        rl = f"**{r['rl']:.3f}**" if r["met"] else f"{r['rl']:.3f}"
        cells = [
            str(r["seed"]),
            str(r["tasks"]),
            f"{r['sft']:.3f}",
            rl,
            f"+{r['gained']} / -{r['lost']}",
            p_text(r["p"]),
            "yes" if r["met"] else "no",
        ]
        if curve:
            c = r["curve"]
            cells.append("-" if c is None else f"{c[0]:.2f}; " + ", ".join(f"{v:.2f}" for v in c[1:]))
        if time:
            cells.append("-" if r["minutes"] is None else f"{r['minutes']:.1f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plainly(runs: list[dict], low: float) -> str:
    """What a reader must not miss: seeds where RL lost beyond noise, and an interval that holds 0."""
    worse = [str(r["seed"]) for r in runs if r["rl"] < r["sft"] and r["p"] < 0.05]
    text = ""
    if worse:
        text += f"; RL lost beyond noise (p < 0.05) at seed{'s' * (len(worse) > 1)} {', '.join(worse)}"
    if low <= 0:
        text += "; the interval includes 0, so no gain over seeds is shown beyond noise"
    return text


def over_seeds(runs: list[dict]) -> str:
    """One line: mean gain over seeds with its 95% t-interval, and the seeds that met the target."""
    from turngym.demo import TARGET_GAIN

    met = [r["seed"] for r in runs if r["met"]]
    which = f" (seed{'s' * (len(met) > 1)} {', '.join(map(str, met))})" if met else ""
    line = f"The target ({TARGET_GAIN:+.2f} at p < 0.05) was met at {len(met)} of {len(runs)} seeds{which}"
    if len(runs) < 2:
        return line + "."
    mean, low, high, p = t_interval([r["rl"] - r["sft"] for r in runs])
    return (
        line + f"; over the {len(runs)} seeds the mean gain is {mean:+.3f}, 95% t-interval "
        f"[{low:+.3f}, {high:+.3f}] (one-sample t-test over seeds, p = {p_text(p)}){plainly(runs, low)}."
    )


def spread_lines(runs: list[dict]) -> list[str]:
    """How much the runs changed, how often a true +0.10 would pass, and the wall minutes."""
    from turngym.core.stats import sign_test_power
    from turngym.demo import TARGET_GAIN

    changed = [(r["gained"] + r["lost"]) / r["tasks"] for r in runs]
    power = [sign_test_power(r["tasks"], c, TARGET_GAIN) for r, c in zip(runs, changed) if c >= TARGET_GAIN]
    gains = [r["rl"] - r["sft"] for r in runs]
    lost = [f"seed {r['seed']} ({r['rl'] - r['sft']:+.3f})" for r in runs if r["rl"] < r["sft"]]
    out = [
        f"RL gained at {sum(g > 0 for g in gains)} of {len(runs)} seeds (gains {min(gains):+.3f} to {max(gains):+.3f})"
        + (f"; it lost ground at {', '.join(lost)}." if lost else "."),
        f"{100 * min(changed):.1f}-{100 * max(changed):.1f}% of the paired tasks changed outcome; at those rates the "
        f"exact sign test passes a true gain of {TARGET_GAIN:+.2f} in {100 * min(power):.0f}-{100 * max(power):.0f}% of runs "
        "(`turngym.core.stats.sign_test_power`, computed, not measured).",
    ]
    times = [r["minutes"] for r in runs if r["minutes"] is not None]
    if times:
        out.append(f"Wall time {min(times):.1f}-{max(times):.1f} minutes a run (`/usr/bin/time`).")
    return out


def demo_phases() -> str:
    """Where seed 0's time went, on the machine of seeds 0-4 and on that of seeds 5-9 (the same
    episodes both times), from each run's ``metrics.jsonl``."""
    runs = {
        "st-seed0": "seed 0, 2026-11-28 (the machine of seeds 0-4)",
        "repro-20261202-seed0": "seed 0 again, 2026-12-02 (the machine of seeds 5-9)",
    }
    lines = [
        "| run | SFT | evaluation after SFT | rollouts | updates | evaluations during and after RL | wall minutes |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, label in runs.items():
        rows = [json.loads(line) for line in (DEMO / name / "metrics.jsonl").read_text().splitlines() if line.strip()]
        total = [
            sum(r.get(key, 0) for r in rows)
            for key in ("time/sft", "time/eval_after_sft", "time/rollout", "time/update", "time/eval")
        ]
        lines.append(f"| {label} | " + " | ".join(f"{t:.0f} s" for t in total) + f" | {minutes(DEMO / name):.1f} |")
    return "\n".join(lines)


def demo_valid_unseen() -> str:
    return seed_table(demo_runs("st-seed"), curve=True, time=True)


def demo_valid_unseen_summary() -> str:
    runs = demo_runs("st-seed")
    return "\n".join(["- " + over_seeds(runs), *("- " + line for line in spread_lines(runs))])


def demo_sealed() -> str:
    runs = demo_runs("sealed-seed")
    if not runs:
        return "No seed has run on the sealed `test` split yet."
    # no minutes: these runs shared the cores with other work (the page says so)
    spread = "".join(f"\n- {line}" for line in spread_lines(runs) if not line.startswith("Wall time"))
    return seed_table(runs, curve=False, time=False) + "\n\n" + over_seeds(runs) + "\n" + spread


def demo_float32() -> str:
    runs = demo_runs("f32-seed")
    gains = ", ".join(f"{r['rl'] - r['sft']:+.3f}" for r in runs)
    return over_seeds(runs) + f" Per seed ({', '.join(str(r['seed']) for r in runs)}): {gains}."


def demo_readme() -> str:
    """The README's outcome lines: the sealed split's seeds, then the old validation results."""

    def short(runs: list[dict]) -> str:
        text = f"met the target at {sum(r['met'] for r in runs)} of {len(runs)} seeds"
        if len(runs) < 2:
            return text
        mean, low, high, _ = t_interval([r["rl"] - r["sft"] for r in runs])
        return text + f", mean gain {mean:+.3f}, 95% t-interval [{low:+.3f}, {high:+.3f}]" + plainly(runs, low)

    sealed, valid = demo_runs("sealed-seed"), demo_runs("st-seed")
    first = "no seed has run on it yet" if not sealed else f"RL {short(sealed)}"
    lines = [f"- On the sealed `test` split ({sealed[0]['tasks'] if sealed else 144} tasks): {first}."]
    if valid:
        lines.append(
            f"- On `valid_unseen` ({valid[0]['tasks']} tasks), before it was retired as a test split "
            f"({VALID_UNSEEN_RUNS} runs of six variants had also chosen settings): RL {short(valid)}."
        )
    return "\n".join(lines)


def seed_spread() -> str:
    """The kept variants on `valid_unseen` (benchmarks/demo_seed_spread.py's own arithmetic)."""
    import demo_seed_spread

    with contextlib.redirect_stdout(io.StringIO()):
        out = demo_seed_spread.main(["--results", str(DEMO)])
    runs = out["runs"]
    by_variant: dict[str, list[dict]] = {}
    for r in runs:
        by_variant.setdefault(r["variant"], []).append(r)
    lines = ["| variant | seeds | mean gain (tasks) | target met |", "|---|---:|---:|---:|"]
    for prefix, rs in by_variant.items():
        lines.append(
            f"| `{prefix}*`: {demo_seed_spread.VARIANTS[prefix]} | {len(rs)} | "
            f"{statistics.fmean(r['rl'] - r['sft'] for r in rs):+.1f} | {sum(r['met'] for r in rs)} |"
        )
    tasks = runs[0]["tasks"]
    lines += [
        "",
        f"Over the {len(runs)} runs with the KL ({len(by_variant)} variants), {sum(r['met'] for r in runs)} "
        f"met the target. The gain spreads by {out['sd_within']:.1f} tasks ({out['sd_within'] / tasks:.3f}) "
        "from seed to seed within a variant; at that spread the target would hold at 80% of seeds for a mean "
        f"gain of {out['needed'][0.80] / tasks:+.2f} and at 95% for {out['needed'][0.95] / tasks:+.2f}. Where SFT "
        f"started strong RL gained less: {out['gain_on_sft'][0]:+.2f} tasks of gain per task SFT solved "
        f"(r = {out['gain_on_sft'][2]:+.2f}, least squares over the runs).",
    ]
    return "\n".join(lines)


# ---- the estimator benchmark ---------------------------------------------------------------


def estimator_results() -> list[dict]:
    return [json.loads(p.read_text()) | {"name": p.stem} for p in sorted((ESTIMATORS / "runs").glob("*.json"))]


def estimators_final() -> str:
    import llm_credit_assignment as lca

    results = estimator_results()
    sft = json.loads((ESTIMATORS / "summary.json").read_text())["sft"]["after_sft"]
    lines = [
        "| estimator | seeds | held-out success after 608 episodes (mean, 95% t-CI) | per seed | gain over SFT "
        "| gained / lost vs SFT per seed |",
        "|---|---:|---:|---|---:|---|",
    ]
    for est in ("grpo", "rloo", "gigpo", "hgpo"):
        mine = sorted((r for r in results if r["estimator"] == est), key=lambda r: r["seed"])
        final = [r["eval"][str(r["updates"])] for r in mine]
        mean, half = lca.interval(final)
        lines.append(
            f"| {est} | {len(mine)} | {mean:.2f} +- {half:.2f} | {', '.join(f'{v:.3f}' for v in final)} | "
            f"{mean - sft:+.2f} | {lca.paired_text([r['vs_sft'] for r in mine])} |"
        )
    lines += ["", f"All runs start from one SFT checkpoint: {sft:.3f} on the 134 `valid_unseen` tasks."]
    return "\n".join(lines)


def estimators_vs_grpo() -> str:
    import llm_credit_assignment as lca

    results = estimator_results()
    lines = [
        "| against GRPO | seeds | mean difference (95% t-CI over seeds) | gained / lost, pooled | exact sign test p "
        "(pooled) | detectable at 80% power: sign test / t over seeds |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for est in ("rloo", "gigpo", "hgpo"):
        v = lca.versus(results, est)
        lines.append(
            f"| {est} | {v['seeds']} | {v['mean_difference']:+.3f} +- {v['ci']:.3f} | +{v['gained']} / "
            f"-{v['lost']} | {v['p']:.2g} | {v['detectable_episodes']:.3f} / {v['detectable_seeds']:.3f} |"
        )
    return "\n".join(lines)


def estimators_minutes() -> str:
    own = [(r["seconds"] / 60, r["name"]) for r in estimator_results() if r["name"] not in NOT_OWN_TIME]
    left = ", ".join(f"{n} ({why})" for n, why in NOT_OWN_TIME.items())
    text = (
        f"The kept runs took {min(own)[0]:.1f}-{max(own)[0]:.1f} minutes each ({len(own)} runs timed on their "
        f"own, two side by side with one thread each, at 8dd2d9b; not counted: {left})."
    )
    timing = [
        json.loads(p.read_text())["seconds"] / 60 for p in sorted((ESTIMATORS / "timing-20261202").glob("*.json"))
    ]
    if timing:
        text += (
            f" With the code of 2026-12-02 a run took {min(timing):.1f}-{max(timing):.1f} minutes "
            f"({len(timing)} runs, `timing-20261202/`), so the 20 take about {20 * max(timing) / 2 / 60:.1f} hours "
            "as two shards, plus the SFT stage once."
        )
    return text


TABLES = {
    "demo-valid-unseen": demo_valid_unseen,
    "demo-valid-unseen-summary": demo_valid_unseen_summary,
    "demo-sealed": demo_sealed,
    "demo-float32": demo_float32,
    "demo-phases": demo_phases,
    "demo-readme": demo_readme,
    "demo-seed-spread": seed_spread,
    "estimators-final": estimators_final,
    "estimators-vs-grpo": estimators_vs_grpo,
    "estimators-minutes": estimators_minutes,
    "env-server-scaling": scaling_table,
}


def render(text: str, cache: dict[str, str]) -> str:
    """``text`` with every marked table replaced by what the script writes for it."""

    def fill(m: re.Match) -> str:
        name = m.group(2)
        if name not in TABLES:
            raise SystemExit(f"unknown table {name!r}: known tables are {', '.join(TABLES)}")
        if name not in cache:
            cache[name] = TABLES[name]().rstrip("\n") + "\n"
        return m.group(1) + cache[name] + m.group(4)

    return MARKER.sub(fill, text)


def differing(pages: list[Path] = PAGES) -> list[str]:
    """'page: table' for each generated table whose text in the page is not what the script writes."""
    cache: dict[str, str] = {}
    out = []
    for page in pages:
        text = page.read_text()
        new = render(text, cache)
        if new != text:
            old = {m.group(2): m.group(3) for m in MARKER.finditer(text)}
            where = page.relative_to(ROOT) if page.is_relative_to(ROOT) else page
            out += [f"{where}: {name}" for name, body in old.items() if cache[name] != body]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 naming each table that differs")
    args = parser.parse_args(argv)
    if args.check:
        stale = differing()
        for line in stale:
            print(f"differs from the raw files: {line}")
        return 1 if stale else 0
    cache: dict[str, str] = {}
    for page in PAGES:
        text = page.read_text()
        new = render(text, cache)
        if new != text:
            page.write_text(new)
            print(f"rewrote {page.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
