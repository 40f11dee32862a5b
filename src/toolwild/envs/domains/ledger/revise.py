"""A write checked as beancount would check the whole new ledger, without loading the whole ledger again.

A write is one :class:`~toolwild.envs.domains.ledger.edit.Splice`: a transaction's lines added, changed or
removed in one file. Loading the new ledger to validate it costs as much as the first load (parse, book, plugins,
validate: seconds for 50,000 transactions), and almost all of that work would give the same result as before.
:func:`revise` does only the part that can change:

- **The splice alone** (when it is exact, see below): the changed lines are parsed by themselves (at their line
  numbers), the one new transaction is booked by itself, and the checks that can see it run on what they look at:
  the accounts it uses must be open and allow its currencies, it must balance, and every balance assertion after
  it (or after the one it replaces) on an account it touches, or a parent of one, is checked again over the
  transactions of those accounts. The other entries stay the objects they were.
- **Otherwise, one parse at most**: the changed file is parsed again (the others' parses are reused) and the
  whole ledger is booked, run through its plugins and validated, as the first load did.

The splice alone is exact, because nothing else beancount does looks at other entries, when:

- the ledger loaded cleanly, runs no plugin of its own, has no ``pad`` (a pad's amount depends on every posting
  before its balance), no ``document`` and no ``documents`` option (their checks read the disk), and no posting
  holds a cost or leaves a currency to be inferred (booking at cost and inferring a currency are the only parts
  of beancount's booking that read other transactions: running balances);
- the changed file has no ``pushtag``/``pushmeta`` and the parser options of a fresh file (account roots, ``|``
  separators, long strings), so its lines parse alone exactly as they parse in it, and the changed lines hold
  exactly one transaction before (a change or removal) and one after (an addition or change), nothing else;
- no line after the change moves (a removal above other entries moves them: their line numbers are in their
  metadata), no other entry has the new transaction's sort key, and no other transaction's address changes
  (it carries a new id, or its content address is not already taken).

Anything else takes the second way, and so does any write the splice alone finds a problem with in parsing or
booking (so the problems reported are exactly those of a full load, in its order). Problems the checks above find
(an account not open, a failed balance assertion, an unbalanced transaction) are reported as they are: the same
checks on the same entries, so the same messages in the same order.
"""

from __future__ import annotations

import dataclasses
import os
import re
from bisect import bisect_left, bisect_right, insort
from collections.abc import Callable
from typing import Any

from beancount.core import data
from beancount.core.number import MISSING
from beancount.ops import balance, validation
from beancount.parser import booking, parser
from beancount.parser.options import OPTIONS_DEFAULTS

from toolwild.envs.domains.ledger.address import ID_KEY, Addresses, Where, content_address, id_number, id_of
from toolwild.envs.domains.ledger.book import (
    ID_NUMBERS_MEMO,
    FileParse,
    LoadedLedger,
    ParsedTree,
    _problem,
    _withheld,
    gc_paused,
    loaded_from,
    parse_tree,
)
from toolwild.envs.domains.ledger.canonical import STATE_MEMO, revised_state
from toolwild.envs.domains.ledger.edit import Splice, raw_at
from toolwild.envs.domains.ledger.index import POSTINGS_MEMO, revised_postings

__all__ = ["revise"]

_PUSH = re.compile(r"^(?:pushtag|pushmeta)\b", re.MULTILINE)
_NOT_AN_ENTRY = re.compile(r"^(?:option|plugin|include|pushtag|poptag|pushmeta|popmeta)\b", re.MULTILINE)
"""Directives that parse to no entry but change how the rest of a file reads: never part of a splice."""
_PARSER_OPTIONS = (
    "name_assets",
    "name_liabilities",
    "name_equity",
    "name_income",
    "name_expenses",
    "allow_pipe_separator",
    "long_string_maxlines",
)
"""The options beancount's parser itself reads while it parses (the others only matter after parsing)."""


