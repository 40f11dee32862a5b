"""Addresses: how a tool names one transaction of a ledger that need not carry ids.

A generated ledger gives every transaction an ``id: "txn-0001"``; a person's books usually have no ids, or ids that
repeat (``bean-check`` accepts both). Writing ids into their file just to be able to edit it would change every
transaction of it, so a transaction is addressed instead by

- its ``id`` metadata, when that value is a string used by no other transaction;
- otherwise its *content address*: its date and a short hash of what it says (payee, narration, postings as
  written), ``2024-03-05-1f3a9c``, with a counter (``-2``, ``-3`` ...) when identical transactions repeat.

A content address depends only on the transaction itself, so it survives any edit elsewhere in the file; editing
the transaction gives it a new one (the write tools return it). Every transaction also answers to its content
address when it has an id, so an address once handed out keeps working while its transaction is unchanged.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from beancount.core import data

__all__ = ["ID_KEY", "Addresses", "Where", "assign_addresses", "content_address", "id_number", "id_of"]

ID_KEY = "id"
"""The metadata key holding a transaction's id (``txn-0001``)."""

Where = tuple[str, int]
"""(file, 1-based line of the transaction's first line): where a transaction is written."""

_SEP = "\x1f"


def _text(value: Any) -> str:
    """A number, currency, date or label as written (Decimal as parsed: ``4.5`` stays ``4.5``); absent: empty."""
    return str(value) if isinstance(value, Decimal | str) or hasattr(value, "isoformat") else ""


def _spec(value: Any) -> str:
    """A cost or price spec as text (amounts may be elided in what is written)."""
    if value is None:
        return ""
    names = ("number_per", "number_total", "number", "currency", "date", "label")
    return "/".join(_text(getattr(value, name)) for name in names if hasattr(value, name))


def content_address(txn: data.Transaction) -> str:
    """``DATE-HASH``: the date and 6 hex digits of a hash of payee, narration and the postings as written."""
    parts = [txn.payee or "", txn.narration or ""]
    for p in txn.postings:
        units = p.units
        parts += [p.account, _text(getattr(units, "number", None)), _text(getattr(units, "currency", None))]
        parts += [_spec(p.cost), _spec(p.price)]
    digest = hashlib.sha256(_SEP.join(parts).encode("utf-8")).hexdigest()[:6]
    return f"{txn.date.isoformat()}-{digest}"


@dataclass(frozen=True)
class Addresses:
    """Every written transaction's address, and what else names it."""

    primary: dict[Where, str] = field(default_factory=dict)
    """Where a transaction is written -> its address (what the tools show as its ``id``)."""
    repeated_ids: dict[str, list[str]] = field(default_factory=dict)
    """A user ``id`` value used by more than one transaction -> their addresses."""
    by_id: list[tuple[data.Transaction, str]] = field(default_factory=list, repr=False)
    """The transactions addressed by their id, with it (their content addresses are worked out when first asked
    for: a generated ledger, all ids, never pays for hashing)."""
    _contents: dict[str, list[str]] = field(default_factory=dict, repr=False)
    """Content address -> the ids of the transactions shown by their id that have it (worked out when first asked
    for, then kept up to date by :meth:`changed`)."""
    _aliases: dict[str, str] = field(default_factory=dict, repr=False)

    def aliases(self) -> dict[str, str]:
        """Content address -> id, for the transactions shown by their id (a content address two of them share
        names neither). Worked out once; the dict is shared: read it."""
        if self.by_id and not self._contents:
            for txn, address in self.by_id:
                self._contents.setdefault(content_address(txn), []).append(address)
        if self._contents and not self._aliases:
            self._aliases.update({k: v[0] for k, v in self._contents.items() if len(v) == 1})
        return self._aliases

    def changed(
        self,
        primary: dict[Where, str],
        gone: tuple[data.Transaction, str] | None,
        new: tuple[data.Transaction, str] | None,
    ) -> Addresses:
        """These addresses after a write: ``primary`` as it now is, a transaction shown by its id taken out
        and/or one put in (each with its id). What :meth:`aliases` worked out follows the change (one hash each),
        instead of hashing every transaction again when a name is next looked up."""
        by_id = self.by_id
        if gone is not None:
            by_id = [pair for pair in by_id if pair[0] is not gone[0]]
        if new is not None:
            by_id = [*by_id, new]
        contents: dict[str, list[str]] = {}
        if self._contents:
            contents = dict(self._contents)
            if gone is not None:
                key = content_address(gone[0])
                rest = [a for a in contents.get(key, []) if a != gone[1]]
                if rest:
                    contents[key] = rest
                else:
                    contents.pop(key, None)
            if new is not None:
                key = content_address(new[0])
                contents[key] = [*contents.get(key, []), new[1]]
        return Addresses(primary, self.repeated_ids, by_id, contents)


def id_of(txn: data.Transaction) -> str | None:
    """The transaction's ``id`` metadata when it is a non-empty string (what can address it), else None."""
    value = txn.meta.get(ID_KEY)
    return value if isinstance(value, str) and value else None


def id_number(value: object) -> int | None:
    """The number of an id the episode issues (``txn-0042`` -> 42), None for any other value: what matching
    ``^txn-(\\d+)$`` gives, without the pattern (this runs once for every transaction of a ledger)."""
    if not isinstance(value, str) or not value.startswith("txn-"):
        return None
    digits = value[4:-1] if value.endswith("\n") else value[4:]  # "$" also matches before a final line break
    return int(digits) if digits.isdecimal() else None


def assign_addresses(written: list[data.Transaction]) -> Addresses:
    """Addresses for the transactions as written, in file order (main file first, then its includes by line).

    A transaction with an id no other transaction uses is addressed by it; every other one by its content address,
    numbered ``-2``, ``-3`` ... among those when identical ones repeat.

    Args:
        written: the transactions as parsed (not booked), each with ``filename`` and ``lineno`` metadata.
    """
    id_counts = Counter(i for t in written if (i := id_of(t)) is not None)
    taken = {i for i, n in id_counts.items() if n == 1}
    seen: Counter[str] = Counter()
    out = Addresses()
    for txn in written:
        user_id = id_of(txn)
        where = (str(txn.meta["filename"]), int(txn.meta["lineno"]))
        if user_id is not None and id_counts[user_id] == 1:
            out.primary[where] = user_id
            out.by_id.append((txn, user_id))
            continue
        base = content_address(txn)
        seen[base] += 1
        address = base if seen[base] == 1 else f"{base}-{seen[base]}"
        while address in taken:  # a user id that happens to look like a content address keeps its name
            seen[base] += 1
            address = f"{base}-{seen[base]}"
        taken.add(address)
        out.primary[where] = address
        if user_id is not None:
            out.repeated_ids.setdefault(user_id, []).append(address)
    return out
