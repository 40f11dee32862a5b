"""Building blocks several templates share: new receipts, corrected amounts, gold call arguments, and answer
sentences written from real tool results."""

from __future__ import annotations

import calendar
from datetime import date, timedelta
from decimal import Decimal
from typing import Any

from toolwild.envs.domains.ledger.seed import CREDIT_CARD
from toolwild.synth.providers.ledger.catalog import RECATEGORIZATIONS, RECEIPTS, Receipt
from toolwild.synth.providers.ledger.phrasing import Period, money, month_day, nick, the_nick
from toolwild.synth.providers.ledger.scenario import Context, Memo, Recorder

__all__ = [
    "add_arguments",
    "balance_sentence",
    "can_amend",
    "can_move",
    "corrected_amount",
    "fresh_amount",
    "paid_phrase",
    "pick_receipts",
    "record_add",
    "record_amend_amount",
    "record_recategorize",
    "spend_arguments",
    "spend_sentence",
    "txn_noun",
]


def fresh_amount(ctx: Context, low: float, high: float) -> Decimal:
    """A price with non-zero cents (so the gold float never looks like an integer)."""
    while True:
        value = Decimal(str(round(ctx.rng.uniform(low, high), 2))).quantize(Decimal("0.01"))
        if value % 1 != 0 and value > 0:
            return value


def corrected_amount(ctx: Context, old: Decimal) -> Decimal:
    """A believable correction of ``old``: a transposed digit pair or a few dollars off, never equal to it."""
    text = f"{old:.2f}"
    candidates: list[Decimal] = []
    digits = text.replace(".", "")
    for i in range(len(digits) - 1):
        if digits[i] != digits[i + 1]:
            swapped = digits[:i] + digits[i + 1] + digits[i] + digits[i + 2 :]
            value = Decimal(f"{swapped[:-2]}.{swapped[-2:]}")
            if value > 0 and value % 1 != 0 and abs(value - old) < old:
                candidates.append(value)
    for _ in range(3):
        delta = Decimal(ctx.rng.randint(1, 9)) + Decimal(ctx.rng.randint(1, 99)) / 100
        value = old + delta
        if value % 1 != 0:
            candidates.append(value)
    candidates = [c for c in candidates if c != old]
    return ctx.pick(candidates)


def pick_receipts(ctx: Context, k: int) -> list[tuple[Receipt, Decimal]]:
    """``k`` receipts from different payees, each with a fresh amount."""
    chosen = ctx.rng.sample(list(RECEIPTS), k)
    return [(r, fresh_amount(ctx, r.low, r.high)) for r in chosen]


def paid_phrase(card: bool) -> str:
    """What the user adds when the card paid (the default payment account needs no mention)."""
    return ", on my card" if card else ""


def add_arguments(receipt: Receipt, amount: Decimal, day: date, *, card: bool) -> dict[str, Any]:
    """Gold ``add_transaction`` arguments: only what the user said (the checking default is left out)."""
    args: dict[str, Any] = {
        "date": day.isoformat(),
        "payee": receipt.payee,
        "narration": receipt.narration,
        "amount": float(amount),
        "expense_account": receipt.account,
    }
    if card:
        args["payment_account"] = CREDIT_CARD
    return args


def record_add(ctx: Context, rec: Recorder, args: dict[str, Any], deps: tuple[int, ...] = ()) -> tuple[int, Memo]:
    """Call ``add_transaction`` and remember the new transaction."""
    idx, result = rec.call("add_transaction", args, deps)
    return idx, ctx.remember(result["transaction"], added=True)


def record_amend_amount(
    ctx: Context, rec: Recorder, memo: Memo, amount: Decimal, deps: tuple[int, ...] = ()
) -> tuple[int, Memo]:
    """Call ``amend_transaction`` with a new amount and remember the changed transaction."""
    idx, result = rec.call("amend_transaction", {"transaction_id": memo.id, "amount": float(amount)}, deps)
    ctx.amended.add(memo.id)
    return idx, ctx.remember(result["transaction"], added=memo.added)


def record_recategorize(
    ctx: Context, rec: Recorder, memo: Memo, target: str, deps: tuple[int, ...] = ()
) -> tuple[int, str, Memo]:
    """Call ``recategorize``; returns (node, the old account, the moved transaction)."""
    idx, result = rec.call("recategorize", {"transaction_id": memo.id, "new_account": target}, deps)
    ctx.moved.add(memo.id)
    return idx, result["old_account"], ctx.remember(result["transaction"], added=memo.added)


def can_amend(ctx: Context, memo: Memo) -> bool:
    """A transaction's amount is corrected at most once per session."""
    return memo.id not in ctx.amended


def can_move(ctx: Context, memo: Memo) -> bool:
    """A transaction is recategorized at most once per session, and only when the catalog knows a better home."""
    return memo.id not in ctx.moved and memo.category in RECATEGORIZATIONS


def spend_arguments(period: Period, category: str) -> dict[str, Any]:
    """Gold ``spending_summary`` arguments."""
    return {"start_date": period.start_iso, "end_date": period.end_iso, "category": category}


def _usd(values: dict[str, str]) -> Decimal:
    return Decimal(values.get("USD", next(iter(values.values()), "0")))


def balance_sentence(result: dict[str, Any]) -> str:
    """A balance, said the way its account type reads naturally."""
    account = result["account"]
    value = _usd(result["balances"])
    if result.get("as_of"):
        day = date.fromisoformat(result["as_of"])
        month_end = (day + timedelta(days=1)).day == 1
        when = f"At the end of {calendar.month_name[day.month] if month_end else month_day(day)}, "
        if account.startswith("Liabilities"):
            return f"{when}you owed {money(max(-value, Decimal(0)))} on {the_nick(account)}."
        return f"{when}{the_nick(account)} had {money(value)}."
    if account == "Expenses":
        return f"{money(value)} has been spent in total so far this year, across all categories."
    if account == "Assets":
        return f"You have {money(value)} across your bank accounts."
    if account.startswith("Liabilities"):
        if value < 0:
            return f"You owe {money(-value)} on {the_nick(account)}."
        return f"You owe nothing on {the_nick(account)} right now."
    if account.startswith("Expenses"):
        return f"{money(value)} has gone into {nick(account)} in total so far this year."
    if account.startswith("Income"):
        return f"{money(-value)} has come in as {nick(account)} so far this year."
    return f"Your {nick(account)} balance is {money(value)}."


def spend_sentence(result: dict[str, Any], period: Period, category: str) -> str:
    """How much was spent on a category over a period, with the per-account breakdown when there is one."""
    total = _usd(result["total"])
    what = "in total" if category == "Expenses" else f"on {nick(category)}"
    if total == 0:
        return f"You didn't spend anything {what} in {period.name}."
    parts = [f"{nick(row['account'])} {money(row['amount'])}" for row in result["by_account"]]
    detail = f" ({', '.join(parts)})" if len(parts) > 1 else ""
    return f"You spent {money(total)} {what} in {period.name}{detail}."


def txn_noun(memo: Memo) -> str:
    """How a user calls a transaction: a receipt they added, a charge already in the books, or a transfer."""
    if not memo.category.startswith("Expenses"):
        return "transfer"
    return "receipt" if memo.added else "charge"
