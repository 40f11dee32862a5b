"""A :class:`.profile.LedgerProfile` derived from a user's own ledger: its accounts, shops, amounts and dates.

Why from the ledger itself: a session on someone's books must talk about *their* checking account, *their*
grocery store and *their* last month, or it tests nothing they care about; and every gold call must succeed on
their file (an account that is not open, a currency an account does not allow, or a change before a balance
assertion would be refused). So everything here is read off the loaded ledger, conservatively:

- the checking account is the ``Assets`` account that pays most of the plain purchases, the card the
  ``Liabilities`` account that does, savings an ``Assets`` account whose name says so (each may be missing);
- receipts are the ledger's own plain purchases (two postings, one ``Expenses`` account, the operating currency,
  no cost or price), one per payee: its most common narration and account, amounts drawn between the smallest and
  largest that payee was paid there;
- categories are the expense accounts those purchases use (and parents grouping two of them); a recategorisation
  moves between two of them that exist, with a reason that fits both kinds (none is invented when none fits);
- "today" is the ledger's last day (a balance assertion after its last transaction counts: a receipt added today
  must not break it), and every edit keeps to days after the last balance assertion of the accounts it touches.
"""

from __future__ import annotations

import calendar
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import date
from decimal import Decimal
from typing import TYPE_CHECKING

from beancount.core import data

from toolwild.envs.domains.ledger.facts import default_payment_account
from toolwild.synth.providers.ledger.catalog import Recategorization, Receipt
from toolwild.synth.providers.ledger.profile import LedgerProfile, Transfer, Trip, concept_chains, greetings

if TYPE_CHECKING:
    from toolwild.envs.domains.ledger.book import LoadedLedger

__all__ = ["Purchase", "plain_purchases", "profile_of"]


@dataclass(frozen=True)
class Purchase:
    """A plain purchase of the ledger: one expense posting paid by one Assets or Liabilities posting."""

    day: date
    payee: str
    narration: str
    category: str
    payment: str
    amount: Decimal


_KINDS: dict[str, tuple[str, ...]] = {
    "groceries": ("grocer", "supermarket"),
    "restaurants": ("restaurant", "dining", "eating", "takeout"),
    "coffee": ("coffee", "cafe"),
    "alcohol": ("alcohol", "bar", "drinks", "wine"),
    "transport": ("transport", "tram", "taxi", "transit", "rideshare", "fuel", "gas"),
    "travel": ("travel", "trip", "hotel", "flight", "vacation", "holiday"),
    "shopping": ("shopping", "household", "clothing"),
    "health": ("health", "pharmacy", "medical"),
    "entertainment": ("entertainment", "movies", "fun"),
}
"""What kind of spending an account's last component names (see :func:`_kind`)."""

_MOVES: tuple[tuple[str, str, str], ...] = (
    ("groceries", "restaurants", "it was hot food from the deli counter"),
    ("groceries", "alcohol", "it was mostly wine"),
    ("restaurants", "coffee", "it was only coffee and a pastry"),
    ("restaurants", "groceries", "it was takeaway food from the market"),
    ("coffee", "restaurants", "it turned into a full lunch"),
    ("alcohol", "restaurants", "it was dinner, not just drinks"),
    ("transport", "travel", "it was for the trip to the airport"),
    ("shopping", "health", "it was a first-aid kit"),
    ("health", "shopping", "it was mostly household stuff"),
    ("entertainment", "restaurants", "it was mostly dinner"),
)
"""Category mistakes a user plausibly corrects: (from kind, to kind, why), most natural first."""

_COUNTRY = re.compile(r"^[A-Z]{2}$")


