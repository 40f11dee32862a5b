"""Text surgery on a Beancount file: find a transaction's lines by id, replace, remove or append one.

Edits work on the *raw* parse (before booking), so an edit rewrites only the lines of the one transaction it
touches and leaves every other byte of the file as the user wrote it. Rendering uses beancount's own printer,
which escapes strings, so user text (payees, narrations) can never break out of its quotes into new directives.
"""

from __future__ import annotations

from dataclasses import dataclass

from beancount.core import data
from beancount.parser import parser, printer

from toolwild.envs.domains.ledger.book import ID_KEY

__all__ = ["RawTransaction", "append_block", "find_raw", "remove_block", "render", "replace_block"]


@dataclass(frozen=True)
class RawTransaction:
    """A transaction as written (amounts may be elided) and the 0-based line span it occupies."""

    entry: data.Transaction
    start: int
    end: int
    """One past the last line of the transaction."""


def _span(lines: list[str], entry: data.Transaction) -> tuple[int, int]:
    start = int(entry.meta["lineno"]) - 1
    last = max([start, *(int(p.meta["lineno"]) - 1 for p in entry.postings if p.meta and "lineno" in p.meta)])
    end = last + 1
    # Posting metadata and indented comments follow their posting on indented, non-blank lines.
    while end < len(lines) and lines[end].strip() and lines[end][:1] in (" ", "\t"):
        end += 1
    return start, end


def find_raw(text: str, txn_id: str) -> RawTransaction | None:
    """The written form of the transaction whose ``id`` metadata is ``txn_id``, or None."""
    entries, _errors, _options = parser.parse_string(text)
    lines = text.splitlines(keepends=True)
    for entry in entries:
        if isinstance(entry, data.Transaction) and entry.meta.get(ID_KEY) == txn_id:
            start, end = _span(lines, entry)
            return RawTransaction(entry=entry, start=start, end=end)
    return None


def render(entry: data.Transaction) -> str:
    """Beancount syntax for one transaction (ends with a newline, no blank line after)."""
    return printer.format_entry(entry).rstrip("\n") + "\n"


def replace_block(text: str, raw: RawTransaction, block: str) -> str:
    """``text`` with the lines of ``raw`` replaced by ``block``."""
    lines = text.splitlines(keepends=True)
    if raw.end == len(lines) and not block.endswith("\n"):
        block += "\n"
    return "".join([*lines[: raw.start], block, *lines[raw.end :]])


def remove_block(text: str, raw: RawTransaction) -> str:
    """``text`` without the lines of ``raw`` (and without the blank line that separated it from the next entry)."""
    lines = text.splitlines(keepends=True)
    end = raw.end
    before_blank = raw.start == 0 or not lines[raw.start - 1].strip()
    start = raw.start
    if before_blank and end < len(lines) and not lines[end].strip():
        end += 1
    elif all(not line.strip() for line in lines[end:]):
        while start > 0 and not lines[start - 1].strip():  # the last entry: drop the blank lines before it
            start -= 1
    return "".join([*lines[:start], *lines[end:]])


def append_block(text: str, block: str) -> str:
    """``text`` with ``block`` added at the end, separated by one blank line."""
    if not text:
        return block
    body = text if text.endswith("\n") else text + "\n"
    if not body.endswith("\n\n"):
        body += "\n"
    return body + block
