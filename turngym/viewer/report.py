"""`turngym report RUN_DIR`: one self-contained HTML file about a run.

Sections: learning curves (from ``metrics.jsonl``, drawn as inline SVG), success by task type
and split, the distribution of episode lengths, invalid-action rates, and links into
``turngym view`` for the episodes worth a look. The summary names the env hash of the episodes
and metrics rows, and a warning opens the page when one env id shows two. No scripts, no external files: the report
opens offline and can be mailed around.

``write_report(path)`` takes a run directory (writes ``RUN_DIR/report.html``) or one
trajectory JSONL file (writes ``NAME.report.html`` beside it).
"""

from __future__ import annotations

import argparse
import datetime as dt
import html
import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from turngym.viewer.curves import (
    LEARNING_KEYS,
    histogram,
    learning_panels,
    line_chart,
    metric_panels,
)
from turngym.viewer.data import episode_rates, latest_files, read_run

DEFAULT_PORT = 8765  # the port `turngym view` uses by default; the report's links point there
GREEN, RED, AMBER = "#16a34a", "#dc2626", "#d97706"


def write_report(
    path: str | Path,
    out: str | Path | None = None,
    viewer_port: int = DEFAULT_PORT,
    warn: Callable[[str], None] | None = None,
) -> Path:
    """Write the report for a run directory or a trajectory JSONL file; returns its path.
    ``warn`` gets the one line the report shows when it combines results made with different
    versions of an env (``turngym.core.versions.hashes_note``)."""
    path = Path(path)
    if out is None:
        out = path / "report.html" if path.is_dir() else path.with_name(path.stem + ".report.html")
    out = Path(out)
    text = build_report(path, viewer_port, warn)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(out)  # readers never see half a report
    return out


# ----- HTML -------------------------------------------------------------------------------------
CSS = """
body { font: 14px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1f2328; margin: 0 auto;
       max-width: 1120px; padding: 1rem 1.5rem 3rem; }
h1 { font-size: 22px; margin-bottom: .2rem; } h2 { font-size: 17px; margin-top: 2rem; border-bottom: 1px solid #d0d7de; }
.muted { color: #656d76; } code, pre { font: 12.5px ui-monospace, SFMono-Regular, Menlo, monospace; }
pre { background: #f6f8fa; padding: .6rem .8rem; border-radius: 6px; overflow: auto; max-height: 20em; }
.cards { display: flex; flex-wrap: wrap; gap: .8rem; }
.card { border: 1px solid #d0d7de; border-radius: 8px; padding: .5rem .9rem; min-width: 8.5rem; }
.card .value { font-size: 20px; font-weight: 600; } .card .name { font-size: 12px; color: #656d76; }
.charts { display: flex; flex-wrap: wrap; gap: 1rem; }
svg.chart { border: 1px solid #eaeef2; border-radius: 6px; background: #fff; font-size: 11px; fill: #1f2328; }
svg.chart .grid { stroke: #eaeef2; } svg.chart .axis { stroke: #8c959f; }
svg.chart .chart-title { font-size: 13px; font-weight: 600; } svg.chart .axis-label { fill: #656d76; }
table { border-collapse: collapse; margin: .5rem 0; } th, td { padding: .25rem .7rem; border-bottom: 1px solid #d0d7de; text-align: left; }
th { background: #f6f8fa; font-size: 12px; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.bar { display: inline-block; width: 90px; height: 9px; background: #eaeef2; border-radius: 5px; margin-right: .4rem; vertical-align: middle; }
.bar span { display: block; height: 100%; border-radius: 5px; background: #16a34a; }
.bar.bad span { background: #dc2626; }
.ok { color: #16a34a; font-weight: 600; } .fail { color: #dc2626; } .unscorable { color: #9a6700; font-weight: 600; }
"""