def revise(loaded: LoadedLedger, splice: Splice, *, allow_outside_includes: bool) -> LoadedLedger:
    """The ledger after ``splice``, with exactly the problems a full load of its new files would report.

    Args:
        loaded: the ledger as it is (its files' texts are the ones the splice was made on).
        splice: the change, to one of its files.
        allow_outside_includes: the include rule the ledger is loaded under (for a full load of the changed file).
    """
    old = loaded.lines(splice.file)
    lines = splice.apply(old)
    text = _new_text(loaded.files[splice.file], old, splice)
    fast = _spliced(loaded, splice, lines, text)
    return fast if fast is not None else _reloaded(loaded, splice.file, lines, text, allow_outside_includes)


def _new_text(text: str, lines: list[str], splice: Splice) -> str:
    """The file's text after ``splice``: the old text cut where the changed lines begin and end (counted from
    the nearer end of the file), not all its lines joined again (a megabyte file has tens of thousands)."""
    if splice.start * 2 <= len(lines):
        begin = sum(map(len, lines[: splice.start]))
    else:
        begin = len(text) - sum(map(len, lines[splice.start :]))
    end = begin + sum(map(len, lines[splice.start : splice.end]))
    return text[:begin] + "".join(splice.lines) + text[end:]


# ---------------------------------------------------------------------------------------------------- one parse
def _reloaded(loaded: LoadedLedger, file: str, lines: list[str], text: str, outside: bool) -> LoadedLedger:
    """The changed file parsed again, the others' parses reused, the whole ledger booked and checked."""
    files = {**loaded.files, file: text}
    reuse = loaded.tree.parses if loaded.tree is not None else None
    with gc_paused():
        tree = parse_tree(
            loaded.main,
            None,
            cwd=os.path.dirname(loaded.main),
            overrides=files,
            allow_outside_includes=outside,
            reuse=reuse,
        )
        after = loaded_from(tree, loaded.main)
    after.stamps.update({n: s for n, s in loaded.stamps.items() if n in after.files and n != file})
    after.memo.update({k: v for k, v in loaded.memo.items() if k.startswith("lines:") and k != "lines:" + file})
    after.memo["lines:" + file] = lines
    return after


# ---------------------------------------------------------------------------------------------------- the splice
def _plain(txn: data.Transaction) -> bool:
    """Booking this transaction reads nothing but it: no cost, and every currency written."""
    for posting in txn.postings:
        units = posting.units
        if posting.cost is not None or (units is not MISSING and not isinstance(units.currency, str)):
            return False
        if posting.price is not None and not isinstance(posting.price.currency, str):
            return False
    return True


def _memo(loaded: LoadedLedger, key: str, make: Callable[[], Any]) -> Any:
    if key not in loaded.memo:
        loaded.memo[key] = make()
    return loaded.memo[key]


def _ledger_splices(loaded: LoadedLedger) -> bool:
    """Whether a transaction can be booked and checked alone in this ledger (see the module docstring)."""
    tree = loaded.tree
    options = loaded.options
    if tree is None or not loaded.ok or options.get("plugin") or options.get("documents"):
        return False
    if options.get("plugin_processing_mode") != "default":
        return False
    transaction, pad, document = data.Transaction, data.Pad, data.Document
    for parse in tree.parses.values():
        for entry in parse.entries:
            kind = type(entry)
            if kind is transaction:
                for posting in entry.postings:  # _plain, inlined: this runs for every posting of the ledger
                    units = posting.units
                    if posting.cost is not None or (units is not MISSING and type(units.currency) is not str):
                        return False
                    if posting.price is not None and type(posting.price.currency) is not str:
                        return False
            elif kind is pad or kind is document:
                return False
    return True


def _file_splices(parse: FileParse) -> bool:
    """Whether lines of this file parse alone as they parse in it."""
    if any(parse.options.get(k) != OPTIONS_DEFAULTS[k] for k in _PARSER_OPTIONS):
        return False
    text = parse.text
    return ("pushtag" not in text and "pushmeta" not in text) or _PUSH.search(text) is None


def _last_line(loaded: LoadedLedger, file: str) -> int:
    """The line of the last entry written in ``file`` (0: none)."""
    assert loaded.tree is not None
    return max((int(e.meta.get("lineno") or 0) for e in loaded.tree.parses[file].entries), default=0)


