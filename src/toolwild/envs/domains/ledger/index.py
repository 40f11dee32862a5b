"""What the read tools look things up in, worked out once per loaded ledger instead of walking every transaction.

A ledger of 50,000 transactions has 100,000 postings; adding up an account's postings one by one into a
beancount ``Inventory`` takes a tenth of a second or more, on every ``get_balance``. These indexes answer the same
questions from lists kept per account and currency (a balance is then a sum of a slice), and from the transactions'
dates (a date range is then a slice). They are kept in the ledger's memo, so a ledger builds each at most once, and
a write hands the new ledger updated copies (:func:`revised_postings`).

An index answers only where its answer is provably the one the walk would give: an account's balance in one
currency whose amounts have at most two decimals and whose sizes cannot round (see :func:`balance`); elsewhere
the tool walks the transactions as before.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from decimal import Decimal

from beancount.core import data

from toolwild.envs.domains.ledger.book import LoadedLedger

__all__ = ["POSTINGS_MEMO", "Postings", "balance", "between", "postings", "revised_postings"]

POSTINGS_MEMO = "postings"
"""The key of a loaded ledger's :class:`Postings` in its memo."""
_DATES_MEMO = "dates"
_EXACT_BELOW = 1e25
"""A sum of amounts with at most two decimals, each partial sum smaller than this, has fewer than 28 significant
digits, Decimal's precision: it is exact, whatever order it is added in."""


@dataclass
class _Series:
    """One account's postings in one currency: their dates (ascending) and amounts."""

    dates: list[dt.date] = field(default_factory=list)
    amounts: list[Decimal] = field(default_factory=list)
    _cents: bool | None = None
    """Every amount has at most two decimals (None: not worked out yet; the first balance asked works it out)."""
    _size: float = 0.0
    """The sum of the amounts' sizes (a bound on every partial sum)."""

    def add(self, date: dt.date, number: Decimal) -> None:
        at = bisect_right(self.dates, date)
        self.dates.insert(at, date)
        self.amounts.insert(at, number)
        if self._cents is not None:
            self._cents = self._cents and _cents(number)
            self._size += abs(float(number))

    def remove(self, date: dt.date, number: Decimal) -> bool:
        low, high = bisect_left(self.dates, date), bisect_right(self.dates, date)
        for i in range(low, high):
            if self.amounts[i] == number:
                del self.dates[i], self.amounts[i]
                return True  # the flags stay: at most two decimals still holds, the size is still a bound
        return False

    def copy(self) -> _Series:
        return _Series(list(self.dates), list(self.amounts), self._cents, self._size)

    def exact(self) -> tuple[bool, float]:
        """(every amount has at most two decimals, the sum of the sizes).

        One sum in C instead of a look at every amount: summed exactly (any rounding raises here), the sizes add
        up to a number whose exponent is the smallest of theirs, so it has at most two decimals exactly when each
        has."""
        if self._cents is None:
            with decimal.localcontext() as context:
                context.prec = 28
                context.traps[decimal.Inexact] = context.traps[decimal.Rounded] = True
                try:
                    size = sum(map(abs, self.amounts), Decimal(0))
                except decimal.DecimalException:
                    self._cents, self._size = False, math.inf
                else:
                    self._cents, self._size = _cents(size), float(size)
        return self._cents, self._size

    def total(self, as_of: dt.date | None) -> Decimal:
        cut = len(self.dates) if as_of is None else bisect_right(self.dates, as_of)
        return sum(self.amounts[:cut], Decimal(0))


def _cents(number: Decimal) -> bool:
    exponent = number.as_tuple().exponent
    return isinstance(exponent, int) and exponent >= -2


@dataclass
class Postings:
    """Every posting's units by account, then currency (posting accounts, open or not, as the tools walk them)."""

    by_account: dict[str, dict[str, _Series]] = field(default_factory=dict)


def postings(loaded: LoadedLedger) -> Postings:
    """The ledger's :class:`Postings`, built on first use (one pass over the postings, two appends each)."""
    found = loaded.memo.get(POSTINGS_MEMO)
    if found is None:
        by_account: dict[str, dict[str, _Series]] = {}
        for txn in loaded.transactions:
            date = txn.date
            for posting in txn.postings:
                units = posting.units
                per = by_account.get(posting.account)
                if per is None:
                    per = by_account[posting.account] = {}
                series = per.get(units.currency)
                if series is None:
                    series = per[units.currency] = _Series()
                if series.dates and date < series.dates[-1]:
                    series.add(date, units.number)
                else:  # the ledger's order is by date: appending is the rule
                    series.dates.append(date)
                    series.amounts.append(units.number)
        found = loaded.memo[POSTINGS_MEMO] = Postings(by_account)
    return found


def revised_postings(old: Postings, gone: data.Transaction | None, new: data.Transaction | None) -> Postings | None:
    """``old`` after one booked transaction was taken out and/or one put in: the accounts they touch copied and
    changed, the others shared. None when the one taken out is not found (then it is built anew when asked)."""
    by_account = dict(old.by_account)
    copied: set[tuple[str, str]] = set()

    def series(account: str, currency: str) -> _Series:
        per = by_account[account] = dict(by_account.get(account, {}))
        if (account, currency) not in copied:
            per[currency] = per[currency].copy() if currency in per else _Series()
            copied.add((account, currency))
        return per[currency]

    for posting in gone.postings if gone is not None else ():
        units = posting.units
        if not series(posting.account, units.currency).remove(gone.date, units.number):  # type: ignore[union-attr]
            return None
    for posting in new.postings if new is not None else ():
        units = posting.units
        series(posting.account, units.currency).add(new.date, units.number)  # type: ignore[union-attr]
    return Postings(by_account)


def balance(index: Postings, accounts: list[str], as_of: dt.date | None) -> tuple[str, Decimal] | None:
    """(currency, total) of these accounts' postings up to ``as_of`` when all are in one currency, every amount has
    at most two decimals and no partial sum can round; None otherwise (the caller walks the transactions: a mix of
    currencies is shown in the order an ``Inventory`` meets them, and a rounding sum depends on the order added).

    With one currency and exact sums, the total is the walk's total whatever the order, and with at most two
    decimals it prints the same (:func:`~toolwild.envs.domains.ledger.money.format_number` shows two)."""
    found = [s for a in accounts for s in index.by_account.get(a, {}).items()]
    if len({currency for currency, _ in found}) > 1:
        return None
    checks = [s.exact() for _, s in found]
    if not all(cents for cents, _ in checks) or sum(size for _, size in checks) >= _EXACT_BELOW:
        return None
    if not found:
        return ("", Decimal(0))
    total = sum((s.total(as_of) for _, s in found), Decimal(0))
    return found[0][0], total


def between(loaded: LoadedLedger, start: dt.date | None, end: dt.date | None) -> list[data.Transaction]:
    """The booked transactions dated from ``start`` to ``end`` (inclusive, None: open), in the ledger's order: a
    slice, since that order is by date."""
    dates = loaded.memo.get(_DATES_MEMO)
    if dates is None:
        dates = loaded.memo[_DATES_MEMO] = [t.date for t in loaded.transactions]
    low = bisect_left(dates, start) if start is not None else 0
    high = bisect_right(dates, end) if end is not None else len(dates)
    return loaded.transactions[low:high]
