"""``toolwild export``: a suite's gold trajectories as training conversations."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from toolwild.cli._common import console, handled_errors, report_skipped
from toolwild.core.formats.wtb import load_wtb_suite
from toolwild.export.training import ExportFormat, write_training_export


def export_command(
    suite_path: Annotated[Path, typer.Argument(metavar="SUITE", exists=True, dir_okay=False, help="Suite JSONL.")],
    out: Annotated[Path, typer.Option("--out", "-o", dir_okay=False, help="Destination file.")],
    fmt: Annotated[
        ExportFormat,
        typer.Option("--format", help="openai-chat (JSONL), sharegpt (JSONL, LLaMA-Factory layout) or parquet."),
    ] = ExportFormat.OPENAI_CHAT,
    skip_invalid: Annotated[
        bool, typer.Option("--skip-invalid", help="Skip malformed suite records (counted and listed).")
    ] = False,
) -> None:
    """Write every session's gold trajectory (first optimal path) as one training conversation, tools included.

    Role order is checked for each conversation; a session that would break it stops the export with its id.
    """
    with handled_errors():
        suite, report = load_wtb_suite(suite_path, skip_invalid=skip_invalid)
        report_skipped(report)
        count = write_training_export(suite, out, fmt)
    console.print(f"{count:,} conversations ({fmt.value}) -> {escape(str(out))}", highlight=False)
