"""``toolwild score``: re-score a result file (published format or toolwild trajectories) without any model."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from toolwild.cli._common import (
    EXIT_HARNESS_ERRORS,
    console,
    err_console,
    handled_errors,
    outcome_exit_code,
    report_skipped,
)
from toolwild.core.verdict import ScoringMode
from toolwild.jobs.score import score_results, write_scored
from toolwild.report.scoreboard import render_scoreboard


def score(
    results: Annotated[
        Path,
        typer.Argument(
            metavar="RESULT.jsonl|RUN_DIR",
            help="Published-format results, toolwild trajectories.jsonl, or a run directory.",
        ),
    ],
    suite_path: Annotated[
        Path | None, typer.Option("--suite", help="The suite the results belong to (default: a run's own).")
    ] = None,
    mode: Annotated[
        ScoringMode | None,
        typer.Option(help="wtb = published scorer, strict = defects fixed (default: wtb or the run's)."),
    ] = None,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Write the metric JSON here.")] = None,
    verdicts: Annotated[Path | None, typer.Option(help="Write per-session verdicts (JSONL) here.")] = None,
    model_name: Annotated[
        str | None, typer.Option(help="Model name for the metric file (default: from the results).")
    ] = None,
    skip_invalid: Annotated[
        bool, typer.Option("--skip-invalid", help="Skip malformed records (they are counted and listed).")
    ] = False,
    count_provider_errors: Annotated[
        bool,
        typer.Option(
            "--count-provider-errors",
            help="Count sessions lost to provider errors as failed instead of leaving them out.",
        ),
    ] = False,
    seed: Annotated[int, typer.Option(help="Seed of the bootstrap confidence intervals.")] = 0,
) -> None:
    """Score results against their suite and print the scoreboard (no model is called).

    Sessions of the suite with no result count as failed inference, as a crashed session would. Given a run
    directory, its suite and mode come from its config.json (another --suite is refused when the run recorded its
    suite's fingerprint). In the run's own mode its metrics.json is rewritten, keeping the run's usage blocks; in
    another mode the metrics go to metrics.MODE.json beside it, so the run's own figures are never overwritten.
    A run of several trials is scored trial by trial (pass^k and pass@k with the figures); --verdicts writes trial
    0's. A forked run is scored fork by fork (the headline is fork 0's, the free run's); --verdicts writes fork 0's.
    """
    with handled_errors():
        scored = score_results(
            results,
            suite=suite_path,
            mode=mode,
            out=out,
            model_name=model_name,
            skip_invalid=skip_invalid,
            count_provider_errors=count_provider_errors,
            seed=seed,
            on_skipped=report_skipped,
        )
    render_scoreboard(scored.metrics, console)
    for note in scored.notes:
        err_console.print(f"[yellow]warning:[/] {escape(note)}")
    if scored.unfinished:
        err_console.print(f"[bold red]error:[/] {escape(scored.unfinished)}")
    for written in write_scored(scored, verdicts):
        console.print(written)
    every = [v for part in scored.by_part for v in part]
    code = outcome_exit_code(every, resume_hint=scored.run_config is not None and results)
    raise typer.Exit(code or (EXIT_HARNESS_ERRORS if scored.unfinished else 0))
