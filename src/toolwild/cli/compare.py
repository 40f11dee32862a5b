"""``toolwild compare``: runs of one suite side by side, in the terminal and as ``compare.html``.

The terminal shows what decides a comparison (the leaderboard and whether each paired difference excludes zero,
and, when runs of a perturbed copy of the suite are given with an unperturbed run, each perturbation's delta); the
page adds the per-category deltas and every flipped task with links into the runs' reports.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from toolwild.cli._common import console, handled_errors
from toolwild.eval.compare import HEADLINE, Comparison, Figure, compare_runs

WIDTH = 80
_NAMES = {"task": "task acc.", "session": "session acc.", "optimal": "optimal path", "progress": "progress"}


def compare(
    run_dirs: Annotated[list[Path], typer.Argument(metavar="RUN_DIR", help="Two or more runs of one suite.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Where to write the HTML page.")] = Path("compare.html"),
    resamples: Annotated[int, typer.Option("--resamples", min=0, help="Paired bootstrap resamples.")] = 10_000,
    seed: Annotated[int, typer.Option("--seed", help="Bootstrap seed.")] = 0,
) -> None:
    """Compare runs of one suite: leaderboard, paired bootstrap differences, category deltas, flipped tasks.

    Runs of a perturbed copy (eval --perturb) compare with runs of its base suite: a robustness table gives each
    perturbation's accuracy delta against the unperturbed run, with paired intervals.
    """
    from toolwild.report.compare_html import write_compare_html  # plotly loads only for this command

    with handled_errors():
        comparison = compare_runs(run_dirs, resamples=resamples, seed=seed)
        write_compare_html(comparison, out)
    term = Console(width=min(WIDTH, console.width), highlight=False)
    term.print(_leaderboard(comparison))
    term.print(_differences(comparison))
    if comparison.robustness:
        term.print(_robustness(comparison))
    elif comparison.base_digest is not None:
        term.print("robustness: no unperturbed run given, so no perturbation delta (add a run of the base suite).")
    flips = len(comparison.flips)
    term.print(f"{flips} task(s) flip between runs (listed in the page, with links to each run's report.html).")
    term.print(f"written: {escape(str(out))}")


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _pp(x: float) -> str:
    """Signed percentage points; a zero (or a float a hair off it) is plain ``0.0``."""
    return "0.0" if abs(x) < 5e-4 else f"{100 * x:+.1f}"


def _cell(fig: Figure) -> str:
    if fig.value is None or fig.low is None or fig.high is None:
        return _pct(fig.value)
    return f"{_pct(fig.value)}\n[dim]{100 * fig.low:.1f}–{100 * fig.high:.1f}[/]"


def _leaderboard(comparison: Comparison) -> Table:
    title = f"mode {comparison.mode} · history {comparison.history} · 95% intervals below each figure"
    table = Table(title=title, title_justify="left")
    table.add_column("run", style="bold", overflow="fold")
    for metric in HEADLINE:
        table.add_column(_NAMES[metric], justify="right")
    table.add_column("sessions", justify="right")
    for run in comparison.runs:
        cells = [_cell(run.figures[m]) for m in HEADLINE]
        label = escape(run.label)
        if run.perturbation is not None:  # which perturbation: the robustness table below
            label += "\n[dim](perturbed)[/]"
        table.add_row(label, *cells, str(run.sessions))
    return table


def _differences(comparison: Comparison) -> Table:
    table = Table(
        title=f"paired differences B − A, in points ({comparison.resamples} resamples of sessions)",
        title_justify="left",
    )
    table.add_column("B − A", overflow="fold")
    table.add_column("metric")
    table.add_column("diff.", justify="right")
    table.add_column("95% interval", justify="right")
    table.add_column("excl. 0", justify="center")
    for p in comparison.pairs:
        pair = f"{comparison.runs[p.b].label} − {comparison.runs[p.a].label}"
        mark = "[bold]yes[/]" if p.excludes_zero else "no"
        interval = f"[{_pp(p.low)}, {_pp(p.high)}]"
        table.add_row(escape(pair), _NAMES[p.metric], _pp(p.point), interval, mark)
    return table


def _robustness(comparison: Comparison) -> Table:
    """Each perturbed run against its unperturbed run: accuracy before and after, and the paired deltas."""
    table = Table(
        title="robustness: perturbed − unperturbed, in points (paired 95% intervals)",
        title_justify="left",
    )
    table.add_column("perturbation", overflow="fold")
    table.add_column("task acc.", justify="right")
    table.add_column("Δ task", justify="right")
    table.add_column("Δ session", justify="right")
    table.add_column("excl. 0", justify="center")
    for row in comparison.robustness:
        run, base = comparison.runs[row.run], comparison.runs[row.base]
        by_metric = {d.metric: d for d in row.deltas}
        cells = []
        for metric in ("task", "session"):
            d = by_metric.get(metric)
            cells.append("n/a" if d is None else f"{_pp(d.point)}\n[dim][{_pp(d.low)}, {_pp(d.high)}][/]")
        task = by_metric.get("task")
        mark = "n/a" if task is None else "[bold]yes[/]" if task.excludes_zero else "no"
        name = f"{escape(','.join(row.kinds))} (seed {row.seed})\n[dim]{escape(run.label)} vs {escape(base.label)}[/]"
        accuracy = f"{_pct(base.figures['task'].value)} → {_pct(run.figures['task'].value)}"
        table.add_row(name, accuracy, *cells, mark)
    return table
