"""``toolwild suite``: write a built-in suite to a file (to inspect it, or to evaluate another harness on it)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Annotated

import typer

from toolwild.cli._common import console, handled_errors
from toolwild.core.formats.wtb import write_wtb_suite
from toolwild.eval.validate import summarize_suite

suite_app = typer.Typer(help="Built-in suites.", no_args_is_help=True)


@suite_app.command("ledger")
def ledger(
    out: Annotated[Path, typer.Option(help="Where to write the suite (WildToolBench JSONL).")],
    sessions: Annotated[int, typer.Option(min=1, help="Number of sessions.")] = 64,
    seed: Annotated[int, typer.Option(help="Generation seed (same seed, same suite).")] = 0,
    like_published: Annotated[
        bool,
        typer.Option(
            "--like-published",
            help="The published design: each of the 256 orderings of single/multi/clarify/chat once per 256 sessions.",
        ),
    ] = False,
) -> None:
    """Generate the Beancount ledger suite (gold calls replayed on real ledgers) and write it."""
    with handled_errors():
        from toolwild.envs.domains.ledger.suite import build_ledger_suite

        with console.status("generating (gold calls replayed on beancount)..."):
            suite = build_ledger_suite(sessions, seed=seed, like_published=like_published)
        out.parent.mkdir(parents=True, exist_ok=True)
        write_wtb_suite(suite, out)
    summary = summarize_suite(suite)
    types = ", ".join(f"{k} {v}" for k, v in sorted(summary.task_types.items()))
    coarse = Counter(t.type.coarse.value for s in suite.sessions for t in s.tasks)
    buckets = ", ".join(f"{k}: {summary.transitions[k]}" for k in sorted(summary.transitions))
    console.print(f"{summary.sessions} sessions, {summary.tasks} tasks ({types}); transitions {buckets}")
    console.print("coarse types: " + ", ".join(f"{k} {v}" for k, v in sorted(coarse.items())))
    console.print(f"distinct type orderings: {len({tuple(t.type.coarse for t in s.tasks) for s in suite.sessions})}")
    console.print(f"written to {out}")
