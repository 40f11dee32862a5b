"""The scoreboard says what each count counts, and a figure of nothing is n/a, not 0.00% of 0/0."""

from __future__ import annotations

from io import StringIO

from rich.console import Console

from toolwild.eval.metrics.accuracy import compute_metrics
from toolwild.report.scoreboard import render_scoreboard


def _render(metrics) -> str:
    out = StringIO()
    render_scoreboard(metrics, Console(file=out, width=200))
    return out.getvalue()


def test_an_empty_figure_is_n_a():
    text = _render(compute_metrics([], model_name="m", resamples=0))
    row = next(line for line in text.splitlines() if "Task accuracy" in line)
    assert "n/a" in row and "0.00%" not in row and "0/0" not in row


def test_counts_name_their_unit():
    text = _render(compute_metrics([], model_name="m", resamples=0))
    rows = {line.split("│")[1].strip(): line for line in text.splitlines() if line.startswith("│")}
    assert "sessions" in rows["Session accuracy"] and "tasks" in rows["Task accuracy"]
    assert "┃ accuracy ┃ tasks ┃" in text and "┃ accuracy ┃ sessions ┃" in text  # breakdown headers
