"""Loading Beancount text: the parsed entries plus every error, as one immutable value.

Every write is validated by loading the *new* text in full (syntax, booking, account references, balance
assertions): a ledger that does not load cleanly is never written. Loading is the single place that knows how
beancount reports problems, so error messages look the same whichever tool caused them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from beancount import loader
from beancount.core import data

__all__ = ["ID_KEY", "LoadedLedger", "load_ledger"]

ID_KEY = "id"
"""The metadata key holding a transaction's stable id (``txn-0001``)."""


@dataclass(frozen=True)
class LoadedLedger:
    """Beancount text and what the loader made of it."""

    text: str
    entries: list[Any]
    errors: list[str]
    options: dict[str, Any]
    _by_id: dict[str, data.Transaction] = field(default_factory=dict, repr=False)

    @property
    def ok(self) -> bool:
        """True when the text loads with no errors at all."""
        return not self.errors

    @property
    def transactions(self) -> list[data.Transaction]:
        """The transactions, in the loader's (date) order."""
        return [e for e in self.entries if isinstance(e, data.Transaction)]

    def transaction(self, txn_id: str) -> data.Transaction | None:
        """The booked transaction with this id, or None."""
        return self._by_id.get(txn_id)

    def transaction_ids(self) -> list[str]:
        """Ids of all transactions that have one."""
        return list(self._by_id)

    def open_accounts(self) -> dict[str, data.Open]:
        """Account name -> its ``open`` directive, for accounts not closed."""
        opened = {e.account: e for e in self.entries if isinstance(e, data.Open)}
        for e in self.entries:
            if isinstance(e, data.Close):
                opened.pop(e.account, None)
        return opened

    @property
    def operating_currency(self) -> str:
        """The first ``operating_currency`` option, USD if none is set."""
        currencies = self.options.get("operating_currency") or ["USD"]
        return str(currencies[0])


def _describe(error: Any) -> str:
    source = getattr(error, "source", None) or {}
    line = source.get("lineno") if isinstance(source, dict) else None
    message = str(getattr(error, "message", error)).strip()
    return f"line {line}: {message}" if line else message


def load_ledger(text: str) -> LoadedLedger:
    """Parse, book and validate ``text`` with beancount; ids must be unique on top of beancount's own checks.

    Args:
        text: the whole ledger file.
    """
    entries, errors, options = loader.load_string(text)
    problems = [_describe(e) for e in errors]
    by_id: dict[str, data.Transaction] = {}
    counts: Counter[str] = Counter()
    for entry in entries:
        if isinstance(entry, data.Transaction):
            value = entry.meta.get(ID_KEY)
            if isinstance(value, str):
                counts[value] += 1
                by_id.setdefault(value, entry)
    problems.extend(f"transaction id {tid!r} is used {n} times" for tid, n in sorted(counts.items()) if n > 1)
    return LoadedLedger(text=text, entries=list(entries), errors=problems, options=dict(options), _by_id=by_id)
