"""``toolwild audit``: test a simulated environment's tools against their contracts; calibrate the judge; audit a
simulated user."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from toolwild.cli._common import (
    EXIT_PROVIDER_ERRORS,
    BaseUrlOption,
    RayAddressOption,
    console,
    err_console,
    handled_errors,
    make_llm,
    progress_bar,
)
from toolwild.core.formats.environment import load_environment, write_environment
from toolwild.errors import ConfigError
from toolwild.llm.registry import describe_backends
from toolwild.run.job import choose_executor, make_executor
from toolwild.run.loop import run_async

if TYPE_CHECKING:
    from toolwild.core.environment import Environment
    from toolwild.eval.user_audit import UserAuditReport
    from toolwild.synth.audit import ToolAudit

audit_app = typer.Typer(help="Audit simulated tools and users; calibrate the judge.", no_args_is_help=True)

ModelOption = Annotated[str, typer.Option(help=f"Model: {'; '.join(describe_backends())}.")]
CacheOption = Annotated[Path | None, typer.Option(help="SQLite file caching model answers (re-runs are free).")]


def _report_row(audit: ToolAudit, threshold: float) -> dict[str, Any]:
    """One tool in ``--report``: the counts behind its reliability, its schema check, and every call."""
    return {
        "tool": audit.tool,
        "reliability": audit.reliability,
        "judged": audit.judged,
        "judged_correct": audit.judged_correct,
        "schema_check": audit.schema_check,
        "kept": audit.passes(threshold),
        "calls": audit.calls,
    }


def _audit_table(env_id: str, audits: list[ToolAudit], threshold: float) -> Table:
    """Per tool: model-judged calls, how many were right, reliability, the code-checked schema call, kept."""
    table = Table(title=f"Audit of {escape(env_id)}", title_justify="left")
    for column in ("tool", "judged", "correct", "reliability", "schema", "kept"):
        table.add_column(column)
    schema_text = {True: "refused", False: "[red]accepted[/]", None: "-"}
    for a in audits:
        table.add_row(
            escape(a.tool),
            str(a.judged),
            str(a.judged_correct),
            f"{a.reliability:.0%}",
            schema_text[a.schema_check],
            "yes" if a.passes(threshold) else "no",
        )
    return table


@audit_app.command("run")
def run(
    env_file: Annotated[Path, typer.Argument(metavar="ENV", exists=True, dir_okay=False, help="An llm environment.")],
    model: ModelOption = "local",
    base_url: BaseUrlOption = None,
    threshold: Annotated[float, typer.Option(min=0.0, max=1.0, help="Least reliability a tool keeps.")] = 0.75,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Write the environment without unreliable tools here.")
    ] = None,
    report: Annotated[Path | None, typer.Option(help="Write every call, observation and verdict here (JSON).")] = None,
    cache: CacheOption = None,
    concurrency: Annotated[
        int, typer.Option(min=1, help="Test calls in flight at once, over every tool (the results do not change).")
    ] = 32,
    executor: Annotated[
        str,
        typer.Option(
            help="Where the tools are audited: `local` (this process) or `ray` (one unit per tool, shards as Ray "
            "tasks, CONCURRENCY calls in flight in each; pip install 'toolwild\\[ray]'). The results are the same."
        ),
    ] = "local",
    ray_address: RayAddressOption = None,
) -> None:
    """Make test calls (valid, schema-invalid, precondition-violating, edge) on each tool, judge them, and print
    each tool's reliability: the share of the model-judged calls judged correct. The schema-invalid call is checked
    by code and shown apart ("schema"), not counted. The model both simulates and judges.

    Every test call of every tool runs at once, at most CONCURRENCY in flight (each on its own episode, so the
    results and the report are the same at any concurrency). With --executor ray each tool is a unit, run in
    shards on the cluster; a --cache file must then be reachable by every worker at the same path."""
    from toolwild.core.files import write_json
    from toolwild.synth.audit import audit_environment

    with handled_errors():
        choose_executor(executor, choices=("local", "ray"))
        environment = load_environment(env_file)
        if executor == "ray":
            kept, audits = _audit_on_ray(environment, model, base_url, cache, concurrency, threshold, ray_address)
        else:
            llm = make_llm(model, base_url=base_url, cache=cache, max_connections=concurrency)

            async def go():
                try:
                    with console.status(f"auditing {len(environment.tools)} tools..."):
                        return await audit_environment(environment, llm, threshold=threshold, concurrency=concurrency)
                finally:
                    await llm.aclose()

            kept, audits = run_async(go())
        if out is not None:
            write_environment(kept, out)
        if report is not None:
            write_json(report, [_report_row(a, threshold) for a in audits])
    console.print(_audit_table(environment.id, audits, threshold))
    console.print(f"kept {len(kept.tools)} of {len(environment.tools)} tools (threshold {threshold:.0%})")


def _audit_on_ray(
    environment: Environment,
    model: str,
    base_url: str | None,
    cache: Path | None,
    concurrency: int,
    threshold: float,
    address: str | None,
) -> tuple[Environment, list[ToolAudit]]:
    """The audit as Ray tasks: one unit per tool, the tools cut into about one shard per CPU of the cluster."""
    from toolwild.synth.audit import AuditSpec, AuditWorker, audit_remote

    remote: Any = make_executor("ray", concurrency, ray_address=address)
    remote.shard_per_cpu(len(environment.tools))  # a missing Ray or cluster is named here
    spec = AuditSpec(
        environment=environment,
        model=model,
        base_url=base_url,
        cache=str(cache.resolve()) if cache is not None else None,
        concurrency=concurrency,
    )
    with console.status(f"auditing {len(environment.tools)} tools on Ray..."):
        return run_async(audit_remote(remote, AuditWorker(spec), threshold=threshold))


@audit_app.command("calibrate")
def calibrate_command(
    labels: Annotated[
        Path,
        typer.Argument(
            metavar="LABELS.jsonl",
            exists=True,
            dir_okay=False,
            help='One row per line: {"tool": {...}, "arguments": {...}, "response": ..., "correct": true|false}.',
        ),
    ],
    model: ModelOption = "local",
    base_url: BaseUrlOption = None,
    cache: CacheOption = None,
) -> None:
    """Measure the judge against labelled (call, response, verdict) rows: precision, recall, false-positive rate
    ("positive" = judged correct; a false positive is a wrong simulation the judge let through)."""
    from toolwild.synth.audit import calibrate, load_labels

    with handled_errors():
        rows = load_labels(labels)
        llm = make_llm(model, base_url=base_url, cache=cache)

        async def go():
            try:
                return await calibrate(llm, rows)
            finally:
                await llm.aclose()

        result = run_async(go())
    table = Table(title=f"Judge calibration ({len(rows)} rows)", title_justify="left", show_header=False)
    table.add_row("precision", f"{result.precision:.1%}")
    table.add_row("recall", f"{result.recall:.1%}")
    table.add_row("false-positive rate", f"{result.false_positive_rate:.1%}")
    table.add_row("accuracy", f"{result.accuracy:.1%}")
    table.add_row("TP / FP / TN / FN", f"{result.tp} / {result.fp} / {result.tn} / {result.fn}")
    if result.unjudged:
        table.add_row("no valid verdict", str(result.unjudged))
    console.print(table)


@audit_app.command("user")
def user_command(
    suite_path: Annotated[
        Path, typer.Argument(metavar="SUITE", exists=True, dir_okay=False, help="A WildToolBench-format suite.")
    ],
    user: Annotated[str, typer.Option(help="The simulated user: `model:M` (M as --model takes) or `recorded`.")] = (
        "model:local"
    ),
    trials: Annotated[int, typer.Option(min=1, help="Runs of every session (trial t seeds the user with SEED+t).")] = 1,
    limit: Annotated[int | None, typer.Option(min=1, help="Audit only the suite's first N sessions.")] = None,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Write the report (every run, turn and finding) here (JSON).")
    ] = None,
    base_url: BaseUrlOption = None,
    cache: CacheOption = None,
    temperature: Annotated[float, typer.Option(min=0.0, help="Sampling temperature of the user model.")] = 0.0,
    seed: Annotated[int, typer.Option(help="Seed of the user model's first trial.")] = 0,
    concurrency: Annotated[int, typer.Option(min=1, help="Sessions audited at once.")] = 4,
) -> None:
    """Run the oracle (gold path, gold questions) against a simulated user TRIALS times per session and check every
    reply by code: a session fails when the user withholds an asked value, gives a wrong one, leaks a withheld one
    before it is asked, ends the task early or never ends it. Prints the simulator's error rate with a 95% Wilson
    interval and the sessions it breaks, with why."""
    from toolwild.core.formats.wtb import load_wtb_suite
    from toolwild.eval.user import ModelUser, RecordedUser, UserSimulator, parse_user_spec, user_prompt
    from toolwild.eval.user_audit import audit_user, user_audit_report

    with handled_errors():
        model = parse_user_spec(user)
        suite, _report = load_wtb_suite(suite_path)
        if limit is not None:
            suite = suite.model_copy(update={"sessions": suite.sessions[:limit]})
        if not suite.sessions:
            raise ConfigError(f"{suite_path}: the suite has no session to audit")
        llm = make_llm(model, base_url=base_url, cache=cache, max_connections=concurrency) if model else None
        simulator: UserSimulator = (
            ModelUser(llm, temperature=temperature, seed=seed) if llm is not None else RecordedUser()
        )
        if trials > 1 and temperature == 0 and llm is not None:
            err_console.print("[yellow]note:[/] at --temperature 0 the trials differ only where the model does")

        async def go():
            try:
                with progress_bar("auditing the user") as bar:
                    task = bar.add_task("runs", total=len(suite.sessions) * trials)
                    return await audit_user(
                        suite.sessions,
                        simulator,
                        trials=trials,
                        concurrency=concurrency,
                        on_done=lambda _run: bar.advance(task),
                    )
            finally:
                if llm is not None:
                    await llm.aclose()

        runs = run_async(go())
        report = user_audit_report(
            suite.model_copy(update={"source": str(suite_path.resolve())}),
            runs,
            user=user,
            trials=trials,
            prompt=user_prompt().record() if llm is not None else None,
            temperature=temperature if llm is not None else None,
            seed=seed if llm is not None else None,
            usage=llm.usage.as_dict() if llm is not None else None,
        )
        if out is not None:
            from toolwild.core.files import write_json

            write_json(out, report.model_dump(mode="json"))
    _print_user_audit(report)
    if report.provider_errors and len(report.provider_errors) * 2 > len(runs):
        err_console.print(
            f"[bold red]error:[/] {len(report.provider_errors)} of {len(runs)} run(s) lost to the provider"
        )
        raise typer.Exit(EXIT_PROVIDER_ERRORS)


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def _method(report: UserAuditReport) -> str:
    """How the interval was computed, in words: over runs clustered by session when there were several trials."""
    interval = report.interval
    if interval is None or interval.effective_n is None:
        return "Wilson"
    return (
        f"Wilson at an effective {interval.effective_n:.1f} of {report.runs} runs: a session's trials are not "
        "independent"
    )


def _print_user_audit(report: UserAuditReport) -> None:
    """The summary (error rate, interval, findings by kind, the oracle's score) and the broken sessions."""
    summary = Table(title=f"User audit: {escape(report.user)}", title_justify="left", show_header=False)
    rate = _percent(report.error_rate)
    if report.interval is not None:
        rate += f" (95% CI {report.interval.low:.1%}\u2013{report.interval.high:.1%}, {_method(report)})"
    summary.add_row("error rate", rate)
    summary.add_row("runs failed", f"{report.failed_runs} of {report.runs} (sessions x trials)")
    summary.add_row("sessions", f"{report.sessions} ({report.trials} trial(s) each)")
    for kind, count in report.by_kind.items():
        summary.add_row(f"  {kind}", f"{count} run(s)")
    summary.add_row("oracle task accuracy", _percent(report.oracle_task_accuracy))
    if report.prompt_version is not None:
        summary.add_row("prompt", f"version {report.prompt_version}, sha256 {(report.prompt_sha256 or '')[:12]}")
    if report.usage is not None:
        total = report.usage.get("total", {})
        summary.add_row(
            "model calls", f"{total.get('calls', 0)} ({total.get('cache_hits', 0)} answered from the cache)"
        )
    if report.provider_errors:
        summary.add_row(
            "lost to the provider",
            f"{len(report.provider_errors)} run(s): {escape(', '.join(report.provider_errors[:5]))}",
        )
    console.print(summary)
    if not report.broken:
        return
    table = Table(title="Sessions the user broke", title_justify="left")
    for column in ("session", "trials", "why (first finding per trial)"):
        table.add_column(column, overflow="fold")
    for broken in report.broken:
        table.add_row(
            escape(broken.session_id),
            ", ".join(str(t) for t in broken.trials),
            escape("\n".join(broken.why)),
        )
    console.print(table)