def _region(loaded: LoadedLedger, splice: Splice) -> tuple[int, int] | None:
    """The old lines ``[low, high)`` the change replaces as a whole: the removed transaction's lines with the
    splice's, which beyond that transaction must be blank; None when they hold anything else."""
    lines = loaded.lines(splice.file)
    low, high = splice.start, splice.end
    if splice.replaces is not None:
        where = (splice.file, int(splice.replaces.meta["lineno"]))
        if loaded.written.get(where) is not splice.replaces:
            return None
        raw = raw_at(lines, splice.replaces)
        low, high = min(low, raw.start), max(high, raw.end)
        rest = [*lines[low : raw.start], *lines[raw.end : high]]
    else:
        rest = lines[low:high]
    if any(line.strip() for line in rest):
        return None
    if high < len(lines) and lines[high][:1] in (" ", "\t") and lines[high].strip():
        return None  # an indented line after the change would read as part of what comes before it
    return low, high


def _parsed_alone(splice: Splice, lines: list[str], low: int, high: int) -> data.Transaction | bool | None:
    """The new region parsed alone at its line numbers: the one transaction it holds, None for none, False when it
    holds anything else or does not parse cleanly."""
    block = "".join(lines[low : high + splice.delta])
    if _NOT_AN_ENTRY.search(block):
        return False
    entries, errors, _ = parser.parse_string(block, report_filename=splice.file, report_firstline=low + 1)
    if errors or len(entries) > 1 or any(not isinstance(e, data.Transaction) for e in entries):
        return False
    return entries[0] if entries else None


def _spliced(loaded: LoadedLedger, splice: Splice, lines: list[str], text: str) -> LoadedLedger | None:
    """The new ledger from the splice alone, or None when that would not be exact (see the module docstring)."""
    tree = loaded.tree
    if tree is None or not _memo(loaded, "splices", lambda: _ledger_splices(loaded)):
        return None
    file = splice.file
    parse = tree.parses.get(file)
    if parse is None or not _memo(loaded, "splices:" + file, lambda: _file_splices(parse)):
        return None
    region = _region(loaded, splice)
    if region is None:
        return None
    low, high = region
    moves = bool(splice.delta) and _memo(loaded, "last_line:" + file, lambda: _last_line(loaded, file)) > high
    if moves and any(p.entries for name, p in tree.parses.items() if name != file):
        return None  # moved entries could pass another file's of the same day and kind (the sort compares lines)
    added = _parsed_alone(splice, lines, low, high)
    if added is False or (added is None and splice.replaces is None):
        return None
    assert added is None or isinstance(added, data.Transaction)
    if added is not None and not _plain(added):
        return None
    removed = splice.replaces
    gone = None
    if removed is not None:
        address = loaded.address_at(file, int(removed.meta["lineno"]))
        gone = loaded.transaction(address) if address is not None else None
        if gone is None:
            return None
    booked = None
    if added is not None:
        made, booking_errors = booking.book([added], loaded.options)
        if booking_errors or len(made) != 1:
            return None
        booked = made[0]
    problems = _balance_errors(loaded, gone, booked)
    if booked is not None:
        problems += validation.validate(_with_opens(loaded, booked), loaded.options)
    if problems:
        return _rejected(loaded, splice, text, problems, high if moves else None)
    return _build(loaded, splice, lines, text, (high, moves), removed, gone, added, booked)


def _opens(loaded: LoadedLedger) -> list[Any]:
    return _memo(loaded, "opens", lambda: [e for e in loaded.entries if isinstance(e, data.Open | data.Close)])


def _with_opens(loaded: LoadedLedger, booked: data.Transaction) -> list[Any]:
    """The ledger's ``open`` and ``close`` directives with the new transaction in its place: all that the
    validations that can fail for a transaction look at (the others look at directives only, and passed)."""
    opens = list(_opens(loaded))
    opens.insert(bisect_right(opens, data.entry_sortkey(booked), key=data.entry_sortkey), booked)
    return opens


