"""The ledger tools: reads and validated writes on a Beancount ledger, one isolated copy per episode.

Each episode works on its own copy of its starting ledger (a generated one, a text, or a user's file with every file
it includes); the files are the state. With ``write_through`` it works on the user's files themselves. A write
changes the text of exactly one transaction in the one file that holds it (or appends one to the main file),
loads the *new* ledger with beancount, and only when it loads with zero errors replaces that file atomically (temp
file + ``os.replace``). Anything beancount rejects (unknown account, wrong currency, failed balance assertion,
impossible date) comes back as a ``rejected`` error and leaves every file byte-identical. Adding the same transaction
twice in one episode is refused as a ``duplicate``, naming the id of the first one, because a write-back agent that
retries must amend, not double-book.

Transactions are named by their address (:mod:`~toolwild.envs.domains.ledger.address`): the ``id`` written in the
ledger when it is unique, else a content address; the tools show it as ``id``.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from beancount.core import account as bc_account
from beancount.core import amount as bc_amount
from beancount.core import data, inventory

from toolwild.core.tool import Effect
from toolwild.envs.base import ToolErrorKind
from toolwild.envs.domains.ledger.book import ID_KEY, LedgerError, LoadedLedger
from toolwild.envs.domains.ledger.canonical import (
    canonical_state,
    canonical_transaction,
    canonical_transactions,
    format_number,
)
from toolwild.envs.domains.ledger.edit import appending, raw_at, removing, render, rewriting
from toolwild.envs.domains.ledger.facts import default_payment_account
from toolwild.envs.domains.ledger.index import balance, between, postings
from toolwild.envs.domains.ledger.query import QueryError, run_bql
from toolwild.envs.domains.ledger.seed import CHECKING, generate_ledger, ledger_today
from toolwild.envs.domains.ledger.store import LedgerStore
from toolwild.envs.toolkit import ToolFailure, Toolkit, tool

__all__ = ["MAX_FOUND", "LedgerEpisode"]

MAX_FOUND = 100
"""Transactions returned by ``find_transactions`` at most (the total count is always reported)."""

_CENT = Decimal("0.01")
_MAX_AMOUNT = Decimal("1e15")
"""Amounts at or above this are refused: no household books a quadrillion, and Decimal cannot round huge ones."""
_CURRENCY = re.compile(r"^[A-Z][A-Z0-9'._-]{0,22}[A-Z0-9]$|^[A-Z]$")
_TAG = re.compile(r"^[A-Za-z0-9_/.-]+$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_CATEGORY_ROOTS = ("Expenses", "Income")
_Builder = Callable[[data.Transaction, data.Transaction], data.Transaction | None]
"""Makes the new written form of a transaction from (written, booked); None when nothing would change."""


def _money(value: float, name: str) -> Decimal:
    """A JSON number as an exact 2-decimal amount (via ``str``, so 42.1 stays 42.10, not 42.099999...)."""
    try:
        number = Decimal(str(value))
    except InvalidOperation:
        raise ToolFailure(ToolErrorKind.INVALID_ARGUMENTS, f"{name}: not a number") from None
    if not number.is_finite():
        raise ToolFailure(ToolErrorKind.INVALID_ARGUMENTS, f"{name}: must be a finite number")
    if abs(number) >= _MAX_AMOUNT:
        raise ToolFailure(ToolErrorKind.INVALID_ARGUMENTS, f"{name}: too large ({value})")
    if number != number.quantize(_CENT):
        raise ToolFailure(ToolErrorKind.INVALID_ARGUMENTS, f"{name}: at most two decimal places ({value})")
    if number == 0:
        raise ToolFailure(ToolErrorKind.INVALID_ARGUMENTS, f"{name}: must not be zero")
    return number.quantize(_CENT)


def _bound(value: float | None, name: str) -> Decimal | None:
    """A search bound as a decimal. NaN and infinities are refused (they compare with nothing), and so are
    negative bounds: a transaction's amount is a size (the total of its positive postings), so a negative bound
    would silently match everything or nothing."""
    if value is None:
        return None
    number = Decimal(str(value))
    if not number.is_finite():
        raise ToolFailure(ToolErrorKind.INVALID_ARGUMENTS, f"{name}: must be a finite number")
    if number < 0:
        raise ToolFailure(
            ToolErrorKind.INVALID_ARGUMENTS,
            f"{name}: must not be negative (got {value}; a transaction's amount is the total of its positive postings)",
        )
    return number


def _date(value: str, name: str, *, kind: ToolErrorKind) -> dt.date:
    try:
        return dt.date.fromisoformat(value.strip())
    except ValueError:
        raise ToolFailure(kind, f"{name}: {value!r} is not a valid date (expected YYYY-MM-DD)") from None


def _text(value: str, name: str) -> str:
    if _CONTROL.search(value):
        raise ToolFailure(ToolErrorKind.INVALID_ARGUMENTS, f"{name}: control characters are not allowed")
    return value.strip()


def _account_name(value: str, name: str) -> str:
    """A syntactically valid account name; whether it is *open* is beancount's call when the write is checked."""
    value = value.strip()
    if not bc_account.is_valid(value):
        raise ToolFailure(
            ToolErrorKind.REJECTED,
            f"{name}: {value!r} is not a Beancount account name (expected e.g. 'Expenses:Food:Groceries')",
        )
    return value


