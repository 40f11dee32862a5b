"""``compare.html``: one self-contained page that puts runs of one suite side by side.

Readable offline: plotly's JavaScript is inlined once (no CDN), every figure is plotly JSON drawn by it, and the only
links go to the runs' own ``report.html`` files (relative paths, so a folder of runs can be moved or archived whole).
The page reads only a :class:`~toolwild.eval.compare.Comparison`, so it cannot disagree with the terminal table.
When some runs are of a perturbed copy of the suite (``--perturb``), a *Robustness* section gives each one's
accuracy delta against its unperturbed run.
"""

from __future__ import annotations

import html
import os
from pathlib import Path

import plotly.graph_objects as go
import plotly.offline

from toolwild.core.files import write_text_atomic
from toolwild.eval.compare import HEADLINE, Comparison, Figure
from toolwild.eval.run_dir import REPORT
from toolwild.report.figures import LEGEND_ON_TOP as _LEGEND_ON_TOP
from toolwild.report.figures import MODEBAR_MARGIN

__all__ = ["render_compare_html", "write_compare_html"]

_METRIC_NAMES = {
    "task": "Task accuracy",
    "session": "Session accuracy",
    "optimal": "Optimal path rate",
    "progress": "Progress",
}
_STYLE = """
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222;padding:0 1em}
table{border-collapse:collapse;margin:1em 0;font-size:14px}
th,td{border-bottom:1px solid #ddd;padding:4px 10px;text-align:right}
th:first-child,td:first-child{text-align:left}
.ci{color:#777;font-size:12px}.up{color:#1a7f37}.down{color:#c62828}.meta{color:#555}
li{margin:.2em 0}code{background:#f4f4f4;padding:0 3px}
"""


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _pp(x: float | None) -> str:
    """A difference in percentage points, signed."""
    if x is None:
        return "n/a"
    return "0.0 pp" if abs(x) < 5e-4 else f"{100 * x:+.1f} pp"


def _figure_cell(fig: Figure) -> str:
    if fig.value is None:
        return "<td>n/a</td>"
    ci = "" if fig.low is None else f"<br><span class=ci>[{_pct(fig.low)}, {_pct(fig.high)}]</span>"
    return f"<td>{_pct(fig.value)} <span class=ci>{fig.part}/{fig.whole} {fig.unit}</span>{ci}</td>"


def _leaderboard(comparison: Comparison) -> str:
    head = "".join(f"<th>{_METRIC_NAMES[m]}</th>" for m in HEADLINE)
    rows = []
    for run in comparison.runs:
        who = html.escape(run.model or run.agent)
        if run.perturbation is not None:
            who += f"<br>perturbed: {html.escape(run.perturbation)}"
        cells = "".join(_figure_cell(run.figures[m]) for m in HEADLINE)
        rows.append(f"<tr><td><b>{html.escape(run.label)}</b><br><span class=ci>{who}</span></td>{cells}</tr>")
    return f"<table><tr><th>run</th>{head}</tr>{''.join(rows)}</table>"


def _plot(fig: go.Figure, div_id: str) -> str:
    """A figure as plotly JSON drawn by the inlined library (``</`` escaped: labels are user data).

    The layout every chart of the page shares, as in ``report.html`` (:func:`toolwild.report.figures._layout`): the
    mode bar stands vertically in a right margin kept for it (across the top it covered the title), and both axes
    ``automargin`` so long labels (``subtype: Coreferential Reference``, run names) grow the margin instead of being
    cut at the chart's edge.
    """
    fig.update_layout(
        template="none",  # plotly's default theme would add ~10 kB of JSON per chart
        modebar={"orientation": "v"},
        margin={"r": MODEBAR_MARGIN, "t": 60},
        title={"x": 0.5, "xanchor": "center", "y": 0.98, "yanchor": "top", "yref": "container"},
    )
    fig.update_xaxes(automargin=True)
    fig.update_yaxes(automargin=True)
    data = fig.to_json().replace("</", "<\\/")
    return (
        f'<div id="{div_id}"></div><script>(function(){{var f={data};'
        f'Plotly.newPlot("{div_id}",f.data,f.layout,{{displaylogo:false,responsive:true}});}})();</script>'
    )


def _pair_name(comparison: Comparison, a: int, b: int) -> str:
    return f"{comparison.runs[b].label} − {comparison.runs[a].label}"