def _balance_errors(loaded: LoadedLedger, gone: data.Transaction | None, new: data.Transaction | None) -> list[Any]:
    """beancount's balance check of every assertion the change can move: dated after the earlier of the two
    transactions, on an account one of them posts to or a parent of it; over the transactions of those accounts."""
    changed = [t for t in (gone, new) if t is not None]
    since = min(t.date for t in changed)
    accounts = {p.account for t in changed for p in t.postings}
    asserted = [
        e
        for e in _memo(loaded, "balances", lambda: [e for e in loaded.entries if isinstance(e, data.Balance)])
        if e.date > since and any(a == e.account or a.startswith(e.account + ":") for a in accounts)
    ]
    if not asserted:
        return []
    roots = {e.account for e in asserted}
    known = {a for a in _memo(loaded, "accounts", lambda: _accounts(loaded))} | accounts
    inside = {a for a in known if any(a == r or a.startswith(r + ":") for r in roots)}
    txns = [t for t in loaded.transactions if t is not gone and any(p.account in inside for p in t.postings)]
    if new is not None:
        txns.append(new)
    subset = sorted([*_opens(loaded), *asserted, *txns], key=data.entry_sortkey)
    _, errors = balance.check(subset, loaded.options)
    return list(errors)


def _accounts(loaded: LoadedLedger) -> set[str]:
    return {p.account for t in loaded.transactions for p in t.postings} | {e.account for e in _opens(loaded)}


def _rejected(
    loaded: LoadedLedger, splice: Splice, text: str, errors: list[Any], moved_after: int | None
) -> LoadedLedger:
    """A ledger that says what is wrong with the change (only its problems are meant to be read). A problem of an
    entry below the change (a balance assertion) is named at its new line when the change moved it."""
    assert loaded.tree is not None
    files = {**loaded.files, splice.file: text}
    problems = [_withheld(_problem(e, files), loaded.tree.root, loaded.main) for e in errors]
    if moved_after is not None:
        problems = [
            dataclasses.replace(p, line=p.line + splice.delta)
            if p.file == splice.file and p.line is not None and p.line > moved_after
            else p
            for p in problems
        ]
    root = loaded.root
    return LoadedLedger(
        text=files[loaded.main],
        entries=loaded.entries,
        errors=[p.describe(main=loaded.main, root=root) for p in problems],
        options=loaded.options,
        main=loaded.main,
        files=files,
        problems=problems,
    )


# ---------------------------------------------------------------------------------------------------- the new ledger
def _without(items: list[Any], item: Any, key: Callable[[Any], Any]) -> list[Any] | None:
    """A copy of the sorted ``items`` without ``item`` (the object itself), or None when it is not there."""
    k = key(item)
    i = bisect_left(items, k, key=key)
    while i < len(items) and items[i] is not item and key(items[i]) == k:
        i += 1
    if i == len(items) or items[i] is not item:
        return None
    out = items.copy()
    del out[i]
    return out


def _with(items: list[Any], item: Any, key: Callable[[Any], Any]) -> list[Any] | None:
    """A copy of the sorted ``items`` with ``item`` in its place, or None when another has its key (a stable sort
    would then place it by where it was written, which the list does not say)."""
    k = key(item)
    low, high = bisect_left(items, k, key=key), bisect_right(items, k, key=key)
    if low != high:
        return None
    out = items.copy()
    out.insert(low, item)
    return out


def _swapped(items: list[Any], out: Any, into: Any, key: Callable[[Any], Any]) -> list[Any] | None:
    """The sorted ``items`` with ``out`` taken out and ``into`` put in (either may be None)."""
    result: list[Any] | None = items
    if out is not None:
        result = _without(items, out, key)
    if result is not None and into is not None:
        result = _with(result, into, key)
    return result


def _addresses(
    loaded: LoadedLedger,
    primary: dict[Where, str],
    removed: data.Transaction | None,
    address: str | None,
    added: data.Transaction | None,
    added_at: Where | None,
) -> tuple[Addresses, str | None] | None:
    """The addresses after the change, and the new transaction's; None when another transaction's could change
    (then every address is worked out anew, by the full load).

    Every address in use is a key of the ledger's transactions by address, which is all this needs to know (see
    :func:`~toolwild.envs.domains.ledger.address.assign_addresses`): an id is its transaction's address exactly
    when no other transaction has it; a content address ``A`` that another transaction shares, or that an id
    pushed aside, comes with an ``A-2``; and a name no transaction answers to is no id and no content address.
    ``primary`` is a copy of the old addresses by place without the removed transaction's (``address``), moved
    lines already moved; it is changed here."""
    old = loaded.addresses
    named = loaded._by_id
    freed = None
    gone = None
    if removed is not None:
        user_id = id_of(removed)
        if address is None or f"{address}-2" in named:
            return None  # numbered ones would move up
        if user_id is not None:
            if address != user_id:
                return None  # an id others share: one of them may be named by it once this one is gone
            gone = (removed, user_id)
        elif address != content_address(removed):
            return None
        freed = address
    new_address = None
    new = None
    if added is not None and added_at is not None:
        user_id = id_of(added)
        name = user_id if user_id is not None else content_address(added)
        if (name in named and name != freed) or name in old.repeated_ids:
            return None
        new_address = primary[added_at] = name
        if user_id is not None:
            new = (added, user_id)
    return old.changed(primary, gone, new), new_address


