"""``toolwild eval``: run an agent on a suite (:func:`toolwild.jobs.evaluate.evaluate`), print the scoreboard."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.progress import Progress, TaskID

from toolwild.cli._common import (
    PERTURB_KINDS,
    PerturbSeedOption,
    RayAddressOption,
    console,
    err_console,
    handled_errors,
    outcome_exit_code,
    progress_bar,
    report_skipped,
)
from toolwild.core.verdict import ScoringMode
from toolwild.eval.build import AGENT_FORMS
from toolwild.eval.run_dir import FORKS, TRIALS, Run, fork_count
from toolwild.eval.runner import RunProgress
from toolwild.eval.session import HistoryMode
from toolwild.eval.user import USER_FORMS
from toolwild.eval.user_audit import user_summary
from toolwild.jobs.evaluate import DEFAULT_SUBSET, EvalOptions, evaluate, run_folder, unchecked_states_warning
from toolwild.llm.cache import CacheMode
from toolwild.llm.registry import describe_backends
from toolwild.report.scoreboard import render_scoreboard


def eval_command(
    suite_path: Annotated[
        Path | None,
        typer.Option(
            "--suite",
            help="A WildToolBench-format suite (JSONL); default: the built-in ledger suite.",
            rich_help_panel="Suite",
        ),
    ] = None,
    all_sessions: Annotated[
        bool,
        typer.Option(
            "--all",
            help=f"Built-in ledger suite: run all sessions, not the first {DEFAULT_SUBSET}.",
            rich_help_panel="Suite",
        ),
    ] = False,
    limit: Annotated[
        int | None,
        typer.Option("--limit", min=1, help="Run only the suite's first N sessions.", rich_help_panel="Suite"),
    ] = None,
    only: Annotated[
        str | None,
        typer.Option("--sessions", help="Run only these sessions (comma-separated ids).", rich_help_panel="Suite"),
    ] = None,
    agent: Annotated[
        str, typer.Option(help=f"Agent: {', '.join(AGENT_FORMS)}.", rich_help_panel="Agent and model")
    ] = "model",
    model: Annotated[
        str,
        typer.Option(
            help=f"Model for --agent model: {'; '.join(describe_backends())}.", rich_help_panel="Agent and model"
        ),
    ] = "local",
    base_url: Annotated[
        str | None, typer.Option(help="Base URL of an OpenAI-compatible server.", rich_help_panel="Agent and model")
    ] = None,
    env_model: Annotated[
        str | None,
        typer.Option(
            help="Model simulating `llm` environments in free mode (as --model).",
            rich_help_panel="Agent and model",
        ),
    ] = None,
    user: Annotated[
        str,
        typer.Option(
            help=f"Who answers the agent: {' or '.join(USER_FORMS)} (a simulated user; free history, audited first).",
            rich_help_panel="Agent and model",
        ),
    ] = "recorded",
    user_temperature: Annotated[
        float,
        typer.Option(min=0.0, help="Sampling temperature of a simulated user.", rich_help_panel="Agent and model"),
    ] = 0.0,
    exclude_user_failures: Annotated[
        bool,
        typer.Option(
            "--exclude-user-failures",
            help="Leave out the sessions the user audit found the simulated user breaking.",
            rich_help_panel="Scoring",
        ),
    ] = False,
    prompt_mode: Annotated[
        bool | None,
        typer.Option(
            "--prompt-mode/--native-tools",
            help="Describe tools in the prompt (default: when not native).",
            rich_help_panel="Agent and model",
        ),
    ] = None,
    mode: Annotated[
        ScoringMode, typer.Option(help="wtb = published scorer, strict = defects fixed.", rich_help_panel="Scoring")
    ] = (ScoringMode.WTB),
    history: Annotated[
        HistoryMode | None,
        typer.Option(
            help="wtb = gold history (published; default for a suite without state checks); free = the agent's "
            "own, on a live environment (default for a suite with expected states: only it checks them); forked = "
            "each session once per task boundary i, tasks before i gold, the rest free (n(n+1)/2 task-runs per "
            "session of n tasks; printed before it starts).",
            rich_help_panel="Scoring",
        ),
    ] = None,
    concurrency: Annotated[int, typer.Option(min=1, help="Sessions run at once.", rich_help_panel="Run")] = 8,
    session_timeout: Annotated[
        float,
        typer.Option(
            min=0.001,
            help="Wall-clock seconds per session (see the README for how a timeout is counted).",
            rich_help_panel="Run",
        ),
    ] = 1800.0,
    request_timeout: Annotated[
        float | None,
        typer.Option(
            min=0.001,
            help="Seconds one model request may take end to end, a server's queue included, before it is retried "
            "(default: 600, the openai SDK's own).",
        ),
    ] = None,
    max_steps: Annotated[int, typer.Option(min=1, help="Most assistant steps per task.", rich_help_panel="Run")] = 32,
    temperature: Annotated[
        float, typer.Option(help="Sampling temperature (recorded).", rich_help_panel="Agent and model")
    ] = 0.0,
    seed: Annotated[int, typer.Option(help="Sampling seed (recorded).", rich_help_panel="Agent and model")] = 0,
    trials: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Run every session k times (trial t: seed + t) for pass^k and pass@k. Trials differ only when "
            "the model samples (--temperature > 0) or the provider is nondeterministic.",
            rich_help_panel="Run",
        ),
    ] = None,
    max_tokens: Annotated[
        int | None,
        typer.Option(
            help="Most tokens per reply (default: 256 for the embedded model, else 1024).",
            rich_help_panel="Agent and model",
        ),
    ] = None,
    cache: Annotated[
        CacheMode, typer.Option(help="Model cache of the run directory.", rich_help_panel="Agent and model")
    ] = CacheMode.READ_WRITE,
    runs_dir: Annotated[Path, typer.Option(help="Parent folder of run directories.", rich_help_panel="Run")] = Path(
        "runs"
    ),
    name: Annotated[
        str | None,
        typer.Option(
            help="Run folder name inside --runs-dir: one name, no '/' (default: agent + timestamp).",
            rich_help_panel="Run",
        ),
    ] = None,
    resume: Annotated[
        Path | None, typer.Option(help="Continue a killed run directory (its config is reused).", rich_help_panel="Run")
    ] = None,
    count_provider_errors: Annotated[
        bool,
        typer.Option(
            "--count-provider-errors",
            help="Count sessions lost to the provider as failed (default: listed, left out).",
            rich_help_panel="Scoring",
        ),
    ] = False,
    preflight: Annotated[
        bool,
        typer.Option(
            help="One cheap call first: fail fast on a wrong endpoint or model.",
            rich_help_panel="Agent and model",
        ),
    ] = True,
    export_wtb_result: Annotated[
        Path | None,
        typer.Option(help="Also write the published WildToolBench result format here.", rich_help_panel="Scoring"),
    ] = None,
    perturb: Annotated[
        str | None,
        typer.Option(
            help=f"Run a perturbed copy of the suite (kept in the run as suite.jsonl): {PERTURB_KINDS} (see README, "
            "Robustness).",
            rich_help_panel="Perturbation",
        ),
    ] = None,
    perturb_seed: PerturbSeedOption = 0,
    perturb_model: Annotated[
        str | None,
        typer.Option(
            help="The model that rewords utterances for --perturb paraphrase (cached in the run).",
            rich_help_panel="Perturbation",
        ),
    ] = None,
    skip_invalid: Annotated[
        bool,
        typer.Option(
            "--skip-invalid", help="Skip malformed suite records (counted and listed).", rich_help_panel="Suite"
        ),
    ] = False,
    executor: Annotated[
        str,
        typer.Option(
            help="`local` or `ray` (shards on Ray; pip install 'toolwild\\[ray]').",
            rich_help_panel="Run",
        ),
    ] = "local",
    ray_address: RayAddressOption = None,
) -> None:
    """Evaluate an agent on a suite: run directory, metrics, report.html and the scoreboard.

    A killed run continues with --resume RUN_DIR; the README says how outcomes count.
    Exit codes: 0 done; 1 bad input; 3 harness errors (figures incomplete); 4 most sessions lost to the provider.
    """
    with handled_errors():
        options = EvalOptions(
            suite=suite_path, all_sessions=all_sessions, limit=limit, sessions=only, skip_invalid=skip_invalid,
            agent=agent, model=model, base_url=base_url, env_model=env_model, user=user,
            user_temperature=user_temperature, exclude_user_failures=exclude_user_failures, prompt_mode=prompt_mode,
            mode=mode, history=history, concurrency=concurrency, session_timeout=session_timeout,
            request_timeout=request_timeout, max_steps=max_steps, temperature=temperature, seed=seed, trials=trials,
            max_tokens=max_tokens, cache=cache, runs_dir=runs_dir, name=name, resume=resume,
            count_provider_errors=count_provider_errors, preflight=preflight, export_wtb_result=export_wtb_result,
            perturb=perturb, perturb_seed=perturb_seed, perturb_model=perturb_model, executor=executor,
            ray_address=ray_address,
        )  # fmt: skip
        options = dataclasses.replace(options, run_dir=run_folder(options))  # named in an interruption's hint
        # the bar counts task-runs, which move as the agent works: sessions of the embedded model take minutes each
        with progress_bar(
            "[bold]task-runs" if history is HistoryMode.FORKED else "[bold]tasks", status="status"
        ) as bar:
            show = _ProgressShown(bar)
            try:
                run = evaluate(
                    options=options,
                    on_progress=show,
                    on_message=lambda text: console.print(escape(text)),
                    on_skipped=report_skipped,
                )
            except KeyboardInterrupt:
                err_console.print(
                    "[yellow]interrupted; finished sessions are saved. "
                    f"Continue with: toolwild eval --resume {options.run_dir}[/]"
                )
                raise typer.Exit(130) from None
    _print_run(run, export_wtb_result)
    raise typer.Exit(outcome_exit_code(run.every_verdict, resume_hint=run.path))


class _ProgressShown:
    """The progress bar of a run: made when the run says its totals (it counts task-runs), moved as it goes."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.bar: TaskID | None = None

    def __call__(self, p: RunProgress) -> None:
        if self.bar is None:
            self.bar = self.progress.add_task("run", total=p.total_tasks, status=f"{p.unit} 0/{p.total}")
        self.progress.update(self.bar, completed=p.tasks_done, status=progress_status(p))


