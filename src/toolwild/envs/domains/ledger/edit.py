"""Text surgery on a Beancount file: change one transaction in place, remove one, or append one.

A person's books are a text they wrote: comments, alignment, posting metadata, line endings. An edit therefore
changes only the tokens it must: an amount change rewrites the number on the posting lines concerned (the end of the
number stays in its column when the spacing allows), a new category rewrites the account on one posting line, a new
date or payee rewrites only that token of the header line. Every other byte of the file is kept.

Each in-place edit is checked by parsing the edited file again: the transaction must read back exactly as intended
and the file must hold the same number of entries. When a change cannot be made in place (a layout the surgery does
not recognise), the transaction is re-rendered by beancount's own printer instead. Strings are escaped the way the
printer escapes them, so user text (payees) can never break out of its quotes into new directives.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from beancount.core import data
from beancount.parser import parser, printer
from beancount.utils.misc_utils import escape_string

from toolwild.envs.domains.ledger.files import split_lines
from toolwild.envs.domains.ledger.money import format_number

__all__ = [
    "RawTransaction",
    "Splice",
    "appending",
    "raw_at",
    "removing",
    "render",
    "replacing",
    "rewriting",
]


@dataclass(frozen=True)
class Splice:
    """A change to one file's text: its lines ``[start, end)`` (0-based) replaced by ``lines``.

    Every write is one: a new transaction appended, one transaction's lines changed or removed. Saying which lines
    changed, instead of handing over a new text, lets the write be checked by parsing those lines alone (see
    :mod:`~toolwild.envs.domains.ledger.revise`)."""

    file: str
    start: int
    end: int
    lines: tuple[str, ...]
    replaces: data.Transaction | None = None
    """The transaction (as parsed from the file) whose lines the change rewrites or removes; None for lines
    added."""

    def apply(self, old: list[str]) -> list[str]:
        """The file's new lines, given its old ones."""
        new = old.copy()
        new[self.start : self.end] = self.lines
        return new

    @property
    def delta(self) -> int:
        """How many lines the change adds (negative: removes); the lines after it move by as many."""
        return len(self.lines) - (self.end - self.start)


def _splice(
    file: str, old: list[str], start: int, end: int, new: list[str], *, replaces: data.Transaction | None = None
) -> Splice:
    """The smallest splice that turns ``old[start:end]`` into ``new``: lines both begin or end with are kept out."""
    while start < end and new and old[start] == new[0]:
        start, new = start + 1, new[1:]
    while start < end and new and old[end - 1] == new[-1]:
        end, new = end - 1, new[:-1]
    return Splice(file, start, end, tuple(new), replaces)


@dataclass(frozen=True)
class RawTransaction:
    """A transaction as written (amounts may be elided) and the 0-based line span it occupies."""

    entry: data.Transaction
    start: int
    end: int
    """One past the last line of the transaction."""


def raw_at(lines: list[str], entry: data.Transaction) -> RawTransaction:
    """The span of a file's ``lines`` that holds ``entry`` (parsed from that file): its header, metadata, postings,
    and the indented metadata and comment lines that follow its last posting."""
    start = int(entry.meta["lineno"]) - 1
    last = max([start, *(int(p.meta["lineno"]) - 1 for p in entry.postings if p.meta and "lineno" in p.meta)])
    end = last + 1
    while end < len(lines) and lines[end].strip() and lines[end][:1] in (" ", "\t"):
        end += 1
    return RawTransaction(entry=entry, start=start, end=end)


def render(entry: data.Transaction, newline: str = "\n") -> str:
    """Beancount syntax for one transaction (ends with a line break, no blank line after)."""
    return (printer.format_entry(entry).rstrip("\n") + "\n").replace("\n", newline)


def replacing(file: str, lines: list[str], raw: RawTransaction, block: str) -> Splice:
    """The lines of ``raw`` replaced by ``block``."""
    if raw.end == len(lines) and not block.endswith("\n"):
        block += "\n"
    return _splice(file, lines, raw.start, raw.end, split_lines(block), replaces=raw.entry)