def build_report(path: Path, viewer_port: int = DEFAULT_PORT, warn: Callable[[str], None] | None = None) -> str:
    run = read_run(Path(path))
    if run["version_note"] and warn is not None:
        warn(run["version_note"])
    eps = run["episodes"]
    totals = episode_rates(eps)
    name = Path(path).resolve().name
    generated = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    body = [
        f"<h1>turngym report: {_e(name)}</h1>",
        f'<p class="muted">{_e(str(Path(path).resolve()))} · generated {generated}</p>',
        f'<p class="fail version-note">Warning: {_e(run["version_note"])}.</p>' if run["version_note"] else "",
        _cards(totals, run),
        _curves_section(run),
        _success_section(eps, run["per_file"]),
        _length_section(eps),
        _invalid_section(eps, run["per_file"]),
        _files_section(run, viewer_port),
        _look_section(eps, run, viewer_port),
    ]
    if run["config"]:
        body.append(f"<h2>Configuration</h2><pre>{_e(run['config'])}</pre>")
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>turngym report: {_e(name)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n"
        + "\n".join(b for b in body if b)
        + "\n</body>\n</html>\n"
    )


def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}%"


def _fmt(x: float | None, digits: int = 3) -> str:
    return "–" if x is None else f"{x:.{digits}g}"


def _bar(x: float | None, bad: bool = False) -> str:
    width = 0 if x is None else max(0.0, min(1.0, x)) * 100
    return f'<span class="bar{" bad" if bad else ""}"><span style="width:{width:.0f}%"></span></span>'


def _cards(t: dict[str, Any], run: dict[str, Any]) -> str:
    cards = [
        ("episodes", str(t["episodes"])),
        ("success rate", _pct(t["success_rate"])),
        ("mean return", _fmt(t["mean_return"])),
        ("mean turns", _fmt(t["mean_steps"])),
        ("invalid actions", _pct(t["invalid_rate"])),
        ("unscorable", str(t["unscorable"])),
        ("trajectory files", str(len(run["per_file"]))),
        ("env hash", " / ".join(run["env_hashes"]) or "none recorded"),
    ]
    if run["metrics"]:
        cards.append(("metric rows", str(len(run["metrics"]))))
    return (
        '<div class="cards">'
        + "".join(
            f'<div class="card"><div class="value">{_e(v)}</div><div class="name">{_e(k)}</div></div>' for k, v in cards
        )
        + "</div>"
    )


def _curves_section(run: dict[str, Any]) -> str:
    # the learning curves as curves.png draws them, then every other group of metrics
    panels = learning_panels(run["metrics"]) + metric_panels(run["metrics"], skip=LEARNING_KEYS)
    charts = [line_chart(**panel) for panel in panels]
    # what the trajectory files themselves say, update by update
    per_update = {
        folder: [f for f in run["per_file"] if f["folder"] == folder and f["update"] is not None and f["episodes"]]
        for folder in ("rollouts", "eval")
    }
    series = {
        "rollout success rate": [
            (f["update"], f["success_rate"]) for f in per_update["rollouts"] if f["success_rate"] is not None
        ],
        "eval success rate": [
            (f["update"], f["success_rate"]) for f in per_update["eval"] if f["success_rate"] is not None
        ],
        "rollout invalid-action rate": [
            (f["update"], f["invalid_rate"]) for f in per_update["rollouts"] if f["invalid_rate"] is not None
        ],
    }
    series = {k: v for k, v in series.items() if v}
    if series:
        charts.append(line_chart(series, "From the trajectory files", "update"))
    charts = [c for c in charts if c]
    if not charts:
        return (
            '<h2 id="curves">Learning curves</h2><p class="muted">No metrics.jsonl and no rollouts/update_*.jsonl: '
            "this is not a training run, so there are no curves.</p>"
        )
    return '<h2 id="curves">Learning curves</h2><div class="charts">' + "".join(charts) + "</div>"