def _interval_scatter(
    series: dict[str, list[tuple[str, float, float, float]]], *, title: str, rows: int, margin: int
) -> go.Figure:
    """Points with their (asymmetric) intervals around a zero line, in percentage points: one trace per metric of
    ``series`` (label, point, low, high), labels on the y axis, top to bottom."""
    fig = go.Figure()
    for metric, points in series.items():
        fig.add_trace(
            go.Scatter(
                x=[100 * point for _, point, _, _ in points],
                y=[label for label, _, _, _ in points],
                mode="markers",
                name=_METRIC_NAMES[metric],
                error_x={
                    "type": "data",
                    "symmetric": False,
                    "array": [100 * (high - point) for _, point, _, high in points],
                    "arrayminus": [100 * (point - low) for _, point, low, _ in points],
                },
            )
        )
    fig.add_vline(x=0, line_dash="dash", line_color="#888")
    fig.update_layout(
        title=title,
        xaxis_title="percentage points",
        height=200 + 40 * rows,
        margin={"l": margin},
        yaxis={"autorange": "reversed"},
        legend=_LEGEND_ON_TOP,
    )
    return fig


def _differences(comparison: Comparison) -> str:
    """The paired differences as points with their 95% intervals around a zero line, then the same as a table."""
    series = {
        metric: [
            (f"{_pair_name(comparison, p.a, p.b)} · {metric}", p.point, p.low, p.high)
            for p in comparison.pairs
            if p.metric == metric
        ]
        for metric in ("task", "session")
    }
    fig = _interval_scatter(
        series,
        title="Paired differences (B − A) with 95% bootstrap intervals",
        rows=len(comparison.pairs),
        margin=220,
    )
    rows = []
    for p in comparison.pairs:
        verdict = "<b>yes</b>" if p.excludes_zero else "no"
        rows.append(
            f"<tr><td>{html.escape(_pair_name(comparison, p.a, p.b))}</td><td>{_METRIC_NAMES[p.metric]}</td>"
            f"<td>{_pp(p.point)}</td><td>[{_pp(p.low)}, {_pp(p.high)}]</td><td>{verdict}</td><td>{p.sessions}</td></tr>"
        )
    table = (
        "<table><tr><th>B − A</th><th>metric</th><th>difference</th><th>95% interval</th><th>excludes 0</th>"
        f"<th>sessions</th></tr>{''.join(rows)}</table>"
    )
    return _plot(fig, "differences") + table


def _robustness(comparison: Comparison) -> str:
    """Each perturbed run's accuracy delta against its unperturbed run: points with paired intervals, then a table."""
    if not comparison.robustness:
        return (
            "<p>Some runs are of a perturbed copy of the suite, but no unperturbed run was given: add a run of the "
            "base suite to see each perturbation's delta.</p>"
        )
    series = {
        metric: [
            (f"{','.join(r.kinds)} · {comparison.runs[r.run].label}", d.point, d.low, d.high)
            for r in comparison.robustness
            for d in r.deltas
            if d.metric == metric
        ]
        for metric in ("task", "session")
    }
    fig = _interval_scatter(
        series,
        title="Perturbed − unperturbed accuracy, with paired 95% bootstrap intervals",
        rows=len(comparison.robustness),
        margin=260,
    )
    rows = []
    for row in comparison.robustness:
        run, base = comparison.runs[row.run], comparison.runs[row.base]
        cells = ""
        for metric in ("task", "session"):
            found = [d for d in row.deltas if d.metric == metric]
            d = found[0] if found else None
            cells += "<td>n/a</td>" if d is None else f"<td>{_delta_span(d.point)} [{_pp(d.low)}, {_pp(d.high)}]</td>"
        task = next((d for d in row.deltas if d.metric == "task"), None)
        verdict = "n/a" if task is None else "<b>yes</b>" if task.excludes_zero else "no"
        rows.append(
            f"<tr><td><b>{html.escape(','.join(row.kinds))}</b> <span class=ci>seed {row.seed}</span><br>"
            f"<span class=ci>{html.escape(run.label)} vs {html.escape(base.label)}</span></td>"
            f"<td>{_pct(base.figures['task'].value)} → {_pct(run.figures['task'].value)}</td>{cells}"
            f"<td>{verdict}</td><td>{task.sessions if task else 0}</td></tr>"
        )
    table = (
        "<table><tr><th>perturbation</th><th>task accuracy</th><th>Δ task accuracy</th><th>Δ session accuracy</th>"
        f"<th>task Δ excludes 0</th><th>sessions</th></tr>{''.join(rows)}</table>"
    )
    return _plot(fig, "robustness") + table