def _print_run(run: Run, export_wtb_result: Path | None) -> None:
    """What the command prints after the run: the scoreboard, what the figures leave out, and where it all is."""
    assert run.metrics is not None
    render_scoreboard(run.metrics, console)
    warning = unchecked_states_warning(run.suite, run.config.history)
    if warning is not None:
        err_console.print(f"[bold yellow]warning:[/] {escape(warning)}")
    for note in run.warnings:
        err_console.print(f"[yellow]{escape(note)}[/]")
    if run.user_audit is not None:
        every = run.every_verdict
        lost = sum(v.user_error is not None and not v.user_error.startswith("excluded:") for v in every)
        excluded = run.excluded_sessions if run.config.exclude_user_failures else None
        console.print(user_summary(run.user_audit, user_errors=lost, excluded=excluded))
    console.print(f"run directory: {run.path}")
    trials, forks = run.config.trials, fork_count(run.suite)
    if trials > 1:
        console.print(f"trials 1..{trials - 1}: {run.path / TRIALS}/<trial>/ (trial 0: the run directory's files)")
    if run.config.history is HistoryMode.FORKED and forks > 1:
        console.print(
            f"forks 1..{forks - 1}: {run.path / FORKS}/<fork>/ (fork 0, the free run: the run directory's files)"
        )
    if export_wtb_result is not None:
        console.print(f"published-format results: {export_wtb_result}")


def progress_status(p: RunProgress, *, units: str | None = None, calls: str | None = None) -> str:
    """The text beside the progress bar (which counts task-runs): the units ended, the agent's turns so far
    (``calls``: "model calls" for a model agent), the running accuracy, tokens and any failures."""
    units, calls = units or p.unit, calls or p.turn
    status = f"{units} {p.done}/{p.total} · {calls} {p.calls:,} · task acc {p.task_accuracy:.1%} · tokens {p.tokens:,}"
    if p.model_failures:
        status += f" · model failures {p.model_failures}"
    if p.provider_errors:
        status += f" · [yellow]provider errors {p.provider_errors}[/]"
    if p.harness_errors:
        status += f" · [red]harness errors {p.harness_errors}[/]"
    return status
