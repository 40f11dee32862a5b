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
from toolwild.eval.runner import RunConfig, load_run_trajectories
from toolwild.eval.scoring.session import score_suite
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

    Sessions of the suite with no result count as failed inference, as a crashed session would. Given a run
    directory, its suite and mode come from its config.json and its metrics.json is rewritten unless --out is given.
    """
    with handled_errors():
        run_config: RunConfig | None = None
        if results.is_dir():
            config_path = results / "config.json"
            if not config_path.exists():
                raise ConfigError(f"{results} is not a run directory (no config.json)")
            run_config = RunConfig.model_validate_json(config_path.read_text(encoding="utf-8"))
            suite_path = suite_path or Path(run_config.suite)
            mode = mode or run_config.mode
            out = out or results / "metrics.json"
            count_infra_errors = count_infra_errors or run_config.count_infra_errors
        if suite_path is None:
            raise ConfigError("--suite is required when scoring a result file")
        mode = mode or ScoringMode.WTB
        suite, suite_report = load_wtb_suite(suite_path, skip_invalid=skip_invalid)
        report_skipped(suite_report)
        if run_config is not None:
            trajectories = load_run_trajectories(results)
        else:
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