def _build(
    loaded: LoadedLedger,
    splice: Splice,
    lines: list[str],
    text: str,
    below: tuple[int, bool],
    removed: data.Transaction | None,
    gone: data.Transaction | None,
    added: data.Transaction | None,
    booked: data.Transaction | None,
) -> LoadedLedger | None:
    """The new ledger: the old one's objects, the changed transaction swapped and, when ``below`` says that
    entries follow the change's last old line and move, those moved (None when that is not exact)."""
    high, moves = below
    tree = loaded.tree
    assert tree is not None
    file = splice.file
    shift = _Shift(file, high, splice.delta) if moves else None
    gone_at = (file, int(removed.meta["lineno"])) if removed is not None else None
    primary = dict(loaded.addresses.primary)
    written = dict(loaded.written)
    by_id = dict(loaded._by_id)
    gone_address = primary.pop(gone_at, None) if gone_at is not None else None
    if gone_at is not None:
        del written[gone_at]
    if gone_address is not None:
        del by_id[gone_address]
    added_at = (file, int(added.meta["lineno"])) if added is not None else None
    if shift is not None:  # after taking the old one out: a moved line may land on its place
        primary = {shift.where(w): a for w, a in primary.items()}
    readdressed = _addresses(loaded, primary, removed, gone_address, added, added_at)
    if readdressed is None:
        return None
    addresses, address = readdressed
    if booked is not None and address is not None and booked.meta.get(ID_KEY) != address:
        booked = booked._replace(meta={**booked.meta, ID_KEY: address})
    key = data.entry_sortkey
    old_parse = tree.parses[file]
    old_entries, old_file_entries = loaded.entries, old_parse.entries
    if shift is not None:  # the entries below the change, with their lines moved (the list order stays)
        old_file_entries = [shift.entry(e) for e in old_file_entries]
        old_entries = [shift.entry(e) for e in old_entries]
        written = {shift.where(w): shift.done.get(id(t), t) for w, t in written.items()}
        by_id = {a: shift.done.get(id(t), t) for a, t in by_id.items()}
        moved_by_id = [(shift.done.get(id(t), t), a) for t, a in addresses.by_id]
        addresses = Addresses(addresses.primary, addresses.repeated_ids, moved_by_id, addresses._contents)
    entries = _swapped(old_entries, gone, booked, key)
    file_entries = _swapped(old_file_entries, removed, added, key)
    if entries is None or file_entries is None:
        return None
    parses = {
        **tree.parses,
        file: FileParse(
            text, file_entries, old_parse.errors, old_parse.options, old_parse.includes, old_parse.problems
        ),
    }
    files = {**loaded.files, file: text}
    new_tree = ParsedTree(tree.problems, tree.options, files, tree.root, parses, tree.stamps)
    if added is not None and added_at is not None and booked is not None and address is not None:
        written[added_at] = added
        by_id[address] = booked
    after = LoadedLedger(
        text=files[loaded.main],
        entries=entries,
        errors=[],
        options=loaded.options,
        main=loaded.main,
        files=files,
        problems=[],
        written=written,
        addresses=addresses,
        auto_opened=loaded.auto_opened,
        _by_id=by_id,
        tree=new_tree,
        stamps=dict(loaded.stamps),
    )
    _carry(loaded, after, splice, lines, gone, booked, removed, added, high if shift is not None else None)
    return after


