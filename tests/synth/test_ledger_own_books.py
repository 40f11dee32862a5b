"""Ledger sessions made on a user's own books: beancount's example ledger (no ids, several currencies, prices,
balance assertions, pads) and a small euro ledger without a card. Every account, payee, amount and date comes from
the ledger; every gold call replays on a fresh copy of it, and the oracle scores 100% on it, live."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections import Counter
from datetime import date
from decimal import Decimal
from pathlib import Path

import pytest
from beancount import loader
from beancount.scripts.example import main as bean_example

from toolwild.core.trajectory import state_digest
from toolwild.core.verdict import ScoringMode
from toolwild.envs.domains.ledger.book import load_ledger_file
from toolwild.envs.domains.ledger.tools import LedgerEpisode
from toolwild.envs.python import PythonEnvironment
from toolwild.errors import ConfigError
from toolwild.eval.agents.oracle import OracleAgent
from toolwild.eval.scoring.session import score_session
from toolwild.eval.session import HistoryMode, run_session
from toolwild.synth.providers.ledger import build_ledger_suite
from toolwild.synth.providers.ledger.own_books import profile_of

N = 16
REF = "books/example.beancount"
_ACCOUNT_ARGUMENTS = ("account", "category", "expense_account", "payment_account", "new_account", "prefix")


@pytest.fixture(scope="module")
def books(tmp_path_factory) -> Path:
    """A year of beancount's own example ledger (seeded: the same file every run)."""
    path = tmp_path_factory.mktemp("books") / "example.beancount"
    args = ["--seed", "3", "--date-begin", "2024-01-01", "--date-end", "2024-12-31", "-o", str(path)]
    bean_example.main(args=args, standalone_mode=False)
    return path