def _category_index(postings: list[data.Posting]) -> int:
    """The posting that says *what* the money was for: the first Expenses posting, else Income, else the first."""
    for root in _CATEGORY_ROOTS:
        for i, posting in enumerate(postings):
            if bc_account.root(1, posting.account) == root:
                return i
    return 0


def _matches_account(account: str, query: str) -> bool:
    """Case-insensitive: the account itself or one of its descendants (``Expenses:Food`` covers groceries)."""
    a, q = account.lower(), query.strip().lower()
    return a == q or a.startswith(q + ":")


def _transaction_amount(txn: data.Transaction) -> Decimal:
    """The size of a transaction: the sum of its positive postings (for two postings, the amount moved)."""
    return sum((p.units.number for p in txn.postings if p.units.number > 0), Decimal(0))


class LedgerEpisode(Toolkit):
    """One isolated Beancount ledger, read and written by tools.

    Args:
        seed: seeds the generated ledger (ignored when ``ledger_text`` or ``ledger_path`` is given).
        ledger_text: a ledger to start from instead of the generated one; it must load without errors. It is
            written to the episode's folder as ``ledger.beancount``, so its relative ``include``s resolve there.
        ledger_path: a user's ledger file to start from: the episode works on a copy of it and of every file it
            includes, in the same relative layout (the user's files are never written).
        write_through: with ``ledger_path``, work on the user's files themselves: every write is the same validated
            atomic replace, under a lock shared by every episode on that folder, and ``close()`` deletes nothing.
        today: the episode's "today" (default: the generated ledger's last day, or the last transaction's date).
            Tools never use it; it anchors relative dates in suite text.
        allow_outside_includes: the ledger may include files outside its folder (None:
            ``TOOLWILD_ALLOW_OUTSIDE_INCLUDES`` decides); otherwise such an include is refused and never read.
        loaded: with ``ledger_path``, a load of that ledger under the same include rule already made (the
            environment's start-up check): the episode starts from it instead of loading again if none of its
            files changed since, and takes it over (it must not be used after).

    Raises:
        LedgerError: (a ``ConfigError`` and a ``ValueError``) the starting ledger does not load cleanly, naming the
            file, line and construct; or the options contradict each other.
    """

    def __init__(
        self,
        *,
        seed: int = 0,
        ledger_text: str | None = None,
        ledger_path: Path | None = None,
        write_through: bool = False,
        today: dt.date | None = None,
        allow_outside_includes: bool | None = None,
        loaded: LoadedLedger | None = None,
    ) -> None:
        if ledger_text is not None and ledger_path is not None:
            raise LedgerError("give ledger_text or ledger_path, not both")
        if write_through and ledger_path is None:
            raise LedgerError("write_through works on a user's ledger file: give ledger_path too")
        if ledger_path is not None:
            path = Path(ledger_path).expanduser()
            store = (
                LedgerStore(path, private_dir=None, allow_outside_includes=allow_outside_includes)
                if write_through
                else LedgerStore.copy_of(path, allow_outside_includes=allow_outside_includes, loaded=loaded)
            )
        else:
            store = LedgerStore.from_text(generate_ledger(seed) if ledger_text is None else ledger_text)
            loaded = None
        try:
            loaded = store.start(loaded if write_through else None)
            if not loaded.ok:
                shown = "; ".join(loaded.errors[:5])
                what = "the starting ledger" if ledger_path is None else f"ledger {ledger_path}"
                raise LedgerError(f"{what} does not load cleanly: {shown}")
        except BaseException:
            store.close()
            raise
        store.prime(loaded)
        generated = ledger_text is None and ledger_path is None
        if today is None:
            last = loaded.transactions[-1].date if loaded.transactions and not generated else None
            today = ledger_today(seed) if generated else (last or dt.date.today())
        self.seed = seed
        self.today = today
        self.write_through = write_through
        self.writes: list[dict[str, Any]] = []
        """Every successful write call, in order (``tool``, ``arguments``, ``id``, ``changed``)."""
        self._default_payment: str | None = CHECKING if generated else None
        self._start: LoadedLedger | None = None if generated else loaded
        """The starting ledger, kept until its default payment account is worked out."""
        self._issue_ids = all(isinstance(t.meta.get(ID_KEY), str) for t in loaded.written.values())
        """New transactions get an ``id: "txn-NNNN"`` only in a ledger whose transactions all carry ids (the
        generated ones); elsewhere they are addressed by content like the user's own."""
        self._added: list[str] = []
        self._high_water = 0
        self._store = store
        self.path = store.main
        """The main ledger file the episode reads and writes."""

    @property
    def default_payment_account(self) -> str | None:
        """The account ``add_transaction`` pays from when none is named (None: the ledger has no clear one): the
        starting ledger's. Worked out when first asked for, so an episode that only reads never walks every
        transaction for it."""
        if self._start is not None:
            self._default_payment = default_payment_account(self._start)
            self._start = None
        return self._default_payment

    # ------------------------------------------------------------------ state
    def close(self) -> None:
        """Remove the episode's copy of the ledger (never the user's files)."""
        self._store.close()

    @property
    def closed(self) -> bool:
        """True once :meth:`close` has run."""
        return self._store.closed

    def text(self) -> str:
        """The main ledger file's current text."""
        return self._store.text()

    def ledger(self) -> LoadedLedger:
        """The current ledger, loaded (cached while its files' text is unchanged)."""
        return self._store.load()

    def state(self) -> dict[str, Any]:
        """``{"ledger": [...]}``: the transactions in canonical form (layout-independent).

        Worked out once per loaded ledger and kept across writes (a write changes one transaction of it), so the
        state after every task costs a list copy. The list is new on each call; its dicts are shared: read them."""
        return {"ledger": list(canonical_state(self.ledger()))}

    # ------------------------------------------------------------------ write machinery
    def _record(self, tool_name: str, arguments: dict[str, Any], txn_id: str, *, changed: bool) -> None:
        self.writes.append({"tool": tool_name, "arguments": arguments, "id": txn_id, "changed": changed})

    @staticmethod
    def _address(ledger: LoadedLedger, txn_id: str) -> str:
        """The address a ``transaction_id`` argument names, or a ``not_found`` naming what to use instead."""
        key = txn_id.strip()
        address = ledger.resolve(key)
        if address is not None:
            return address
        repeated = ledger.addresses.repeated_ids.get(key)
        if repeated:
            raise ToolFailure(
                ToolErrorKind.NOT_FOUND,
                f"id {key!r} is used by {len(repeated)} transactions of this ledger; name one by its address: "
                + ", ".join(repeated[:10]),
            )
        raise ToolFailure(ToolErrorKind.NOT_FOUND, f"no transaction with id {key!r}")

    def _next_id(self, ledger: LoadedLedger) -> str:
        """One past the highest id ever seen in this episode, so a deleted id is never handed out again."""
        self._high_water = max(self._high_water, ledger.highest_id_number())
        return f"txn-{self._high_water + 1:04d}"

    @staticmethod
    def _duplicate_key(txn: data.Transaction) -> tuple[Any, ...]:
        postings = sorted((p.account, p.units.number, p.units.currency) for p in txn.postings)
        return (txn.date, (txn.payee or "").strip().casefold(), tuple(postings))

    @staticmethod
    def _auto_opened_note(before: LoadedLedger, after: LoadedLedger, accounts: list[str]) -> dict[str, str]:
        """``{"note": ...}`` when the write used an account that was not open and a plugin opened it."""
        was_open = before.open_accounts()
        fresh = sorted({a for a in accounts if a in after.auto_opened and a not in was_open})
        if not fresh:
            return {}
        plugins = ", ".join(name for name, _ in after.options.get("plugin") or []) or "a plugin"
        return {
            "note": f"{', '.join(fresh)} was not open: this ledger opens accounts on first use ({plugins}), so "
            "beancount accepted the write and the account now exists. Check the name against list_accounts."
        }

    def _rewrite(self, txn_id: str, build: _Builder) -> tuple[str, str, dict[str, str]]:
        """Replace the written form of one transaction by ``build(written, booked)``, validate and commit.

        ``build`` returns None when nothing would change: then no file is rewritten at all. Returns the address
        before, the address after (a content address changes with the content) and a note for the result.
        """
        with self._store.writing() as ledger:
            address = self._address(ledger, txn_id)
            where = ledger.where(address)
            booked = ledger.transaction(address)
            if where is None or booked is None or where not in ledger.written:  # pragma: no cover - addressed
                raise ToolFailure(ToolErrorKind.NOT_FOUND, f"no transaction with id {txn_id!r} in the files")
            file, line = where
            lines = ledger.lines(file)
            raw = raw_at(lines, ledger.written[where])
            new_entry = build(raw.entry, booked)
            if new_entry is None:
                return address, address, {}
            after = self._store.commit(ledger, rewriting(file, lines, raw, new_entry, ledger.newline(file)))
        new_address = after.address_at(file, line) or address
        self._added = [new_address if a == address else a for a in self._added]
        return address, new_address, self._auto_opened_note(ledger, after, [p.account for p in new_entry.postings])

    def _current(self, txn_id: str) -> dict[str, Any]:
        """The canonical form of a transaction that must exist (it was just written)."""
        txn = self.ledger().transaction(txn_id)
        if txn is None:
            raise RuntimeError(f"transaction {txn_id} vanished after a validated write")
        return canonical_transaction(txn)

    @staticmethod
    def _renamed(before: str, after: str) -> dict[str, str]:
        """``{"previous_id": ...}`` when an edit gave the transaction a new (content) address."""
        return {"previous_id": before} if before != after else {}

    # ------------------------------------------------------------------ reads
    @tool(effect=Effect.READ)
    def run_query(self, bql: str) -> dict[str, Any]:
        """Run a Beancount Query Language (beanquery) statement over the current ledger and return its table.
        The default table is postings (columns such as date, payee, narration, account, position, number,
        currency); entry_meta('id') gives the ledger's transaction ids. At most 200 rows are returned.

        Args:
            bql: one BQL statement, e.g. "SELECT account, sum(position) WHERE account ~ '^Expenses' GROUP BY account".
        """
        try:
            return run_bql(self.ledger(), bql)
        except QueryError as exc:
            raise ToolFailure(ToolErrorKind.INVALID_ARGUMENTS, str(exc)) from None

    @tool(effect=Effect.READ)
    def list_accounts(self, prefix: str = "") -> list[dict[str, Any]]:
        """List the open accounts of the ledger (the only accounts a transaction may use).

        Args:
            prefix: only accounts starting with this text, case-insensitive (e.g. "Expenses"); empty for all.
        """
        wanted = prefix.strip().lower()
        return [
            {"account": name, "opened": entry.date.isoformat(), "currencies": list(entry.currencies or [])}
            for name, entry in sorted(self.ledger().open_accounts().items())
            if name.lower().startswith(wanted)
        ]

    @tool(effect=Effect.READ)
    def find_transactions(
        self,
        start_date: str | None = None,
        end_date: str | None = None,
        payee: str | None = None,
        narration: str | None = None,
        account: str | None = None,
        min_amount: float | None = None,
        max_amount: float | None = None,
    ) -> dict[str, Any]:
        """Search transactions; every filter given must match. Returns ids to use with the write tools.

        Args:
            start_date: first date included, YYYY-MM-DD.
            end_date: last date included, YYYY-MM-DD.
            payee: text the payee contains (case-insensitive), e.g. "whole foods".
            narration: text the description contains (case-insensitive).
            account: an account or parent account one of the postings uses, e.g. "Expenses:Food".
            min_amount: smallest transaction amount (the total of its positive postings).
            max_amount: largest transaction amount.
        """
        kind = ToolErrorKind.INVALID_ARGUMENTS
        start = _date(start_date, "start_date", kind=kind) if start_date else None
        end = _date(end_date, "end_date", kind=kind) if end_date else None
        if start and end and start > end:
            raise ToolFailure(kind, "start_date is after end_date")
        low = _bound(min_amount, "min_amount")
        high = _bound(max_amount, "max_amount")
        if low is not None and high is not None and low > high:
            raise ToolFailure(kind, "min_amount is above max_amount")
        found = []
        payee_part = payee.strip().lower() if payee else None
        narration_part = narration.strip().lower() if narration else None
        for txn in between(self.ledger(), start, end):
            if payee_part is not None and payee_part not in (txn.payee or "").lower():
                continue
            if narration_part is not None and narration_part not in (txn.narration or "").lower():
                continue
            if account and not any(_matches_account(p.account, account) for p in txn.postings):
                continue
            size = _transaction_amount(txn)
            if (low is not None and size < low) or (high is not None and size > high):
                continue
            found.append(txn)
        listed = canonical_transactions(found)
        return {"count": len(listed), "transactions": listed[:MAX_FOUND], "truncated": len(listed) > MAX_FOUND}

    @tool(effect=Effect.READ)
    def get_balance(self, account: str, date: str | None = None) -> dict[str, Any]:
        """The balance of an account (including its sub-accounts), per currency. Signs are Beancount's: money
        you owe (a credit card) is negative, spending accounts are positive.

        Args:
            account: the account or parent account, e.g. "Assets:Bank:Checking" or "Expenses:Food".
            date: balance as of the end of this day, YYYY-MM-DD; omit for the current balance.
        """
        ledger = self.ledger()
        as_of = _date(date, "date", kind=ToolErrorKind.INVALID_ARGUMENTS) if date else None
        names = [name for name in ledger.open_accounts() if _matches_account(name, account)]
        if not names:
            raise ToolFailure(
                ToolErrorKind.NOT_FOUND, f"no account {account!r} (list_accounts shows the accounts of the ledger)"
            )
        index = postings(ledger)
        quick = balance(index, [a for a in index.by_account if _matches_account(a, account)], as_of)
        if quick is not None:
            balances = {quick[0]: format_number(quick[1])} if quick[1] else {}
        else:
            total = inventory.Inventory()
            for txn in between(ledger, None, as_of):
                for posting in txn.postings:
                    if _matches_account(posting.account, account):
                        total.add_amount(posting.units)
            balances = {pos.units.currency: format_number(pos.units.number) for pos in total if pos.units.number}
        exact = [name for name in names if name.lower() == account.strip().lower()]
        return {
            "account": exact[0] if exact else account.strip(),
            "as_of": as_of.isoformat() if as_of else None,
            "balances": balances or {ledger.operating_currency: "0.00"},
        }

    @tool(effect=Effect.READ)
    def spending_summary(self, start_date: str, end_date: str, category: str = "Expenses") -> dict[str, Any]:
        """Totals per account under a category between two dates (inclusive): how much was spent on what.

        Args:
            start_date: first date included, YYYY-MM-DD.
            end_date: last date included, YYYY-MM-DD.
            category: the parent account to total, e.g. "Expenses:Food" (default: all expenses).
        """
        kind = ToolErrorKind.INVALID_ARGUMENTS
        start = _date(start_date, "start_date", kind=kind)
        end = _date(end_date, "end_date", kind=kind)
        if start > end:
            raise ToolFailure(kind, "start_date is after end_date")
        ledger = self.ledger()
        if not any(_matches_account(name, category) for name in ledger.open_accounts()):
            raise ToolFailure(ToolErrorKind.NOT_FOUND, f"no account {category!r} to summarise")
        per_account: dict[tuple[str, str], Decimal] = {}
        count = 0
        for txn in between(ledger, start, end):
            hit = False
            for posting in txn.postings:
                if _matches_account(posting.account, category):
                    key = (posting.account, posting.units.currency)
                    per_account[key] = per_account.get(key, Decimal(0)) + posting.units.number
                    hit = True
            count += hit
        totals: dict[str, Decimal] = {}
        for (_, currency), number in per_account.items():
            totals[currency] = totals.get(currency, Decimal(0)) + number
        return {
            "category": category.strip(),
            "start_date": start.isoformat(),
            "end_date": end.isoformat(),
            "by_account": [
                {"account": acct, "amount": format_number(number), "currency": cur}
                for (acct, cur), number in sorted(per_account.items())
            ],
            "total": {cur: format_number(number) for cur, number in sorted(totals.items())}
            or {ledger.operating_currency: "0.00"},
            "transactions": count,
        }

    # ------------------------------------------------------------------ writes
    @tool(effect=Effect.WRITE)
    def add_transaction(
        self,
        date: str,
        payee: str,
        narration: str,
        amount: float,
        expense_account: str,
        payment_account: str | None = None,
        currency: str | None = None,
        tags: list[str] | None = None,
    ) -> dict[str, Any]:
        """Record a new transaction: money goes from the payment account to the expense account. Returns its id.

        Args:
            date: the transaction date, YYYY-MM-DD.
            payee: who was paid, e.g. "Whole Foods".
            narration: what it was for, e.g. "Groceries".
            amount: the amount paid (use a negative amount for a refund).
            expense_account: the account that receives the money, e.g. "Expenses:Food:Groceries".
            payment_account: the account the money comes from, e.g. "Liabilities:CreditCard" for the card. Omitted:
                the ledger's usual payment account, the bank account that pays for most of its purchases
                ("Assets:Bank:Checking" in the built-in ledger); a ledger without a clear one needs it named.
            currency: the currency code. Omitted: the ledger's operating currency ("USD" in the built-in ledger).
            tags: optional tags without the leading "#".
        """
        day = _date(date, "date", kind=ToolErrorKind.REJECTED)
        number = _money(amount, "amount")
        payee_text, narration_text = _text(payee, "payee"), _text(narration, "narration")
        expense = _account_name(expense_account, "expense_account")
        if payment_account is None and self.default_payment_account is None:
            raise ToolFailure(
                ToolErrorKind.INVALID_ARGUMENTS,
                "payment_account: this ledger has no usual payment account to default to; name the account the "
                "money comes from (list_accounts with prefix Assets or Liabilities shows them)",
            )
        payment = _account_name(
            payment_account if payment_account is not None else str(self.default_payment_account), "payment_account"
        )
        cur = (currency if currency is not None else self.ledger().operating_currency).strip().upper()
        if not _CURRENCY.match(cur):
            raise ToolFailure(ToolErrorKind.REJECTED, f"currency: {currency!r} is not a currency code")
        tag_set = frozenset(t.strip().lstrip("#") for t in tags or [])
        if any(not _TAG.match(t) for t in tag_set):
            raise ToolFailure(ToolErrorKind.INVALID_ARGUMENTS, "tags: letters, digits and - _ / . only")

        with self._store.writing() as ledger:
            txn_id = self._next_id(ledger) if self._issue_ids else None
            entry = data.Transaction(
                meta={ID_KEY: txn_id} if txn_id is not None else {},
                date=day,
                flag="*",
                payee=payee_text,
                narration=narration_text,
                tags=tag_set,
                links=frozenset(),
                postings=[
                    data.Posting(expense, bc_amount.Amount(number, cur), None, None, None, None),
                    data.Posting(payment, bc_amount.Amount(-number, cur), None, None, None, None),
                ],
            )
            key = self._duplicate_key(entry)
            for earlier in self._added:
                txn = ledger.transaction(earlier)
                if txn is not None and self._duplicate_key(txn) == key:
                    raise ToolFailure(
                        ToolErrorKind.DUPLICATE,
                        f"an identical transaction was already added in this session as {earlier} "
                        f"({day.isoformat()}, {payee_text}, {format_number(number)} {cur}); amend it instead of "
                        "adding it again",
                    )
            newline = ledger.newline(ledger.main)
            splice, line = appending(ledger.main, ledger.lines(ledger.main), render(entry, newline), newline)
            after = self._store.commit(ledger, splice)
        address = after.address_at(ledger.main, line)
        if address is None:  # pragma: no cover - the block just written starts at that line
            raise RuntimeError(f"the transaction written at line {line} has no address")
        self._added.append(address)
        if txn_id is not None:
            self._high_water += 1  # the id just issued (never handed out again, even after a delete)
        arguments = {
            "date": date,
            "payee": payee,
            "narration": narration,
            "amount": amount,
            "expense_account": expense_account,
            "payment_account": payment_account,
            "currency": currency,
            "tags": tags,
        }
        self._record("add_transaction", arguments, address, changed=True)
        note = self._auto_opened_note(ledger, after, [expense, payment])
        return {"id": address, "transaction": self._current(address), **note}

    @tool(effect=Effect.WRITE)
    def amend_transaction(
        self,
        transaction_id: str,
        amount: float | None = None,
        account: str | None = None,
        date: str | None = None,
        payee: str | None = None,
    ) -> dict[str, Any]:
        """Correct an existing transaction in place (only the fields given change; nothing else is touched).

        Args:
            transaction_id: the id of the transaction, e.g. "txn-0042".
            amount: the corrected amount (positive; the signs of the postings are kept).
            account: the corrected category: replaces the account of the expense-side posting.
            date: the corrected date, YYYY-MM-DD.
            payee: the corrected payee.
        """
        if amount is None and account is None and date is None and payee is None:
            raise ToolFailure(ToolErrorKind.INVALID_ARGUMENTS, "give at least one of amount, account, date, payee")
        number = _money(amount, "amount") if amount is not None else None
        if number is not None and number < 0:
            # The contract says positive: the postings keep their signs. Taking abs() would record 3.00 for -3,
            # the opposite of what was asked; a refund is a new transaction with a negative amount.
            raise ToolFailure(
                ToolErrorKind.INVALID_ARGUMENTS,
                f"amount: must be positive (got {amount}); the signs of the postings are kept. To record a refund, "
                "add a transaction with a negative amount",
            )
        new_date = _date(date, "date", kind=ToolErrorKind.REJECTED) if date is not None else None
        new_payee = _text(payee, "payee") if payee is not None else None
        new_account = _account_name(account, "account") if account is not None else None
        changed: list[str] = []

        def build(raw: data.Transaction, booked: data.Transaction) -> data.Transaction | None:
            postings = list(raw.postings)
            index = _category_index(postings)
            if number is not None:
                simple = len(booked.postings) == len(raw.postings) == 2
                if not simple or any(p.cost or p.price for p in booked.postings):
                    raise ToolFailure(
                        ToolErrorKind.PRECONDITION_FAILED,
                        "only a two-posting transaction's amount can be amended; delete it and add it again",
                    )
                category = booked.postings[index]
                sign = Decimal(-1) if category.units.number < 0 else Decimal(1)
                cur = category.units.currency
                for i, posting in enumerate(postings):
                    if not isinstance(getattr(posting.units, "number", None), Decimal):
                        continue  # an elided amount stays elided: beancount fills it in
                    signed = sign * number if i == index else -sign * number
                    postings[i] = posting._replace(units=bc_amount.Amount(signed, cur))
                if category.units.number != sign * number:
                    changed.append("amount")
            if new_account is not None and postings[index].account != new_account:
                postings[index] = postings[index]._replace(account=new_account)
                changed.append("account")
            entry = raw._replace(postings=postings)
            if new_date is not None and new_date != raw.date:
                entry = entry._replace(date=new_date)
                changed.append("date")
            if new_payee is not None and new_payee != (raw.payee or ""):
                entry = entry._replace(payee=new_payee)
                changed.append("payee")
            return entry if changed else None

        before, after, note = self._rewrite(transaction_id, build)
        arguments = {"transaction_id": transaction_id, "amount": amount, "account": account, "date": date}
        self._record("amend_transaction", {**arguments, "payee": payee}, after, changed=bool(changed))
        result = {"id": after, "changed": changed, "transaction": self._current(after)}
        return {**result, **self._renamed(before, after), **note}

    @tool(effect=Effect.WRITE)
    def delete_transaction(self, transaction_id: str) -> dict[str, Any]:
        """Remove a transaction from the ledger (for an entry that should not exist, e.g. a double entry).

        Args:
            transaction_id: the id of the transaction, e.g. "txn-0042".
        """
        with self._store.writing() as ledger:
            address = self._address(ledger, transaction_id)
            where = ledger.where(address)
            booked = ledger.transaction(address)
            if where is None or booked is None or where not in ledger.written:  # pragma: no cover - addressed
                raise ToolFailure(ToolErrorKind.NOT_FOUND, f"no transaction with id {transaction_id!r} in the files")
            lines = ledger.lines(where[0])
            self._store.commit(ledger, removing(where[0], lines, raw_at(lines, ledger.written[where])))
        self._record("delete_transaction", {"transaction_id": transaction_id}, address, changed=True)
        return {"id": address, "deleted": canonical_transaction(booked)}

    @tool(effect=Effect.WRITE)
    def recategorize(self, transaction_id: str, new_account: str) -> dict[str, Any]:
        """Move a transaction to another category: replaces the account of its expense-side posting.

        Args:
            transaction_id: the id of the transaction, e.g. "txn-0042".
            new_account: the category it belongs to, e.g. "Expenses:Food:Restaurants".
        """
        target = _account_name(new_account, "new_account")
        old: list[str] = []

        def build(raw: data.Transaction, booked: data.Transaction) -> data.Transaction | None:
            postings = list(raw.postings)
            index = _category_index(postings)
            old.append(postings[index].account)
            if postings[index].account == target:
                return None
            postings[index] = postings[index]._replace(account=target)
            return raw._replace(postings=postings)

        before, after, note = self._rewrite(transaction_id, build)
        arguments = {"transaction_id": transaction_id, "new_account": new_account}
        self._record("recategorize", arguments, after, changed=old[0] != target)
        result = {"id": after, "old_account": old[0], "new_account": target, "transaction": self._current(after)}
        return {**result, **self._renamed(before, after), **note}