# ---------------------------------------------------------------------------------------------------- reading
def plain_purchases(loaded: LoadedLedger, currency: str, usable: set[str]) -> list[Purchase]:
    """The ledger's plain purchases in ``currency`` on accounts that allow it (see :class:`Purchase`), by date."""
    out: list[Purchase] = []
    for txn in loaded.transactions:
        if len(txn.postings) != 2 or not txn.payee or not txn.payee.strip():
            continue
        if any(p.cost or p.price or p.units is None or p.units.currency != currency for p in txn.postings):
            continue
        spent = [p for p in txn.postings if p.account.startswith("Expenses:") and p.units.number > 0]
        paid = [p for p in txn.postings if p.account.startswith(("Assets:", "Liabilities:")) and p.units.number < 0]
        if len(spent) != 1 or len(paid) != 1 or not {spent[0].account, paid[0].account} <= usable:
            continue
        out.append(
            Purchase(
                txn.date,
                txn.payee.strip(),
                (txn.narration or "").strip(),
                spent[0].account,
                paid[0].account,
                spent[0].units.number,
            )
        )
    return out


def _usable(loaded: LoadedLedger, currency: str) -> dict[str, date]:
    """Open accounts that may hold ``currency`` (no currency constraint, or one naming it) -> their opening day."""
    return {
        name: entry.date
        for name, entry in loaded.open_accounts().items()
        if not entry.currencies or currency in entry.currencies
    }


def _locks(loaded: LoadedLedger) -> dict[str, date]:
    """Account -> the date of its last balance assertion."""
    out: dict[str, date] = {}
    for entry in loaded.entries:
        if isinstance(entry, data.Balance):
            out[entry.account] = max(out.get(entry.account, entry.date), entry.date)
    return out


def _most_used(accounts: Iterable[str], root: str) -> str | None:
    counts = Counter(a for a in accounts if a.startswith(root + ":"))
    return min(counts, key=lambda a: (-counts[a], a)) if counts else None


def _two_postings(loaded: LoadedLedger, gets: str, gives: str) -> list[data.Transaction]:
    """Two-posting transactions moving money from ``gives`` to ``gets``."""
    out = []
    for txn in loaded.transactions:
        if len(txn.postings) != 2:
            continue
        by = {p.account: p.units.number for p in txn.postings if p.units is not None}
        if by.get(gets, 0) > 0 and by.get(gives, 0) < 0:
            out.append(txn)
    return out


# ---------------------------------------------------------------------------------------------------- words
_PLURALS = {"restaurant": "restaurants"}
"""Account names people say in the plural ("How much did I spend on restaurants?")."""


def _spoken(component: str) -> str:
    """``"PreTax401k"`` -> ``"pre tax401k"``, ``"Opening-Balances"`` -> ``"opening balances"``."""
    words = re.sub(r"(?<=[a-z])(?=[A-Z])", " ", component).replace("-", " ").replace("_", " ").lower()
    return _PLURALS.get(words, words)


def _card_nick(account: str) -> str:
    """How a user calls a card: "credit card", "Chase Slate card", "Amex card" (country codes like "US" skipped).

    The nickname always says the account's last part ("Slate" of ``Liabilities:US:Chase:Slate``): that is how
    the words name the card among the chart's accounts (:func:`toolwild.core.hidden_intent.states`), where
    "my Chase card" would leave the agent to guess."""
    words = [w for w in account.split(":")[1:] if not _COUNTRY.match(w)] or [account.split(":")[-1]]
    last = words[-1]
    if len(words) == 1:
        return "credit card" if "card" in last.lower() else f"{last} card"
    if "card" in last.lower():
        return f"{words[-2]} {_spoken(last)}"
    if "card" in words[-2].lower():
        return f"{last} card"
    return f"{words[-2]} {last} card"


def _nicknames(accounts: Iterable[str], roles: dict[str, str | None]) -> dict[str, str]:
    """Account -> spoken name: the last component, or the last two where that would name two accounts."""
    names = sorted(set(accounts))
    short = {a: _spoken(a.split(":")[-1]) for a in names if ":" in a}
    clashes = Counter(short.values())
    out = {a: (s if clashes[s] == 1 else " ".join(_spoken(p) for p in a.split(":")[-2:])) for a, s in short.items()}
    out["Expenses"] = "spending"
    checking, savings, card = roles.get("checking"), roles.get("savings"), roles.get("card")
    if checking is not None and "checking" in checking.split(":")[-1].lower():
        out[checking] = "checking"
    if savings is not None and "saving" in savings.split(":")[-1].lower():
        out[savings] = "savings"
    if card is not None:
        out[card] = _card_nick(card)
    return out


