"""``toolwild score``: re-score a result file (published format or toolwild trajectories) without any model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from toolwild.cli._common import console, handled_errors, report_skipped
from toolwild.core.formats.results import load_trajectories
from toolwild.core.formats.wtb import load_wtb_suite
from toolwild.core.verdict import ScoringMode
from toolwild.errors import ConfigError
from toolwild.eval.metrics.accuracy import compute_metrics
from toolwild.eval.scoring.session import score_suite
from toolwild.report.scoreboard import render_scoreboard


def score(
    results: Annotated[
        Path, typer.Argument(metavar="RESULT.jsonl", help="Published-format results or toolwild trajectories.jsonl.")
    ],
    suite_path: Annotated[Path, typer.Option("--suite", help="The suite the results belong to.")],
    mode: Annotated[ScoringMode, typer.Option(help="wtb = published scorer, strict = defects fixed.")] = (
        ScoringMode.WTB
    ),
    out: Annotated[Path | None, typer.Option(help="Write the metric JSON here.")] = None,
    verdicts: Annotated[Path | None, typer.Option(help="Write per-session verdicts (JSONL) here.")] = None,
    model_name: Annotated[
        str | None, typer.Option(help="Model name for the metric file (default: from the results).")
    ] = None,
    skip_invalid: Annotated[bool, typer.Option(help="Skip malformed records (they are counted and listed).")] = False,
    count_infra_errors: Annotated[
        bool, typer.Option(help="Count sessions lost to provider errors as failed instead of leaving them out.")
    ] = False,
    seed: Annotated[int, typer.Option(help="Seed of the bootstrap confidence intervals.")] = 0,
) -> None:
    """Score results against their suite and print the scoreboard (no model is called).

    Sessions of the suite with no result count as failed inference, as a crashed session would.
    """
    with handled_errors():
        suite, suite_report = load_wtb_suite(suite_path, skip_invalid=skip_invalid)
        report_skipped(suite_report)
        trajectories, result_report = load_trajectories(results, skip_invalid=skip_invalid)
        report_skipped(result_report)
        if not trajectories:
            raise ConfigError(f"{results}: no results to score")
        session_verdicts = score_suite(suite, trajectories, mode=mode)
        name = model_name or next((t.model for t in trajectories if t.model), None) or results.stem
        metrics = compute_metrics(
            session_verdicts, model_name=name, mode=mode, count_infra_errors=count_infra_errors, seed=seed
        )
    render_scoreboard(metrics, console)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(metrics.model_dump(mode="json"), ensure_ascii=False, indent=2) + "\n")
        console.print(f"metrics written to {out}")
    if verdicts is not None:
        verdicts.parent.mkdir(parents=True, exist_ok=True)
        with verdicts.open("w", encoding="utf-8") as fh:
            for v in session_verdicts:
                fh.write(json.dumps(v.model_dump(mode="json"), ensure_ascii=False) + "\n")
        console.print(f"verdicts written to {verdicts}")
