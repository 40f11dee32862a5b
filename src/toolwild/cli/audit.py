"""``toolwild audit``: test a simulated environment's tools against their contracts; calibrate the judge."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from toolwild.cli._common import RayAddressOption, check_executor, console, handled_errors, make_llm, run_async
from toolwild.core.formats.environment import load_environment, write_environment
from toolwild.llm.registry import describe_backends

if TYPE_CHECKING:
    from toolwild.core.environment import Environment
    from toolwild.synth.audit import ToolAudit

audit_app = typer.Typer(help="Audit simulated tools and calibrate the judge.", no_args_is_help=True)

ModelOption = Annotated[str, typer.Option(help=f"Model: {'; '.join(describe_backends())}.")]
BaseUrlOption = Annotated[str | None, typer.Option(help="Base URL of an OpenAI-compatible server.")]
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
    table = Table(title=f"Audit of {env_id}", title_justify="left")
    for column in ("tool", "judged", "correct", "reliability", "schema", "kept"):
        table.add_column(column)
    schema_text = {True: "refused", False: "[red]accepted[/]", None: "-"}
    for a in audits:
        table.add_row(
            a.tool,
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
        check_executor(executor)
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
    from toolwild.run.ray_executor import RayExecutor
    from toolwild.synth.audit import AuditSpec, AuditWorker, audit_remote

    remote = RayExecutor(concurrency, address=address)
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
