"""Gold you can trust: the gold checks on the four suites issue #28 read, and on the published fixture.

Run: ``.venv/bin/python bench/gold.py`` (about 3-4 minutes on 2 cores; the own-books suite needs ``bean-example``
from beancount, the published row ../shared/fixtures).

- ``ledger`` (built-in): the default 64-session suite ``toolwild eval`` runs;
- ``ledger --like-published``: 256 sessions;
- own books: 32 sessions on ``bean-example --seed 11`` (``toolwild suite ledger --ledger``);
- ``inventory --like-published``: 256 sessions of the graph builder;
- the published WildToolBench sessions 0-4 (read, not generated).

Per suite it prints one markdown row (the README quotes them): tool tasks with an ungrounded identifier
(``core.grounding``), hidden-intent labels the values do not bear out (``core.hidden_intent``), ambiguous-reference
warnings (``core.references``), and how long generation took.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from toolwild.core.formats.wtb import load_wtb_suite
from toolwild.core.grounding import ungrounded_identifiers
from toolwild.core.hidden_intent import check_subtypes
from toolwild.core.references import ambiguous_references
from toolwild.core.session import Suite
from toolwild.synth.providers.ledger import build_ledger_suite
from toolwild.synth.sessions import SessionsConfig, load_handle, synth_sessions

FIXTURE = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "wildtoolbench"
FIXTURE_SUITE = FIXTURE / "sessions_0_4.reconstructed.jsonl"


def row(name: str, suite: Suite, seconds: float | None) -> str:
    tool_tasks = ungrounded = labels = warnings = 0
    for session in suite.sessions:
        tool_tasks += sum(1 for t in session.tasks if t.call_nodes)
        ungrounded += len({f.task_index for f in ungrounded_identifiers(session)})
        labels += len(check_subtypes(session))
        warnings += len(ambiguous_references(session))
    took = f"{seconds:.1f} s" if seconds is not None else "(read)"
    share = f"{ungrounded / tool_tasks:.0%}" if tool_tasks else "n/a"
    return f"| {name} | {len(suite.sessions)} | {ungrounded}/{tool_tasks} ({share}) | {labels} | {warnings} | {took} |"


def timed(make):
    start = time.perf_counter()
    suite = make()
    return suite, time.perf_counter() - start


def main() -> None:
    print(
        "| suite | sessions | tool tasks with an ungrounded identifier | label errors | ambiguity warnings | made in |"
    )
    print("|---|---|---|---|---|---|")
    suite, took = timed(lambda: build_ledger_suite(64))
    print(row("`ledger` (built-in, 64)", suite, took), flush=True)
    suite, took = timed(lambda: build_ledger_suite(256, like_published=True))
    print(row("`ledger --like-published`", suite, took), flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        books = Path(tmp) / "books.beancount"
        example = Path(sys.executable).parent / "bean-example"
        books.write_text(subprocess.run([str(example), "--seed", "11"], capture_output=True, text=True).stdout)
        suite, took = timed(lambda: build_ledger_suite(32, ledger=books))
        print(row("own books (`bean-example --seed 11`)", suite, took), flush=True)
    config = SessionsConfig(n_sessions=256, like_published=True)
    suite, took = timed(lambda: asyncio.run(synth_sessions([load_handle("inventory")], config, name="inv")).suite)
    print(row("`inventory --like-published`", suite, took), flush=True)
    if FIXTURE_SUITE.is_file():
        published, _ = load_wtb_suite(FIXTURE_SUITE)
        print(row("published WildToolBench sessions 0-4", published, None))


if __name__ == "__main__":
    main()