def _success_section(eps: list[dict[str, Any]], per_file: list[dict[str, Any]]) -> str:
    if not eps:
        return '<h2 id="success">Success by task type and split</h2><p class="muted">No episodes.</p>'
    keep = latest_files(per_file)
    note = ""
    if len(keep) < len(per_file):  # a training run: earlier updates would blur the picture
        eps = [e for e in eps if e["file"] in keep]
        note = (
            " From the latest update's files only (earlier updates are in the curves above): "
            + ", ".join(f"<code>{_e(f)}</code>" for f in keep)
            + "."
        )
    splits = sorted({e["split"] for e in eps})
    types = sorted({e["task_type"] for e in eps})
    cells: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for e in eps:
        cells[(e["task_type"], e["split"])].append(e)
        cells[(e["task_type"], "all")].append(e)
        cells[("all", e["split"])].append(e)
        cells[("all", "all")].append(e)
    columns = splits + (["all"] if len(splits) > 1 else [])
    rows_ = types + (["all"] if len(types) > 1 else [])
    head = "<tr><th>task type \\ split</th>" + "".join(f"<th>{_e(s)}</th>" for s in columns) + "</tr>"
    body = []
    for t in rows_:
        tds = []
        for s in columns:
            rates = episode_rates(cells.get((t, s), []))
            tds.append(
                '<td class="num">–</td>'
                if not rates["episodes"]
                else f'<td class="num">{_bar(rates["success_rate"])}{_pct(rates["success_rate"])} '
                f'<span class="muted">(n={rates["episodes"]})</span></td>'
            )
        body.append(f"<tr><th>{_e(t)}</th>{''.join(tds)}</tr>")
    return (
        '<h2 id="success">Success by task type and split</h2>'
        f'<p class="muted">Success rate over scorable episodes; n counts all episodes.{note}</p>'
        f'<table class="success-table">{head}{"".join(body)}</table>'
    )


def _length_section(eps: list[dict[str, Any]]) -> str:
    counts: dict[str, dict[int, int]] = {
        "success": defaultdict(int),
        "failure": defaultdict(int),
        "unscorable": defaultdict(int),
    }
    for e in eps:
        label = "unscorable" if not e["scorable"] else "success" if e["success"] else "failure"
        counts[label][e["length"]] += 1
    counts = {k: dict(v) for k, v in counts.items() if v}
    chart = histogram(counts, "Episode length", "turns", {"success": GREEN, "failure": RED, "unscorable": AMBER})
    lengths = sorted(e["length"] for e in eps)
    stats = (
        f'<p class="muted">min {lengths[0]} · median {lengths[len(lengths) // 2]} · max {lengths[-1]} turns; '
        f"ended by the turn limit: {sum(e['done_reason'] in ('max_turns', 'truncated') for e in eps)} episodes.</p>"
        if lengths
        else '<p class="muted">No episodes.</p>'
    )
    return f'<h2 id="lengths">Episode length distribution</h2>{stats}<div class="charts">{chart}</div>'


def _invalid_section(eps: list[dict[str, Any]], per_file: list[dict[str, Any]]) -> str:
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for e in eps:
        groups[(e["split"], e["task_type"])].append(e)
    rows = []
    for (split, ttype), members in sorted(groups.items()):
        r = episode_rates(members)
        rows.append(
            f'<tr><td>{_e(split)}</td><td>{_e(ttype)}</td><td class="num">{r["steps"]}</td>'
            f'<td class="num">{sum(m["invalid_actions"] for m in members)}</td>'
            f'<td class="num">{_bar(r["invalid_rate"], bad=True)}{_pct(r["invalid_rate"])}</td></tr>'
        )
    return (
        '<h2 id="invalid">Invalid-action rate</h2>'
        '<p class="muted">Share of turns whose action the env rejected (info["action_valid"] false).</p>'
        '<table class="invalid-table"><tr><th>split</th><th>task type</th><th>turns</th><th>invalid</th>'
        f"<th>rate</th></tr>{''.join(rows)}</table>"
    )


def _viewer_url(port: int, file: str, **params: Any) -> str:
    extra = "".join(f"&{k}={quote(str(v))}" for k, v in params.items())
    return f"http://127.0.0.1:{port}/#file={quote(file)}{extra}"


