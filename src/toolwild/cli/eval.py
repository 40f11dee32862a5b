"""``toolwild eval``: run an agent on a suite, write a run directory, print the scoreboard."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from toolwild.cli._common import (
    PERTURB_KINDS,
    PerturbSeedOption,
    RayAddressOption,
    check_executor,
    console,
    err_console,
    handled_errors,
    outcome_exit_code,
    progress_bar,
    report_skipped,
    run_async,
)
from toolwild.core.files import write_json
from toolwild.core.formats.wtb import load_wtb_suite, write_wtb_suite
from toolwild.core.session import Suite
from toolwild.core.trajectory import Trajectory
from toolwild.core.verdict import Metrics, ScoringMode, SessionVerdict
from toolwild.envs.registry import anchor_session, check_session_environments
from toolwild.errors import ConfigError, ToolwildError
from toolwild.eval.build import AGENT_FORMS, RunClients, build_run_clients
from toolwild.eval.metrics.forked import compute_forked_metrics
from toolwild.eval.metrics.passk import compute_trial_metrics
from toolwild.eval.runner import (
    USER_AUDIT,
    EncodedVerdicts,
    RunConfig,
    RunProgress,
    SessionTrial,
    fork_count,
    fork_sessions,
    forked_task_runs,
    load_run_config,
    load_run_trajectories,
    mark_user_failures,
    run_trials,
    verdict_line,
    write_fork_verdicts,
    write_trial_verdicts,
)
from toolwild.eval.session import HistoryMode
from toolwild.eval.user import USER_FORMS, UserSimulator, parse_user_spec, user_prompt
from toolwild.eval.user_audit import (
    UserAuditReport,
    audit_user,
    load_user_audit,
    user_audit_report,
    user_extension,
    user_summary,
)
from toolwild.export.wtb_result import write_wtb_results
from toolwild.llm.cache import CacheMode
from toolwild.llm.preflight import preflight_all, preflight_alongside
from toolwild.llm.redact import redact_url
from toolwild.llm.registry import describe_backends
from toolwild.report.html import RunView, encode_records, write_report
from toolwild.report.scoreboard import render_scoreboard

DEFAULT_SUBSET = 4
"""Sessions of the built-in ledger suite run by default (the embedded model needs about a minute per session)."""
_SEPARATORS = re.compile(r"[:/\\]")
"""What the agent's name may hold that a default run name must not (a path separator, a drive's colon)."""


def _perturbed_run_suite(
    base: Suite | None,
    suite_path: Path,
    run_dir: Path,
    kinds: str,
    seed: int,
    model: str | None,
    base_url: str | None,
) -> None:
    """Write the perturbed copy ``--perturb`` asks for into the run (its ``suite.jsonl``: re-scoring, resuming and
    ``compare`` read it; it records the base suite's fingerprint, the kinds and the seed).

    ``base``: the suite read from ``suite_path`` (None: read it, as the run's own copy of its sessions is);
    ``suite_path``'s folder is where its environment files resolve. The kinds were checked before anything was
    written (:func:`_check_new_run_options`).
    """
    from toolwild.cli.validate import perturbed_copy

    if base is None:
        base, _ = load_wtb_suite(suite_path)
    cache = run_dir / "perturb.cache.sqlite"
    outcome = perturbed_copy(base, suite_path, kinds, seed, model, base_url, cache)
    write_wtb_suite(_anchored(outcome.suite, suite_path.resolve().parent), run_dir / "suite.jsonl")
    console.print(escape(outcome.summary()))


def _selected(suite: Suite, limit: int | None, only: str | None) -> Suite:
    """The sessions ``--sessions`` names (in the suite's order), then the first ``--limit`` of them."""
    sessions = suite.sessions
    if only is not None:
        wanted = [s.strip() for s in only.split(",") if s.strip()]
        known = {s.id for s in sessions}
        unknown = [w for w in wanted if w not in known]
        if not wanted or unknown:
            raise ConfigError(f"--sessions: no session {', '.join(unknown) or '(none given)'} in the suite")
        sessions = [s for s in sessions if s.id in set(wanted)]
    if limit is not None:
        sessions = sessions[:limit]
    return suite.model_copy(update={"sessions": sessions})


def _anchored(suite: Suite, folder: Path) -> Suite:
    """The files the sessions name relative to the suite's folder (environment files, own-books snapshots) made
    absolute: the copy lives in the run folder (see :func:`~toolwild.envs.registry.anchor_session`)."""
    return suite.model_copy(update={"sessions": [anchor_session(s, folder) for s in suite.sessions]})


def _run_name(name: str | None, agent: str) -> str:
    """The run folder's name inside ``--runs-dir``: ``--name``, or the agent and the time.

    Why exactly one path component: ``--name ../escape`` wrote the whole run outside ``--runs-dir`` and an absolute
    name wherever it pointed, both without a word.
    """
    if name is None:
        return f"{_SEPARATORS.sub('-', agent)}-{datetime.now(UTC):%Y%m%d-%H%M%S}"
    if name in ("", ".", "..") or any(c in name for c in "/\\") or Path(name).is_absolute() or not name.isprintable():
        raise ConfigError(
            f"--name {name!r}: a run name is one folder name inside --runs-dir, without '/', '\\', control "
            "characters, and not '.' or '..' (e.g. --name gpt4o-ledger; --runs-dir chooses the folder it goes in)"
        )
    return name


def _check_new_run_options(
    perturb: str | None,
    perturb_model: str | None,
    user: str,
    history: HistoryMode | None,
    trials: int | None,
    exclude_user_failures: bool,
) -> bool:
    """Refuse options of a new run that name nothing or contradict each other, before the suite is read (a bad
    ``--perturb`` used to wait for the whole suite to load); whether the user is simulated (``--user model:M``)."""
    if perturb is not None:
        from toolwild.core.perturb import parse_kinds

        if any(k.name == "paraphrase" for k in parse_kinds(perturb)) and perturb_model is None:
            raise ConfigError("--perturb paraphrase needs a model to reword the utterances: give --perturb-model M")
    simulated = parse_user_spec(user) is not None
    if history is HistoryMode.FORKED:
        _check_forked(simulated, trials)
    if simulated and history is HistoryMode.WTB:
        raise ConfigError("a simulated user (--user model:M) needs the agent's own history: --history free")
    if exclude_user_failures and not simulated:
        raise ConfigError("--exclude-user-failures needs a simulated user (--user model:M)")
    return simulated


def _run_suite(
    suite_path: Path | None, all_sessions: bool, limit: int | None, only: str | None, skip_invalid: bool
) -> tuple[Suite, Suite | None, Path | None]:
    """The sessions a new run evaluates, read (or, for the built-in ledger suite, generated) without writing
    anything: (the sessions, the copy the run keeps as its ``suite.jsonl`` or None when it reads ``--suite`` itself,
    the folder the suite names its files from).

    Raises:
        ConfigError: a suite without a session (``validate`` calls it an error: a scoreboard of nothing is not a
            result), or an unknown ``--sessions`` id.
    """
    if suite_path is None:  # the built-in ledger suite, generated by code (deterministic) and kept with the run
        from toolwild.synth.providers.ledger import build_ledger_suite

        ledger = build_ledger_suite()
        if not all_sessions and limit is None and only is None:
            ledger.sessions = ledger.sessions[:DEFAULT_SUBSET]
        chosen = _selected(ledger, limit, only)
        return chosen, chosen, None
    whole, report = load_wtb_suite(suite_path, skip_invalid=skip_invalid)
    report_skipped(report)
    if not whole.sessions:
        skipped = " (every record was skipped)" if report.skipped else ""
        raise ConfigError(f"{suite_path}: the suite holds no session{skipped}: nothing to evaluate")
    folder = suite_path.resolve().parent
    if limit is None and only is None:
        return whole, None, folder
    return whole, _anchored(_selected(whole, limit, only), folder), folder


def _state_checked_tasks(suite: Suite) -> int:
    """Tasks with an expected state: what only a live history (``free``, ``forked``) checks."""
    return sum(t.checks_state for s in suite.sessions for t in s.tasks)


def _default_history(suite: Suite) -> HistoryMode:
    """``free`` for a suite with state checks (the built-in ledger suite, a suite on your own books, any suite
    ``synth sessions`` makes on a live environment), ``wtb`` (the published protocol) otherwise.

    Why: ``wtb`` runs no call on an environment, so it cannot check a state; defaulting to it evaluated an own-books
    suite without its ledger checks, silently.
    """
    return HistoryMode.FREE if _state_checked_tasks(suite) else HistoryMode.WTB


def _check_environments(suite: Suite, clients: RunClients, base_dir: Path | None, by_default: bool) -> None:
    """Open every environment the run's sessions name (a live history runs calls on them) before anything is
    written; when the history was chosen by default, the error says how to run without them."""
    try:
        check_session_environments(suite.sessions, simulator=clients.simulator, base_dir=base_dir)
    except ConfigError as exc:
        if not by_default:
            raise
        raise ConfigError(
            f"{exc} (--history is free by default on a suite with state checks; --history wtb runs it without "
            "its environments and skips them)"
        ) from None


def _warn_unchecked_states(suite: Suite, history: HistoryMode) -> None:
    """Say on stderr, under the scoreboard, that a ``--history wtb`` run left the suite's state checks out."""
    tasks = _state_checked_tasks(suite)
    if history is HistoryMode.WTB and tasks:
        err_console.print(
            f"[bold yellow]warning:[/] state checks not run: {tasks} task(s) of the suite have an expected state, "
            "but --history wtb runs no call on the environment, so the figures above do not check them (--history "
            "free runs them)"
        )


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
    from contextlib import ExitStack

    from toolwild.run.lock import OutputLock

    # Every option is checked, the suite read and the agent and its clients built before anything is written: a
    # refused command leaves no run folder (and takes no lock). The run folder has one writer: its lock is taken
    # before the first write in it, and a second eval on it (a --resume while this one is alive) is refused naming
    # this one's pid.
    with handled_errors(), ExitStack() as held:
        check_executor(executor)
        copy: Suite | None = None  # a new run's copy of the sessions it runs (None: it reads --suite itself)
        history_by_default = False
        if resume is not None:
            if limit is not None or only is not None:
                raise ConfigError("a resumed run keeps its sessions: leave out --limit and --sessions")
            if perturb is not None:
                raise ConfigError("a resumed run keeps its suite (perturbed or not): leave out --perturb")
            config = _resume_config(resume, base_url)
            _check_user_prompt(config)
            if trials is not None and trials != config.trials:
                raise ConfigError(f"a resumed run keeps its trials ({config.trials}): leave out --trials")
            run_dir = resume
            suite, report = load_wtb_suite(config.suite, skip_invalid=skip_invalid)
            report_skipped(report)
            base_dir = Path(config.suite).parent
        else:
            run_dir = runs_dir / _run_name(name, agent)
            simulated = _check_new_run_options(perturb, perturb_model, user, history, trials, exclude_user_failures)
            if _holds_results(run_dir / "trajectories.jsonl"):
                raise ConfigError(
                    f"{run_dir} already holds a run; use --resume to continue it or choose another --name"
                )
            suite, copy, base_dir = _run_suite(suite_path, all_sessions, limit, only, skip_invalid)
            if simulated:
                history = HistoryMode.FREE
                mode = ScoringMode.STRICT  # the published live loop's labels need the recorded user (README)
            elif history is None:
                history, history_by_default = _default_history(suite), True
            # the run reads --suite itself, or the copy it keeps (of a selection, a perturbation, the built-in suite)
            read = (
                suite_path if suite_path is not None and copy is None and perturb is None else run_dir / "suite.jsonl"
            )
            config = RunConfig(
                suite=str(read.resolve()),
                agent=agent,
                model=model if agent == "model" else None,
                base_url=redact_url(base_url),
                prompt_mode=prompt_mode,
                history=history,
                mode=mode,
                concurrency=concurrency,
                session_timeout_s=session_timeout,
                request_timeout_s=request_timeout,
                max_steps_per_task=max_steps,
                temperature=temperature,
                seed=seed,
                trials=trials or 1,
                max_tokens=max_tokens or (256 if agent == "model" and model.startswith("local") else 1024),
                count_provider_errors=count_provider_errors,
                cache=cache.value,
                env_model=env_model,
                user=user,
                user_temperature=user_temperature,
                exclude_user_failures=exclude_user_failures,
                **(user_prompt().record() if simulated else {}),
            )
        live_url = base_url if base_url is not None else config.base_url
        clients = build_run_clients(config.model_copy(update={"base_url": live_url}), suite)
        try:
            if config.history.live:
                _check_environments(suite, clients, base_dir, history_by_default)
            held.enter_context(OutputLock(run_dir))
            if resume is None:  # the first writes
                run_dir.mkdir(parents=True, exist_ok=True)
                if copy is not None:  # the run keeps the sessions it runs: re-scoring and resuming read this file
                    write_wtb_suite(copy, run_dir / "suite.jsonl")
                if perturb is not None:
                    source = suite_path if copy is None and suite_path is not None else run_dir / "suite.jsonl"
                    base = suite if copy is None else None  # a copy is perturbed as the run keeps it: read back
                    _perturbed_run_suite(base, source, run_dir, perturb, perturb_seed, perturb_model, base_url)
                if copy is not None or perturb is not None:
                    suite, _ = load_wtb_suite(config.suite)  # what the run reads back when re-scored or resumed
            clients.open_cache(run_dir, CacheMode(config.cache))
        except BaseException:
            run_async(clients.aclose())
            raise
        agent_obj, llm, simulator = clients.agent, clients.llm, clients.simulator
        user_obj, user_llm = clients.user, clients.user_llm
        user_report: UserAuditReport | None = None
        forked = config.history is HistoryMode.FORKED
        if forked:
            console.print(_forked_cost(suite, run_dir if resume is not None else None))

        units = "session forks" if forked else ("sessions" if config.trials == 1 else "session trials")
        calls = "model calls" if config.agent == "model" else "steps"
        tasks = sum(len(s.tasks) for s in suite.sessions)
        total_tasks = forked_task_runs(suite) if forked else tasks * config.trials
        ends = tasks if forked else len(suite.sessions) * config.trials  # the units: a fork per task of its session
        prepared = _Prepared(fork_count(suite) if forked else config.trials)
        # the bar counts task-runs, which move as the agent works: sessions of the embedded model take minutes each
        with progress_bar("[bold]task-runs" if forked else "[bold]tasks", status="status") as progress:
            bar = progress.add_task("run", total=total_tasks, status=f"{units} 0/{ends}")

            def show(p: RunProgress) -> None:
                status = progress_status(p, units=units, calls=calls)
                progress.update(bar, completed=p.tasks_done, status=status)

            async def run() -> list:
                nonlocal user_report
                try:
                    checked = (llm, simulator, user_llm) if preflight else ()
                    if user_obj is not None:  # the audit talks to the models before the run: check them first
                        await preflight_all(*checked)
                        checked = ()
                        user_report = await _user_audit(suite, user_obj, config, run_dir)
                    remote = {}
                    if executor == "ray":
                        from toolwild.eval.runner import EvalWorker
                        from toolwild.run.ray_executor import RayExecutor

                        remote = {
                            "executor": RayExecutor(
                                config.concurrency, address=ray_address, shard_size=config.concurrency
                            ),
                            "worker": EvalWorker(config, run_dir, live_url),
                        }
                    return await preflight_alongside(
                        checked,
                        lambda ready: run_trials(
                            suite,
                            agent_obj,
                            config,
                            run_dir,
                            resume=resume is not None,
                            on_progress=show,
                            simulator=simulator,
                            user=user_obj,
                            ready=ready,
                            on_result=prepared.keep,
                            **remote,
                        ),
                    )
                finally:
                    await clients.aclose()

            try:
                by_trial = run_async(run())
            except KeyboardInterrupt:
                err_console.print(
                    "[yellow]interrupted; finished sessions are saved. "
                    f"Continue with: toolwild eval --resume {run_dir}[/]"
                )
                raise typer.Exit(130) from None
        excluded = None
        if config.exclude_user_failures and user_report is not None:
            counts = [mark_user_failures(trial, user_report) for trial in by_trial]
            excluded = counts[0]  # sessions (every trial leaves out the same ones)
        verdicts = by_trial[0]  # of a forked run: fork 0's, the free run's
        score_parts = compute_forked_metrics if forked else compute_trial_metrics
        metrics = score_parts(
            by_trial, model_name=agent_obj.name, mode=config.mode, count_provider_errors=config.count_provider_errors
        )
        remote_usage = {"note": "made and counted in the Ray workers (not collected)"}
        if llm is not None:  # with Ray the calls were made (and counted) in the workers
            metrics.extensions["usage"] = llm.usage.as_dict() if executor == "local" else remote_usage
        if simulator is not None and simulator is not llm:
            metrics.extensions["simulator_usage"] = simulator.usage.as_dict() if executor == "local" else remote_usage
        if user_llm is not None and user_llm is not llm:
            metrics.extensions["user_usage"] = user_llm.usage.as_dict() if executor == "local" else remote_usage
        if user_report is not None:
            metrics.extensions["user"] = {
                "user": config.user,
                "prompt_version": config.user_prompt_version,
                "prompt_sha256": config.user_prompt_sha256,
                **user_extension(
                    user_report, [v for t in by_trial for v in t], count_provider_errors=config.count_provider_errors
                ),
                "excluded_sessions": excluded,
            }
        write_json(run_dir / "metrics.json", metrics.model_dump(mode="json"))
        if excluded:  # sessions the user audit left out read otherwise now: encode them again
            prepared = _Prepared(0, prepared.trajectories)
        (write_fork_verdicts if forked else write_trial_verdicts)(run_dir, by_trial, prepared.lines)
        trajectories = list(prepared.trajectories.values())
        view = RunView.of(suite, trajectories, verdicts, config)
        view.encoded = prepared.records
        _write_report(run_dir, view, metrics)
        if export_wtb_result is not None:
            write_wtb_results(export_wtb_result, suite, trajectories, verdicts, model_name=agent_obj.name)
    render_scoreboard(metrics, console)
    _warn_unchecked_states(suite, config.history)
    if user_report is not None:
        lost = sum(v.user_error is not None and not v.user_error.startswith("excluded:") for t in by_trial for v in t)
        console.print(user_summary(user_report, user_errors=lost, excluded=excluded))
    console.print(f"run directory: {run_dir}")
    if config.trials > 1:
        console.print(
            f"trials 1..{config.trials - 1}: {run_dir / 'trials'}/<trial>/ (trial 0: the run directory's files)"
        )
    if forked and fork_count(suite) > 1:
        console.print(
            f"forks 1..{fork_count(suite) - 1}: {run_dir / 'forks'}/<fork>/ (fork 0, the free run: the run "
            "directory's files)"
        )
    if export_wtb_result is not None:
        console.print(f"published-format results: {export_wtb_result}")
    raise typer.Exit(outcome_exit_code([v for trial in by_trial for v in trial], resume_hint=run_dir))


class _Prepared:
    """What the end of a run writes, prepared as each session ends, while the run still waits on the model: the
    run's own trajectories (trial 0, fork 0: no need to read them back) and their report records, and every
    part's verdict lines. Why: encoding them all after the last response was most of the time the user waited
    for nothing at the end of a 256-session run."""

    def __init__(self, parts: int, trajectories: dict[str, Trajectory] | None = None) -> None:
        self.lines: list[EncodedVerdicts] = [{} for _ in range(parts)]
        self.trajectories: dict[str, Trajectory] = trajectories if trajectories is not None else {}
        self.records: dict[str, tuple[SessionVerdict, str]] = {}

    def keep(self, item: SessionTrial, traj: Trajectory, verdict: SessionVerdict) -> None:
        """The runner's ``on_result``: one session (of one trial or fork) has ended."""
        self.lines[item.fork or item.trial][traj.session_id] = (verdict, verdict_line(verdict))
        if item.trial == 0 and item.fork == 0:
            self.trajectories[traj.session_id] = traj
            self.records[traj.session_id] = (verdict, encode_records(item.session, verdict, traj))


def progress_status(p: RunProgress, *, units: str = "sessions", calls: str = "model calls") -> str:
    """The text beside the progress bar (which counts task-runs): the units ended, the agent's turns so far
    (``calls``: "model calls" for a model agent), the running accuracy, tokens and any failures."""
    status = f"{units} {p.done}/{p.total} · {calls} {p.calls:,} · task acc {p.task_accuracy:.1%} · tokens {p.tokens:,}"
    if p.model_failures:
        status += f" · model failures {p.model_failures}"
    if p.provider_errors:
        status += f" · [yellow]provider errors {p.provider_errors}[/]"
    if p.harness_errors:
        status += f" · [red]harness errors {p.harness_errors}[/]"
    return status


def _holds_results(path: Path) -> bool:
    """Whether a run folder's trajectory file holds a finished session: a run stopped before its first one (its
    preflight failed, say) holds nothing to resume, and may be started again under its name."""
    return path.is_file() and path.stat().st_size > 0


def _write_report(run_dir: Path, view: RunView, metrics: Metrics) -> None:
    """``report.html`` from what the run holds in hand; a failure to write it costs no finished work (the
    metrics and verdicts are already on disk), so it is a warning with the command that retries it."""
    try:
        write_report(run_dir, view=view, metrics=metrics)
    except (OSError, ToolwildError) as exc:
        err_console.print(f"[yellow]report.html not written: {exc} (retry: toolwild report {run_dir})[/]")


def _check_forked(simulated: bool, trials: int | None) -> None:
    """``--history forked`` runs one trial with the recorded user: the forks replay gold turns (a simulated user
    has none) and already multiply the work by about (n+1)/2."""
    if simulated:
        raise ConfigError(
            "--history forked needs the recorded user: a simulated user (--user model:M) has no gold turns"
        )
    if trials is not None and trials > 1:
        raise ConfigError("--history forked runs one trial: leave out --trials (the forks already rerun each session)")


def _forked_cost(suite: Suite, resumed: Path | None) -> str:
    """What a forked run costs, said before it starts: per session of n tasks, fork i runs its n - i last tasks,
    n(n+1)/2 task-runs in all, against n for a free or wtb run (and, resuming, how many are left)."""
    tasks = sum(len(s.tasks) for s in suite.sessions)  # also the number of forks: one per task boundary
    runs = forked_task_runs(suite)
    extra = f"{runs - tasks:,} more, {(runs - tasks) / tasks:.2f} per task" if tasks else "nothing"
    line = (
        f"--history forked: {len(suite.sessions)} session(s) of {tasks:,} task(s) run once per task boundary: "
        f"{tasks:,} session forks, {runs:,} task-runs (n(n+1)/2 per session of n tasks; a free or wtb run makes "
        f"{tasks:,}: {extra})"
    )
    if resumed is None:
        return line
    left = 0
    for i in range(fork_count(suite)):
        done = {t.session_id for t in load_run_trajectories(resumed, fork=i) if t.final}
        left += sum(len(s.tasks) - i for s in fork_sessions(suite, i).sessions if s.id not in done)
    return f"{line}; {left:,} task-run(s) left to run"


def _resume_config(run_dir: Path, base_url: str | None) -> RunConfig:
    """The config of the run to resume; a base URL with credentials (never stored) must be given again."""
    config = load_run_config(run_dir)
    stored = config.base_url
    if base_url is not None:
        if redact_url(base_url) != stored:
            raise ConfigError(f"--base-url {redact_url(base_url)} is not the run's ({stored})")
    elif stored is not None and "***" in stored:
        raise ConfigError(
            f"the run's base URL ({stored}) had credentials, which are never stored: pass --base-url again"
        )
    return config


def _check_user_prompt(config: RunConfig) -> None:
    """A resumed run with a simulated user must be played by the same prompt: its sha256 is in the config."""
    if config.user == "recorded" or config.user_prompt_sha256 is None:
        return
    now = user_prompt()
    if now.sha256 != config.user_prompt_sha256:
        raise ConfigError(
            f"the simulated user's prompt changed since the run started (sha256 {config.user_prompt_sha256[:12]} in "
            f"the run, {now.sha256[:12]} now, version {now.version}): resuming would mix two users"
        )


async def _user_audit(suite: Suite, user: UserSimulator, config: RunConfig, run_dir: Path) -> UserAuditReport:
    """The run's user audit (the oracle against the simulated user, one trial per session), made once and kept in
    the run directory: a resumed run reads it again."""
    path = run_dir / USER_AUDIT
    if path.exists():
        return load_user_audit(path)
    runs = await audit_user(suite.sessions, user, trials=1, concurrency=config.concurrency)
    report = user_audit_report(
        suite,
        runs,
        user=config.user,
        trials=1,
        prompt=user_prompt().record(),
        temperature=config.user_temperature,
        seed=config.seed,
    )
    write_json(path, report.model_dump(mode="json"))
    return report