def _kind(account: str) -> str | None:
    """The kind of spending an account names by one of the words of its last component ("Restaurants" ->
    restaurants; "Barber" is no bar)."""
    words = _spoken(account.split(":")[-1]).split()

    def names(word: str, key: str) -> bool:
        return word in (key, key + "s") or (len(key) >= 5 and word.startswith(key))

    return next((k for k, keys in _KINDS.items() if any(names(w, key) for w in words for key in keys)), None)


# ---------------------------------------------------------------------------------------------------- pieces
def _receipts(purchases: list[Purchase]) -> tuple[Receipt, ...]:
    """One receipt per payee with a narration: its most common narration and category, amounts within the range
    that payee was paid in that category (a payee always paid the same amount is a bill, not a receipt)."""
    by_payee: dict[str, list[Purchase]] = {}
    for p in purchases:
        if p.narration:
            by_payee.setdefault(p.payee, []).append(p)
    out = []
    for payee in sorted(by_payee):
        kinds = Counter((p.narration, p.category) for p in by_payee[payee])
        narration, category = min(kinds, key=lambda k: (-kinds[k], k))
        amounts = [p.amount for p in by_payee[payee] if p.category == category]
        low, high = min(amounts), max(amounts)
        if len(amounts) < 2 or high - low < Decimal("0.10"):
            continue
        spoken = "for " + narration[:1].lower() + narration[1:]
        out.append(Receipt(payee, narration, category, float(low), float(high), spoken))
    return tuple(out)


def _findable(loaded: LoadedLedger, purchases: list[Purchase]) -> frozenset[str]:
    """Payees of plain purchases that no other payee of the ledger contains (case-insensitive, as the search)."""
    every = {t.payee.strip() for t in loaded.transactions if t.payee and t.payee.strip()}
    folded = [(p, p.casefold()) for p in every]
    return frozenset(
        p.payee for p in purchases if not any(other != p.payee and p.payee.casefold() in low for other, low in folded)
    )


def _categories(purchases: list[Purchase]) -> tuple[str, ...]:
    """Expense accounts with two or more plain purchases, and the parents that group two of them."""
    counts = Counter(p.category for p in purchases)
    leaves = sorted(a for a, n in counts.items() if n >= 2)
    parents = Counter(a.rsplit(":", 1)[0] for a in leaves if a.count(":") >= 2)
    return tuple(sorted({*leaves, *(a for a, n in parents.items() if n >= 2)}))


def _recategorizations(categories: Iterable[str], usable: dict[str, date]) -> dict[str, Recategorization]:
    """Each category that a plausible mistake moves to another existing expense account, with the user's reason."""
    expense = sorted(a for a in usable if a.startswith("Expenses:"))
    of_kind: dict[str, str] = {}
    for account in expense:
        kind = _kind(account)
        if kind is not None and kind not in of_kind:
            of_kind[kind] = account
    out: dict[str, Recategorization] = {}
    for source in categories:
        kind = _kind(source)
        for src, dst, reason in _MOVES:
            target = of_kind.get(dst)
            if src == kind and target is not None and target != source:
                out[source] = Recategorization(target, reason)
                break
    return out


def _transfer(loaded: LoadedLedger, checking: str | None, savings: str | None) -> Transfer | None:
    """How the books word a move from checking to savings (the latest one that has a payee and a narration)."""
    if checking is None or savings is None:
        return None
    moves = [t for t in _two_postings(loaded, savings, checking) if t.payee and t.narration]
    return Transfer(moves[-1].payee.strip(), moves[-1].narration.strip()) if moves else None


def _salary(loaded: LoadedLedger, usable: dict[str, date]) -> str | None:
    named = [a for a in usable if a.startswith("Income:") and "salary" in a.lower()]
    return min(named) if named else None


