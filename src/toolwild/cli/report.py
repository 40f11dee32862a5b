"""``toolwild report``: a run (or a published result file) as one self-contained HTML page."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from toolwild.cli._common import console, handled_errors
from toolwild.core.verdict import ScoringMode
from toolwild.errors import ConfigError
from toolwild.report.html import write_report, write_result_report


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
    """Write an HTML report: headline, the paper's figures, and every task's trajectory and verdict (offline)."""
    with handled_errors():
        if source.is_dir():
            if suite_path is not None:
                raise ConfigError(f"{source} is a run directory: it has its own suite; leave out --suite")
            if mode is not None:
                raise ConfigError(f"{source} is a run directory: its report shows the run's own mode; leave out --mode")
            path = write_report(source, out)
        else:
            if suite_path is None:
                raise ConfigError(f"{source}: --suite is required for a result file (or give a run directory)")
            path, _metrics = write_result_report(suite_path, source, out, mode=mode or ScoringMode.WTB)
    console.print(f"report written to {path}")
