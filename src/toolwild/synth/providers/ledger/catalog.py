"""The things a ledger user talks about: today's receipts, plausible category mistakes, and concept questions.

Kept apart from the templates so wording and amounts can be extended without touching the generation logic. The
constants here are the built-in ledger's (:meth:`.profile.LedgerProfile.builtin`); a user's own ledger gets its
receipts and accounts from its own transactions (:mod:`.own_books`), and the concept chats and greetings are
templates whose account names are filled in from the profile, each kept only where its wording fits the ledger.
"""

from __future__ import annotations

from dataclasses import dataclass

from toolwild.envs.domains.ledger.seed import CHECKING, CREDIT_CARD, SAVINGS

__all__ = [
    "BUILTIN_FACTS",
    "BUILTIN_ROLES",
    "CAPABILITIES",
    "CONCEPT_TEMPLATES",
    "FINDABLE_PAYEES",
    "GREETING_TEMPLATES",
    "RECATEGORIZATIONS",
    "RECEIPTS",
    "Concept",
    "ConceptTemplate",
    "Greeting",
    "GreetingTemplate",
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
    """The question; ``" || "`` separates ways to ask it (:func:`ways`)."""
    answer: str
    account: str


def ways(text: str) -> list[str]:
    """The ways a catalogue text can be said (its ``" || "``-separated alternatives)."""
    return text.split(" || ")


@dataclass(frozen=True)
class ConceptTemplate:
    """A concept question whose wording names the ledger's own accounts.

    ``question`` and ``answer`` are :meth:`str.format` templates over the names a profile gives
    (:meth:`.profile.LedgerProfile.names`); ``account`` is the role whose account the step is about; ``needs`` are
    the roles and facts the wording presupposes (a step whose needs a ledger lacks is dropped, with every step
    after it: later questions refer back to earlier ones).
    """

    question: str
    answer: str
    account: str
    needs: frozenset[str]


def _needs(*roles: str) -> frozenset[str]:
    return frozenset(roles)


CONCEPT_TEMPLATES: tuple[tuple[ConceptTemplate, ...], ...] = (
    (
        ConceptTemplate(
            "Quick question first: why does my {card_nick} show up as a negative number in the ledger?"
            " || Why is my {card_nick} a minus figure in the books?"
            " || How come the {card_nick} balance has a minus sign in front of it?"
            " || Is something wrong, or is my {card_nick} supposed to be negative in the ledger?",
            "Because the card is a liability: money you owe. Beancount keeps liabilities negative, so a balance of "
            "-500.00 {currency} on {card} means you owe {owe_500}.",
            "card",
            _needs("card"),
        ),
        ConceptTemplate(
            "So when I pay it off from {checking_nick}, is that spending?",
            "No. Paying the card moves money from {checking} to {card}: your debt goes "
            "down by the same amount your cash does, and no expense account changes.",
            "checking",
            _needs("card", "checking", "card_paid_from_checking"),
        ),
        ConceptTemplate(
            "Then where does the actual spending show up?",
            "At the moment you buy something: the purchase is booked to an Expenses account (for example "
            "{example}) on the day you use {card}, not when you pay the bill.",
            "expenses",
            _needs("card", "example"),
        ),
        ConceptTemplate(
            "Got it. And why is my {salary_nick} negative too?",
            "Income accounts are negative in Beancount because money flows out of them into your accounts: each "
            "paycheck posts -X to {salary} and +X to {checking}, so every transaction sums to zero.",
            "salary",
            _needs("salary", "checking", "salary_to_checking"),
        ),
    ),
    (
        ConceptTemplate(
            "What does the balance assertion on my {checking_nick} account actually do?"
            " || There's a balance assertion on my {checking_nick} account. What is that line for?"
            " || What's the point of the balance check on my {checking_nick} account?"
            " || Why does my {checking_nick} account have a balance assertion in the file?",
            "It states what an account must contain at the start of a given day. Beancount checks it every time the "
            "file loads, so a typo in an earlier amount makes the file fail instead of silently drifting.",
            "checking",
            _needs("checking", "checking_asserted"),
        ),
        ConceptTemplate(
            "And what happens if that check fails?",
            "Then the ledger no longer validates: beancount reports the account ({checking}), the expected and the "
            "actual balance, and the difference. Any change that would break an assertion is refused, so nothing is "
            "written.",
            "checking",
            _needs("checking"),
        ),
        ConceptTemplate(
            "Does that mean I can't fix an old transaction there?",
            "You can fix an old transaction in {checking}, as long as the books still add up: correcting an old "
            "amount also needs the assertion after it to be updated (or the correction must not change that "
            "account's balance).",
            "savings",
            _needs("checking", "savings"),
        ),
        ConceptTemplate(
            "Makes sense. Should I add one for {savings_nick} too?",
            "Yes: like the one on {checking}, one assertion per bank account per statement is a good habit (your "
            "ledger already has one on {savings}). It catches missing or doubled transactions the moment they "
            "happen.",
            "savings",
            _needs("savings", "savings_asserted"),
        ),
    ),
)
"""Short threads of questions about the books; each question after the first refers back to the previous one."""

CAPABILITIES = (
    "I can look up balances, search transactions, summarise spending by category and period, run BQL queries, and "
    "add, correct, recategorize or delete transactions; every change is checked with beancount before it is saved."
)


@dataclass(frozen=True)
class Greeting:
    """An opening turn with no request in it yet, the reply, and the account the conversation is then about."""

    account: str
    text: str
    reply: str


@dataclass(frozen=True)
class GreetingTemplate:
    """A greeting whose wording names one of the ledger's accounts (the ``account`` role; formatted like
    :class:`ConceptTemplate`)."""

    account: str
    text: str
    reply: str


GREETING_TEMPLATES: tuple[GreetingTemplate, ...] = (
    GreetingTemplate(
        "card",
        "Hi! I'd like to get my {card_nick} under control this month. Can you help me with that?"
        " || Hello. My {card_nick} is getting out of hand; will you help me keep on top of it?"
        " || Hi, can you be my helper for the {card_nick} this month? I keep losing track.",
        "Sure. Your card is {card} in the ledger. " + CAPABILITIES,
    ),
    GreetingTemplate(
        "groceries",
        "Hey, I want to keep a closer eye on my grocery spending. Can you help with that in my ledger?"
        " || Hi! My grocery bills feel out of control. Can you help me watch them in my ledger?"
        " || Hello, I'd like help tracking what goes on groceries. Is that something you can do?",
        "Happy to. Groceries are booked to {groceries}. " + CAPABILITIES,
    ),
    GreetingTemplate(
        "checking",
        "Hi! Can you help me keep my {checking_nick} account tidy today?"
        " || Hello, I want my {checking_nick} account in order. Can you give me a hand?"
        " || Hey there. Could you help me tidy up the {checking_nick} account?",
        "Of course. {Checking_nick} is {checking} in your ledger. " + CAPABILITIES,
    ),
)

BUILTIN_ROLES: dict[str, str] = {
    "card": CREDIT_CARD,
    "checking": CHECKING,
    "savings": SAVINGS,
    "salary": "Income:Salary",
    "example": "Expenses:Food:Groceries",
    "groceries": "Expenses:Food:Groceries",
    "expenses": "Expenses",
}
"""The built-in ledger's account for each role a concept or greeting names."""

BUILTIN_FACTS: frozenset[str] = frozenset(
    {"card_paid_from_checking", "salary_to_checking", "checking_asserted", "savings_asserted"}
)
"""What every generated ledger bears out: the card is paid from checking, the salary goes to checking, and both
bank accounts carry a balance assertion."""
