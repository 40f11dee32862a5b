"""``toolwild report``: a run (or a published result file) as one self-contained HTML page."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from toolwild.cli._common import EXIT_HARNESS_ERRORS, console, err_console, handled_errors
from toolwild.core.verdict import ScoringMode
from toolwild.errors import ConfigError
from toolwild.eval.run_dir import check_exists, missing_note, result_missing_note
from toolwild.report.html import load_result_view, load_run_view, write_report, write_result_report


def report(
    source: Annotated[
        Path,
        typer.Argument(metavar="RUN_DIR|RESULT.jsonl", help="A run directory, or a result file with --suite."),
    ],
    suite_path: Annotated[Path | None, typer.Option("--suite", help="The suite of a published result file.")] = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="Where to write (default: RUN_DIR/report.html, RESULT.report.html)."),
    ] = None,
    mode: Annotated[
        ScoringMode | None, typer.Option(help="Scoring of a result file: wtb (published, default) or strict.")
    ] = None,
) -> None:
    """Write an HTML report: headline, the paper's figures, and every task's trajectory and verdict (offline).

    An unfinished run (sessions without a result) is reported with them counted as failed, as score counts them;
    the page and the terminal name them, and the exit code is 3 (the figures are incomplete).
    """
    with handled_errors():
        check_exists(source)
        if source.is_dir():
            if suite_path is not None:
                raise ConfigError(f"{source} is a run directory: it has its own suite; leave out --suite")
            if mode is not None:
                raise ConfigError(f"{source} is a run directory: its report shows the run's own mode; leave out --mode")
            view = load_run_view(source, missing_as_failed=True)
            path = write_report(source, out, view=view)
            unfinished = missing_note(source, view.missing, len(view.sessions)) if view.missing else None
            notes = view.notes
        else:
            if suite_path is None:
                raise ConfigError(f"{source}: --suite is required for a result file (or give a run directory)")
            view, _suite_report, _result_report = load_result_view(suite_path, source, mode=mode or ScoringMode.WTB)
            path, _metrics = write_result_report(suite_path, source, out, mode=mode or ScoringMode.WTB, view=view)
            unfinished = None
            notes = view.notes
            if view.missing:
                notes = [*notes, result_missing_note(source, view.missing, len(view.sessions))]
    console.print(f"report written to {path}")
    for note in notes:
        err_console.print(f"[yellow]warning:[/] {escape(note)}")
    if unfinished is not None:
        err_console.print(f"[bold red]error:[/] {escape(unfinished)}")
        raise typer.Exit(EXIT_HARNESS_ERRORS)
