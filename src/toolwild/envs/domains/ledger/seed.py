"""A deterministic, realistic personal-finance ledger in Beancount syntax.

The ledger is the starting state of every ledger episode, so it must be reproducible from a seed alone (a suite
stores only the seed), load with zero errors, and look like a real person's books: a salary twice a month, rent, a
credit card that is paid off, groceries at real chains, and a couple of balance assertions that hold. Every
transaction carries a stable ``id`` metadata value (``txn-0001`` ...) so tools and gold calls can address it.
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass
from datetime import date, timedelta
from decimal import Decimal

__all__ = [
    "ACCOUNTS",
    "CHECKING",
    "CREDIT_CARD",
    "SAVINGS",
    "generate_ledger",
    "ledger_today",
    "month_start",
]

CHECKING = "Assets:Bank:Checking"
SAVINGS = "Assets:Bank:Savings"
CREDIT_CARD = "Liabilities:CreditCard"
_OPENING = "Equity:Opening-Balances"
_SALARY = "Income:Salary"

ACCOUNTS: tuple[str, ...] = (
    CHECKING,
    SAVINGS,
    CREDIT_CARD,
    _OPENING,
    _SALARY,
    "Expenses:Entertainment",
    "Expenses:Food:Groceries",
    "Expenses:Food:Restaurants",
    "Expenses:Health",
    "Expenses:Rent",
    "Expenses:Shopping",
    "Expenses:Transport",
    "Expenses:Travel",
    "Expenses:Utilities",
)
"""Every account the seed ledger opens (all in USD)."""

_CENT = Decimal("0.01")


@dataclass(frozen=True)
class _Spend:
    """A kind of everyday purchase: where, what, how much, how often, and how it is usually paid."""

    payee: str
    narration: str
    account: str
    low: float
    high: float
    daily_probability: float
    card_share: float


_EVERYDAY: tuple[_Spend, ...] = (
    _Spend("Whole Foods", "Groceries", "Expenses:Food:Groceries", 24, 165, 0.11, 0.6),
    _Spend("Trader Joe's", "Groceries", "Expenses:Food:Groceries", 18, 95, 0.11, 0.5),
    _Spend("Safeway", "Groceries", "Expenses:Food:Groceries", 15, 120, 0.08, 0.4),
    _Spend("Chipotle", "Lunch", "Expenses:Food:Restaurants", 11, 19, 0.05, 0.9),
    _Spend("Sweetgreen", "Lunch", "Expenses:Food:Restaurants", 12, 18, 0.05, 0.9),
    _Spend("Blue Bottle Coffee", "Coffee", "Expenses:Food:Restaurants", 4.5, 9, 0.07, 0.9),
    _Spend("Tartine Bakery", "Breakfast", "Expenses:Food:Restaurants", 8, 22, 0.03, 0.8),
    _Spend("Nopa", "Dinner", "Expenses:Food:Restaurants", 48, 125, 0.025, 1.0),
    _Spend("Uber", "Ride", "Expenses:Transport", 11, 46, 0.11, 1.0),
    _Spend("Shell", "Gas", "Expenses:Transport", 36, 72, 0.09, 0.7),
    _Spend("AMC Theatres", "Movie tickets", "Expenses:Entertainment", 15, 42, 0.03, 1.0),
    _Spend("Amazon", "Household order", "Expenses:Shopping", 12, 150, 0.07, 1.0),
    _Spend("Target", "Household supplies", "Expenses:Shopping", 20, 120, 0.04, 0.7),
    _Spend("REI", "Outdoor gear", "Expenses:Shopping", 40, 220, 0.015, 1.0),
    _Spend("CVS Pharmacy", "Pharmacy", "Expenses:Health", 8, 45, 0.035, 0.6),
)


@dataclass
class _Txn:
    day: date
    payee: str
    narration: str
    postings: list[tuple[str, Decimal]]


def month_start(start: date, offset: int) -> date:
    """The first day of the month ``offset`` months after ``start``'s month."""
    index = start.year * 12 + (start.month - 1) + offset
    return date(index // 12, index % 12 + 1, 1)


def ledger_today(seed: int, *, months: int = 4, start: date = date(2024, 1, 1)) -> date:
    """The "today" of a seeded ledger: a day between the 18th and 26th of its last month.

    The ledger ends on this day (nothing is dated later), so relative phrases in a suite ("today", "last month",
    "this month") always point at real data.
    """
    return month_start(start, max(months, 1) - 1) + timedelta(days=17 + seed % 9)


def _money(rng: random.Random, low: float, high: float) -> Decimal:
    return Decimal(str(round(rng.uniform(low, high), 2))).quantize(_CENT)


def _fmt(amount: Decimal) -> str:
    return f"{amount.quantize(_CENT):,.2f}".replace(",", "")


def _pay(day: date, payee: str, narration: str, to: str, amount: Decimal | str, source: str) -> _Txn:
    """A two-posting transaction: ``amount`` goes from ``source`` to ``to``."""
    value = Decimal(amount)
    return _Txn(day, payee, narration, [(to, value), (source, -value)])


def _scheduled(rng: random.Random, day: date, salary: Decimal, rent: Decimal, card_balance: Decimal) -> list[_Txn]:
    """The fixed monthly rhythm: pay, rent, savings, bills, subscriptions, the card payment."""
    out: list[_Txn] = []
    if day.day in (1, 15):
        out.append(_pay(day, "Acme Corp", "Salary", CHECKING, salary, _SALARY))
    if day.day == 1:
        out.append(_pay(day, "Parkside Apartments", "Rent", "Expenses:Rent", rent, CHECKING))
    if day.day == 2:
        out.append(_pay(day, "Clipper", "Transit pass", "Expenses:Transport", "86.00", CHECKING))
    if day.day == 3:
        out.append(_pay(day, "Chase", "Transfer to savings", SAVINGS, "500.00", CHECKING))
    if day.day == 5:
        out.append(_pay(day, "Netflix", "Subscription", "Expenses:Entertainment", "15.49", CREDIT_CARD))
    if day.day == 8:
        out.append(_pay(day, "PG&E", "Electricity bill", "Expenses:Utilities", _money(rng, 58, 142), CHECKING))
    if day.day == 9:
        out.append(_pay(day, "Spotify", "Subscription", "Expenses:Entertainment", "10.99", CREDIT_CARD))
    if day.day == 12:
        out.append(_pay(day, "Comcast", "Internet", "Expenses:Utilities", "79.99", CREDIT_CARD))
    if day.day == 19:
        out.append(_pay(day, "SF Water", "Water bill", "Expenses:Utilities", _money(rng, 34, 61), CHECKING))
    if day.day == 22 and card_balance < 0:
        out.append(_pay(day, "Chase", "Credit card payment", CREDIT_CARD, -card_balance, CHECKING))
    return out


def _everyday(rng: random.Random, day: date) -> list[_Txn]:
    out: list[_Txn] = []
    for spend in _EVERYDAY:
        if rng.random() < spend.daily_probability:
            amount = _money(rng, spend.low, spend.high)
            paid_with = CREDIT_CARD if rng.random() < spend.card_share else CHECKING
            out.append(_pay(day, spend.payee, spend.narration, spend.account, amount, paid_with))
    return out


def _trip(rng: random.Random, start: date, months: int) -> list[_Txn]:
    """One trip in the second or third month (if the ledger is that long): a flight and a stay, on the card."""
    if months < 2:
        return []
    first = month_start(start, rng.choice(range(1, min(months, 3)))) + timedelta(days=rng.randint(5, 12))
    flight = _money(rng, 240, 420)
    stay = _money(rng, 310, 640)
    return [
        _pay(first, "Alaska Airlines", "Flight to Denver", "Expenses:Travel", flight, CREDIT_CARD),
        _pay(first + timedelta(days=2), "Airbnb", "Denver stay", "Expenses:Travel", stay, CREDIT_CARD),
    ]


def _render_txn(txn: _Txn, txn_id: str) -> str:
    lines = [f'{txn.day.isoformat()} * "{txn.payee}" "{txn.narration}"', f'  id: "{txn_id}"']
    lines.extend(f"  {account:<28}{_fmt(amount):>11} USD" for account, amount in txn.postings)
    return "\n".join(lines)


@functools.lru_cache(maxsize=16)
def generate_ledger(seed: int, *, months: int = 4, start: date = date(2024, 1, 1)) -> str:
    """The Beancount text of a seeded personal ledger from ``start`` to :func:`ledger_today`.

    The last few texts made are kept (a suite opens a session's ledger once per build attempt and once more to
    verify it; a text is about 20 kB).

    Args:
        seed: the random seed; the same seed always gives byte-identical text.
        months: how many calendar months the ledger spans (the last one ends "today").
        start: the first day of the ledger (the opening balances are dated on it).
    """
    if months < 1:
        raise ValueError("months must be at least 1")
    rng = random.Random(seed)
    end = ledger_today(seed, months=months, start=start)
    salary = Decimal(rng.choice(range(2350, 3100, 25))) + Decimal(rng.choice((0, 40, 65))) / 100
    rent = Decimal(rng.choice((1650, 1795, 1850, 1925, 2100)))
    opening = {
        CHECKING: Decimal(rng.choice(range(2400, 4800, 100))) + _money(rng, 0, 0.99),
        SAVINGS: Decimal(rng.choice(range(8000, 16000, 500))),
        CREDIT_CARD: -_money(rng, 150, 600),
    }
    txns: list[_Txn] = [
        _Txn(
            start,
            "Opening Balance",
            "Balances carried over",
            [*opening.items(), (_OPENING, -sum(opening.values(), Decimal(0)))],
        )
    ]
    trip = _trip(rng, start, months)
    card = opening[CREDIT_CARD]
    day = start
    while day <= end:
        today = [t for t in trip if t.day == day]
        today += _scheduled(rng, day, salary, rent, card)
        today += _everyday(rng, day)
        for t in today:
            card += sum((amt for acct, amt in t.postings if acct == CREDIT_CARD), Decimal(0))
        txns.extend(today)
        day += timedelta(days=1)

    # Balance assertions at the start of months 2 and 3 (before anything a suite edits, which is all in the
    # last month), on the two bank accounts; a balance assertion holds at the *start* of its day.
    checks: list[tuple[date, str]] = []
    if months >= 2:
        checks.append((month_start(start, 1), CHECKING))
        checks.append((month_start(start, min(2, months - 1)), SAVINGS))
    else:
        checks.append((start + timedelta(days=1), SAVINGS))

    blocks: list[tuple[date, int, str]] = []
    for number, t in enumerate(txns, start=1):
        blocks.append((t.day, 1, _render_txn(t, f"txn-{number:04d}")))
    for when, account in checks:
        total = sum((amt for t in txns if t.day < when for acct, amt in t.postings if acct == account), Decimal(0))
        blocks.append((when, 0, f"{when.isoformat()} balance {account:<28}{_fmt(total):>11} USD"))
    blocks.sort(key=lambda b: (b[0], b[1]))

    header = [
        'option "title" "Household finances"',
        'option "operating_currency" "USD"',
        "",
        *(f"{start.isoformat()} open {account} USD" for account in ACCOUNTS),
    ]
    return "\n".join(header) + "\n\n" + "\n\n".join(text for _, _, text in blocks) + "\n"
