"""Scoring results again, as one library call: :func:`score_results` is ``toolwild score`` without the printing.

A run directory is scored part by part (every trial, or every fork of a forked run) in its own mode unless asked
otherwise, its usage blocks carried over; a result file (published format or a ``trajectories.jsonl``) is checked
line by line against its suite. No model is called.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolwild.core.formats.results import load_trajectories
from toolwild.core.formats.wtb import load_wtb_suite
from toolwild.core.jsonl import LoadReport
from toolwild.core.session import Suite
from toolwild.core.trajectory import Trajectory
from toolwild.core.verdict import Metrics, ScoringMode, SessionVerdict
from toolwild.errors import ConfigError, DataError
from toolwild.eval.run_config import RunConfig
from toolwild.eval.run_dir import (
    METRICS,
    check_exists,
    check_result_file,
    check_run_suite,
    fork_sessions,
    load_run_config,
    missing_note,
    result_missing_note,
    run_metrics,
    score_parts,
    write_part_verdicts,
    write_verdicts,
)
from toolwild.eval.scoring.session import score_suite
from toolwild.eval.session import HistoryMode

__all__ = ["RUN_ONLY_EXTENSIONS", "Scored", "score_results", "write_scored"]

RUN_ONLY_EXTENSIONS = ("usage", "simulator_usage")
"""``extensions`` keys of a run's metrics that re-scoring cannot recompute (no model is called), so it keeps them."""


@dataclass
class Scored:
    """Results scored again: the figures, every part's verdicts, and what the reader must be told about them."""

    results: Path
    metrics: Metrics
    by_part: list[list[SessionVerdict]]
    run_config: RunConfig | None = None
    """The run's config when ``results`` is a run directory."""
    out: Path | None = None
    """Where the metrics go (a run's own ``metrics.json`` in its own mode, ``metrics.MODE.json`` in another)."""
    notes: list[str] = field(default_factory=list)
    """Warnings to print beside the figures (a torn line, unchecked results, sessions without a result)."""
    unfinished: str = ""
    """The line that says a run is unfinished ("" for a finished run or a result file)."""


def score_results(
    results: Path,
    *,
    suite: Path | None = None,
    mode: ScoringMode | None = None,
    out: Path | None = None,
    model_name: str | None = None,
    skip_invalid: bool = False,
    count_provider_errors: bool = False,
    seed: int = 0,
    on_skipped: Callable[[LoadReport], None] | None = None,
) -> Scored:
    """Score ``results`` (a run directory, a published result file or a ``trajectories.jsonl``) against its suite.

    Sessions of the suite with no result count as failed, as a crashed session would. A run directory's suite and
    mode come from its ``config.json`` (another suite is refused when the run recorded its fingerprint).
    ``on_skipped``: called with each load report (suite, result file) when ``skip_invalid`` skipped records.

    Raises:
        ConfigError: no such path, no suite for a result file, no result to score, a metrics file that would
            overwrite the run's own figures in another mode.
        ScoringError: results of another suite.
    """
    tell = on_skipped or (lambda _report: None)
    check_exists(results)
    run_config: RunConfig | None = None
    carried: dict[str, Any] = {}
    notes: list[str] = []
    if results.is_dir():
        run_config = load_run_config(results)
        suite = suite or Path(run_config.suite)
        mode = mode or run_config.mode
        out = _run_metrics_out(results, run_config.mode, mode, out)
        carried = _run_extensions(results, notes)
        count_provider_errors = count_provider_errors or run_config.count_provider_errors
    if suite is None:
        raise ConfigError("--suite is required when scoring a result file")
    mode = mode or ScoringMode.WTB
    loaded, suite_report = load_wtb_suite(suite, skip_invalid=skip_invalid)
    tell(suite_report)
    unfinished = ""
    if run_config is not None:  # every trial (or fork) of the run (one for a run without --trials)
        trajectories, by_part, unfinished = _score_run(results, run_config, loaded, suite, mode, notes)
    else:
        trajectories, by_part = _score_file(results, loaded, suite, mode, skip_invalid, tell, notes)
    name = model_name or next((t.model for t in trajectories if t.model), None) or results.stem
    metrics = run_metrics(
        run_config, by_part, model_name=name, mode=mode, count_provider_errors=count_provider_errors, seed=seed
    )
    metrics.extensions.update(carried)
    return Scored(results, metrics, by_part, run_config, out, notes, unfinished)