def _busiest(purchases: list[Purchase]) -> str:
    """The last component of the category with the most purchases (a BQL regex naming it; account components are
    letters, digits and hyphens, literal in a regex)."""
    counts = Counter(p.category for p in purchases)
    return min(counts, key=lambda a: (-counts[a], a)).split(":")[-1] if counts else "Expenses"


def _since(first: date, today: date) -> dict[str, str]:
    """How running totals are qualified: "this year" when the books cover one calendar year, else their start."""
    if first.year == today.year:
        return {}
    start = f"since {calendar.month_name[first.month]} {first.year}"
    return {"so_far": start, "this_year": start, "since_start": start}


# ---------------------------------------------------------------------------------------------------- the profile
def profile_of(loaded: LoadedLedger) -> LedgerProfile:
    """The profile of a user's loaded ledger, loaded cleanly (see the module docstring).

    Its default payment account (where ``add_transaction`` pays from when no account is given) is the one the
    ledger's episodes use (:func:`toolwild.envs.domains.ledger.facts.default_payment_account`; None: it must always
    be named).
    """
    currency = loaded.operating_currency
    usable = _usable(loaded, currency)
    purchases = plain_purchases(loaded, currency, set(usable))
    checking = _most_used((p.payment for p in purchases), "Assets")
    card = _most_used((p.payment for p in purchases), "Liabilities")
    savings = min(
        (a for a in usable if a.startswith("Assets:") and "saving" in a.lower() and a != checking), default=None
    )
    receipts = _receipts(purchases)
    categories = _categories(purchases)
    locks = _locks(loaded)
    days = [t.date for t in loaded.transactions]
    today = max([*days, *locks.values()], default=date.today())
    roles = {"checking": checking, "savings": savings, "card": card}
    travel = next((a for a in sorted(usable) if a.startswith("Expenses:") and _kind(a) == "travel"), None)
    bare = LedgerProfile(
        checking=checking,
        savings=savings,
        card=card,
        default_payment=default_payment_account(loaded),
        currency=currency,
        receipts=receipts,
        recategorizations=_recategorizations(categories, usable),
        findable_payees=_findable(loaded, purchases),
        concept_chains=(),
        greetings=(),
        spend_categories=categories,
        compare_categories=categories,
        clarify_categories=tuple(sorted({r.account for r in receipts})),
        query_pattern=_busiest(purchases),
        sweep=_transfer(loaded, checking, savings),
        trip=Trip(travel, "the trip") if travel else None,
        nicknames=_nicknames([*usable, *categories], roles),
        today=today,
        locks=locks,
        opened=usable,
        narration_reasons=False,
        **_since(min(days, default=today), today),
    )
    return _with_chats(bare, loaded, purchases, receipts, usable)


def _with_chats(
    bare: LedgerProfile,
    loaded: LoadedLedger,
    purchases: list[Purchase],
    receipts: tuple[Receipt, ...],
    usable: dict[str, date],
) -> LedgerProfile:
    """The profile with the concept chats and greetings whose accounts and claims the ledger bears out."""
    roles = {k: v for k, v in {"checking": bare.checking, "savings": bare.savings, "card": bare.card}.items() if v}
    roles["expenses"] = "Expenses"
    salary = _salary(loaded, usable)
    if salary:
        roles["salary"] = salary
    example = Counter(r.account for r in receipts).most_common(1)
    if example:
        roles["example"] = example[0][0]
    groceries = next((a for a in sorted(usable) if a.startswith("Expenses:") and _kind(a) == "groceries"), None)
    if groceries:
        roles["groceries"] = groceries
    facts: set[str] = set()
    if bare.card and bare.checking and _two_postings(loaded, bare.card, bare.checking):
        facts.add("card_paid_from_checking")
    if salary and bare.checking and _two_postings(loaded, bare.checking, salary):
        facts.add("salary_to_checking")
    facts |= {f"{role}_asserted" for role in ("checking", "savings") if roles.get(role) in bare.locks}
    names = bare.names(roles)
    return replace(
        bare, concept_chains=concept_chains(names, roles, frozenset(facts)), greetings=greetings(names, roles)
    )
