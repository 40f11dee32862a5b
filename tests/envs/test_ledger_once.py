"""Ledgers parsed once (issue #34): the start-up check's load is the first episode's, a write is checked without
loading the whole ledger again, and what is worked out per loaded ledger follows every write.

The splice (:mod:`toolwild.envs.domains.ledger.revise`) must be invisible: after every write of a long random
sequence, on ledgers with ids and without, with includes, repeated transactions and balance assertions, the
ledger the episode holds equals a full load of its files from disk, entry for entry, and the splice's verdict on
every write (new ledger or problems) equals that of loading the new files in full.
"""

from __future__ import annotations

import datetime as dt
import gc
import random
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from beancount.core import data, inventory

from toolwild.envs.domains.ledger import LedgerEpisode, generate_ledger, ledger_environment
from toolwild.envs.domains.ledger import book as book_module
from toolwild.envs.domains.ledger import revise as revise_module
from toolwild.envs.domains.ledger.address import id_number
from toolwild.envs.domains.ledger.book import LoadedLedger, gc_paused, load_tree
from toolwild.envs.domains.ledger.canonical import canonical_state, canonical_transactions
from toolwild.envs.domains.ledger.edit import appending, raw_at, removing
from toolwild.envs.domains.ledger.files import split_lines
from toolwild.envs.domains.ledger.index import balance, postings
from toolwild.envs.domains.ledger.money import format_number
from toolwild.envs.domains.ledger.seed import CHECKING, CREDIT_CARD

EXPENSES = ["Expenses:Food:Groceries", "Expenses:Food:Restaurants", "Expenses:Transport", "Expenses:Shopping"]


# ---------------------------------------------------------------------------------------------------- helpers
def _same(got: LoadedLedger, fresh: LoadedLedger) -> None:
    """``got`` (made by a splice, or renamed from another load) is what a full load gave: ``fresh``."""
    assert got.errors == fresh.errors
    assert got.files == fresh.files
    assert got.entries == fresh.entries  # the same entries in the same order, line numbers and ids included
    assert got.written == fresh.written
    assert got.addresses.primary == fresh.addresses.primary
    assert got.addresses.repeated_ids == fresh.addresses.repeated_ids
    assert sorted(a for _, a in got.addresses.by_id) == sorted(a for _, a in fresh.addresses.by_id)
    assert got.addresses.aliases() == fresh.addresses.aliases()
    assert got._by_id == fresh._by_id
    assert got.auto_opened == fresh.auto_opened
    assert got.tree is not None and fresh.tree is not None
    assert {n: p.entries for n, p in got.tree.parses.items()} == {n: p.entries for n, p in fresh.tree.parses.items()}
    assert got.options["include"] == fresh.options["include"]
    # what the ledger worked out and a write carried over
    assert got.transactions == fresh.transactions
    assert canonical_state(got) == canonical_transactions(fresh.transactions)
    assert got.highest_id_number() == fresh.highest_id_number()
    assert got.open_accounts() == fresh.open_accounts()
    for key, kinds in [("opens", data.Open | data.Close), ("balances", data.Balance)]:
        if key in got.memo:  # the directives the checks of the next write look at: the ledger's own
            assert got.memo[key] == [e for e in fresh.entries if isinstance(e, kinds)]
            own = [e for e in got.entries if isinstance(e, kinds)]
            assert all(a is b for a, b in zip(got.memo[key], own, strict=True))
    for name, text in fresh.files.items():
        assert got.lines(name) == split_lines(text)
        assert got.line_endings(name) == (text.count("\r\n"), text.count("\n"))
        assert got.newline(name) == fresh.newline(name)
    index = postings(got)
    for account, per in postings(fresh).by_account.items():
        for currency, series in per.items():
            assert sorted(
                zip(index.by_account[account][currency].dates, index.by_account[account][currency].amounts, strict=True)
            ) == sorted(zip(series.dates, series.amounts, strict=True))


