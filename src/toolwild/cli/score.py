"""``toolwild score``: re-score a result file (published format or toolwild trajectories) without any model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

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
from toolwild.core.formats.results import load_trajectories
from toolwild.core.formats.wtb import load_wtb_suite
from toolwild.core.session import Suite
from toolwild.core.trajectory import Trajectory
from toolwild.core.verdict import ScoringMode
from toolwild.errors import ConfigError, DataError
from toolwild.eval.metrics.forked import compute_forked_metrics
from toolwild.eval.metrics.passk import compute_trial_metrics
from toolwild.eval.runner import (
    RunConfig,
    check_exists,
    check_result_file,
    check_run_suite,
    fork_sessions,
    load_run_config,
    missing_note,
    result_missing_note,
    score_trials,
    write_fork_verdicts,
    write_trial_verdicts,
    write_verdicts,
)
from toolwild.eval.scoring.session import score_suite
from toolwild.eval.session import HistoryMode
from toolwild.report.scoreboard import render_scoreboard

METRICS = "metrics.json"
RUN_ONLY_EXTENSIONS = ("usage", "simulator_usage")
"""``extensions`` keys of a run's metrics that re-scoring cannot recompute (no model is called), so it keeps them."""


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
        run_config: RunConfig | None = None
        carried: dict[str, Any] = {}
        missing: list[str] = []
        unfinished = ""
        notes: list[str] = []
        check_exists(results)
        if results.is_dir():
            run_config = load_run_config(results)
            suite_path = suite_path or Path(run_config.suite)
            mode = mode or run_config.mode
            out = _run_metrics_out(results, run_config.mode, mode, out)
            carried = _run_extensions(results)
            count_provider_errors = count_provider_errors or run_config.count_provider_errors
        if suite_path is None:
            raise ConfigError("--suite is required when scoring a result file")
        mode = mode or ScoringMode.WTB
        suite, suite_report = load_wtb_suite(suite_path, skip_invalid=skip_invalid)
        report_skipped(suite_report)
        forked = run_config is not None and run_config.history is HistoryMode.FORKED
        if run_config is not None:  # every trial (or fork) of the run (one for a run without --trials)
            check_run_suite(run_config, suite, suite_path)
            torn: list[DataError] = []
            by_trial_results, by_trial = score_trials(results, run_config, suite, mode=mode, torn=torn)
            trajectories = by_trial_results[0]
            missing, unfinished = _missing(results, run_config, suite, by_trial_results)
            notes += [str(t) for t in torn]
        else:  # every line is checked against the suite: same ids are not enough, the tasks must match
            unchecked: list[str] = []
            trajectories, result_report = load_trajectories(
                results, skip_invalid=skip_invalid, suite=suite, unchecked=unchecked
            )
            report_skipped(result_report)
            warning = check_result_file(results, suite, suite_path, unchecked)
            if warning is not None:
                notes.append(warning)
            found = {t.session_id for t in trajectories}
            lacking = [s.id for s in suite.sessions if s.id not in found]
            if lacking and trajectories:  # the documented rule, said where the figures are shown
                notes.append(result_missing_note(results, lacking, len(suite.sessions)))
            by_trial = None
        if not trajectories:
            raise ConfigError(f"{results}: no results to score")
        if by_trial is None:
            by_trial = [score_suite(suite, trajectories, mode=mode)]
        session_verdicts = by_trial[0]
        name = model_name or next((t.model for t in trajectories if t.model), None) or results.stem
        metrics = (compute_forked_metrics if forked else compute_trial_metrics)(
            by_trial, model_name=name, mode=mode, count_provider_errors=count_provider_errors, seed=seed
        )
        metrics.extensions.update(carried)
    render_scoreboard(metrics, console)
    for note in notes:
        err_console.print(f"[yellow]warning:[/] {escape(note)}")
    if missing:
        err_console.print(f"[bold red]error:[/] {escape(unfinished)}")
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(metrics.model_dump(mode="json"), ensure_ascii=False, indent=2) + "\n")
        console.print(f"metrics written to {out}")
    if run_config is not None and out is not None and out.resolve() == (results / METRICS).resolve():
        # the run's own verdicts (every trial's or fork's), beside its own metrics
        (write_fork_verdicts if forked else write_trial_verdicts)(results, by_trial)
    if verdicts is not None:
        write_verdicts(verdicts, session_verdicts)
        console.print(f"verdicts written to {verdicts}")
    every = [v for trial in by_trial for v in trial]
    code = outcome_exit_code(every, resume_hint=run_config is not None and results)
    raise typer.Exit(code or (EXIT_HARNESS_ERRORS if missing else 0))


def _missing(run_dir: Path, config: RunConfig, suite: Suite, by_part: list[list[Trajectory]]) -> tuple[list[str], str]:
    """What an unfinished run lacks: the sessions without a result (a trial run's or forked run's (session, trial)
    or (session, fork) pairs, part by part), in suite order, and the line that says so; ``[]`` for a finished
    run."""
    forked = config.history is HistoryMode.FORKED
    lacking: list[str] = []
    total = 0
    for part, found in enumerate(by_part):
        have = {t.session_id for t in found}
        sessions = fork_sessions(suite, part).sessions if forked else suite.sessions
        total += len(sessions)
        where = f" (fork {part})" if forked else (f" (trial {part})" if config.trials > 1 else "")
        lacking += [f"{s.id}{where}" for s in sessions if s.id not in have]
    if forked:
        unit, counted = (
            "(session, fork) pair(s)",
            "fork 0's count as failed, the others' are left out of the forked figures",
        )
    elif config.trials > 1:
        unit, counted = "(session, trial) pair(s)", "they count as failed in their trial"
    else:
        unit, counted = "session(s)", "they count as failed"
    return lacking, missing_note(run_dir, lacking, total, unit=unit, counted=counted)


def _run_metrics_out(run_dir: Path, run_mode: ScoringMode, mode: ScoringMode, out: Path | None) -> Path:
    """Where re-scoring a run writes: ``--out``, else ``metrics.json`` in the run's own mode and
    ``metrics.MODE.json`` in another, because ``metrics.json`` holds the figures the run reported."""
    own = run_dir / METRICS
    if out is None:
        return own if mode is run_mode else run_dir / f"metrics.{mode.value}.json"
    if mode is not run_mode and out.resolve() == own.resolve():
        raise ConfigError(
            f"{own} holds the run's {run_mode.value} metrics; write the {mode.value} ones elsewhere "
            f"(default: {run_dir / f'metrics.{mode.value}.json'})"
        )
    return out


def _run_extensions(run_dir: Path) -> dict[str, Any]:
    """The blocks of the run's metrics.json that only the run could measure (model usage), to carry over: the
    re-scoring calls no model, so without them the rewritten file would claim a run that cost nothing."""
    path = run_dir / METRICS
    if not path.is_file():
        return {}
    try:
        extensions = json.loads(path.read_bytes()).get("extensions", {})
    except (ValueError, RecursionError, AttributeError):
        err_console.print(f"[yellow]{path} is not readable metrics JSON: the run's usage is not carried over[/]")
        return {}
    if not isinstance(extensions, dict):
        return {}
    return {key: extensions[key] for key in RUN_ONLY_EXTENSIONS if key in extensions}