def _categories(comparison: Comparison) -> str:
    """Each later run's accuracy minus the first run's, per category: a bar chart and the table of counts."""
    if not comparison.categories:
        return "<p>No category to compare.</p>"
    fig = go.Figure()
    names = [f"{r.group}: {r.category}" for r in comparison.categories]
    for k, run in enumerate(comparison.runs[1:], start=1):
        deltas = [None if r.deltas[k] is None else 100 * r.deltas[k] for r in comparison.categories]
        fig.add_trace(go.Bar(x=names, y=deltas, name=f"{run.label} − {comparison.runs[0].label}"))
    fig.update_layout(
        title="Accuracy difference to the first run, per category",
        yaxis_title="percentage points",
        legend=_LEGEND_ON_TOP,
    )
    head = "".join(f"<th>{html.escape(r.label)}</th>" for r in comparison.runs)
    rows = []
    for row in comparison.categories:
        cells = ""
        for k, cell in enumerate(row.cells):
            delta = row.deltas[k]
            mark = "" if k == 0 or delta is None else _delta_span(delta)
            cells += f"<td>{_pct(cell.accuracy)} <span class=ci>{cell.correct}/{cell.total}</span> {mark}</td>"
        rows.append(
            f"<tr><td>{row.group}: {html.escape(row.category)} <span class=ci>({row.unit})</span></td>{cells}</tr>"
        )
    return _plot(fig, "categories") + f"<table><tr><th>category</th>{head}</tr>{''.join(rows)}</table>"


def _delta_span(delta: float) -> str:
    css = "up" if delta > 0 else "down" if delta < 0 else "ci"
    return f"<span class={css}>{_pp(delta)}</span>"


def _report_href(run_path: str, anchor: str, out_dir: Path) -> str:
    """A link to a task in a run's report.html, relative to the page (the folder moves with its runs)."""
    target = Path(run_path) / REPORT
    try:
        rel = os.path.relpath(target, out_dir.resolve())
    except ValueError:  # another drive (Windows): an absolute file path still opens offline
        rel = target.as_posix()
    return html.escape(Path(rel).as_posix() + "#" + anchor, quote=True)


def _flips(comparison: Comparison, out_dir: Path) -> str:
    if not comparison.flips:
        return "<p>No task flips between the runs.</p>"
    parts = []
    for a, b in sorted({(f.a, f.b) for f in comparison.flips}):
        ra, rb = comparison.runs[a], comparison.runs[b]
        items = []
        for f in (f for f in comparison.flips if (f.a, f.b) == (a, b)):
            good, bad = (ra, rb) if f.correct_in == "a" else (rb, ra)
            links = " · ".join(
                f'<a href="{_report_href(r.path, f.anchor, out_dir)}">{html.escape(r.label)}</a>' for r in (ra, rb)
            )
            items.append(
                f"<li class=flip><code>{html.escape(f.session_id)}</code> task {f.task_index + 1} "
                f"<span class=ci>({html.escape(f.task_type)}, {html.escape(f.subtype)})</span>: "
                f"<span class=up>right in {html.escape(good.label)}</span>, "
                f"<span class=down>wrong in {html.escape(bad.label)}</span>"
                f"{': ' + html.escape(f.reason) if f.reason else ''} — {links}</li>"
            )
        title = f"{html.escape(ra.label)} vs {html.escape(rb.label)}: {len(items)} task(s)"
        parts.append(f"<h3>{title}</h3><ul>{''.join(items)}</ul>")
    return "".join(parts)


def render_compare_html(comparison: Comparison, out_dir: Path) -> str:
    """The whole page as a string; ``out_dir`` is where it will live (the flips' links are relative to it)."""
    base = (
        f", perturbed copies of suite {comparison.base_digest[:12]} among the runs"
        if comparison.base_digest is not None
        else ""
    )
    meta = (
        f"suite <code>{html.escape(comparison.suite)}</code> (fingerprint {comparison.suite_digest[:12]}{base}) · "
        f"mode <b>{html.escape(comparison.mode)}</b> · history <b>{html.escape(comparison.history)}</b> · "
        f"{comparison.resamples} paired bootstrap resamples over sessions, seed {comparison.seed}"
    )
    robustness = f"<h2>Robustness</h2>{_robustness(comparison)}" if comparison.base_digest is not None else ""
    return (
        "<!doctype html><html><head><meta charset=utf-8><title>toolwild compare</title>"
        f"<style>{_STYLE}</style><script>{plotly.offline.get_plotlyjs()}</script></head><body>"
        f"<h1>toolwild compare</h1><p class=meta>{meta}</p>"
        f"<h2>Leaderboard</h2>{_leaderboard(comparison)}"
        f"<h2>Paired differences</h2>{_differences(comparison)}"
        f"{robustness}"
        f"<h2>Per category</h2>{_categories(comparison)}"
        f"<h2>Tasks that flip</h2>{_flips(comparison, out_dir)}"
        "</body></html>\n"
    )


def write_compare_html(comparison: Comparison, out: Path) -> None:
    """Write ``compare.html`` atomically (a killed write never leaves half a page)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out, render_compare_html(comparison, out.parent))