def removing(file: str, lines: list[str], raw: RawTransaction) -> Splice:
    """The lines of ``raw`` removed (and the blank line that separated it from the next entry)."""
    end = raw.end
    before_blank = raw.start == 0 or not lines[raw.start - 1].strip()
    start = raw.start
    if before_blank and end < len(lines) and not lines[end].strip():
        end += 1
    elif all(not line.strip() for line in lines[end:]):
        while start > 0 and not lines[start - 1].strip():  # the last entry: drop the blank lines before it
            start -= 1
    return Splice(file, start, end, (), raw.entry)


def appending(file: str, lines: list[str], block: str, newline: str = "\n") -> tuple[Splice, int]:
    """``block`` added at the end, separated by one blank line; and the 1-based line it starts on.

    Only the last two lines can change (a line break added to the last one, a blank line after it), so only they
    are looked at: the file's size does not matter."""
    if not lines:
        return _splice(file, lines, 0, 0, split_lines(block)), 1
    keep = max(len(lines) - 2, 0)
    tail = "".join(lines[keep:])
    body = tail if tail.endswith("\n") else tail + newline
    if not body.endswith(("\n\n", "\n\r\n")):
        body += newline
    line = keep + body.count("\n") + 1
    return _splice(file, lines, keep, len(lines), split_lines(body + block)), line


# ---------------------------------------------------------------------------------------------------- in place
_LEAD = r"^(?P<lead>[ \t]+(?:[!&#?%*PSTCURM][ \t]+)?)"
_HEADER = re.compile(r"^(?P<date>\d{4}(?P<sep>[-/])\d{2}[-/]\d{2})(?P<ws>[ \t]+)(?P<flag>txn|[^\s\"]+)")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_ACCOUNT_END = r"(?=[ \t;]|\r?\n|$)"


def _posting_line(line: str, account: str) -> re.Match[str] | None:
    return re.match(_LEAD + "(?P<account>" + re.escape(account) + ")" + _ACCOUNT_END, line)


def _number_text(like: str, number: Decimal) -> str:
    """``number`` written like ``like`` was: with thousands separators if it had them, at least two decimals."""
    return f"{number:,.2f}" if "," in like else format_number(number)


def _regap(gap: str, delta: int) -> str:
    """Spacing that keeps what follows in its column after the text before it grew by ``delta`` characters,
    never narrower than two spaces (or the one space there was); tabs are left alone."""
    if "\t" in gap:
        return gap
    return " " * max(len(gap) - delta, min(2, len(gap)))


def _patch_number(line: str, account: str, currency: str, number: Decimal) -> str | None:
    posting = _posting_line(line, account)
    if posting is None:
        return None
    rest = line[posting.end() :]
    found = re.match(
        r"(?P<gap>[ \t]+)(?P<num>[^;{@\r\n\"]*?[0-9)])(?P<gap2>[ \t]*)" + re.escape(currency) + r"(?![A-Za-z0-9'._-])",
        rest,
    )
    if found is None:
        return None
    new = _number_text(found.group("num"), number)
    gap = _regap(found.group("gap"), len(new) - len(found.group("num")))
    return line[: posting.end()] + gap + new + rest[found.end("num") :]


def _patch_account(line: str, old: str, new: str) -> str | None:
    posting = _posting_line(line, old)
    if posting is None:
        return None
    rest = line[posting.end() :]
    gap = re.match(r"[ \t]+", rest)
    if gap is not None and rest[gap.end() :].strip() and not rest[gap.end() :].lstrip().startswith(";"):
        rest = _regap(gap.group(), len(new) - len(old)) + rest[gap.end() :]  # keep the amount's column
    return line[: posting.start("account")] + new + rest


