"""The canonical form of a ledger: its transactions as sorted, normalised JSON.

Two ledgers with the same content (whatever their layout, ordering, alignment, elided amounts or number
formatting) have equal canonical forms, so an episode's state can be compared with an expected state and diffed
transaction by transaction.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from decimal import Decimal
from typing import Any

from beancount.core import data

from toolwild.envs.domains.ledger.address import ID_KEY
from toolwild.envs.domains.ledger.book import LoadedLedger, load_ledger
from toolwild.envs.domains.ledger.money import format_number

__all__ = [
    "STATE_MEMO",
    "canonical_ledger",
    "canonical_state",
    "canonical_transaction",
    "canonical_transactions",
    "format_number",
    "revised_state",
]

STATE_MEMO = "canonical"
"""The key of a loaded ledger's canonical form in its memo."""


def _amount(value: Any) -> str | None:
    if value is None or not hasattr(value, "number") or not isinstance(value.number, Decimal):
        return None
    return f"{format_number(value.number)} {value.currency}"


def _posting(posting: data.Posting) -> dict[str, Any]:
    units = posting.units
    out: dict[str, Any] = {
        "account": posting.account,
        "amount": format_number(units.number) if isinstance(units.number, Decimal) else None,
        "currency": units.currency if isinstance(units.currency, str) else None,
    }
    if posting.cost is not None:
        cost = posting.cost
        number = getattr(cost, "number", None)
        currency = getattr(cost, "currency", None)
        out["cost"] = f"{format_number(number)} {currency}" if isinstance(number, Decimal) else str(cost)
    if posting.price is not None:
        out["price"] = _amount(posting.price)
    return out


def _posting_key(p: dict[str, Any]) -> tuple[str, str, Decimal]:
    return (p["account"], p["currency"] or "", Decimal(p["amount"]) if p["amount"] is not None else Decimal(0))


def canonical_transaction(txn: data.Transaction) -> dict[str, Any]:
    """One booked transaction as JSON: id, date, flag, payee, narration, tags, links and sorted postings."""
    txn_id = txn.meta.get(ID_KEY)
    return {
        "id": txn_id if isinstance(txn_id, str) else None,
        "date": txn.date.isoformat(),
        "flag": txn.flag,
        "payee": txn.payee or "",
        "narration": txn.narration or "",
        "tags": sorted(txn.tags or ()),
        "links": sorted(txn.links or ()),
        "postings": sorted((_posting(p) for p in txn.postings), key=_posting_key),
    }


def _sort_key(t: dict[str, Any]) -> tuple[str, str, str, str, str]:
    return (t["date"], t["id"] or "", t["payee"], t["narration"], repr(t["postings"]))


def canonical_transactions(transactions: list[data.Transaction]) -> list[dict[str, Any]]:
    """Booked transactions in canonical form, sorted by date, then id."""
    return sorted((canonical_transaction(t) for t in transactions), key=_sort_key)


def canonical_ledger(text: str) -> list[dict[str, Any]]:
    """The transactions of a Beancount text in canonical form (sorted by date, then id; amounts normalised).

    Args:
        text: the ledger file's text.
    """
    return canonical_transactions(load_ledger(text).transactions)


def canonical_state(loaded: LoadedLedger) -> list[dict[str, Any]]:
    """A loaded ledger's transactions in canonical form, worked out once per ledger.

    Why: the live loop asks for an episode's state after every task, and putting 50,000 transactions in canonical
    form and sorting them takes seconds. The list and its dicts are shared by every caller: read them, never change
    them (copy what you must change)."""
    found = loaded.memo.get(STATE_MEMO)
    if found is None:
        found = loaded.memo[STATE_MEMO] = canonical_transactions(loaded.transactions)
    return found


def revised_state(
    state: list[dict[str, Any]], removed: data.Transaction | None, added: data.Transaction | None
) -> list[dict[str, Any]] | None:
    """``state`` (a ledger's canonical form) with one booked transaction taken out and/or one put in, the others
    left where they are: the canonical form of the ledger after the write, as :func:`canonical_transactions` would
    sort it. None when that cannot be told without sorting all again: the new transaction's sort key equals
    another's (their order then depends on the ledger's own order), or the removed one is not found."""
    out = list(state)
    if removed is not None:
        gone = canonical_transaction(removed)
        key = _sort_key(gone)
        i = bisect_left(out, key, key=_sort_key)
        while i < len(out) and out[i] != gone and _sort_key(out[i]) == key:
            i += 1
        if i == len(out) or out[i] != gone:
            return None
        del out[i]  # equal dicts are interchangeable: whichever of them goes, the list is the same
    if added is not None:
        new = canonical_transaction(added)
        key = _sort_key(new)
        low, high = bisect_left(out, key, key=_sort_key), bisect_right(out, key, key=_sort_key)
        if low != high:
            return None
        out.insert(low, new)
    return out
