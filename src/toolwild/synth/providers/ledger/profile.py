"""What the ledger templates know about the books a session is made on: its accounts, receipts, payees and dates.

Why a profile: the templates were written for the generated ledger, whose accounts, shops and dates are constants.
A user's own ledger has other accounts ("Assets:US:BofA:Checking"), other shops and another year, and may lack an
account a template needs (no savings account). Everything a template takes from the books is read from one
:class:`LedgerProfile` instead: :meth:`LedgerProfile.builtin` is exactly the generated ledger's constants (the
built-in suite stays byte-identical), :func:`.own_books.profile_of` derives the same facts from a user's loaded
ledger (that module builds on this one, never the reverse). A role a ledger lacks is None, and the templates that
need it offer no option.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import date
from decimal import Decimal

from toolwild.envs.domains.ledger.seed import CHECKING, CREDIT_CARD, SAVINGS
from toolwild.synth.providers.ledger.catalog import (
    BUILTIN_FACTS,
    BUILTIN_ROLES,
    CONCEPT_TEMPLATES,
    FINDABLE_PAYEES,
    GREETING_TEMPLATES,
    RECATEGORIZATIONS,
    RECEIPTS,
    Concept,
    Greeting,
    Recategorization,
    Receipt,
)
from toolwild.synth.providers.ledger.phrasing import CATEGORY_NICKS, capital, money, nick

__all__ = ["LedgerProfile", "Transfer", "Trip", "concept_chains", "greetings"]


@dataclass(frozen=True)
class Transfer:
    """How the user's books word a move of money from checking to savings (payee and narration)."""

    payee: str
    narration: str


@dataclass(frozen=True)
class Trip:
    """A travel category and how the user calls the trip that charges can belong to."""

    account: str
    name: str


_SPEND_CATEGORIES = (
    "Expenses:Food",
    "Expenses:Food:Groceries",
    "Expenses:Food:Restaurants",
    "Expenses:Transport",
    "Expenses:Shopping",
    "Expenses:Utilities",
)
_COMPARE_CATEGORIES = (*_SPEND_CATEGORIES, "Expenses:Entertainment")
_CLARIFY_CATEGORIES = (
    "Expenses:Food:Restaurants",
    "Expenses:Food:Groceries",
    "Expenses:Transport",
    "Expenses:Shopping",
)


