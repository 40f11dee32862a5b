"""How a person talks about their money: nicknames of accounts, amounts, days and periods.

Task templates write utterances and gold answers with these helpers so that the same account, amount or period
is always spoken of the same way, and the gold arguments (ISO dates, full account names) stay exact.
"""

from __future__ import annotations

import calendar
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, timedelta
from decimal import Decimal

from toolwild.envs.domains.ledger.seed import CHECKING, CREDIT_CARD, SAVINGS, month_start

__all__ = [
    "CATEGORY_NICKS",
    "Period",
    "capital",
    "day_phrase",
    "last_month",
    "money",
    "month_before_last",
    "month_day",
    "month_end_phrase",
    "nick",
    "number",
    "of_day",
    "this_month",
]

CATEGORY_NICKS: dict[str, str] = {
    CHECKING: "checking",
    SAVINGS: "savings",
    CREDIT_CARD: "credit card",
    "Income:Salary": "salary",
    "Expenses": "spending",
    "Expenses:Food": "food",
    "Expenses:Food:Groceries": "groceries",
    "Expenses:Food:Restaurants": "restaurants",
    "Expenses:Transport": "transport",
    "Expenses:Travel": "travel",
    "Expenses:Shopping": "shopping",
    "Expenses:Health": "health",
    "Expenses:Entertainment": "entertainment",
    "Expenses:Utilities": "utilities",
    "Expenses:Rent": "rent",
}
"""The everyday name of each account, as a user would say it."""


def nick(account: str, names: Mapping[str, str] = CATEGORY_NICKS) -> str:
    """The everyday name of an account ("Expenses:Food:Groceries" -> "groceries"): ``names`` has it, else its last
    component."""
    return names.get(account, account.rsplit(":", 1)[-1].lower())


def capital(text: str) -> str:
    """``text`` with its first letter upper case ("the Chase card" -> "The Chase card"; ``str.capitalize`` would
    lower the rest)."""
    return text[:1].upper() + text[1:]


def of_day(day: date, today: date) -> str:
    """A day as a noun modifier: ``from today``, ``from yesterday``, ``from April 3``."""
    if day == today:
        return "from today"
    if day == today - timedelta(days=1):
        return "from yesterday"
    return f"from {calendar.month_name[day.month]} {day.day}"


def month_end_phrase(day: date) -> str:
    """``March`` for a month's last day, else ``March 14``."""
    if (day + timedelta(days=1)).day == 1:
        return calendar.month_name[day.month]
    return f"{calendar.month_name[day.month]} {day.day}"


def money(amount: Decimal | str, currency: str = "USD") -> str:
    """``$1,234.50`` (negative amounts keep their sign: ``-$12.00``); another currency than USD is said by its code
    (``1,234.50 EUR``)."""
    value = Decimal(amount)
    sign = "-" if value < 0 else ""
    if currency != "USD":
        return f"{sign}{abs(value):,.2f} {currency}"
    return f"{sign}${abs(value):,.2f}"


def number(amount: Decimal | str) -> str:
    """``42.10``: how a user types an amount."""
    return f"{Decimal(amount):.2f}"


def day_phrase(day: date, today: date) -> str:
    """``today``, ``yesterday`` or ``on April 3``."""
    if day == today:
        return "today"
    if day == today - timedelta(days=1):
        return "yesterday"
    return f"on {calendar.month_name[day.month]} {day.day}"


def month_day(day: date) -> str:
    """``April 3``."""
    return f"{calendar.month_name[day.month]} {day.day}"


@dataclass(frozen=True)
class Period:
    """A date range a user names ("last month") with its exact ISO bounds."""

    start: date
    end: date
    label: str
    """How the user says it, e.g. "last month" or "in February"."""

    @property
    def start_iso(self) -> str:
        """The first day, YYYY-MM-DD."""
        return self.start.isoformat()

    @property
    def end_iso(self) -> str:
        """The last day, YYYY-MM-DD."""
        return self.end.isoformat()

    @property
    def name(self) -> str:
        """The period as a noun ("March", "April so far")."""
        if self.start.day == 1 and (self.end + timedelta(days=1)).day == 1:
            return calendar.month_name[self.start.month]
        return f"{calendar.month_name[self.start.month]} so far"


def _whole_month(first: date, label: str) -> Period:
    last = date(first.year, first.month, calendar.monthrange(first.year, first.month)[1])
    return Period(first, last, label)


def last_month(today: date) -> Period:
    """The calendar month before today's."""
    return _whole_month(month_start(today, -1), "last month")


def month_before_last(today: date) -> Period:
    """The calendar month two before today's."""
    first = month_start(today, -2)
    return _whole_month(first, f"in {calendar.month_name[first.month]}")


def this_month(today: date) -> Period:
    """From the first of today's month to today."""
    return Period(today.replace(day=1), today, "this month")
