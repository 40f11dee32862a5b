"""Your own books from the command line: ``--ledger FILE`` on ``env``, ``suite ledger`` and ``eval`` of its suite.

The ledger is one that beancount's own example generator writes (no ``id:`` metadata, several currencies, prices,
balance assertions, pads): the closest thing to a real user's books that needs no download.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from beancount.scripts import example
from typer.testing import CliRunner

from toolwild.cli.main import app


def run(*args: str):
    return CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def books(tmp_path_factory) -> Path:
    """A year of a fictional person's books, written by beancount's example generator (seeded)."""
    import datetime as dt
    import io
    import random

    folder = tmp_path_factory.mktemp("books")
    out = io.StringIO()
    random.seed(7)
    example.write_example_file(dt.date(1980, 5, 12), dt.date(2024, 1, 1), dt.date(2024, 12, 31), True, out)
    path = folder / "books.beancount"
    path.write_text(out.getvalue(), encoding="utf-8")
    return path


def test_env_call_reads_your_books_and_never_writes_them(books):
    before = sha(books)
    found = run("env", "call", "ledger", "find_transactions", "--ledger", books, "--args", '{"payee": "Chipotle"}')
    assert found.exit_code == 0, found.output
    result = json.loads(found.output)["result"]
    assert result["transactions"], "the example ledger has lunches at Chipotle"
    txn = result["transactions"][0]
    amend = json.dumps({"transaction_id": txn["id"], "payee": "Chipotle Mexican Grill"})
    changed = run("env", "call", "ledger", "amend_transaction", "--ledger", books, "--args", amend)
    assert changed.exit_code == 0, changed.output
    assert sha(books) == before, "the user's file must never be written by env call"


def test_ledger_option_is_refused_elsewhere_and_bad_books_are_named(tmp_path, books):
    other = run("env", "tools", "inventory", "--ledger", books)
    assert other.exit_code == 1 and "ledger environment only" in other.output
    broken = tmp_path / "broken.beancount"
    broken.write_text('plugin "no.such.plugin"\n\n2024-01-01 open Assets:Cash USD\n', encoding="utf-8")
    bad = run("env", "tools", "ledger", "--ledger", broken)
    assert bad.exit_code == 1
    assert "no.such.plugin" in bad.output and "Traceback" not in bad.output


def test_a_suite_on_your_books_is_evaluated_on_its_snapshot(tmp_path, books):
    suite = tmp_path / "mine.jsonl"
    made = run("suite", "ledger", "--ledger", books, "--out", suite, "--sessions", 4, "--verify")
    assert made.exit_code == 0, made.output
    snapshot = tmp_path / "mine.ledger" / books.name
    assert sha(snapshot) == sha(books)
    sessions = [json.loads(line) for line in suite.read_text().splitlines()]
    assert len(sessions) == 4
    for s in sessions:
        assert s["ledger_file"] == "mine.ledger/books.beancount"
        assert s["ledger_sha256"] == sha(books)
        assert "ledger_seed" not in s

    oracle = ("eval", "--suite", suite, "--agent", "oracle", "--history", "free", "--runs-dir", tmp_path / "runs")
    result = run(*oracle, "--name", "o")
    assert result.exit_code == 0, result.output
    metrics = json.loads((tmp_path / "runs" / "o" / "metrics.json").read_text())
    assert metrics["total_info"]["task"] == {"accuracy": 1.0, "correct_count": 16, "total_count": 16}

    # the snapshot changed behind the suite's back: its gold no longer applies, and eval says so before any call
    snapshot.write_text(snapshot.read_text() + "\n; edited\n", encoding="utf-8")
    stale = run(*oracle, "--name", "stale")
    assert stale.exit_code != 0 and "changed since the suite was made" in stale.output