def _files_section(run: dict[str, Any], port: int) -> str:
    command = f"turngym view {run['path']} --port {port}"
    rows = []
    for f in run["per_file"]:
        rows.append(
            f'<tr><td><a href="{_e(_viewer_url(port, f["file"]))}">{_e(f["file"])}</a></td>'
            f'<td class="num">{f["episodes"]}</td><td class="num">{_pct(f["success_rate"])}</td>'
            f'<td class="num">{_fmt(f["mean_return"])}</td><td class="num">{_fmt(f["mean_steps"])}</td>'
            f'<td class="num">{_pct(f["invalid_rate"])}</td><td class="num">{f["unscorable"]}</td></tr>'
        )
    return (
        '<h2 id="files">Trajectory files</h2>'
        f"<p>Links open in the trajectory viewer: start it with <code>{_e(command)}</code>.</p>"
        '<table class="files-table"><tr><th>file</th><th>episodes</th><th>success</th><th>mean return</th>'
        f"<th>mean turns</th><th>invalid actions</th><th>unscorable</th></tr>{''.join(rows)}</table>"
        + "".join(f'<p class="fail unreadable">skipped: {_e(msg)}</p>' for msg in run["unreadable"])
    )


def _look_section(eps: list[dict[str, Any]], run: dict[str, Any], port: int, limit: int = 15) -> str:
    """Failures with the lowest return, then unscorable ones: where an episode went wrong."""
    worst = sorted(
        (e for e in eps if not e["success"]),
        key=lambda e: (e["episode_return"] or 0.0, -e["invalid_actions"]),
    )[:limit]
    best = [e for e in eps if e["success"]][:3]
    if not worst and not best:
        return ""
    rows = []
    for e in worst + best:
        outcome = (
            '<span class="unscorable">unscorable</span>'
            if not e["scorable"]
            else '<span class="ok">success</span>'
            if e["success"]
            else '<span class="fail">failure</span>'
        )
        link = _viewer_url(port, e["file"], episode=e["index"])
        rows.append(
            f'<tr><td><a href="{_e(link)}">{_e(e["trajectory_id"])}</a></td><td>{_e(e["file"])}</td>'
            f"<td>{_e(e['task_id'])}</td>"
            f'<td>{_e(e["task_type"])}</td><td>{_e(e["split"])}</td><td class="num">{e["length"]}</td>'
            f'<td class="num">{_fmt(e["episode_return"])}</td><td>{outcome}</td>'
            f'<td class="num">{e["invalid_actions"]}</td></tr>'
        )
    return (
        '<h2 id="look">Episodes worth a look</h2>'
        f'<p class="muted">Up to {limit} failed episodes with the lowest return, and a few successes, '
        "each linked into the viewer.</p>"
        '<table class="look-table"><tr><th>episode</th><th>file</th><th>task</th><th>type</th><th>split</th><th>turns</th>'
        f"<th>return</th><th>outcome</th><th>invalid</th></tr>{''.join(rows)}</table>"
    )


# ----- command ----------------------------------------------------------------------------------
def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", help="a run directory (or one trajectory JSONL file)")
    p.add_argument("--out", help="where to write the HTML (default: RUN_DIR/report.html)")
    p.add_argument(
        "--viewer-port",
        type=int,
        default=DEFAULT_PORT,
        help=f"port the report's viewer links point at (default {DEFAULT_PORT})",
    )


def run(args) -> int:
    from turngym.core.commands import CLIError

    path = Path(args.path)
    if not path.exists():
        raise CLIError(f"{args.path}: no such run directory or file")
    if path.is_file():  # one file named on purpose: a foreign file is a mistake, not a skip
        from turngym.viewer.data import load_file

        try:
            load_file(path)
        except (ValueError, OSError) as e:
            raise CLIError(str(e)) from None
    print(
        write_report(
            args.path,
            args.out,
            args.viewer_port,
            warn=lambda note: print(f"turngym report: warning: {note}", file=sys.stderr),
        )
    )
    return 0