@dataclass(frozen=True)
class LedgerProfile:
    """The accounts, receipts, payees and dates the templates draw from (see the module docstring).

    Sequences keep the order the templates draw from them in: the same profile and random stream give the same
    session.
    """

    checking: str | None
    """The bank account everyday spending is paid from (None: the ledger has none)."""
    savings: str | None
    card: str | None
    """The credit card everyday spending is charged to."""
    default_payment: str | None
    """The account ``add_transaction`` pays from when none is given: the gold leaves it out only then."""
    currency: str
    """The operating currency: amounts are read and said in it."""
    receipts: tuple[Receipt, ...]
    recategorizations: Mapping[str, Recategorization]
    """Expense account -> the category a user may say it really belongs to, and why."""
    findable_payees: frozenset[str]
    """Payees no other payee contains (a payee search for one finds only its own transactions)."""
    concept_chains: tuple[tuple[Concept, ...], ...]
    greetings: tuple[Greeting, ...]
    spend_categories: tuple[str, ...]
    """What a single spending question may ask about."""
    compare_categories: tuple[str, ...]
    """What a multi-tool spending question may ask about (and compare)."""
    clarify_categories: tuple[str, ...]
    """What a spending question without a period may ask about."""
    query_pattern: str
    """The account regex of the per-payee BQL query a user pastes ("Restaurants")."""
    sweep: Transfer | None
    """How a move to savings is recorded (None: no checking-to-savings transfer to copy)."""
    trip: Trip | None
    nicknames: Mapping[str, str] = field(default_factory=lambda: CATEGORY_NICKS)
    """Account -> how the user says it; other accounts are said by their last component."""
    today: date | None = None
    """The ledger's "today" (None: the generated ledger's own, which depends on its seed)."""
    locks: Mapping[str, date] = field(default_factory=dict)
    """Account -> the date of its last balance assertion: a change to its balance before that day is refused."""
    opened: Mapping[str, date] = field(default_factory=dict)
    """Account -> the day it was opened, for the accounts a write may use (empty: every account, from the start)."""
    narration_reasons: bool = True
    """Whether a receipt's narration says why its category is right ("a groceries purchase"): true of the built-in
    receipts; a user's narrations ("Eating out with Bill") do not, so their category is justified by where that
    payee's purchases usually go."""
    so_far: str = "so far this year"
    """How a running total is qualified ("so far this year"; "since March 2021" for books spanning years)."""
    this_year: str = "this year"
    since_start: str = "since January"

    # ------------------------------------------------------------------------------------------------ built-in
    @classmethod
    def builtin(cls) -> LedgerProfile:
        """The generated ledger's constants, exactly as the templates always used them."""
        return _BUILTIN

    # ------------------------------------------------------------------------------------------------ accounts
    @property
    def banks(self) -> tuple[str, ...]:
        """Checking, savings and the card, those the ledger has, in that order."""
        return tuple(a for a in (self.checking, self.savings, self.card) if a is not None)

    def sibling(self, account: str) -> str | None:
        """The bank account a user puts next to ``account``: checking, or savings next to checking (the card when
        there is no savings account)."""
        if self.checking is not None and account != self.checking:
            return self.checking
        return next((a for a in (self.savings, self.card) if a is not None and a != account), None)

    def writable(self, account: str, day: date) -> bool:
        """Whether a change to ``account``'s balance on ``day`` is accepted: the account is open that day (when the
        profile lists them) and no balance assertion on it or a parent account is dated after ``day`` (an
        assertion holds at the start of its day)."""
        if self.opened and not (account in self.opened and self.opened[account] <= day):
            return False
        parts = account.split(":")
        for depth in range(1, len(parts) + 1):
            lock = self.locks.get(":".join(parts[:depth]))
            if lock is not None and lock > day:
                return False
        return True

    @property
    def leaf_categories(self) -> tuple[str, ...]:
        """The compare categories that are no other one's parent (two of them never overlap)."""
        cats = self.compare_categories
        return tuple(c for c in cats if not any(o.startswith(c + ":") for o in cats))

    # ------------------------------------------------------------------------------------------------ words
    def nick(self, account: str) -> str:
        """How the user says an account ("Expenses:Food:Groceries" -> "groceries")."""
        return nick(account, self.nicknames)

    def the_nick(self, account: str) -> str:
        """The nickname with the article a sentence needs ("the credit card", "checking")."""
        return f"the {self.nick(account)}" if account.startswith("Liabilities") else self.nick(account)

    def money(self, amount: Decimal | str) -> str:
        """An amount in the operating currency, as the answers say it."""
        return money(amount, self.currency)

    def amount_of(self, values: Mapping[str, str]) -> str:
        """The operating currency's figure of a per-currency result (``"0.00"`` when it has none)."""
        return values.get(self.currency, "0.00")

    def balance_questions(self, account: str) -> tuple[str, ...]:
        """Ways to ask for a bank account's balance."""
        nick = self.nick(account)
        if account == self.card:
            return (
                f"How much do I owe on {self.the_nick(account)}?",
                f"What's my {nick} balance?",
                f"What's sitting on {self.the_nick(account)} at the moment?",
                f"How big is the {nick} bill looking?",
            )
        if account == self.savings:
            return (
                f"How much do I have in {nick}?",
                f"What's the balance of my {nick} account?",
                f"How are my {nick} looking?",
                f"Can you tell me what's in {nick}?",
            )
        return (
            f"What's my {nick} balance right now?",
            f"How much money is in my {nick} account?",
            f"What have I got in {nick} today?",
            f"Can you check {nick} for me? How much is there?",
            f"How much is left in {nick}?",
        )

    def which_bank(self) -> str:
        """The clarifying question when the user did not say which account."""
        names = [self.the_nick(a) for a in self.banks]
        if len(names) < 3:
            return f"Which account: {' or '.join(names)}?"
        return f"Which account: {', '.join(names[:-1])}, or {names[-1]}?"

    def bank_reply(self, account: str) -> str:
        """The user's answer naming one bank account."""
        if account == self.savings:
            return f"My {self.nick(account)} account."
        return capital(self.the_nick(account)) + "."

    def names(self, roles: Mapping[str, str]) -> dict[str, str]:
        """The values concept and greeting templates are formatted with: each role's account and nickname."""
        out: dict[str, str] = {"currency": self.currency, "owe_500": self.money("500").replace(".00", "")}
        for role, account in roles.items():
            out[role] = account
            out[f"{role}_nick"] = self.nick(account)
            out[f"{role.capitalize()}_nick"] = capital(self.nick(account))
        return out


def concept_chains(
    profile_names: Mapping[str, str], roles: Mapping[str, str], facts: frozenset[str]
) -> tuple[tuple[Concept, ...], ...]:
    """The concept chats that fit a ledger: each chain cut before its first step whose roles or facts it lacks
    (chains left empty are dropped)."""
    have = set(roles) | set(facts)
    chains: list[tuple[Concept, ...]] = []
    for template in CONCEPT_TEMPLATES:
        steps: list[Concept] = []
        for step in template:
            if not step.needs <= have or step.account not in roles:
                break
            steps.append(
                Concept(step.question.format(**profile_names), step.answer.format(**profile_names), roles[step.account])
            )
        if steps:
            chains.append(tuple(steps))
    return tuple(chains)


def greetings(profile_names: Mapping[str, str], roles: Mapping[str, str]) -> tuple[Greeting, ...]:
    """The greetings whose account the ledger has."""
    return tuple(
        Greeting(roles[g.account], g.text.format(**profile_names), g.reply.format(**profile_names))
        for g in GREETING_TEMPLATES
        if g.account in roles
    )


def _builtin() -> LedgerProfile:
    bare = LedgerProfile(
        checking=CHECKING,
        savings=SAVINGS,
        card=CREDIT_CARD,
        default_payment=CHECKING,
        currency="USD",
        receipts=RECEIPTS,
        recategorizations=RECATEGORIZATIONS,
        findable_payees=FINDABLE_PAYEES,
        concept_chains=(),
        greetings=(),
        spend_categories=_SPEND_CATEGORIES,
        compare_categories=_COMPARE_CATEGORIES,
        clarify_categories=_CLARIFY_CATEGORIES,
        query_pattern="Restaurants",
        sweep=Transfer("Chase", "Transfer to savings"),
        trip=Trip("Expenses:Travel", "the Denver trip"),
    )
    names = bare.names(BUILTIN_ROLES)
    return replace(
        bare,
        concept_chains=concept_chains(names, BUILTIN_ROLES, BUILTIN_FACTS),
        greetings=greetings(names, BUILTIN_ROLES),
    )


_BUILTIN = _builtin()