def _score_run(
    run_dir: Path, config: RunConfig, suite: Suite, suite_path: Path, mode: ScoringMode, notes: list[str]
) -> tuple[list[Trajectory], list[list[SessionVerdict]], str]:
    """A run directory's every part scored again: part 0's trajectories, every part's verdicts, and the line that
    says the run is unfinished ("" when it is not)."""
    check_run_suite(config, suite, suite_path)
    torn: list[DataError] = []
    by_part_results, by_part = score_parts(run_dir, config, suite, mode=mode, torn=torn)
    missing, unfinished = _missing(run_dir, config, suite, by_part_results)
    notes += [str(t) for t in torn]
    if not by_part_results[0]:
        raise ConfigError(f"{run_dir}: no results to score")
    return by_part_results[0], by_part, unfinished if missing else ""


def _score_file(
    results: Path,
    suite: Suite,
    suite_path: Path,
    mode: ScoringMode,
    skip_invalid: bool,
    tell: Callable[[LoadReport], None],
    notes: list[str],
) -> tuple[list[Trajectory], list[list[SessionVerdict]]]:
    """A result file, every line checked against the suite: same ids are not enough, the tasks must match."""
    unchecked: list[str] = []
    trajectories, result_report = load_trajectories(
        results, skip_invalid=skip_invalid, suite=suite, unchecked=unchecked
    )
    tell(result_report)
    warning = check_result_file(results, suite, suite_path, unchecked)
    if warning is not None:
        notes.append(warning)
    found = {t.session_id for t in trajectories}
    lacking = [s.id for s in suite.sessions if s.id not in found]
    if lacking and trajectories:  # the documented rule, said where the figures are shown
        notes.append(result_missing_note(results, lacking, len(suite.sessions)))
    if not trajectories:
        raise ConfigError(f"{results}: no results to score")
    return trajectories, [score_suite(suite, trajectories, mode=mode)]


def write_scored(scored: Scored, verdicts: Path | None = None) -> Iterator[str]:
    """Write what was scored: the metrics (``scored.out``), a run's own verdicts beside its own metrics, and part
    0's verdicts to ``verdicts``; yields a line for each file the user asked for."""
    out, results = scored.out, scored.results
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(scored.metrics.model_dump(mode="json"), ensure_ascii=False, indent=2) + "\n")
        yield f"metrics written to {out}"
    if scored.run_config is not None and out is not None and out.resolve() == (results / METRICS).resolve():
        # the run's own verdicts (every trial's or fork's), beside its own metrics
        write_part_verdicts(results, scored.run_config, scored.by_part)
    if verdicts is not None:
        write_verdicts(verdicts, scored.by_part[0])
        yield f"verdicts written to {verdicts}"


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


def _run_extensions(run_dir: Path, notes: list[str]) -> dict[str, Any]:
    """The blocks of the run's metrics.json that only the run could measure (model usage), to carry over: the
    re-scoring calls no model, so without them the rewritten file would claim a run that cost nothing. An
    unreadable file is said in ``notes``."""
    path = run_dir / METRICS
    if not path.is_file():
        return {}
    try:
        extensions = json.loads(path.read_bytes()).get("extensions", {})
    except (ValueError, RecursionError, AttributeError):
        notes.append(f"{path} is not readable metrics JSON: the run's usage is not carried over")
        return {}
    if not isinstance(extensions, dict):
        return {}
    return {key: extensions[key] for key in RUN_ONLY_EXTENSIONS if key in extensions}