def _warm(ledger: LoadedLedger) -> None:
    """Work out everything a write carries over, so that the carrying is what is tested."""
    canonical_state(ledger)
    postings(ledger)
    ledger.highest_id_number()
    ledger.open_accounts()
    ledger.addresses.aliases()
    for name in ledger.files:
        ledger.line_endings(name)


class _Both:
    """Every write decided twice: by the splice and by loading the new files in full; both must agree."""

    def __init__(self) -> None:
        self.spliced = self.rejected = self.full = 0
        self._spliced = revise_module._spliced

    def __call__(self, loaded: LoadedLedger, splice: Any, lines: list[str], text: str) -> LoadedLedger | None:
        fast = self._spliced(loaded, splice, lines, text)
        if fast is None:
            self.full += 1
            return None
        slow = revise_module._reloaded(loaded, splice.file, lines, text, True)
        if fast.ok:
            self.spliced += 1
            _warm(slow)
            _same(fast, slow)
        else:
            self.rejected += 1
            assert fast.errors == slow.errors and fast.errors
        return fast


@pytest.fixture
def both(monkeypatch) -> _Both:
    checker = _Both()
    monkeypatch.setattr(revise_module, "_spliced", checker)
    return checker


def _simple(ledger: LoadedLedger) -> list[data.Transaction]:
    return [t for t in ledger.transactions if len(t.postings) == 2 and t.meta.get("id")]


def _random_writes(episode: LedgerEpisode, rng: random.Random, n: int, *, first: dt.date, last: dt.date) -> int:
    """``n`` random writes (adds, amends, recategorisations, deletes anywhere); after each the episode's ledger
    is compared with a full load of its files. Returns how many succeeded."""
    done = 0
    days = (last - first).days
    for i in range(n):
        ledger = episode.ledger()
        _warm(ledger)
        pick = rng.random()
        day = (first + dt.timedelta(days=rng.randrange(days + 1))).isoformat()
        targets = _simple(ledger)
        target = rng.choice(targets)
        tid = target.meta["id"]
        if pick < 0.35:
            args: dict[str, Any] = {
                "date": day,
                "payee": rng.choice(["Corner Shop", "Whole Foods", f"Stall {i}"]),
                "narration": "Test",
                "amount": rng.choice([4.5, 12.0, 250.0, -3.25, 99.99]),
                "expense_account": rng.choice(EXPENSES),
            }
            if rng.random() < 0.3:
                args["payment_account"] = CREDIT_CARD
            observation = episode.call("add_transaction", args)
        elif pick < 0.55:
            change = rng.choice([{"amount": rng.choice([1.0, 77.7, 1234.5])}, {"date": day}, {"payee": "Renamed"}])
            observation = episode.call("amend_transaction", {"transaction_id": tid, **change})
        elif pick < 0.7:
            observation = episode.call("recategorize", {"transaction_id": tid, "new_account": rng.choice(EXPENSES)})
        else:
            observation = episode.call("delete_transaction", {"transaction_id": tid})
        done += observation.ok
        fresh = load_tree(episode.path, allow_outside_includes=True)
        _warm(fresh)
        _same(episode.ledger(), fresh)
    return done


def _strip_ids(text: str) -> str:
    return re.sub(r'^  id: "txn-\d+"\n', "", text, flags=re.M)


def _with_checks(text: str) -> str:
    """The generated ledger with a balance assertion on the checking account at the start of every month (the
    amounts a full load computes), so writes before them are checked against them."""
    ledger = LedgerEpisode(ledger_text=text).ledger()
    lines = []
    for month in range(2, 5):
        when = dt.date(2024, month, 1)
        total = sum(
            (p.units.number for t in ledger.transactions if t.date < when for p in t.postings if p.account == CHECKING),
            Decimal(0),
        )
        lines.append(f"{when.isoformat()} balance {CHECKING} {total} USD")
    return text + "\n" + "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------------- the splice
