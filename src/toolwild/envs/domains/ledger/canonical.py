"""The canonical form of a ledger: its transactions as sorted, normalised JSON.

Two ledgers with the same content (whatever their layout, ordering, alignment, elided amounts or number
formatting) have equal canonical forms, so an episode's state can be compared with an expected state and diffed
transaction by transaction.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from beancount.core import data

from toolwild.envs.domains.ledger.address import ID_KEY
from toolwild.envs.domains.ledger.book import load_ledger
from toolwild.envs.domains.ledger.money import format_number

__all__ = ["canonical_ledger", "canonical_transaction", "canonical_transactions", "format_number"]


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