class _Shift:
    """The entries of one file below a change, moved by the lines it added (negative: removed): new objects
    whose metadata (and their postings') carry the new line numbers, each made once and shared where a load would
    share it (a booked transaction's postings are often the parsed ones)."""

    def __init__(self, file: str, after: int, delta: int) -> None:
        self.file, self.after, self.delta = file, after, delta
        self.done: dict[int, Any] = {}
        """id(old object) -> its moved copy (the old objects live on in the old ledger, so ids are not reused)."""

    def where(self, where: Where) -> Where:
        file, line = where
        return (file, line + self.delta) if file == self.file and line > self.after else where

    def _meta(self, meta: dict[str, Any] | None) -> dict[str, Any] | None:
        if meta and meta.get("filename") == self.file:
            line = meta.get("lineno")
            if isinstance(line, int) and line > self.after:
                return {**meta, "lineno": line + self.delta}
        return None

    def entry(self, entry: Any) -> Any:
        line = entry.meta.get("lineno") if entry.meta else None
        if not isinstance(line, int) or line <= self.after:
            return entry  # above the change: its postings are too
        found = self.done.get(id(entry))
        if found is None:
            fields: dict[str, Any] = {}
            meta = self._meta(entry.meta)
            if meta is not None:
                fields["meta"] = meta
            postings = getattr(entry, "postings", None)
            if postings:
                fields["postings"] = [self._posting(p) for p in postings]
            found = self.done[id(entry)] = entry._replace(**fields) if fields else entry
        return found

    def _posting(self, posting: data.Posting) -> data.Posting:
        found = self.done.get(id(posting))
        if found is None:
            meta = self._meta(posting.meta)
            found = self.done[id(posting)] = posting._replace(meta=meta) if meta is not None else posting
        return found


def _line_endings(lines: Any) -> tuple[int, int]:
    return sum(line.endswith("\r\n") for line in lines), sum(line.endswith("\n") for line in lines)


def _carry(
    old: LoadedLedger,
    new: LoadedLedger,
    splice: Splice,
    lines: list[str],
    gone: data.Transaction | None,
    booked: data.Transaction | None,
    removed: data.Transaction | None,
    added: data.Transaction | None,
    moved_after: int | None,
) -> None:
    """Hand the new ledger what is worked out of the old one and still true, updated for the change
    (``moved_after``: the line below which entries moved, None if none did)."""
    file = splice.file
    memo = new.memo
    directives = ("opens", "balances") if moved_after is None else ()  # moved ones are new objects
    for key, value in old.memo.items():
        kept = key in ("splices", "open_accounts", *directives) or key.startswith("splices:")
        if kept or (key.startswith(("lines:", "newlines:")) and not key.endswith(":" + file)):
            memo[key] = value  # the change adds one plain transaction at most: no directive, no option
    memo["lines:" + file] = lines
    counts = old.memo.get("newlines:" + file)
    if counts is not None:
        before, after = _line_endings(old.lines(file)[splice.start : splice.end]), _line_endings(splice.lines)
        memo["newlines:" + file] = (counts[0] - before[0] + after[0], counts[1] - before[1] + after[1])
    if "accounts" in old.memo:
        memo["accounts"] = old.memo["accounts"] | ({p.account for p in booked.postings} if booked else set())
    last = old.memo.get("last_line:" + file)
    if moved_after is not None and last is not None and last > moved_after:
        memo["last_line:" + file] = last + splice.delta
    elif last is not None and (removed is None or int(removed.meta["lineno"]) != last):
        memo["last_line:" + file] = max(last, int(added.meta["lineno"])) if added is not None else last
    if "transactions" in old.memo and moved_after is None:
        txns = _swapped(old.memo["transactions"], gone, booked, data.entry_sortkey)
        if txns is not None:
            memo["transactions"] = txns
    if STATE_MEMO in old.memo:
        state = revised_state(old.memo[STATE_MEMO], gone, booked)
        if state is not None:
            memo[STATE_MEMO] = state
    if POSTINGS_MEMO in old.memo:
        index = revised_postings(old.memo[POSTINGS_MEMO], gone, booked)
        if index is not None:
            memo[POSTINGS_MEMO] = index
    numbers = old.memo.get(ID_NUMBERS_MEMO)
    if numbers is not None:
        memo[ID_NUMBERS_MEMO] = numbers = list(numbers)
        if removed is not None and (number := id_number(id_of(removed))) is not None:
            numbers.pop(bisect_left(numbers, number))
        if added is not None and (number := id_number(id_of(added))) is not None:
            insort(numbers, number)
