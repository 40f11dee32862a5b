"""Loads kept per ledger text (issue #34): a second episode of the same ledger starts from a copy of the first's
load, renamed to its own files, instead of parsing and booking it again.

The copy must be what loading its files gives, entry for entry; it must be its own (a write in one episode changes
neither another episode nor the kept load); a changed text must load afresh; and the number kept is bounded.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from beancount.scripts.example import main as bean_example

from toolwild.envs.domains.ledger import LedgerEpisode, generate_ledger
from toolwild.envs.domains.ledger import store as store_module
from toolwild.envs.domains.ledger.book import LoadedLedger, load_tree
from toolwild.envs.domains.ledger.canonical import canonical_state, canonical_transactions
from toolwild.envs.domains.ledger.seed import CHECKING


@pytest.fixture(autouse=True)
def _nothing_kept():
    store_module.forget_kept_loads()
    yield
    store_module.forget_kept_loads()


@pytest.fixture
def loads(monkeypatch) -> list[Path]:
    """Every full load the store makes (the main file of each)."""
    made: list[Path] = []
    real = store_module.load_tree

    def counting(main, *args, **kwargs):
        made.append(Path(main))
        return real(main, *args, **kwargs)

    monkeypatch.setattr(store_module, "load_tree", counting)
    return made


def _same(got: LoadedLedger, fresh: LoadedLedger) -> None:
    """``got`` (a kept load renamed) is what a full load of its files gave: ``fresh``."""
    assert got.main == fresh.main
    assert got.errors == fresh.errors == []
    assert got.files == fresh.files
    assert got.entries == fresh.entries  # file names and line numbers in every entry's and posting's metadata
    assert got.written == fresh.written
    assert got._by_id == fresh._by_id
    assert got.addresses.primary == fresh.addresses.primary
    assert got.addresses.repeated_ids == fresh.addresses.repeated_ids
    assert sorted(a for _, a in got.addresses.by_id) == sorted(a for _, a in fresh.addresses.by_id)
    assert dict((a, t) for t, a in got.addresses.by_id) == dict((a, t) for t, a in fresh.addresses.by_id)
    assert got.addresses.aliases() == fresh.addresses.aliases()
    assert got.auto_opened == fresh.auto_opened
    assert got.tree is not None and fresh.tree is not None
    assert got.tree.root == fresh.tree.root
    assert {n: p.entries for n, p in got.tree.parses.items()} == {n: p.entries for n, p in fresh.tree.parses.items()}
    plain = {k: v for k, v in fresh.options.items() if k != "dcontext"}
    assert {k: v for k, v in got.options.items() if k != "dcontext"} == plain
    assert str(got.options["dcontext"]) == str(fresh.options["dcontext"])
    assert got.options["dcontext"] is not fresh.options["dcontext"]
    assert canonical_state(got) == canonical_transactions(fresh.transactions)


def test_a_second_episode_of_the_same_text_is_the_kept_load_renamed(loads):
    first = LedgerEpisode(seed=11)
    second = LedgerEpisode(seed=11)
    try:
        assert loads == [first.path]  # the second episode loaded nothing
        assert second.path != first.path
        _same(second.ledger(), load_tree(second.path))
        _same(first.ledger(), load_tree(first.path))
        assert store_module.kept_loads() == 1
    finally:
        first.close()
        second.close()


def test_a_changed_text_is_loaded_afresh(loads):
    text = generate_ledger(12)
    changed = text.replace("Household finances", "Household finances 2")
    assert changed != text
    a = LedgerEpisode(ledger_text=text)
    b = LedgerEpisode(ledger_text=changed)
    try:
        assert loads == [a.path, b.path]
        assert b.ledger().options["title"] == "Household finances 2"
        assert a.ledger().options["title"] == "Household finances"
        _same(b.ledger(), load_tree(b.path))
    finally:
        a.close()
        b.close()


def test_a_write_in_one_episode_reaches_no_other_nor_the_kept_load(loads):
    first = LedgerEpisode(seed=13)
    try:
        before = canonical_state(first.ledger())
        added = first.add_transaction("2024-04-10", "Corner Shop", "Milk", 4.2, "Expenses:Food:Groceries", CHECKING)
        assert added["id"]
        assert len(canonical_state(first.ledger())) == len(before) + 1
        first.amend_transaction(added["id"], amount=4.3)
    finally:
        first.close()
    second = LedgerEpisode(seed=13)
    fresh = LedgerEpisode(seed=13)
    try:
        assert len(loads) == 1  # both started from the kept load
        _same(second.ledger(), load_tree(second.path))
        assert second.state() == {"ledger": before}
        assert fresh.state() == second.state()
        # each episode writes its own copy: the same write in both gives the same id and state
        one = second.add_transaction("2024-04-11", "Cafe", "Tea", 3.5, "Expenses:Food:Restaurants", CHECKING)
        two = fresh.add_transaction("2024-04-11", "Cafe", "Tea", 3.5, "Expenses:Food:Restaurants", CHECKING)
        assert one == two
        assert second.state() == fresh.state()
        assert second.text() == fresh.text()
        _same(second.ledger(), load_tree(second.path))
    finally:
        second.close()
        fresh.close()


def test_the_kept_loads_are_bounded(loads):
    episodes = [LedgerEpisode(seed=100 + i) for i in range(store_module.KEPT_LOADS + 3)]
    for episode in episodes:
        episode.close()
    assert store_module.kept_loads() == store_module.KEPT_LOADS
    assert len(loads) == store_module.KEPT_LOADS + 3
    LedgerEpisode(seed=100).close()  # the oldest was dropped: loaded again
    assert len(loads) == store_module.KEPT_LOADS + 4
    LedgerEpisode(seed=100 + store_module.KEPT_LOADS + 2).close()  # the newest is still kept
    assert len(loads) == store_module.KEPT_LOADS + 4
    assert store_module.kept_loads() == store_module.KEPT_LOADS


@pytest.fixture(scope="module")
def books(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("books") / "example.beancount"
    args = ["--seed", "3", "--date-begin", "2024-01-01", "--date-end", "2024-06-30", "-o", str(path)]
    bean_example.main(args=args, standalone_mode=False)
    return path


def test_own_books_are_loaded_once_and_again_when_the_file_changes(loads, books, tmp_path):
    path = tmp_path / "books.beancount"
    text = books.read_text()
    path.write_text(text)
    a = LedgerEpisode(ledger_path=path)
    b = LedgerEpisode(ledger_path=path)
    try:
        assert loads == [path]  # the user's file loaded once; each copy is that load renamed
        _same(b.ledger(), load_tree(b.path))
        assert a.path != b.path and b.path != path
    finally:
        a.close()
        b.close()
    # the same size, written at once: only the text can tell the change
    changed = text.replace("Employer match", "Employer Match", 1)
    assert len(changed) == len(text) and changed != text
    path.write_text(changed)
    c = LedgerEpisode(ledger_path=path)
    try:
        assert loads == [path, path]
        assert c.text() == changed
        _same(c.ledger(), load_tree(c.path))
    finally:
        c.close()


def test_the_kept_loads_are_bounded_in_size(loads, monkeypatch):
    one = len(generate_ledger(200))
    monkeypatch.setattr(store_module, "KEPT_CHARS", int(one * 2.5))  # room for two generated ledgers
    for seed in (200, 201, 202):
        LedgerEpisode(seed=seed).close()
    assert store_module.kept_loads() == 2  # the oldest was dropped to stay within the size
    LedgerEpisode(seed=202).close()
    assert len(loads) == 3
    monkeypatch.setattr(store_module, "KEPT_CHARS", one)  # a ledger of more than half the size is never kept
    store_module.forget_kept_loads()
    first = LedgerEpisode(seed=203)
    second = LedgerEpisode(seed=203)
    try:
        assert store_module.kept_loads() == 0
        assert len(loads) == 5
        _same(second.ledger(), load_tree(second.path))
    finally:
        first.close()
        second.close()