@pytest.mark.parametrize("seed", [0, 1])
def test_random_writes_on_a_generated_ledger_equal_full_loads(both, seed):
    episode = LedgerEpisode(seed=seed)
    rng = random.Random(seed)
    ok = _random_writes(episode, rng, 60, first=dt.date(2024, 1, 2), last=dt.date(2024, 4, 20))
    assert ok >= 30
    assert both.spliced >= 30 and both.full <= both.spliced // 4  # the splice is the rule, not the exception


def test_random_writes_on_books_without_ids_with_assertions_equal_full_loads(both):
    """Content addresses (a write renames what it changes), identical transactions, and balance assertions that
    many writes break: every verdict, accepted or rejected, is the full load's."""
    repeated = '2024-02-10 * "Twin" "Same"\n  Expenses:Shopping  5.00 USD\n  Assets:Bank:Checking  -5.00 USD\n'
    text = _with_checks(_strip_ids(generate_ledger(3)) + "\n" + repeated + "\n" + repeated)
    episode = LedgerEpisode(ledger_text=text)
    rng = random.Random(7)
    for _ in range(40):
        ledger = episode.ledger()
        _warm(ledger)
        target = rng.choice([t for t in ledger.transactions if len(t.postings) == 2])
        address = target.meta["id"]
        pick = rng.random()
        day = (dt.date(2024, 1, 2) + dt.timedelta(days=rng.randrange(100))).isoformat()
        if pick < 0.4:
            args = {"date": day, "payee": "Twin", "narration": "Same", "amount": rng.choice([5.0, 6.0])}
            observation = episode.call("add_transaction", {**args, "expense_account": "Expenses:Shopping"})
        elif pick < 0.7:
            observation = episode.call("amend_transaction", {"transaction_id": address, "amount": 3.0})
        else:
            observation = episode.call("delete_transaction", {"transaction_id": address})
        assert observation.ok or observation.error is not None
        fresh = load_tree(episode.path)
        _warm(fresh)
        _same(episode.ledger(), fresh)
    assert both.spliced >= 10 and both.rejected >= 1