def _patch_header(line: str, date: dt.date | None, payee: str | None) -> str | None:
    header = _HEADER.match(line)
    if header is None:
        return None
    if date is not None:
        sep = header.group("sep")
        line = date.strftime(f"%Y{sep}%m{sep}%d") + line[header.end("date") :]
    if payee is None:
        return line
    pos, strings = header.end("flag"), []
    while True:
        blank = re.match(r"[ \t]+", line[pos:])
        at = pos + (blank.end() if blank else 0)
        found = _STRING.match(line, at)
        if found is None:
            break
        strings.append(found)
        pos = found.end()
    quoted = f'"{escape_string(payee)}"'
    if len(strings) >= 2:
        return line[: strings[0].start()] + quoted + line[strings[0].end() :]
    if len(strings) == 1:  # only a narration: the payee goes before it
        return line[: strings[0].start()] + quoted + " " + line[strings[0].start() :]
    return None


def _essence(entry: data.Transaction) -> tuple[Any, ...]:
    """What a transaction says (not where it is written): compared to check an in-place edit."""
    meta = {k: v for k, v in entry.meta.items() if k not in ("filename", "lineno")}
    postings = [(p.account, p.units, p.cost, p.price, p.flag) for p in entry.postings]
    return (entry.date, entry.flag, entry.payee or "", entry.narration, entry.tags, entry.links, meta, postings)


def _patch(lines: list[str], raw: RawTransaction, new: data.Transaction) -> list[str] | None:
    """The new lines of ``raw``'s span with only the changed tokens rewritten, or None when the change is not one
    the surgery knows (then the transaction is re-rendered)."""
    old = raw.entry
    same = (old.flag, old.narration, old.tags, old.links, len(old.postings))
    if same != (new.flag, new.narration, new.tags, new.links, len(new.postings)):
        return None
    span = lines[raw.start : raw.end]
    if old.date != new.date or (old.payee or "") != (new.payee or ""):
        date = new.date if old.date != new.date else None
        payee = new.payee or "" if (old.payee or "") != (new.payee or "") else None
        header = _patch_header(span[0], date, payee)
        if header is None:
            return None
        span[0] = header
    for before, after in zip(old.postings, new.postings, strict=True):
        if before == after:
            continue
        if (before.cost, before.price, before.flag) != (after.cost, after.price, after.flag) or not before.meta:
            return None
        index = int(before.meta["lineno"]) - 1 - raw.start
        line: str | None = span[index]
        if before.account != after.account:
            line = _patch_account(span[index], before.account, after.account)
        if line is not None and before.units != after.units:
            units = after.units
            if not isinstance(units.number, Decimal) or units.currency != getattr(before.units, "currency", None):
                return None
            line = _patch_number(line, after.account, units.currency, units.number)
        if line is None:
            return None
        span[index] = line
    return span


def _reads_back(lines: list[str], span: list[str], raw: RawTransaction, new: data.Transaction) -> bool:
    """True when the file with ``raw``'s span replaced by ``span`` (edited in place) reads back as ``new``.

    Only the span's lines differ, so parsing the span alone decides; when that is not conclusive (the span does
    not parse on its own, e.g. under renamed root accounts), both files are parsed and compared."""
    alone, errors, _ = parser.parse_string("".join(span))
    if not errors and len(alone) == 1 and isinstance(alone[0], data.Transaction):
        return _essence(alone[0]) == _essence(new)
    before, _, _ = parser.parse_string("".join(lines))
    after, errors, _ = parser.parse_string("".join([*lines[: raw.start], *span, *lines[raw.end :]]))
    if errors or len(after) != len(before):
        return False
    found = [e for e in after if isinstance(e, data.Transaction) and e.meta.get("lineno") == raw.start + 1]
    return len(found) == 1 and _essence(found[0]) == _essence(new)


def rewriting(file: str, lines: list[str], raw: RawTransaction, new: data.Transaction, newline: str = "\n") -> Splice:
    """The transaction ``raw`` changed into ``new``: in place when only its date, payee, posting accounts or posting
    numbers change (every other byte kept), else re-rendered by beancount's printer."""
    span = _patch(lines, raw, new)
    if span is not None and _reads_back(lines, span, raw, new):
        return _splice(file, lines, raw.start, raw.end, span, replaces=raw.entry)
    return replacing(file, lines, raw, render(new, newline))
