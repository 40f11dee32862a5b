"""``toolwild validate``: load a suite, count what it holds, and list every problem found."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from toolwild.cli._common import console, handled_errors, make_llm
from toolwild.core.formats.wtb import load_wtb_suite
from toolwild.core.jsonl import read_jsonl
from toolwild.eval.validate import Severity, summarize_suite, validate_suite


def _count_table(title: str, key: str, value: str, counts: Mapping[Any, int]) -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column(key)
    table.add_column(value, justify="right")
    for name in sorted(counts):
        table.add_row(escape(str(name)), str(counts[name]))
    return table


def validate(
    suite_path: Annotated[Path, typer.Argument(metavar="SUITE.jsonl", help="A WildToolBench-format suite.")],
    oracle_check: Annotated[
        bool,
        typer.Option("--oracle-check/--no-oracle-check", help="Score the gold path in both modes (100% expected)."),
    ] = True,
    replay: Annotated[
        bool,
        typer.Option(
            "--replay/--no-replay",
            help="Replay every session's gold calls on its environment (built-in or replay file): observations and "
            "states must be the recorded ones.",
        ),
    ] = False,
    subtypes: Annotated[
        bool,
        typer.Option(
            "--subtypes/--no-subtypes",
            help="Check every hidden-intent label against the values: a coreferential task needs a value the "
            "previous task showed, a long-range one a value from two or more tasks back (and not the previous one).",
        ),
    ] = False,
    env_model: Annotated[
        str | None,
        typer.Option(
            help="With --replay: the model that simulates `llm` environments (e.g. local); without it they are skipped."
        ),
    ] = None,
    base_url: Annotated[
        str | None, typer.Option(help="Base URL of an OpenAI-compatible server for --env-model.")
    ] = None,
    cache: Annotated[
        Path | None,
        typer.Option(help="The generation run's response cache: replayed simulator calls are answered from it."),
    ] = None,
) -> None:
    """Check a suite: counts, type/subtype distribution, malformed records and gold-DAG problems.

    Every record is read even after a bad one, so all problems are listed at once; the exit code is 1 when any
    record is malformed or any error-level problem is found.
    """
    with handled_errors():
        suite, report = load_wtb_suite(suite_path, skip_invalid=True)
        line_of = {}
        for number, obj in read_jsonl(suite_path):
            if isinstance(obj, dict) and isinstance(obj.get("id"), str):
                line_of[obj["id"]] = number
        summary = summarize_suite(suite)
        simulator = make_llm(env_model, base_url=base_url, cache=cache) if env_model and replay else None
        problems = validate_suite(
            suite,
            line_of=line_of,
            oracle_check=oracle_check,
            replay=replay,
            base_dir=suite_path.parent,
            simulator=simulator,
            subtypes=subtypes,
        )

    head = Table(title=escape(str(suite_path)), title_justify="left", show_header=False)
    head.add_row("sessions", str(summary.sessions))
    head.add_row("tasks", str(summary.tasks))
    head.add_row("tool entries / unique names", f"{summary.tools} / {summary.unique_tools}")
    head.add_row("malformed records", str(report.skipped_count))
    console.print(head)
    console.print(_count_table("Distribution", "task type", "n", summary.task_types))
    console.print(_count_table("Turn subtypes", "subtype", "n", summary.subtypes))
    console.print(_count_table("Sessions by instruction transitions", "transitions", "sessions", summary.transitions))

    errors = report.skipped_count + sum(p.severity is Severity.ERROR for p in problems)
    if report.skipped or problems:
        table = Table(title="Problems", title_justify="left")
        table.add_column("severity")
        table.add_column("where")
        table.add_column("problem")
        for exc in report.skipped:
            where = f"line {exc.line}" + (f", field {exc.field}" if exc.field else "")
            table.add_row("[red]error[/]", escape(where), escape(exc.message))
        for p in problems:
            style = "red" if p.severity is Severity.ERROR else "yellow"
            table.add_row(f"[{style}]{p.severity.value}[/]", escape(p.where), escape(p.message))
        console.print(table)
    if errors:
        console.print(f"[red]{errors} error(s)[/]")
        raise typer.Exit(1)
    console.print("[green]suite is valid[/]")
