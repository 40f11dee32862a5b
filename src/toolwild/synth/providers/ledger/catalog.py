"""The things a ledger user talks about: today's receipts, plausible category mistakes, and concept questions.

Kept apart from the templates so wording and amounts can be extended without touching the generation logic.
"""

from __future__ import annotations

from dataclasses import dataclass

from toolwild.envs.domains.ledger.seed import CHECKING, CREDIT_CARD, SAVINGS

__all__ = [
    "CONCEPT_CHAINS",
    "FINDABLE_PAYEES",
    "RECATEGORIZATIONS",
    "RECEIPTS",
    "Concept",
    "Recategorization",
    "Receipt",
]


@dataclass(frozen=True)
class Receipt:
    """A purchase a user may ask to record: who, what (the narration the user says), where it belongs, how much."""

    payee: str
    narration: str
    account: str
    low: float
    high: float
    spoken: str
    """How the user describes it: "for groceries", "for lunch"."""


RECEIPTS: tuple[Receipt, ...] = (
    Receipt("Whole Foods", "Groceries", "Expenses:Food:Groceries", 24, 140, "for groceries"),
    Receipt("Trader Joe's", "Groceries", "Expenses:Food:Groceries", 18, 95, "for groceries"),
    Receipt("Safeway", "Groceries", "Expenses:Food:Groceries", 15, 120, "for groceries"),
    Receipt("Chipotle", "Lunch", "Expenses:Food:Restaurants", 11, 19, "for lunch"),
    Receipt("Blue Bottle Coffee", "Coffee", "Expenses:Food:Restaurants", 4.5, 9, "for coffee"),
    Receipt("Nopa", "Dinner", "Expenses:Food:Restaurants", 48, 125, "for dinner"),
    Receipt("Uber", "Ride home", "Expenses:Transport", 12, 45, "for a ride home"),
    Receipt("Shell", "Gas", "Expenses:Transport", 36, 72, "for gas"),
    Receipt("CVS Pharmacy", "Pharmacy", "Expenses:Health", 8, 45, "for pharmacy items"),
    Receipt("Target", "Household supplies", "Expenses:Shopping", 20, 120, "for household supplies"),
    Receipt("AMC Theatres", "Movie tickets", "Expenses:Entertainment", 15, 42, "for movie tickets"),
)


@dataclass(frozen=True)
class Recategorization:
    """A plausible category mistake: what it should have been, and why the user says so."""

    target: str
    reason: str


RECATEGORIZATIONS: dict[str, Recategorization] = {
    "Expenses:Food:Groceries": Recategorization("Expenses:Food:Restaurants", "it was hot food from the deli counter"),
    "Expenses:Food:Restaurants": Recategorization("Expenses:Travel", "it was a meal on the Denver trip"),
    "Expenses:Transport": Recategorization("Expenses:Travel", "it was for the trip to the airport"),
    "Expenses:Shopping": Recategorization("Expenses:Health", "it was a first-aid kit"),
    "Expenses:Health": Recategorization("Expenses:Shopping", "it was mostly household stuff"),
    "Expenses:Entertainment": Recategorization("Expenses:Food:Restaurants", "it was mostly dinner"),
}

FINDABLE_PAYEES: frozenset[str] = frozenset(
    {
        "Whole Foods",
        "Trader Joe's",
        "Safeway",
        "Chipotle",
        "Sweetgreen",
        "Nopa",
        "Uber",
        "Shell",
        "Amazon",
        "Target",
        "REI",
        "CVS Pharmacy",
        "AMC Theatres",
    }
)
"""Payees whose name matches no other payee as a substring, so a payee search finds only them."""


@dataclass(frozen=True)
class Concept:
    """One question about how the books work, its answer, and the account it is about."""

    question: str
    answer: str
    account: str


CONCEPT_CHAINS: tuple[tuple[Concept, ...], ...] = (
    (
        Concept(
            "Quick question first: why does my credit card show up as a negative number in the ledger?",
            "Because the card is a liability: money you owe. Beancount keeps liabilities negative, so a balance of "
            "-500.00 USD on Liabilities:CreditCard means you owe $500.",
            CREDIT_CARD,
        ),
        Concept(
            "So when I pay it off from checking, is that spending?",
            "No. Paying the card moves money from Assets:Bank:Checking to Liabilities:CreditCard: your debt goes "
            "down by the same amount your cash does, and no expense account changes.",
            CHECKING,
        ),
        Concept(
            "Then where does the actual spending show up?",
            "At the moment you buy something: the purchase is booked to an Expenses account (for example "
            "Expenses:Food:Groceries) on the day you use the card, not when you pay the bill.",
            "Expenses",
        ),
        Concept(
            "Got it. And why is my salary negative too?",
            "Income accounts are negative in Beancount because money flows out of them into your accounts: each "
            "paycheck posts -X to Income:Salary and +X to Assets:Bank:Checking, so every transaction sums to zero.",
            "Income:Salary",
        ),
    ),
    (
        Concept(
            "What does the balance assertion on my checking account actually do?",
            "It states what an account must contain at the start of a given day. Beancount checks it every time the "
            "file loads, so a typo in an earlier amount makes the file fail instead of silently drifting.",
            CHECKING,
        ),
        Concept(
            "And what happens if that check fails?",
            "The ledger no longer validates: beancount reports the account, the expected and the actual balance, and "
            "the difference. Any change that would break an assertion is refused, so nothing is written.",
            CHECKING,
        ),
        Concept(
            "Does that mean I can't fix an old checking transaction?",
            "You can, as long as the books still add up: correcting an old amount also needs the assertion after it "
            "to be updated (or the correction must not change that account's balance).",
            SAVINGS,
        ),
        Concept(
            "Makes sense. Should I add one for savings too?",
            "Yes: one assertion per bank account per statement is a good habit (your ledger already has one on "
            "Assets:Bank:Savings). It catches missing or doubled transactions the moment they happen.",
            SAVINGS,
        ),
    ),
)
"""Short threads of questions about the books; each question after the first refers back to the previous one."""
