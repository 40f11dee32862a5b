"""Facts about a ledger that tools and task generation both need, read from the ledger itself.

Only what the ledger *is* belongs here; how tasks are made from it lives in :mod:`toolwild.synth.providers.ledger`.
"""

from __future__ import annotations

from collections import Counter
from decimal import Decimal

from beancount.core import account as bc_account

from toolwild.envs.domains.ledger.book import LoadedLedger

__all__ = ["PAYMENT_ROOTS", "default_payment_account", "payment_account_uses"]

PAYMENT_ROOTS = ("Assets", "Liabilities")
"""Where money for an expense comes from: a bank account first, then a card."""


def payment_account_uses(loaded: LoadedLedger) -> Counter[str]:
    """How often each open Assets or Liabilities account pays for an expense in a simple purchase: a transaction
    of two postings, one a positive ``Expenses`` posting, the other a negative posting of that account.

    It runs for every transaction when an episode on a user's ledger starts, so it is written out flat: one pass
    over each transaction's two postings (a posting's root is its first component, what ``account.root(1, ...)``
    gives)."""
    opened = loaded.open_accounts()
    uses: Counter[str] = Counter()
    for txn in loaded.transactions:
        postings = txn.postings
        if len(postings) != 2:
            continue
        expenses = 0
        funding = []
        for posting in postings:
            sign = _sign(posting)
            root = posting.account.partition(":")[0]
            if sign > 0 and root == "Expenses":
                expenses += 1
            elif sign < 0 and root in PAYMENT_ROOTS:
                funding.append(posting.account)
        if expenses == 1 and len(funding) == 1 and funding[0] in opened:
            uses[funding[0]] += 1
    return uses


def _sign(posting: object) -> int:
    number = getattr(getattr(posting, "units", None), "number", None)
    return (number > 0) - (number < 0) if isinstance(number, Decimal) else 0


def default_payment_account(loaded: LoadedLedger) -> str | None:
    """The account ``add_transaction`` pays from when the agent names none, or None when the ledger has no clear one.

    It is the open Assets account (a bank account) that pays for the most simple purchases; when no Assets account
    pays for any, the Liabilities account (a card) that pays for the most. A tie at the top is no clear default. On
    the built-in generated ledgers this is ``Assets:Bank:Checking``.
    """
    uses = payment_account_uses(loaded)
    for root in PAYMENT_ROOTS:
        ranked = [(n, name) for name, n in uses.items() if bc_account.root(1, name) == root]
        ranked.sort(reverse=True)
        if ranked:
            if len(ranked) > 1 and ranked[0][0] == ranked[1][0]:
                return None
            return ranked[0][1]
    return None
