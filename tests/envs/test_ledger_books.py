"""The ledger on a user's own books (issue #17): a real ledger made by beancount's example generator, includes,
plugins, CRLF files, ledgers without ids or with repeated ids, write-through, and many episodes at once."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import stat
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from pathlib import Path

import beanquery
import pytest
from beancount import loader
from beancount.core import data

from toolwild.envs.base import ToolErrorKind
from toolwild.envs.domains.ledger import (
    LedgerEpisode,
    copy_ledger_tree,
    default_payment_account,
    generate_ledger,
    ledger_environment,
    load_ledger,
    load_ledger_file,
)
from toolwild.envs.domains.ledger.query import json_value
from toolwild.envs.domains.ledger.seed import CHECKING
from toolwild.errors import ConfigError

BEAN_EXAMPLE = Path(sys.executable).parent / "bean-example"
CARD = "Liabilities:US:Chase:Slate"
NOTE = "  ; receipt kept"


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _check(path: Path) -> list[str]:
    """What bean-check says about a ledger file (beancount's own loader, no cache file written)."""
    _entries, errors, _options = loader._load([(str(path), True)], None, None, None)
    return [e.message for e in errors]


@pytest.fixture(scope="module")
def example(tmp_path_factory) -> Path:
    """Four months of books by beancount's example generator (no ids, several currencies, prices, costs, balance
    assertions), with the comments a person adds: one after each restaurant header and one inside it."""
    folder = tmp_path_factory.mktemp("books")
    path = folder / "example.beancount"
    subprocess.run(
        [str(BEAN_EXAMPLE), "--seed", "5", "--date-begin", "2024-01-01", "--date-end", "2024-05-01", "-o", str(path)],
        check=True,
        capture_output=True,
        timeout=60,
    )
    text = path.read_text(encoding="utf-8")
    text = re.sub(
        r'^(\d{4}-\d\d-\d\d \* "[^"\n]*" "Eating out[^"\n]*")$', rf"\1{NOTE}\n  ; split with Bill", text, flags=re.M
    )
    path.write_text(text, encoding="utf-8")
    assert _check(path) == []
    return path


def _latest_card_purchase(episode: LedgerEpisode) -> dict:
    """The last card purchase after the card's last balance assertion (its amount can change without breaking one)."""
    ledger = episode.ledger()
    asserted = max(e.date for e in ledger.entries if isinstance(e, data.Balance) and e.account == CARD)
    found = episode.call("find_transactions", {"account": CARD, "start_date": (asserted.isoformat())}).result
    purchases = [t for t in found["transactions"] if any(p["account"].startswith("Expenses") for p in t["postings"])]
    return purchases[-1]


def _bql(path: Path, query: str) -> list[list]:
    entries, _errors, options = loader._load([(str(path), True)], None, None, None)
    cursor = beanquery.connect("beancount:", entries=entries, errors=[], options=options).execute(query)
    return [[json_value(cell) for cell in row] for row in cursor.fetchall()]


def _diff(before: str, after: str) -> list[tuple[str, str]]:
    old, new = before.splitlines(keepends=True), after.splitlines(keepends=True)
    assert len(old) == len(new)
    return [(a, b) for a, b in zip(old, new, strict=True) if a != b]


# ---------------------------------------------------------------------------------------------------- a real ledger
def test_example_ledger_reads_match_beanquery(example):
    episode = LedgerEpisode(ledger_path=example)
    try:
        assert episode.path != example and episode.path.name == example.name
        for query in (
            "SELECT account, sum(position) AS total GROUP BY account ORDER BY account",
            "SELECT date, payee, narration, account, position WHERE account ~ '^Expenses:Food' ORDER BY date, payee",
            "SELECT currency, count(*) AS n GROUP BY currency ORDER BY currency",
        ):
            assert episode.call("run_query", {"bql": query}).result["rows"] == _bql(example, query)[:200], query
        for account, day in ((CARD, None), ("Assets:US:BofA:Checking", "2024-03-15"), ("Expenses:Food", None)):
            args = {"account": account, **({"date": day} if day else {})}
            balance = episode.call("get_balance", args).result["balances"]
            where = f"account ~ '^{account}(:|$)'" + (f" AND date <= {day}" if day else "")
            rows = _bql(example, f"SELECT currency, sum(number) WHERE {where} GROUP BY currency")
            assert balance == {cur: total for cur, total in rows}, account
        ids = [t["id"] for t in episode.state()["ledger"] if t["flag"] != "P"]
        assert len(ids) == len(set(ids)) > 100 and all(
            re.fullmatch(r"\d{4}-\d\d-\d\d-[0-9a-f]{6}(-\d+)?", i) for i in ids
        )
        assert episode.default_payment_account == "Assets:US:BofA:Checking"
    finally:
        episode.close()


def test_example_ledger_writes_keep_every_other_byte(example):
    original = _sha(example)
    episode = LedgerEpisode(ledger_path=example)
    try:
        target = _latest_card_purchase(episode)
        before = episode.text()
        amended = episode.call("amend_transaction", {"transaction_id": target["id"], "amount": 1234.5})
        assert amended.ok, amended.error
        assert amended.result["changed"] == ["amount"] and amended.result["previous_id"] == target["id"]
        changed = _diff(before, episode.text())
        assert len(changed) == 2  # the two posting lines; header, comments and every other line kept
        for old, new in changed:
            assert re.sub(r"-?[\d,.]+ USD", "N USD", old).replace(" ", "") == re.sub(
                r"-?[\d,.]+ USD", "N USD", new
            ).replace(" ", "")
            assert old.index(" USD") == new.index(" USD")  # the amounts stay right-aligned
        assert {p["amount"] for p in amended.result["transaction"]["postings"]} == {"1234.50", "-1234.50"}

        before = episode.text()
        moved = episode.call(
            "recategorize", {"transaction_id": amended.result["id"], "new_account": "Expenses:Food:Alcohol"}
        )
        assert moved.ok, moved.error
        [(old, new)] = _diff(before, episode.text())
        assert (
            old.replace(moved.result["old_account"], "X").split() == new.replace("Expenses:Food:Alcohol", "X").split()
        )
        assert old.index(" USD") == new.index(" USD")

        receipt = {
            "date": "2024-04-30",
            "payee": "Whole Foods",
            "narration": "Groceries",
            "amount": 42.1,
            "expense_account": "Expenses:Food:Groceries",
        }
        before = episode.text()
        added = episode.call("add_transaction", receipt)
        assert added.ok, added.error
        assert episode.text().startswith(before) and 'id: "' not in episode.text()[len(before) :]
        assert {p["account"] for p in added.result["transaction"]["postings"]} == {
            "Expenses:Food:Groceries",
            "Assets:US:BofA:Checking",  # the ledger's own usual payment account
        }
        snapshot = episode.path.read_bytes()
        again = episode.call("add_transaction", {**receipt, "narration": "again"})
        assert again.error.kind is ToolErrorKind.DUPLICATE and added.result["id"] in again.error.message
        early = episode.call("find_transactions", {"account": CARD, "end_date": "2024-01-31"}).result["transactions"]
        rejected = episode.call("amend_transaction", {"transaction_id": early[-1]["id"], "amount": 999})
        assert rejected.error.kind is ToolErrorKind.REJECTED and "Balance failed" in rejected.error.message
        assert episode.path.read_bytes() == snapshot
        assert NOTE in episode.text() and episode.text().count(NOTE) == example.read_text().count(NOTE)
        assert _check(episode.path) == []
    finally:
        episode.close()
    assert _sha(example) == original


def test_write_through_writes_only_validated_changes(example, tmp_path):
    books = tmp_path / "books.beancount"
    shutil.copyfile(example, books)
    books.chmod(0o640)
    episode = LedgerEpisode(ledger_path=books, write_through=True)
    try:
        assert episode.path == books
        untouched = books.read_bytes()
        bad = episode.call("add_transaction", {**_receipt(), "expense_account": "Expenses:Nope"})
        assert bad.error.kind is ToolErrorKind.REJECTED and books.read_bytes() == untouched
        target = _latest_card_purchase(episode)
        ok = episode.call("amend_transaction", {"transaction_id": target["id"], "amount": 77.01})
        assert ok.ok, ok.error
        assert books.read_bytes() != untouched and _check(books) == []
        assert stat.S_IMODE(books.stat().st_mode) == 0o640
        assert [p.name for p in tmp_path.iterdir()] == ["books.beancount"]  # no temp or lock file left beside it
        fresh = LedgerEpisode(ledger_path=books)
        assert any(t["id"] == ok.result["id"] for t in fresh.state()["ledger"])
        fresh.close()
    finally:
        episode.close()
    assert books.exists()


def _receipt(**overrides) -> dict:
    return {
        "date": "2024-04-30",
        "payee": "Corner Shop",
        "narration": "Snacks",
        "amount": 4.5,
        "expense_account": "Expenses:Food",
        **overrides,
    }


# ---------------------------------------------------------------------------------------------------- includes, plugins
def _tree(root: Path) -> Path:
    """books/main.beancount including a relative file, a file in a subfolder, and one outside its folder."""
    (root / "books" / "2024").mkdir(parents=True)
    (root / "shared").mkdir()
    (root / "shared" / "accounts.beancount").write_text(
        "2024-01-01 open Assets:Cash USD\n2024-01-01 open Expenses:Food USD\n2024-01-01 open Expenses:Fun USD\n"
    )
    (root / "books" / "2024" / "january.beancount").write_text(
        '2024-01-05 * "Deli" "Lunch"  ; paid cash\n  Expenses:Food        12.00 USD ; with soup\n  Assets:Cash\n'
    )
    main = root / "books" / "main.beancount"
    main.write_text(
        'option "operating_currency" "USD"\ninclude "../shared/accounts.beancount"\ninclude "2024/*.beancount"\n\n'
        '2024-01-02 * "Cafe" "Coffee"\n  Expenses:Food   3.50 USD\n  Assets:Cash\n'
    )
    return main


def test_relative_includes_resolve_against_the_ledger_folder_and_included_transactions_can_be_edited(
    tmp_path, monkeypatch
):
    main = _tree(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    originals = {p: p.read_bytes() for p in tmp_path.rglob("*.beancount")}
    episode = LedgerEpisode(ledger_path=Path(os.path.relpath(main)), allow_outside_includes=True)  # ../shared
    try:
        copy_root = episode.path.parent.parent
        assert episode.path == copy_root / "books" / "main.beancount"
        assert (copy_root / "shared" / "accounts.beancount").exists()
        deli = next(t for t in episode.state()["ledger"] if t["payee"] == "Deli")
        main_text = episode.text()
        amended = episode.call("amend_transaction", {"transaction_id": deli["id"], "amount": 15})
        assert amended.ok, amended.error
        assert episode.text() == main_text  # the included file was edited, not the main one
        january = (copy_root / "books" / "2024" / "january.beancount").read_text()
        assert january == (
            '2024-01-05 * "Deli" "Lunch"  ; paid cash\n  Expenses:Food        15.00 USD ; with soup\n  Assets:Cash\n'
        )
    finally:
        episode.close()
    assert {p: p.read_bytes() for p in tmp_path.rglob("*.beancount")} == originals
    # write-through edits the user's included file in place, and only it
    books = LedgerEpisode(ledger_path=main, write_through=True, allow_outside_includes=True)
    deli = next(t for t in books.state()["ledger"] if t["payee"] == "Deli")
    assert books.call("recategorize", {"transaction_id": deli["id"], "new_account": "Expenses:Fun"}).ok
    books.close()
    changed = [p for p in originals if p.read_bytes() != originals[p]]
    assert changed == [tmp_path / "books" / "2024" / "january.beancount"] and _check(main) == []


def test_copy_ledger_tree_keeps_the_layout(tmp_path):
    main = _tree(tmp_path / "user")
    (tmp_path / "user" / "books" / "docs").mkdir()
    text = main.read_text().replace(
        'option "operating_currency" "USD"\n', 'option "operating_currency" "USD"\noption "documents" "docs"\n'
    )
    main.write_text(
        text.replace('"../shared/accounts.beancount"', f'"{tmp_path / "user" / "shared" / "accounts.beancount"}"')
    )
    copied = copy_ledger_tree(main, tmp_path / "copy", allow_outside_includes=True)
    assert copied == tmp_path / "copy" / "books" / "main.beancount"
    assert (tmp_path / "copy" / "books" / "2024" / "january.beancount").read_bytes() == (
        tmp_path / "user" / "books" / "2024" / "january.beancount"
    ).read_bytes()
    assert 'include "../shared/accounts.beancount"' in copied.read_text()  # the absolute include now reads the copy
    assert _check(copied) == []  # the documents folder is still the user's, so the copy loads like the original


def test_unimportable_plugin_and_missing_include_are_named(tmp_path):
    plugin = tmp_path / "plugin.beancount"
    plugin.write_text('option "operating_currency" "USD"\nplugin "foo.bar"\n2024-01-01 open Assets:Cash USD\n')
    with pytest.raises(ConfigError) as caught:
        load_ledger_file(plugin)
    message = str(caught.value)
    assert 'plugin.beancount line 2: plugin "foo.bar" could not be imported' in message
    assert "No module named 'foo'" in message and "Traceback" not in message and "\n" not in message
    with pytest.raises(ConfigError, match=re.escape('plugin "foo.bar"')):
        ledger_environment(ledger=plugin)
    missing = tmp_path / "missing.beancount"
    missing.write_text('option "operating_currency" "USD"\n\ninclude "nowhere/x.beancount"\n')
    with pytest.raises(ConfigError, match=r'missing.beancount line 3: include "nowhere/x.beancount": no such file'):
        load_ledger_file(missing)
    with pytest.raises(ConfigError, match=re.escape('include "nowhere/x.beancount"')):
        LedgerEpisode(ledger_path=missing)
    with pytest.raises(ConfigError, match="no such file"):
        load_ledger_file(tmp_path / "absent.beancount")


def test_auto_accounts_writes_say_what_validation_means(tmp_path):
    path = tmp_path / "auto.beancount"
    path.write_text(
        'option "operating_currency" "USD"\nplugin "beancount.plugins.auto_accounts"\n\n'
        '2024-01-02 * "Cafe" "Coffee"\n  Expenses:Food   3.50 USD\n  Assets:Cash\n'
    )
    episode = LedgerEpisode(ledger_path=path)
    try:
        known = episode.call("add_transaction", _receipt(payment_account="Assets:Cash"))
        assert known.ok and "note" not in known.result
        typo = episode.call("add_transaction", _receipt(expense_account="Expenses:Fod", payment_account="Assets:Cash"))
        assert typo.ok, typo.error
        assert "Expenses:Fod was not open" in typo.result["note"] and "auto_accounts" in typo.result["note"]
    finally:
        episode.close()


# ---------------------------------------------------------------------------------------------------- text of the file
def test_crlf_file_stays_crlf(tmp_path):
    path = tmp_path / "windows.beancount"
    text = (
        'option "operating_currency" "USD"\n2024-01-01 open Assets:Cash USD\n2024-01-01 open Expenses:Food USD\n'
        '2024-01-01 open Expenses:Fun USD\n\n2024-01-02 * "Cafe" "Coffee" ; morning\n  Expenses:Food   3.50 USD\n'
        "  Assets:Cash\n"
    )
    path.write_bytes(text.replace("\n", "\r\n").encode())
    episode = LedgerEpisode(ledger_path=path, write_through=True)
    try:
        cafe = episode.state()["ledger"][0]["id"]
        added = episode.call("add_transaction", _receipt(payment_account="Assets:Cash"))
        assert added.ok, added.error
        calls = [
            ("amend_transaction", {"transaction_id": cafe, "amount": 4, "payee": "Blue Cafe", "date": "2024-01-03"}),
            ("recategorize", {"transaction_id": added.result["id"], "new_account": "Expenses:Fun"}),
        ]
        for name, args in calls:
            assert episode.call(name, args).ok
        raw = path.read_bytes()
        assert raw.count(b"\n") == raw.count(b"\r\n") > 10 and b"Blue Cafe" in raw and b"; morning" in raw
        deleted = episode.call("delete_transaction", {"transaction_id": episode.state()["ledger"][0]["id"]})
        assert deleted.ok
        raw = path.read_bytes()
        assert raw.count(b"\n") == raw.count(b"\r\n") and _check(path) == []
    finally:
        episode.close()


def test_in_place_edits_keep_layout(tmp_path):
    text = (
        'option "operating_currency" "USD"\n2024-01-01 open Assets:Bank USD\n2024-01-01 open Expenses:Rent USD\n'
        "2024-01-01 open Expenses:Home USD\n\n"
        "; the flat\n"
        '2024/02/01 * "Rent" ; monthly\n'
        '  note: "kept"\n'
        "  Expenses:Rent                  1,250.00 USD\n"
        '    ref: "posting meta"\n'
        "  Assets:Bank                   -1,250.00 USD  ; standing order\n"
    )
    path = tmp_path / "flat.beancount"
    path.write_text(text)
    episode = LedgerEpisode(ledger_path=path)
    try:
        rent = episode.state()["ledger"][0]["id"]
        obs = episode.call("amend_transaction", {"transaction_id": rent, "amount": 980, "payee": 'Land"lord'})
        assert obs.ok, obs.error
        assert episode.text() == text.replace(
            '"Rent" ; monthly', '"Landlord" "Rent" ; monthly'.replace("Landlord", 'Land\\"lord')
        ).replace("  1,250.00", "    980.00").replace(" -1,250.00", "   -980.00")
        moved = episode.call("recategorize", {"transaction_id": obs.result["id"], "new_account": "Expenses:Home"})
        assert moved.ok and "  Expenses:Home                    980.00 USD\n" in episode.text()
        dated = episode.call("amend_transaction", {"transaction_id": moved.result["id"], "date": "2024-02-02"})
        assert dated.ok and '2024/02/02 * "Land\\"lord" "Rent" ; monthly\n' in episode.text()
        assert episode.ledger().transactions[0].payee == 'Land"lord'
    finally:
        episode.close()


def test_a_layout_the_surgery_does_not_know_is_re_rendered(tmp_path):
    """A header without strings has no payee token to replace: the transaction is re-rendered by beancount's
    printer (its comment goes), every other line is kept, and the ledger still loads."""
    head = 'option "operating_currency" "USD"\n2024-01-01 open Assets:Bank USD\n2024-01-01 open Expenses:Rent USD\n'
    tail = '\n; keep me\n2024-02-02 * "Other" "Kept"\n  Expenses:Rent   1 USD ; kept too\n  Assets:Bank\n'
    path = tmp_path / "bare-header.beancount"
    path.write_text(head + "\n2024-02-01 *\n  Expenses:Rent   10 USD ; lost\n  Assets:Bank\n" + tail)
    episode = LedgerEpisode(ledger_path=path)
    try:
        first = episode.state()["ledger"][0]["id"]
        assert episode.call("amend_transaction", {"transaction_id": first, "payee": "Landlord"}).ok
        text = episode.text()
        assert text.startswith(head) and text.endswith(tail) and '2024-02-01 * "Landlord" ""\n' in text
        assert "; lost" not in text and _check(episode.path) == []
    finally:
        episode.close()


# ---------------------------------------------------------------------------------------------------- addresses
def test_transactions_without_ids_have_stable_content_addresses(tmp_path):
    header = 'option "operating_currency" "USD"\n2024-01-01 open Assets:Cash USD\n2024-01-01 open Expenses:Food USD\n'
    twice = '\n2024-01-02 * "Cafe" "Coffee"\n  Expenses:Food   3.50 USD\n  Assets:Cash\n'
    path = tmp_path / "plain.beancount"
    path.write_text(header + twice + twice + '\n2024-01-03 * "Deli" "Lunch"\n  Expenses:Food   9 USD\n  Assets:Cash\n')
    episode = LedgerEpisode(ledger_path=path)
    try:
        ids = [t["id"] for t in episode.state()["ledger"]]
        assert ids[1] == ids[0] + "-2" and len(set(ids)) == 3
        added = episode.call("add_transaction", _receipt(payment_account="Assets:Cash"))
        assert added.ok and added.result["id"].startswith("2024-04-30-") and "id:" not in episode.text()
        deli = ids[2]
        amended = episode.call("amend_transaction", {"transaction_id": deli, "amount": 10})
        new_id = amended.result["id"]
        assert amended.result["previous_id"] == deli and new_id != deli
        assert [t["id"] for t in episode.state()["ledger"]][:2] == ids[:2]  # edits elsewhere keep addresses
        assert episode.call("amend_transaction", {"transaction_id": deli, "amount": 11}).error.kind is (
            ToolErrorKind.NOT_FOUND
        )
        assert episode.call("delete_transaction", {"transaction_id": ids[1]}).ok
        assert episode.call("delete_transaction", {"transaction_id": ids[0]}).ok
        ids_in_bql = episode.call("run_query", {"bql": "SELECT DISTINCT entry_meta('id') AS id"}).result["rows"]
        assert sorted(r[0] for r in ids_in_bql) == sorted([added.result["id"], new_id])
    finally:
        episode.close()


def test_repeated_user_ids_load_and_are_addressable(tmp_path):
    text = (
        'option "operating_currency" "USD"\n2024-01-01 open Assets:Cash USD\n2024-01-01 open Expenses:Food USD\n'
        '\n2024-01-02 * "Cafe" "Coffee"\n  id: "r1"\n  Expenses:Food   3.50 USD\n  Assets:Cash\n'
        '\n2024-01-03 * "Deli" "Lunch"\n  id: "r1"\n  Expenses:Food   9.00 USD\n  Assets:Cash\n'
        '\n2024-01-04 * "Bar" "Beer"\n  id: "b7"\n  Expenses:Food   6.00 USD\n  Assets:Cash\n'
    )
    assert loader.load_string(text)[1] == []  # bean-check accepts it, so must we
    path = tmp_path / "ids.beancount"
    path.write_text(text)
    episode = LedgerEpisode(ledger_path=path)
    try:
        cafe, deli, bar = episode.state()["ledger"]
        assert bar["id"] == "b7" and cafe["id"].startswith("2024-01-02-") and deli["id"].startswith("2024-01-03-")
        ambiguous = episode.call("amend_transaction", {"transaction_id": "r1", "amount": 5})
        assert ambiguous.error.kind is ToolErrorKind.NOT_FOUND
        assert cafe["id"] in ambiguous.error.message and deli["id"] in ambiguous.error.message
        assert episode.call("amend_transaction", {"transaction_id": deli["id"], "amount": 5}).ok
        assert episode.text().count('id: "r1"') == 2  # the user's ids stay as they were written
        # an address once handed out keeps working: b7 also answers to its content address
        alias = episode.ledger().addresses.aliases()
        assert episode.call("recategorize", {"transaction_id": next(iter(alias)), "new_account": "Expenses:Food"}).ok
        added = episode.call("add_transaction", _receipt(payment_account="Assets:Cash"))
        assert added.result["id"] == "txn-0001"  # every transaction here has an id, so the new one gets one too
    finally:
        episode.close()


# ---------------------------------------------------------------------------------------------------- payment default
def test_default_payment_account_comes_from_the_ledger(example, tmp_path):
    for seed in (0, 1, 2, 17, 99):
        assert default_payment_account(load_ledger(generate_ledger(seed))) == CHECKING
    assert default_payment_account(load_ledger_file(example)) == "Assets:US:BofA:Checking"
    bare = tmp_path / "bare.beancount"
    bare.write_text(
        'option "operating_currency" "USD"\n2024-01-01 open Assets:Cash USD\n2024-01-01 open Expenses:Food\n'
    )
    episode = LedgerEpisode(ledger_path=bare)
    try:
        assert episode.default_payment_account is None
        before = episode.path.read_bytes()
        obs = episode.call("add_transaction", _receipt())
        assert obs.error.kind is ToolErrorKind.INVALID_ARGUMENTS and "payment_account" in obs.error.message
        assert episode.path.read_bytes() == before
        assert episode.call("add_transaction", _receipt(payment_account="Assets:Cash")).ok
    finally:
        episode.close()


# ---------------------------------------------------------------------------------------------------- many episodes
def test_64_concurrent_episodes_on_one_user_ledger_stay_isolated(example):
    original = _sha(example)
    env = ledger_environment(ledger=example)
    episodes = [env.reset(seed=i) for i in range(64)]

    def work(i: int) -> str:
        episode = episodes[i]
        added = episode.call("add_transaction", _receipt(expense_account="Expenses:Food:Groceries", amount=i + 1))
        assert added.ok, added.error
        amended = episode.call("amend_transaction", {"transaction_id": added.result["id"], "amount": i + 1.25})
        assert amended.ok, amended.error
        return amended.result["id"]

    try:
        with ThreadPoolExecutor(max_workers=8) as pool:
            ids = list(pool.map(work, range(64)))
        assert len({e.path for e in episodes}) == 64
        for i, episode in enumerate(episodes):
            mine = [t for t in episode.state()["ledger"] if t["payee"] == "Corner Shop"]
            assert [t["id"] for t in mine] == [ids[i]]
            assert {p["amount"] for p in mine[0]["postings"]} == {f"{i + 1.25:.2f}", f"-{i + 1.25:.2f}"}
    finally:
        for episode in episodes:
            episode.close()
    assert all(not e.path.exists() for e in episodes) and _sha(example) == original


def test_concurrent_write_through_episodes_never_lose_a_write(tmp_path):
    path = tmp_path / "shared.beancount"
    path.write_text(
        'option "operating_currency" "USD"\n2024-01-01 open Assets:Cash USD\n2024-01-01 open Expenses:Food\n'
    )
    episodes = [LedgerEpisode(ledger_path=path, write_through=True) for _ in range(8)]

    def work(i: int) -> None:
        for k in range(3):
            obs = episodes[i].call("add_transaction", _receipt(amount=i * 10 + k + 1, payment_account="Assets:Cash"))
            assert obs.ok, obs.error

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(work, range(8)))
    for episode in episodes:
        episode.close()
    amounts = sorted(
        p.units.number for t in load_ledger_file(path).transactions for p in t.postings if p.units.number > 0
    )
    assert amounts == sorted(Decimal(i * 10 + k + 1) for i in range(8) for k in range(3))


def test_options_that_contradict_each_other_are_refused(tmp_path):
    path = tmp_path / "x.beancount"
    path.write_text('option "operating_currency" "USD"\n')
    with pytest.raises(ConfigError, match="not both"):
        LedgerEpisode(ledger_text="", ledger_path=path)
    with pytest.raises(ConfigError, match="ledger_path"):
        LedgerEpisode(write_through=True)
    with pytest.raises(ConfigError, match="give ledger"):
        ledger_environment(write_through=True)


def test_pad_entries_are_shown_but_only_written_transactions_are_addressed(tmp_path):
    path = tmp_path / "pad.beancount"
    path.write_text(
        'option "operating_currency" "USD"\n2024-01-01 open Assets:Cash USD\n2024-01-01 open Expenses:Food USD\n'
        "2024-01-01 open Equity:Opening-Balances\n\n2024-01-01 pad Assets:Cash Equity:Opening-Balances\n"
        "2024-01-02 balance Assets:Cash 100.00 USD\n\n"
        '2024-01-03 * "Cafe" "Coffee"\n  Expenses:Food   3.50 USD\n  Assets:Cash\n'
    )
    episode = LedgerEpisode(ledger_path=path)
    try:
        padding, cafe = episode.state()["ledger"]
        assert padding["flag"] == "P" and padding["id"] is None and cafe["id"].startswith("2024-01-03-")
        assert episode.call("amend_transaction", {"transaction_id": cafe["id"], "amount": 4}).ok
        assert episode.call("get_balance", {"account": "Assets:Cash"}).result["balances"] == {"USD": "96.00"}
    finally:
        episode.close()


def test_write_through_on_a_symlinked_ledger_keeps_the_link(tmp_path):
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "books.beancount"
    target.write_text(
        'option "operating_currency" "USD"\n2024-01-01 open Assets:Cash USD\n2024-01-01 open Expenses:Food\n'
    )
    link = tmp_path / "books.beancount"
    link.symlink_to(target)
    episode = LedgerEpisode(ledger_path=link, write_through=True)
    try:
        assert episode.call("add_transaction", _receipt(payment_account="Assets:Cash")).ok
    finally:
        episode.close()
    assert link.is_symlink() and "Corner Shop" in target.read_text() and _check(target) == []


def test_an_add_without_a_currency_books_the_ledgers_operating_currency(tmp_path):
    """A euro ledger: an add that names no currency is booked in EUR (a USD default would be refused by the accounts'
    currency constraint, or, on unconstrained accounts, silently book dollars into euro books)."""
    books = tmp_path / "euro.beancount"
    books.write_text(
        'option "operating_currency" "EUR"\n\n'
        "2024-01-01 open Assets:Girokonto\n2024-01-01 open Expenses:Food\n2024-01-01 open Equity:Opening\n\n"
        '2024-01-02 * "Opening"\n  Assets:Girokonto  500.00 EUR\n  Equity:Opening\n\n'
        '2024-01-03 * "Rewe" "Groceries"\n  Expenses:Food  20.00 EUR\n  Assets:Girokonto\n',
        encoding="utf-8",
    )
    episode = LedgerEpisode(ledger_path=books)
    try:
        added = episode.call(
            "add_transaction",
            {
                "date": "2024-01-04",
                "payee": "Edeka",
                "narration": "Groceries",
                "amount": 12.5,
                "expense_account": "Expenses:Food",
            },
        )
        assert added.ok, added.error
        assert {p["currency"] for p in added.result["transaction"]["postings"]} == {"EUR"}
        assert {p["account"] for p in added.result["transaction"]["postings"]} == {"Expenses:Food", "Assets:Girokonto"}
    finally:
        episode.close()
