"""``toolwild eval``: run an agent on a suite and score it.

Only the built-in ``oracle`` agent exists so far (model agents and the async runner come with the runner issue);
the run directory layout is already the final one: ``config.json``, ``trajectories.jsonl``, ``metrics.json``.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from toolwild.cli._common import console, handled_errors, report_skipped
from toolwild.core.formats.results import append_trajectory
from toolwild.core.formats.wtb import load_wtb_suite
from toolwild.core.verdict import ScoringMode
from toolwild.errors import ConfigError
from toolwild.eval.agents.oracle import oracle_trajectory
from toolwild.eval.metrics.accuracy import compute_metrics
from toolwild.eval.scoring.session import score_session
from toolwild.report.scoreboard import render_scoreboard

AGENTS = ("oracle",)


def eval_command(
    suite_path: Annotated[Path, typer.Option("--suite", help="A WildToolBench-format suite (JSONL).")],
    agent: Annotated[str, typer.Option(help=f"The agent to evaluate; available: {', '.join(AGENTS)}.")] = "oracle",
    mode: Annotated[ScoringMode, typer.Option(help="wtb = published scorer, strict = defects fixed.")] = (
        ScoringMode.WTB
    ),
    runs_dir: Annotated[Path, typer.Option(help="Parent folder of run directories.")] = Path("runs"),
    name: Annotated[str | None, typer.Option(help="Run name (default: agent + timestamp).")] = None,
    skip_invalid: Annotated[bool, typer.Option(help="Skip malformed suite records (counted and listed).")] = False,
) -> None:
    """Evaluate an agent on a suite, write a run directory, and print the scoreboard."""
    with handled_errors():
        if agent not in AGENTS:
            raise ConfigError(f"unknown agent {agent!r}; available: {', '.join(AGENTS)}")
        suite, report = load_wtb_suite(suite_path, skip_invalid=skip_invalid)
        report_skipped(report)
        run_name = name or f"{agent}-{datetime.now(UTC).strftime('%Y%m%d-%H%M%S')}"
        run_dir = runs_dir / run_name
        run_dir.mkdir(parents=True, exist_ok=True)
        config = {"suite": str(suite_path), "agent": agent, "mode": mode.value, "sessions": len(suite.sessions)}
        (run_dir / "config.json").write_text(json.dumps(config, indent=2) + "\n")
        verdicts = []
        with (
            (run_dir / "trajectories.jsonl").open("w", encoding="utf-8") as fh,
            Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=console,
                transient=True,
            ) as progress,
        ):
            bar = progress.add_task("sessions", total=len(suite.sessions))
            for session in suite.sessions:
                trajectory = oracle_trajectory(session)
                append_trajectory(fh, trajectory)
                verdicts.append(score_session(session, trajectory, mode=mode))
                progress.advance(bar)
        metrics = compute_metrics(verdicts, model_name=agent, mode=mode)
        (run_dir / "metrics.json").write_text(
            json.dumps(metrics.model_dump(mode="json"), ensure_ascii=False, indent=2) + "\n"
        )
    render_scoreboard(metrics, console)
    console.print(f"run directory: {run_dir}")
