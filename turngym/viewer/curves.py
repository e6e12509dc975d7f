"""The one place that draws a run's curves, for ``curves.png`` (the trainer, at the end of a run)
and for ``report.html`` (``turngym report``).

A chart is a *panel*, a plain dict: ``title``, ``x_label``, ``series`` (name -> [(x, y)], each
drawn as a line, with dots when it has at most ``DOTS`` points), and optionally ``marks`` (name ->
[(x, y)] drawn as crosses, no line), ``band`` ((x0, x1, name): a shaded span of x) and
``labels`` ({(x, y): text} written above a point). ``learning_panels`` builds the learning curves
(success rate and mean return of training rollouts and of every held-out evaluation at its
true position), ``metric_panels`` one panel per other group of metrics. ``line_chart`` draws a
panel as inline SVG, ``plot_curves`` the learning panels as a PNG with matplotlib, both from
the same panels, colours and rules.
"""

from __future__ import annotations

import html
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

from turngym.core.runs import read_metrics

X_KEYS = ("update", "env_steps", "episodes", "step")
PALETTE = ("#2563eb", "#16a34a", "#dc2626", "#9333ea", "#ea580c", "#0891b2", "#4d7c0f", "#be185d")
MARK, BAND = "#dc2626", "#ea580c"
DOTS = 40  # a series with more points is a plain line: dots would hide it
#: the learning curves: (metric, axis label); train/, eval/ and eval_after_sft/ keys of each
LEARNING = (("success_rate", "success rate"), ("mean_return", "mean return"))
#: the metrics keys the learning panels draw
LEARNING_KEYS = frozenset(
    f"{stage}/{metric}" for stage in ("train", "eval", "eval_after_sft") for metric, _ in LEARNING
)


# ----- what is drawn ----------------------------------------------------------------------------
def eval_points(rows: list[dict[str, Any]], metric: str) -> list[tuple[float, float, str]]:
    """Every held-out evaluation of a run as (x, value, stage), x in updates.

    The zero-shot evaluation sits at x = -1 when SFT ran (SFT occupies -1..0, before RL's first
    update), the after-SFT one at 0, RL's at their update; without SFT, zero-shot is at 0.
    """
    points = []
    sft = any(r.get("sft/turns") for r in rows)
    for r in rows:
        update = r.get("update", 0)
        if r.get(f"eval/{metric}") is not None:
            at_start = update == 0
            points.append(
                (
                    -1.0 if at_start and sft else float(update),
                    r[f"eval/{metric}"],
                    "zero-shot" if at_start else "rl",
                )
            )
        if r.get(f"eval_after_sft/{metric}") is not None:
            points.append((0.0, r[f"eval_after_sft/{metric}"], "after sft"))
    return sorted(points)


def eval_episodes(rows: list[dict[str, Any]]) -> dict[float, int]:
    """Episodes of each RL-phase held-out evaluation, by its x in ``eval_points`` (after SFT at 0)."""
    out = {}
    for r in rows:
        if r.get("eval_after_sft/episodes"):
            out[0.0] = r["eval_after_sft/episodes"]
        elif r.get("update") and r.get("eval/episodes"):
            out[float(r["update"])] = r["eval/episodes"]
    return out