def test_writes_to_an_included_file_equal_full_loads(both, tmp_path):
    """Two files: a write to either is spliced, except a removal above entries when the other file has entries
    (moved lines could pass the other file's in beancount's sort); that one is loaded in full."""
    text = generate_ledger(2)
    head, _, body = text.partition("\n\n")
    blocks = body.split("\n\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "more.beancount").write_text("\n\n".join(blocks[len(blocks) // 2 :]), encoding="utf-8")
    main = tmp_path / "books.beancount"
    main.write_text(head + '\ninclude "sub/more.beancount"\n\n' + "\n\n".join(blocks[: len(blocks) // 2]) + "\n")
    episode = LedgerEpisode(ledger_path=main)
    ok = _random_writes(episode, random.Random(3), 40, first=dt.date(2024, 1, 2), last=dt.date(2024, 4, 20))
    assert ok >= 20 and both.spliced >= 15 and both.full >= 1


def test_rejected_writes_say_what_a_full_load_says(both):
    """An account not open, a currency the account does not allow, a date before the account opened, a balance
    assertion the change breaks: rejected by the splice with the full load's messages, nothing written."""
    episode = LedgerEpisode(ledger_text=_with_checks(generate_ledger(0)))
    before = episode.text()
    base = {"payee": "X", "narration": "y", "amount": 10.0, "expense_account": "Expenses:Shopping"}
    calls = [
        ("add_transaction", {**base, "date": "2024-03-10", "expense_account": "Expenses:Nowhere"}),
        ("add_transaction", {**base, "date": "2024-03-10", "currency": "EUR"}),
        ("add_transaction", {**base, "date": "2023-12-01"}),
        ("add_transaction", {**base, "date": "2024-01-15"}),  # paid from checking before two assertions
    ]
    txn = next(t for t in _simple(episode.ledger()) if t.date < dt.date(2024, 2, 1) and CHECKING in str(t.postings))
    calls.append(("amend_transaction", {"transaction_id": txn.meta["id"], "amount": 1.0}))
    for name, arguments in calls:
        observation = episode.call(name, arguments)
        assert not observation.ok and observation.error.kind == "rejected", (name, arguments)
    assert episode.text() == before
    assert both.rejected == len(calls) and both.full == 0


def test_a_removal_in_the_middle_moves_the_lines_below(both):
    episode = LedgerEpisode(seed=4)
    ledger = episode.ledger()
    _warm(ledger)
    middle = _simple(ledger)[len(_simple(ledger)) // 2]
    assert episode.call("delete_transaction", {"transaction_id": middle.meta["id"]}).ok
    assert both.spliced == 1 and both.full == 0
    after = episode.ledger()
    assert after.memo["last_line:" + str(episode.path)] < ledger.memo["last_line:" + str(episode.path)]
    fresh = load_tree(episode.path)
    _warm(fresh)
    _same(after, fresh)


def test_a_ledger_with_costs_is_loaded_again_in_one_parse(both, monkeypatch, tmp_path):
    """Booking at cost reads other transactions: no splice; the changed file alone is parsed again."""
    text = generate_ledger(0) + (
        "\n2024-01-01 open Assets:Broker\n2024-01-01 open Equity:Void\n"
        '2024-01-05 * "Buy"\n  Assets:Broker  2 HOOL {100.00 USD}\n  Equity:Void  -200.00 USD\n'
    )
    main = tmp_path / "books.beancount"
    main.write_text(text, encoding="utf-8")
    (tmp_path / "other.beancount").write_text("2024-01-01 open Assets:Other USD\n", encoding="utf-8")
    with main.open("a", encoding="utf-8") as fh:
        fh.write('\ninclude "other.beancount"\n')
    episode = LedgerEpisode(ledger_path=main)
    parsed: list[str] = []
    parse_file = book_module._parse_file
    monkeypatch.setattr(
        book_module, "_parse_file", lambda name, *a, **k: parsed.append(name) or parse_file(name, *a, **k)
    )
    args = {"date": "2024-03-01", "payee": "X", "narration": "y", "amount": 3.0, "expense_account": "Expenses:Shopping"}
    assert episode.call("add_transaction", args).ok
    assert both.full == 1 and both.spliced == 0
    assert parsed == [str(episode.path)]  # one file parsed again; the included one was reused
    fresh = load_tree(episode.path)
    _warm(fresh)
    _same(episode.ledger(), fresh)


# ---------------------------------------------------------------------------------------------------- loaded once
def _books(tmp_path: Path) -> Path:
    """A user's books: the generated ledger without ids, split over a main file and an included one."""
    text = _strip_ids(generate_ledger(5))
    head, _, body = text.partition("\n\n")
    blocks = body.split("\n\n")
    (tmp_path / "books" / "2024").mkdir(parents=True)
    (tmp_path / "books" / "2024" / "q1.beancount").write_text("\n\n".join(blocks[:60]) + "\n", encoding="utf-8")
    main = tmp_path / "books" / "main.beancount"
    main.write_text(head + '\ninclude "2024/*.beancount"\n\n' + "\n\n".join(blocks[60:]) + "\n", encoding="utf-8")
    return main


def test_the_start_up_checks_load_is_the_first_episodes(monkeypatch, tmp_path):
    main = _books(tmp_path)
    parsed: list[str] = []
    parse_file = book_module._parse_file
    monkeypatch.setattr(
        book_module, "_parse_file", lambda name, *a, **k: parsed.append(name) or parse_file(name, *a, **k)
    )
    backend = ledger_environment(ledger=main)
    episode = backend.reset(seed=0)
    assert episode.call("get_balance", {"account": "Expenses"}).ok
    assert episode.call("find_transactions", {"payee": "whole foods"}).ok
    assert len(parsed) == 2  # the check parsed each file once; the episode's copy reused it
    assert episode.path != main and main.parent not in episode.path.parents
    _same(episode.ledger(), load_tree(episode.path))  # renamed, it is the copy's own load (2 more parses here)
    second = backend.reset(seed=0)
    assert len(parsed) == 6  # a later episode loads once
    assert second.call("get_balance", {"account": "Expenses"}).ok
    assert len(parsed) == 6
    assert second.state() == episode.state()
    episode.close()
    second.close()


def test_a_file_changed_after_the_check_is_read_again(tmp_path):
    main = _books(tmp_path)
    backend = ledger_environment(ledger=main)
    main.write_text(
        main.read_text(encoding="utf-8") + '\n2024-04-30 * "Late" "entry"\n  Expenses:Shopping  1.00 USD\n'
        "  Assets:Bank:Checking  -1.00 USD\n",
        encoding="utf-8",
    )
    episode = backend.reset(seed=0)
    assert episode.call("find_transactions", {"payee": "late"}).result["count"] == 1
    episode.close()


def test_reads_and_state_after_the_first_do_not_parse(monkeypatch):
    episode = LedgerEpisode(seed=0)
    first = episode.state()
    assert episode.call("get_balance", {"account": "Expenses:Food"}).ok

    def no_parsing(*_a: Any, **_k: Any) -> None:
        raise AssertionError("parsed again")

    monkeypatch.setattr(book_module, "parse_tree", no_parsing)
    monkeypatch.setattr(book_module.parser, "parse_string", no_parsing)
    for name, args in [("get_balance", {"account": "Assets"}), ("list_accounts", {}), ("find_transactions", {})]:
        assert episode.call(name, args).ok
    assert episode.state() == first
    assert episode.state()["ledger"] is not first["ledger"]  # a new list each time: changing it changes no cache


def test_another_writers_change_is_seen_through_the_stamps(tmp_path):
    """Write-through: a change to an included file by someone else is seen by the next read (a stat tells)."""
    main = _books(tmp_path)
    episode = LedgerEpisode(ledger_path=main, write_through=True)
    assert episode.call("find_transactions", {"payee": "Someone"}).result["count"] == 0
    q1 = main.parent / "2024" / "q1.beancount"
    q1.write_text(
        q1.read_text(encoding="utf-8") + '\n2024-01-31 * "Someone" "else"\n  Expenses:Shopping  2.00 USD\n'
        "  Assets:Bank:Checking  -2.00 USD\n",
        encoding="utf-8",
    )
    assert episode.call("find_transactions", {"payee": "Someone"}).result["count"] == 1
    _same(episode.ledger(), load_tree(main))


# ---------------------------------------------------------------------------------------------------- reads
def _walk(ledger: LoadedLedger, account: str, as_of: dt.date | None) -> dict[str, str]:
    """get_balance's balances as every posting walked into an Inventory gives them (the tool before its index)."""
    total = inventory.Inventory()
    for txn in ledger.transactions:
        if as_of is not None and txn.date > as_of:
            continue
        for posting in txn.postings:
            a, q = posting.account.lower(), account.lower()
            if a == q or a.startswith(q + ":"):
                total.add_amount(posting.units)
    return {pos.units.currency: format_number(pos.units.number) for pos in total if pos.units.number}


@pytest.mark.parametrize("extra", ["", "eur"])
def test_balances_from_the_index_are_the_walks(extra):
    text = generate_ledger(6)
    if extra:  # a second currency in one account: the walk decides (the Inventory's order is shown)
        text += (
            "\n2024-01-01 open Expenses:Abroad\n2024-01-01 open Equity:Abroad\n"
            '2024-03-05 * "Cafe" "abroad"\n  Expenses:Abroad  4.20 EUR\n  Equity:Abroad  -4.20 EUR\n'
            '2024-03-06 * "Cafe" "home"\n  Expenses:Abroad  1.00 USD\n  Assets:Bank:Checking  -1.00 USD\n'
        )
    episode = LedgerEpisode(ledger_text=text)
    index = postings(episode.ledger())
    assert balance(index, ["Expenses:Food:Groceries"], None) is not None  # the index answers these
    assert (balance(index, ["Expenses:Abroad"], None) is None) == bool(extra)  # and leaves a mix to the walk
    for step in range(4):
        ledger = episode.ledger()
        for account in ["Expenses", "Expenses:Food", "Assets", CHECKING, "Equity", "Expenses:Abroad", "Income"]:
            for as_of in [None, dt.date(2024, 1, 31), dt.date(2024, 3, 15)]:
                args = {"account": account, **({"date": as_of.isoformat()} if as_of else {})}
                observation = episode.call("get_balance", args)
                if observation.ok:
                    assert observation.result["balances"] == (_walk(ledger, account, as_of) or {"USD": "0.00"})
        payment = {"payment_account": CREDIT_CARD} if step % 2 else {}
        args = {"date": f"2024-03-{11 + step}", "payee": "P", "narration": "n", "amount": 3.33 * (step + 1)}
        assert episode.call("add_transaction", {**args, "expense_account": EXPENSES[step], **payment}).ok


# ---------------------------------------------------------------------------------------------------- pieces
def _old_append(text: str, block: str, newline: str = "\n") -> tuple[str, int]:
    """``append_block`` as it was before writes became splices (the reference)."""
    if not text:
        return block, 1
    body = text if text.endswith("\n") else text + newline
    if not body.endswith(("\n\n", "\n\r\n")):
        body += newline
    return body + block, body.count("\n") + 1


@pytest.mark.parametrize(
    "text", ["", "a", "a\n", "a\n\n", "a\r\n", "a\r\n\r\n", "\n", "x\n  y\n", "x\n\n\n", "p\r\nq", "\r\n"]
)
def test_appending_is_what_appending_was(text):
    block = '2024-01-01 * "x"\n  A  1 USD\n  B\n'
    lines = split_lines(text)
    splice, line = appending("f", lines, block)
    assert ("".join(splice.apply(lines)), line) == _old_append(text, block)
    assert revise_module._new_text(text, lines, splice) == "".join(splice.apply(lines))


def test_splices_of_a_change_and_a_removal_rebuild_the_text():
    text = generate_ledger(0)
    ledger = LedgerEpisode(ledger_text=text).ledger()
    lines = split_lines(text)
    for txn in list(ledger.written.values())[::17]:
        splice = removing("f", lines, raw_at(lines, txn))
        assert revise_module._new_text(text, lines, splice) == "".join(splice.apply(lines))


@pytest.mark.parametrize(
    "text", ["", "a", "a\n", "a\r\nb\r\n", "a\rb\n", "a\x0cb\n", "x\u2028y\nz", "\n\n", "a\r", "tab\x0b\n", "é\x85\n"]
)
def test_lines_are_split_where_beancount_counts_them(text):
    assert split_lines(text) == [part + "\n" for part in text.split("\n")[:-1]] + (
        [text.split("\n")[-1]] if text.split("\n")[-1] else []
    )


@pytest.mark.parametrize(
    "value", ["txn-0042", "txn-42\n", "txn-42\n\n", "txn-", "txn-4a", "txn-٣٤", "xtxn-1", "TXN-1", None, 7, "txn-1\r\n"]
)
def test_id_numbers_are_what_the_pattern_gave(value):
    match = re.match(r"^txn-(\d+)$", value) if isinstance(value, str) else None
    assert id_number(value) == (int(match.group(1)) if match else None)


def test_the_collector_pause_nests_and_restores():
    was = gc.isenabled()
    try:
        gc.enable()
        with gc_paused():
            assert not gc.isenabled()
            with gc_paused():
                assert not gc.isenabled()
            assert not gc.isenabled()
        assert gc.isenabled()
        gc.disable()
        with gc_paused():
            pass
        assert not gc.isenabled()  # off before, off after
    finally:
        (gc.enable if was else gc.disable)()
