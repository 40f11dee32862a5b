"""``toolwild validate``: load a suite, count what it holds, and list every problem found."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from toolwild.cli._common import (
    PERTURB_KINDS,
    EncoderOption,
    PerturbSeedOption,
    console,
    handled_errors,
)
from toolwild.cli._quality import check_encoder, quality_encoder
from toolwild.cli._quality import share_of as _of
from toolwild.cli._quality import wording_rows as _wording_rows
from toolwild.core.quality import Example, SuiteQuality
from toolwild.errors import ConfigError, DataError

if TYPE_CHECKING:
    from toolwild.jobs.validate import SuiteCheck


def _count_table(title: str, key: str, value: str, counts: Mapping[Any, int]) -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column(key)
    table.add_column(value, justify="right")
    for name in sorted(counts):
        table.add_row(escape(str(name)), str(counts[name]))
    return table


MAX_PROBLEMS = 20
"""Problems printed by default; the count of the rest and the totals follow (``--max-problems 0`` prints all)."""


def quality_table(quality: SuiteQuality) -> Table:
    """Every quality figure of a suite (see :mod:`toolwild.core.quality`)."""
    table = Table(title="Quality", title_justify="left", show_header=False)
    for name, value in _wording_rows(quality, details=True):
        table.add_row(name, value)
    grounding = quality.grounding
    table.add_row(
        "tool tasks with an ungrounded identifier",
        _of(
            grounding.tasks,
            grounding.tool_tasks,
            grounding.tasks / grounding.tool_tasks if grounding.tool_tasks else None,
        ),
    )
    ambiguity = quality.ambiguity
    table.add_row("ambiguous references (checker)", f"{ambiguity.findings:,} in {ambiguity.tasks:,} task(s)")
    if ambiguity.generation_drops is not None:
        table.add_row("task attempts dropped as ambiguous_reference", f"{ambiguity.generation_drops:,}")
    if quality.subtypes:
        table.add_row("value-backed labels", "")
    for label, backed in quality.subtypes.items():
        share = backed.value_backed / backed.labels if backed.labels else None
        table.add_row(f"  {escape(label)}", _of(backed.value_backed, backed.labels, share))
    return table


def quality_examples(quality: SuiteQuality) -> Table | None:
    """The kept examples behind the figures (the most repeated turns, answers that fail, ambiguous references, copied
    spans, utterances alike in meaning), or None. Their texts are plain :class:`~rich.text.Text`: neither markup nor
    emoji codes, so a ledger account such as ``Assets:Bank:Checking`` is not shown with a bank emoji."""
    kinds: list[tuple[str, list[Example]]] = [
        ("answer", quality.answers.failures),
        ("ambiguous", quality.ambiguity.examples),
        ("ungrounded", quality.grounding.examples),
        ("copied span", quality.copied_description_spans.examples),
    ]
    pairs = quality.semantic.examples if quality.semantic is not None else []
    repeats = quality.repeated_turns.examples
    if not pairs and not repeats and not any(examples for _, examples in kinds):
        return None
    table = Table(title="Quality examples (up to 5 each)", title_justify="left")
    for column in ("kind", "where", "text", "why"):
        table.add_column(column)
    for repeat in repeats:
        table.add_row("repeated turn", "", Text(repeat.text), f"{repeat.count:,} times")
    for kind, examples in kinds:
        for ex in examples:
            where = f"{ex.session} task {ex.task}"
            why = "; ".join(ex.why[:3]) + (f" (+{len(ex.why) - 3} more)" if len(ex.why) > 3 else "")
            table.add_row(kind, Text(where), Text(ex.text), Text(why))
    for pair in pairs:
        a, b = pair.first, pair.second
        where = f"{a.session} task {a.task} / {b.session} task {b.task}"
        table.add_row("alike in meaning", Text(where), Text(f"{a.text} / {b.text}"), f"cosine {pair.cosine:.3f}")
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
            help="Check every hidden-intent label against the values (errors), and warn of references that more "
            'than one earlier value answers ("the same units" when 3 were asked for and 19 came back).',
        ),
    ] = False,
    grounding: Annotated[
        bool,
        typer.Option(
            "--grounding/--no-grounding",
            help="Check that every identifier a gold call passes (an account name, an id) is reachable by the agent: "
            "in the user's words, the context, a tool schema's values or an earlier observation (errors).",
        ),
    ] = False,
    quality: Annotated[
        bool,
        typer.Option(
            "--quality/--no-quality",
            help="Quality as training data: distinct user turns and utterances, the most repeated turn, distinct "
            "first four words, distinct-2/3, utterances alike in meaning and with a near-paraphrase (on --encoder), "
            "tool-task answers that pass the answer check, distinct chat answers, tasks per wild behaviour, ambiguous "
            "references, user turns copying a tool description, value-backed labels per subtype. Informational: the "
            "exit code does not depend on it.",
        ),
    ] = False,
    encoder: EncoderOption = "auto",
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
    perturb: Annotated[
        str | None,
        typer.Option(
            help=f"Check a perturbed copy instead (not written): {PERTURB_KINDS} (the oracle must still score 100%).",
            rich_help_panel="Perturbation",
        ),
    ] = None,
    perturb_seed: PerturbSeedOption = 0,
    perturb_model: Annotated[
        str | None,
        typer.Option(
            help="The model that rewords utterances for --perturb paraphrase (with --base-url, --cache).",
            rich_help_panel="Perturbation",
        ),
    ] = None,
    max_problems: Annotated[
        int,
        typer.Option(
            min=0, metavar="N", help="Problems listed (errors first); the totals count every one. 0: list all."
        ),
    ] = MAX_PROBLEMS,
) -> None:
    """Check a suite: counts, type/subtype distribution, malformed records and gold-DAG problems.

    Every record is read even after a bad one, so all problems are listed at once; the exit code is 1 when any
    record is malformed or any error-level problem is found. With --perturb the checks run on a perturbed copy.
    """
    from toolwild.jobs.validate import CheckOptions, check_suite  # what only this verb needs: loaded when it runs

    with handled_errors():
        if encoder != "auto" and not quality:
            raise ConfigError("--encoder measures the semantic diversity of --quality: give --quality too")
        if quality:
            check_encoder(encoder)
        text_encoder, missing = quality_encoder(encoder) if quality else (None, None)
        options = CheckOptions(
            oracle_check=oracle_check, replay=replay, subtypes=subtypes, grounding=grounding, env_model=env_model,
            base_url=base_url, cache=cache, perturb=perturb, perturb_seed=perturb_seed, perturb_model=perturb_model,
            quality=quality, encoder=text_encoder, encoder_missing=missing,
        )  # fmt: skip
        check = check_suite(suite_path, options)
    _print_summary(check)
    _print_problems(check, max_problems)
    if check.errors:
        also = f", {check.warnings:,} warning(s)" if check.warnings else ""
        console.print(f"[red]{check.errors:,} error(s)[/]{also}")
        raise typer.Exit(1)
    console.print("[green]suite is valid[/]" + (f" ({check.warnings:,} warning(s))" if check.warnings else ""))


def _print_summary(check: SuiteCheck) -> None:
    """What the suite holds: its counts, distributions, what was replayed, and the quality figures."""
    summary, suite = check.summary, check.suite
    head = Table(title=escape(str(check.path)), title_justify="left", show_header=False)
    head.add_row("sessions", str(summary.sessions))
    head.add_row("tasks", str(summary.tasks))
    head.add_row("tool entries / unique names", f"{summary.tools} / {summary.unique_tools}")
    head.add_row("malformed records", str(check.report.skipped_count))
    console.print(head)
    if check.perturbed is not None:
        console.print(escape(check.perturbed.summary()))
    console.print(_count_table("Distribution", "task type", "n", summary.task_types))
    console.print(_count_table("Turn subtypes", "subtype", "n", summary.subtypes))
    console.print(_count_table("Sessions by instruction transitions", "transitions", "sessions", summary.transitions))
    if check.replay_skips is not None:  # what was replayed, and why the rest was not: a replay that checked nothing
        done = [s for s in suite.sessions if s.id not in check.replay_skips]  # must not look clean
        calls = sum(len(t.call_nodes) for s in done for t in s.tasks)
        console.print(
            f"replay: {len(done)} of {len(suite.sessions)} session(s) replayed on their environments "
            f"({calls:,} gold calls)"
        )
        for reason, n in Counter(check.replay_skips.values()).most_common():
            console.print(f"  [yellow]{n} not replayed: they {reason}[/]")
    if check.quality is not None:
        console.print(quality_table(check.quality))
        examples = quality_examples(check.quality)
        if examples is not None:
            console.print(examples)


def _print_problems(check: SuiteCheck, max_problems: int) -> None:
    """Every problem (errors first, each kind in file order), the first ``max_problems`` of them (0: all)."""
    rows = [("error", _where(exc), exc.message) for exc in check.report.skipped]
    rows += [(p.severity.value, p.where, p.message) for p in check.problems]
    rows.sort(key=lambda row: row[0] != "error")  # stable: errors first, each kind in file order
    if not rows:
        return
    shown = rows if max_problems == 0 else rows[:max_problems]
    title = "Problems" if len(shown) == len(rows) else f"Problems (the first {len(shown)} of {len(rows):,})"
    table = Table(title=title, title_justify="left")
    table.add_column("severity")
    table.add_column("where")
    table.add_column("problem")
    for severity, where, message in shown:
        style = "red" if severity == "error" else "yellow"
        table.add_row(f"[{style}]{severity}[/]", escape(where), escape(message))
    console.print(table)
    if len(shown) < len(rows):
        console.print(f"… and {len(rows) - len(shown):,} more (--max-problems 0 lists every one)")


def _where(exc: DataError) -> str:
    """A skipped record's place: its line, and field when known (the file is the table's title)."""
    return f"line {exc.line}" + (f", field {exc.field}" if exc.field else "")