def learning_panels(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Success rate and mean return against updates: training rollouts, and every held-out
    evaluation at its true position (zero-shot, after SFT, during RL), the SFT phase as a band
    and updates with no learning signal marked. Panels with nothing to draw are left out."""
    sft = any(r.get("sft/turns") for r in rows)
    counts = eval_episodes(rows)
    panels = []
    for metric, label in LEARNING:
        train = [
            (float(r["update"]), r[f"train/{metric}"])
            for r in rows
            if r.get(f"train/{metric}") is not None and r.get("update")
        ]
        silent = [
            (float(r["update"]), r[f"train/{metric}"])
            for r in rows
            if r.get("warning/no_signal") and r.get(f"train/{metric}") is not None
        ]
        held_out = [(x, y) for x, y, _ in eval_points(rows, metric)]
        if not train and not held_out:
            continue
        series = {name: pts for name, pts in (("train rollouts", train), ("held-out eval", held_out)) if pts}
        panel: dict[str, Any] = {
            "title": label,
            "x_label": "RL update (SFT before 0)" if sft else "RL update",
            "series": series,
        }
        if silent:
            panel["marks"] = {"no learning signal": silent}
        if sft:
            panel["band"] = (-1.0, 0.0, "SFT")
        if len(set(counts.values())) > 1:  # e.g. a cheaper curve between whole evaluations
            panel["labels"] = {(x, y): f"{counts[x]} ep." for x, y in held_out if x in counts}
        panels.append(panel)
    return panels


def metric_panels(metrics: list[dict[str, Any]], skip: set[str] | frozenset = frozenset()) -> list[dict[str, Any]]:
    """One panel per group of numeric metrics other than ``skip``: success rates, returns, then
    one per key prefix (at most ``len(PALETTE)`` series each), against the first of ``X_KEYS``
    the rows have."""
    if not metrics:
        return []
    x_key = next((k for k in X_KEYS if any(k in r for r in metrics)), None)
    series: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for i, row in enumerate(metrics):
        x = row.get(x_key, i) if x_key else i
        if not _is_number(x):
            continue
        for k, v in row.items():
            if k not in X_KEYS and k not in skip and _is_number(v):
                series[k].append((float(x), float(v)))
    panels, used = [], set()
    for title, word in (("Success rate", "success"), ("Mean return", "return")):
        keys = [k for k in series if word in k]
        if keys:
            panels.append({"title": title, "x_label": x_key or "row", "series": {k: series[k] for k in keys}})
            used.update(keys)
    by_prefix: dict[str, list[str]] = defaultdict(list)
    for k in series:
        if k not in used:
            by_prefix[k.split("/", 1)[0] if "/" in k else "other"].append(k)
    for prefix, keys in by_prefix.items():
        for start in range(0, len(keys), len(PALETTE)):
            chunk = keys[start : start + len(PALETTE)]
            panels.append({"title": prefix, "x_label": x_key or "row", "series": {k: series[k] for k in chunk}})
    return panels


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _colours(panel: dict[str, Any]) -> dict[str, str]:
    return {name: PALETTE[k % len(PALETTE)] for k, name in enumerate(panel["series"])}


# ----- inline SVG -------------------------------------------------------------------------------
def nice_ticks(lo: float, hi: float, count: int = 5, integer: bool = False) -> list[float]:
    """Round tick values covering [lo, hi] (steps of 1, 2 or 5 times a power of ten)."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return [0.0]
    if hi - lo <= 1e-9 * max(abs(lo), abs(hi), 1.0):
        # one value, up to rounding (-0.2 and -0.20000000000000004: steps of 1e-17 never ended):
        # a unit-wide axis around it that does not cross zero
        # (a success rate that is 0 everywhere gets 0..1, not -0.5..0.5)
        lo, hi = (lo - 0.5, hi + 0.5) if lo < 0 or lo - 0.5 >= 0 else (0.0, lo + 1.0)
    raw = (hi - lo) / max(count - 1, 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    if integer:  # updates and turns come in whole numbers
        step = max(step, 1)
    start = math.floor(lo / step) * step
    ticks, t = [], start
    while t < hi + step * 0.999:
        ticks.append(round(t, 12))
        t += step
    return ticks


def number(x: float) -> str:
    """A tick label: short, exponent only for very large or small values."""
    if x == 0:
        return "0"
    if abs(x) >= 1e5 or abs(x) < 1e-3:
        return f"{x:.2g}"
    return f"{x:.4g}"


def chart_legend(entries: list[tuple[str, str]], left: float, right: float, y: float = 36) -> tuple[list[str], int]:
    """Legend entries (name, colour) in rows under the title; returns the SVG parts and its height."""
    parts, x, rows = [], left, 1
    for name, colour in entries:
        w = 22 + 6.3 * len(name)  # about the width of 11px text
        if x > left and x + w > right:
            x, rows = left, rows + 1
        ly = y + 15 * (rows - 1)
        parts.append(f'<rect x="{x:.1f}" y="{ly - 9}" width="10" height="10" fill="{colour}"/>')
        parts.append(f'<text x="{x + 14:.1f}" y="{ly}">{html.escape(name)}</text>')
        x += w
    return parts, 15 * rows if entries else 0


def chart_frame(title: str, width: int, height: int, left: float, right: float, yt: list[float], sy) -> list[str]:
    """The opening of a chart's SVG: title and the horizontal grid lines with their labels."""
    parts = [
        f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img">',
        f"<title>{html.escape(title)}</title>",
        f'<text x="{left}" y="18" class="chart-title">{html.escape(title)}</text>',
    ]
    for y in yt:
        parts.append(f'<line x1="{left}" x2="{width - right}" y1="{sy(y):.1f}" y2="{sy(y):.1f}" class="grid"/>')
        parts.append(f'<text x="{left - 6}" y="{sy(y) + 4:.1f}" text-anchor="end">{number(y)}</text>')
    return parts


def line_chart(
    series: dict[str, list[tuple[float, float]]],
    title: str,
    x_label: str,
    width: int = 520,
    height: int = 250,
    marks: dict[str, list[tuple[float, float]]] | None = None,
    band: tuple[float, float, str] | None = None,
    labels: dict[tuple[float, float], str] | None = None,
) -> str:
    """A panel as inline SVG: one line per series, crosses for ``marks``, the shaded ``band``,
    axes with round ticks and a legend ("" when there is nothing to draw)."""
    marks, labels = marks or {}, labels or {}
    points = [p for pts in (*series.values(), *marks.values()) for p in pts]
    if not points:
        return ""
    colours = _colours({"series": series})
    left, right, bottom = 58, 14, 42
    entries = [*colours.items(), *((name, MARK) for name in marks), *([(band[2], BAND)] if band else [])]
    legend, legend_h = chart_legend(entries, left, width - right)
    top, height = 36 + legend_h, height + legend_h  # the legend sits above the plot, never on a line
    xs = [p[0] for p in points] + ([band[0], band[1]] if band else [])
    xt = nice_ticks(min(xs), max(xs), integer=all(float(x).is_integer() for x in xs))
    yt = nice_ticks(min(p[1] for p in points), max(p[1] for p in points))
    x0, x1, y0, y1 = xt[0], xt[-1], yt[0], yt[-1]

    def sx(x: float) -> float:
        return left + (x - x0) / (x1 - x0 or 1) * (width - left - right)

    def sy(y: float) -> float:
        return height - bottom - (y - y0) / (y1 - y0 or 1) * (height - top - bottom)

    parts = chart_frame(title, width, height, left, right, yt, sy)
    if band:
        parts.append(
            f'<rect x="{sx(band[0]):.1f}" y="{top}" width="{sx(band[1]) - sx(band[0]):.1f}" '
            f'height="{height - bottom - top}" fill="{BAND}" fill-opacity="0.15">'
            f"<title>{html.escape(band[2])}</title></rect>"
        )
    for x in xt:
        parts.append(f'<text x="{sx(x):.1f}" y="{height - bottom + 16}" text-anchor="middle">{number(x)}</text>')
    parts.append(
        f'<text x="{(left + width - right) / 2:.1f}" y="{height - 6}" text-anchor="middle" '
        f'class="axis-label">{html.escape(x_label)}</text>'
    )
    parts.append(f'<line x1="{left}" x2="{left}" y1="{top}" y2="{height - bottom}" class="axis"/>')
    parts.append(f'<line x1="{left}" x2="{width - right}" y1="{height - bottom}" y2="{height - bottom}" class="axis"/>')
    for name, pts in series.items():
        colour = colours[name]
        pts = sorted(pts)
        coords = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in pts)
        parts.append(
            f'<polyline points="{coords}" fill="none" stroke="{colour}" stroke-width="2" '
            f'data-series="{html.escape(name)}"/>'
        )
        if len(pts) <= DOTS:
            parts += [f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="2.5" fill="{colour}"/>' for x, y in pts]
    for name, pts in marks.items():
        for x, y in pts:
            parts.append(
                f'<path d="M{sx(x) - 4:.1f},{sy(y) - 4:.1f}l8,8m0,-8l-8,8" stroke="{MARK}" '
                f'stroke-width="2" data-series="{html.escape(name)}"/>'
            )
    for (x, y), text in labels.items():
        parts.append(
            f'<text x="{sx(x):.1f}" y="{sy(y) - 7:.1f}" text-anchor="middle" font-size="9">{html.escape(text)}</text>'
        )
    parts += legend
    parts.append("</svg>")
    return "".join(parts)


# ----- PNG --------------------------------------------------------------------------------------
def plot_curves(run_dir: str | Path, out: str | Path | None = None, title: str | None = None) -> Path:
    """``run_dir/curves.png`` (or ``out``): the run's ``learning_panels`` side by side."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    run_dir = Path(run_dir)
    panels = learning_panels(read_metrics(run_dir / "metrics.jsonl"))
    out = Path(out) if out else run_dir / "curves.png"
    fig, axes = plt.subplots(1, max(len(panels), 1), figsize=(5 * max(len(panels), 1), 4), squeeze=False)
    for ax, panel in zip(axes[0], panels):
        if panel.get("band"):
            lo, hi, name = panel["band"]
            ax.axvspan(lo, hi, color=BAND, alpha=0.15, label=name)
        for name, colour in _colours(panel).items():
            xs, ys = zip(*sorted(panel["series"][name]))
            ax.plot(xs, ys, "o-" if len(xs) <= DOTS else "-", color=colour, markersize=4, label=name)
        for name, pts in panel.get("marks", {}).items():
            xs, ys = zip(*pts)
            ax.plot(xs, ys, "x", color=MARK, label=name)
        for (x, y), text in panel.get("labels", {}).items():
            ax.annotate(text, (x, y), textcoords="offset points", xytext=(0, 6), ha="center", fontsize=7)
        ax.set_xlabel(panel["x_label"])
        ax.set_ylabel(panel["title"])
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title or run_dir.name)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out


def histogram(
    counts: dict[str, dict[int, int]],
    title: str,
    x_label: str,
    colours: dict[str, str],
    width: int = 520,
    height: int = 250,
) -> str:
    """Stacked bars: ``counts[label][value]`` episodes per integer value, one colour per label."""
    values = sorted({v for c in counts.values() for v in c})
    if not values:
        return ""
    lo, hi = values[0], values[-1]
    bin_width = max(1, math.ceil((hi - lo + 1) / 30))  # at most 30 bars
    bins = list(range(lo - lo % bin_width, hi + 1, bin_width))
    stacked = {
        b: {label: sum(n for v, n in c.items() if b <= v < b + bin_width) for label, c in counts.items()} for b in bins
    }
    top_count = max(sum(s.values()) for s in stacked.values())
    yt = nice_ticks(0, top_count, integer=True)
    left, right, bottom = 46, 14, 42
    legend, legend_h = chart_legend([(label, colours[label]) for label in counts], left, width - right)
    top, height = 36 + legend_h, height + legend_h
    plot_w, plot_h = width - left - right, height - top - bottom
    bar_w = plot_w / len(bins)

    def sy(y: float) -> float:
        return height - bottom - y / (yt[-1] or 1) * plot_h

    parts = chart_frame(title, width, height, left, right, yt, sy)
    label_every = max(1, math.ceil(len(bins) / 12))
    for i, b in enumerate(bins):
        base = 0
        x = left + i * bar_w
        for label, n in stacked[b].items():
            if n:
                parts.append(
                    f'<rect x="{x + 1:.1f}" y="{sy(base + n):.1f}" width="{max(bar_w - 2, 1):.1f}" '
                    f'height="{sy(base) - sy(base + n):.1f}" fill="{colours[label]}">'
                    f"<title>{html.escape(label)}: {n} episodes, {b}"
                    f"{'' if bin_width == 1 else f'-{b + bin_width - 1}'} turns</title></rect>"
                )
                base += n
        if i % label_every == 0:
            parts.append(f'<text x="{x + bar_w / 2:.1f}" y="{height - bottom + 16}" text-anchor="middle">{b}</text>')
    parts.append(
        f'<text x="{(left + width - right) / 2:.1f}" y="{height - 6}" text-anchor="middle" '
        f'class="axis-label">{html.escape(x_label)}</text>'
    )
    parts.append(f'<line x1="{left}" x2="{width - right}" y1="{height - bottom}" y2="{height - bottom}" class="axis"/>')
    parts += legend
    parts.append("</svg>")
    return "".join(parts)
