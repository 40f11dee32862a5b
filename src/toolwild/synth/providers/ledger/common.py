"""Building blocks several templates share: new receipts, corrected amounts, gold call arguments, and answer
sentences written from real tool results."""

from __future__ import annotations

import calendar
from datetime import date, timedelta
from decimal import Decimal
from typing import Any

from toolwild.synth.providers.ledger.catalog import Receipt
from toolwild.synth.providers.ledger.phrasing import Period, month_day, number
from toolwild.synth.providers.ledger.phrasing import money as money_in
from toolwild.synth.providers.ledger.scenario import Context, Memo, Recorder

__all__ = [
    "add_arguments",
    "balance_sentence",
    "can_amend",
    "can_move",
    "choose_card",
    "corrected_amount",
    "fresh_amount",
    "paid_phrase",
    "pick_receipts",
    "record_add",
    "record_amend_amount",
    "record_recategorize",
    "said",
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
    chosen = ctx.rng.sample(list(ctx.profile.receipts), k)
    return [(r, fresh_amount(ctx, r.low, r.high)) for r in chosen]


def said(ctx: Context, amount: Decimal) -> str:
    """A new receipt's amount as the user types it: ``42.10``, with the currency when it is not dollars (``42.10
    EUR``), so the currency the gold passes is one the user said."""
    currency = ctx.profile.currency
    return number(amount) if currency == "USD" else f"{number(amount)} {currency}"


def choose_card(ctx: Context) -> bool | None:
    """Whether a new receipt was paid by card (True) or from checking (False), half and half; the one the books
    have when they lack the other; None when they have neither (no receipt can be paid)."""
    card = ctx.rng.random() < 0.5
    has_card, has_checking = ctx.profile.card is not None, ctx.profile.checking is not None
    if not has_card and not has_checking:
        return None
    return (card and has_card) or not has_checking


def _says_checking(ctx: Context) -> bool:
    """Checking must be named when it is not where ``add_transaction`` pays from by default."""
    return ctx.profile.checking != ctx.profile.default_payment


def paid_phrase(ctx: Context, card: bool) -> str:
    """What the user adds about the payment: the card always, checking only when it is not the default."""
    if card:  # the card by name: "my card" leaves the agent to pick one when the books have two
        return f", on my {ctx.nick(ctx.profile.card)}" if ctx.profile.card is not None else ", on my card"
    checking = ctx.profile.checking
    return f", from {ctx.nick(checking)}" if checking is not None and _says_checking(ctx) else ""


def add_arguments(ctx: Context, receipt: Receipt, amount: Decimal, day: date, *, card: bool) -> dict[str, Any]:
    """Gold ``add_transaction`` arguments: only what the user said (the default payment account is left out)."""
    args: dict[str, Any] = {
        "date": day.isoformat(),
        "payee": receipt.payee,
        "narration": receipt.narration,
        "amount": float(amount),
        "expense_account": receipt.account,
    }
    if card:
        args["payment_account"] = ctx.profile.card
    elif _says_checking(ctx):
        args["payment_account"] = ctx.profile.checking
    if ctx.profile.currency != "USD":  # the tool's default; another one the user said (see :func:`said`)
        args["currency"] = ctx.profile.currency
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
    return idx, ctx.remember(result["transaction"], added=memo.added, was=memo.id)


def record_recategorize(
    ctx: Context, rec: Recorder, memo: Memo, target: str, deps: tuple[int, ...] = ()
) -> tuple[int, str, Memo]:
    """Call ``recategorize``; returns (node, the old account, the moved transaction)."""
    idx, result = rec.call("recategorize", {"transaction_id": memo.id, "new_account": target}, deps)
    ctx.moved.add(memo.id)
    return idx, result["old_account"], ctx.remember(result["transaction"], added=memo.added, was=memo.id)


def can_amend(ctx: Context, memo: Memo) -> bool:
    """A transaction's amount is corrected at most once per session, only where no balance assertion after it
    would break, and never where a rule the user set made the amount (the sweep's "everything above $3,000": the
    assistant worked it out, so a "correction" would break the user's own rule)."""
    return memo.id not in ctx.amended and not (ctx.aliases(memo.id) & ctx.ruled) and ctx.writable(memo)


def can_move(ctx: Context, memo: Memo) -> bool:
    """A transaction is recategorized at most once per session, only when the profile knows a better home, and only
    where no balance assertion on either category would break."""
    fix = ctx.profile.recategorizations.get(memo.category)
    return (
        memo.id not in ctx.moved
        and fix is not None
        and ctx.profile.writable(memo.category, memo.day)
        and ctx.profile.writable(fix.target, memo.day)
    )


def spend_arguments(period: Period, category: str) -> dict[str, Any]:
    """Gold ``spending_summary`` arguments."""
    return {"start_date": period.start_iso, "end_date": period.end_iso, "category": category}


def _figure(ctx: Context, values: dict[str, str]) -> Decimal:
    """The operating currency's figure (zero when it has none)."""
    return Decimal(values.get(ctx.profile.currency, "0"))


def _besides(ctx: Context, values: dict[str, str]) -> str:
    """What a per-currency result holds in other currencies or commodities, as a clause ("" when nothing): a real
    ledger's accounts may hold shares or hours next to money, and the answer must not hide them."""
    others = [f"{amount} {currency}" for currency, amount in values.items() if currency != ctx.profile.currency]
    return f" Besides that: {', '.join(others)}." if others else ""


def balance_sentence(ctx: Context, result: dict[str, Any]) -> str:
    """A balance, said the way its account type reads naturally (holdings in other currencies added after it)."""
    return _balance_words(ctx, result) + _besides(ctx, result["balances"])


def _balance_words(ctx: Context, result: dict[str, Any]) -> str:
    """The balance in the operating currency, worded by the account's type."""
    account = result["account"]
    value = _figure(ctx, result["balances"])
    money, nick, the_nick = ctx.money, ctx.nick, ctx.the_nick
    # "since March 2021" (books spanning years) names a month the balance does not show: the answer says what it is
    so_far = ctx.profile.so_far if not any(ch.isdigit() for ch in ctx.profile.so_far) else "since the books begin"
    if result.get("as_of"):
        day = date.fromisoformat(result["as_of"])
        month_end = (day + timedelta(days=1)).day == 1
        when = f"At the end of {calendar.month_name[day.month] if month_end else month_day(day)}, "
        if account.startswith("Liabilities"):
            return f"{when}you owed {money(max(-value, Decimal(0)))} on {the_nick(account)}."
        return f"{when}{the_nick(account)} had {money(value)}."
    if account == "Expenses":
        return f"{money(value)} has been spent in total {so_far}, across all categories."
    if account == "Assets":
        return f"You have {money(value)} across your bank accounts."
    if account.startswith("Liabilities"):
        if value < 0:
            return f"You owe {money(-value)} on {the_nick(account)}."
        return f"You owe nothing on {the_nick(account)} right now."
    if account.startswith("Expenses"):
        return f"{money(value)} has gone into {nick(account)} in total {so_far}."
    if account.startswith("Income"):
        return f"{money(-value)} has come in as {nick(account)} {so_far}."
    return f"Your {nick(account)} balance is {money(value)}."


def spend_sentence(ctx: Context, result: dict[str, Any], period: Period, category: str) -> str:
    """How much was spent on a category over a period, with the per-account breakdown when there is one."""
    total = _figure(ctx, result["total"])
    money, nick = ctx.money, ctx.nick
    what = "in total" if category == "Expenses" else f"on {nick(category)}"
    if total == 0:
        return f"You didn't spend anything {what} in {period.name}.{_besides(ctx, result['total'])}"
    parts = [f"{nick(row['account'])} {money_in(row['amount'], row['currency'])}" for row in result["by_account"]]
    if len(parts) > 1:  # the breakdown names every currency already
        return f"You spent {money(total)} {what} in {period.name} ({', '.join(parts)})."
    return f"You spent {money(total)} {what} in {period.name}.{_besides(ctx, result['total'])}"


def txn_noun(memo: Memo) -> str:
    """How a user calls a transaction: a receipt they added, a charge already in the books, or a transfer."""
    if not memo.category.startswith("Expenses"):
        return "transfer"
    return "receipt" if memo.added else "charge"