@pytest.fixture(scope="module")
def digest(books) -> str:
    return hashlib.sha256(books.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def suite(books, digest):
    made = build_ledger_suite(N, seed=0, ledger=books, ledger_ref=REF)
    assert hashlib.sha256(books.read_bytes()).hexdigest() == digest  # making sessions never writes the user's file
    return made


@pytest.fixture(scope="module")
def ledger(books):
    entries, errors, options = loader.load_file(str(books))
    assert errors == []
    return entries, options


def _payees(entries) -> set[str]:
    return {e.payee for e in entries if hasattr(e, "postings") and e.payee}


def _open(entries) -> set[str]:
    return {e.account for e in entries if type(e).__name__ == "Open"}


def _names_an_open_account(value: str, opened: set[str]) -> bool:
    """An open account, or a parent of one (a summary over "Expenses:Food")."""
    return any(a == value or a.startswith(value + ":") for a in opened) or value == ""


def _calls(session):
    for task in session.tasks:
        yield from task.call_nodes


def test_the_profile_reads_the_books(books, ledger):
    entries, _ = ledger
    profile = profile_of(load_ledger_file(books))
    assert profile.checking == "Assets:US:BofA:Checking"  # the bank account that pays for purchases
    assert profile.card == "Liabilities:US:Chase:Slate"  # the card that does
    assert profile.savings is None  # the example has no savings account: templates that need one offer nothing
    # the card by its last part too: "my Chase card" would leave an agent to guess among the bank's cards
    assert profile.nick(profile.card) == "Chase Slate card" and profile.the_nick(profile.card) == "the Chase Slate card"
    assert profile.today == max(e.date for e in entries if type(e).__name__ in ("Transaction", "Balance"))
    assert profile.receipts and {r.payee for r in profile.receipts} <= _payees(entries)
    everyone = _payees(entries)
    for payee in profile.findable_payees:  # a payee search for it finds only its own transactions
        assert not any(payee.casefold() in other.casefold() for other in everyone if other != payee)
    for source, fix in profile.recategorizations.items():
        assert {source, fix.target} <= _open(entries)
    # the accounts of the example allow only these currencies: no receipt may use another
    assert profile.currency == "USD" and "Expenses:Vacation" not in {r.account for r in profile.receipts}


def test_the_suite_is_whole_and_names_the_file(suite, digest, books):
    assert len(suite.sessions) == N  # build_ledger_suite raises on a lost session
    today = profile_of(load_ledger_file(books)).today
    for session in suite.sessions:
        assert "ledger_seed" not in session.extra
        assert session.extra["ledger_file"] == REF and session.extra["ledger_sha256"] == digest
        assert session.env_info.startswith(today.isoformat())
        assert session.environment == "ledger"


def test_accounts_payees_amounts_and_dates_come_from_the_books(suite, ledger):
    entries, _ = ledger
    opened, payees = _open(entries), _payees(entries)
    first = min(e.date for e in entries if type(e).__name__ == "Transaction")
    last = max(e.date for e in entries if type(e).__name__ in ("Transaction", "Balance"))
    paid: dict[tuple[str, str], list[Decimal]] = {}
    for e in entries:
        if type(e).__name__ == "Transaction" and e.payee and len(e.postings) == 2:
            for p in e.postings:
                paid.setdefault((e.payee, p.account), []).append(abs(p.units.number))
    adds = 0
    for session in suite.sessions:
        for node in _calls(session):
            args = node.action.arguments
            for name in _ACCOUNT_ARGUMENTS:
                if isinstance(args.get(name), str):
                    assert _names_an_open_account(args[name], opened), (session.id, node.name, args)
            for name in ("date", "start_date", "end_date"):
                if name in args:
                    assert first <= date.fromisoformat(args[name]) <= last, (session.id, node.name, args)
            if node.name == "add_transaction":  # a real shop, at a price that shop charged in that category
                adds += 1
                assert args["payee"] in payees, (session.id, args)
                amounts = paid[(args["payee"], args["expense_account"])]
                assert min(amounts) <= Decimal(str(args["amount"])) <= max(amounts), (session.id, args)
    assert adds >= N // 2, adds  # receipts are a large share of what users ask
    said = " ".join(f"{t.utterance} {t.gold[-1].observation}" for s in suite.sessions for t in s.tasks)
    assert "Whole Foods" not in said and "Assets:Bank:Checking" not in said  # nothing from the built-in ledger


def test_templates_that_need_a_missing_account_offer_nothing(suite):
    used = Counter(t for s in suite.sessions for t in s.extra["ledger_templates"])
    assert "sweep_to_savings" not in used  # no savings account
    assert "find_two_then_move" not in used  # no travel category that takes dollars
    assert len(used) >= 20, used  # still a wide mix
    for session in suite.sessions:
        for node in _calls(session):
            assert "Savings" not in str(node.action.arguments)


def test_edits_of_transactions_without_ids_use_the_address_the_books_give(suite):
    """The example has no ``id:`` metadata: the gold addresses a transaction by what a search or a write returned,
    and an edit's result gives the address later calls use."""
    seen: set[str] = set()
    edited = 0
    for session in suite.sessions:
        known: set[str] = set()
        for node in _calls(session):
            result = node.observation["result"]
            target = node.action.arguments.get("transaction_id")
            if target is not None:
                assert target in known, (session.id, node.name, target)  # never guessed
                edited += 1
                seen.add(target)
            if node.name == "find_transactions":
                known.update(row["id"] for row in result["transactions"])
            if isinstance(result, dict) and "transaction" in result:
                known.add(result["transaction"]["id"])
    assert edited >= 4


@pytest.fixture(scope="module")
def oracle_runs(suite, books, digest):
    """The oracle in the live loop (free history), every call executed on an episode started from the user's file."""
    environment = PythonEnvironment("ledger", LedgerEpisode, factory=lambda _seed: LedgerEpisode(ledger_path=books))

    async def run_all():
        return [
            await run_session(session, OracleAgent(), history=HistoryMode.FREE, environment=environment)
            for session in suite.sessions
        ]

    runs = asyncio.run(run_all())
    assert hashlib.sha256(books.read_bytes()).hexdigest() == digest  # episodes work on copies
    return runs


def test_every_gold_observation_is_what_the_books_answer(suite, oracle_runs):
    """Each gold call, executed on a fresh copy of the books in session order, gives the recorded observation."""
    executed = 0
    for session, trajectory in zip(suite.sessions, oracle_runs, strict=True):
        for task, ran in zip(session.tasks, trajectory.tasks, strict=True):
            gold = {f"call_{node.idx}": node.observation for node in task.call_nodes}
            for step in ran.steps:
                for call, observation in zip(step.tool_calls or [], step.observations or [], strict=True):
                    assert json.loads(observation) == gold[call.id], (session.id, call.name)
                    executed += 1
    assert executed >= 3 * N


@pytest.mark.parametrize("mode", list(ScoringMode))
def test_the_oracle_scores_100_percent_on_the_books(suite, oracle_runs, mode):
    for session, trajectory in zip(suite.sessions, oracle_runs, strict=True):
        verdict = score_session(session, trajectory, mode=mode)
        reasons = [t.error_reason for t in verdict.tasks]
        assert [t.label for t in verdict.tasks] == ["correct"] * 4, (session.id, reasons)
        assert all(t.state_match for t in verdict.tasks), session.id  # the ledger after each task is the expected one
        assert all(t.redundant_writes == 0 for t in verdict.tasks), session.id


# ------------------------------------------------------------------------------------------------ other books
_EURO = """option "operating_currency" "EUR"

2023-11-01 open Assets:Bank:Giro EUR
2023-11-01 open Expenses:Food:Groceries EUR
2023-11-01 open Expenses:Food:Restaurants EUR
2023-11-01 open Expenses:Transport EUR
2023-11-01 open Equity:Opening EUR

2023-11-01 * "Opening"
  Assets:Bank:Giro        3000.00 EUR
  Equity:Opening
"""


def _euro_books(tmp_path: Path) -> Path:
    """Three months of a euro ledger with one bank account, no card and no savings."""
    shops = [
        ("Edeka", "Groceries", "Expenses:Food:Groceries", (23.40, 71.15, 48.90)),
        ("Aldi Sued", "Weekly shop", "Expenses:Food:Groceries", (31.05, 54.70)),
        ("Trattoria Roma", "Dinner", "Expenses:Food:Restaurants", (38.50, 61.20, 44.00)),
        ("BVG", "Tickets", "Expenses:Transport", (9.40, 12.80)),
    ]
    lines = [_EURO]
    day = 3
    for month in (11, 12, 1):
        year = 2023 if month > 2 else 2024
        for payee, narration, account, amounts in shops:
            for amount in amounts:
                lines.append(
                    f'{year}-{month:02d}-{day:02d} * "{payee}" "{narration}"\n'
                    f"  {account}  {amount:.2f} EUR\n  Assets:Bank:Giro\n"
                )
                day = day % 26 + 1
    path = tmp_path / "euro.beancount"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def test_a_euro_ledger_without_a_card(tmp_path):
    path = _euro_books(tmp_path)
    profile = profile_of(load_ledger_file(path))
    assert (profile.checking, profile.card, profile.savings) == ("Assets:Bank:Giro", None, None)
    suite = build_ledger_suite(8, seed=1, ledger=path, ledger_ref="euro.beancount")
    for session in suite.sessions:
        episode = LedgerEpisode(ledger_path=path)
        try:
            for task in session.tasks:
                assert "$" not in task.utterance + str(task.gold[-1].observation)  # euros are said as euros
                for node in task.call_nodes:
                    assert "Liabilities" not in str(node.action.arguments)
                    observation = episode.call(node.name, node.action.arguments)
                    assert observation.model_dump(mode="json", include={"ok", "result"}) == node.observation
                assert state_digest(episode.state()) == task.expected_digest
        finally:
            episode.close()


def test_books_without_purchases_are_refused_with_the_reason(tmp_path):
    path = tmp_path / "cash.beancount"
    path.write_text(
        'option "operating_currency" "USD"\n2024-01-01 open Assets:Cash USD\n2024-01-01 open Equity:Opening USD\n'
        '2024-01-01 * "Opening"\n  Assets:Cash  100.00 USD\n  Equity:Opening\n',
        encoding="utf-8",
    )
    with pytest.raises(ConfigError, match="no purchase in USD is paid from an Assets or Liabilities account"):
        build_ledger_suite(2, ledger=path)
    with pytest.raises(ConfigError, match="no such file"):
        build_ledger_suite(2, ledger=tmp_path / "missing.beancount")
