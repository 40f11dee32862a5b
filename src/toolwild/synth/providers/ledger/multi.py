"""Multi-tool tasks: Parallel (independent calls in one turn), Sequential (each call needs the previous result)
and Mixed (a parallel part and a dependent part).

Parallel calls are only ever paired when neither can change what the other sees (a summary of *last* month next
to an add dated *today*), so the recorded observations are the same in any execution order.
"""

from __future__ import annotations

import itertools
from datetime import date, timedelta
from decimal import Decimal
from typing import Any

from toolwild.core.task import TaskType
from toolwild.envs.domains.ledger.seed import CHECKING, CREDIT_CARD, SAVINGS
from toolwild.synth.providers.ledger.catalog import RECATEGORIZATIONS
from toolwild.synth.providers.ledger.common import (
    add_arguments,
    balance_sentence,
    can_amend,
    can_move,
    corrected_amount,
    paid_phrase,
    pick_receipts,
    record_add,
    record_amend_amount,
    record_recategorize,
    spend_arguments,
    spend_sentence,
    txn_noun,
)
from toolwild.synth.providers.ledger.phrasing import (
    Period,
    day_phrase,
    last_month,
    money,
    month_day,
    month_end_phrase,
    nick,
    number,
    of_day,
    the_nick,
    this_month,
)
from toolwild.synth.providers.ledger.scenario import (
    Context,
    GenerationError,
    Memo,
    Mode,
    Option,
    Recorder,
    memo_targets,
    option,
)

__all__ = ["multi_options"]

_CATEGORIES = (
    "Expenses:Food",
    "Expenses:Food:Groceries",
    "Expenses:Food:Restaurants",
    "Expenses:Transport",
    "Expenses:Shopping",
    "Expenses:Utilities",
    "Expenses:Entertainment",
)
_BANK = (CHECKING, SAVINGS, CREDIT_CARD)

_option = option


def _added_sentence(memo: Memo) -> str:
    return f"added {memo.id} ({memo.payee}, {money(memo.amount)}, {memo.category}, paid from {memo.payment})"


def _disjoint(a: str, b: str) -> bool:
    return not (a == b or a.startswith(b + ":") or b.startswith(a + ":"))


def _record_spend(ctx: Context, rec: Recorder, period: Period, category: str) -> tuple[int, str]:
    idx, result = rec.call("spending_summary", spend_arguments(period, category))
    ctx.spends.append((ctx.position, category, period, result["total"].get("USD", "0.00")))
    return idx, spend_sentence(result, period, category)


def _record_balance(
    ctx: Context, rec: Recorder, account: str, deps: tuple[int, ...] = (), as_of: str | None = None
) -> tuple[int, str]:
    args: dict[str, Any] = {"account": account}
    if as_of:
        args["date"] = as_of
    idx, result = rec.call("get_balance", args, deps)
    ctx.balances.append((ctx.position, account, result["balances"].get("USD", "0.00"), as_of))
    return idx, balance_sentence(result)


def _find_one(ctx: Context, rec: Recorder, target: dict[str, Any]) -> tuple[int, Memo]:
    args = {"payee": target["payee"], "start_date": target["date"], "end_date": target["date"]}
    idx, result = rec.call("find_transactions", args)
    if result["count"] != 1:
        raise GenerationError(f"search for {args} found {result['count']} transactions, expected 1")
    memo = ctx.memo_from(result["transactions"][0], added=False)
    return idx, memo


def _recent_targets(ctx: Context, *, this_month_only: bool = False) -> list[dict[str, Any]]:
    start = this_month(ctx.today).start if this_month_only else last_month(ctx.today).start
    return ctx.seed_targets(start, ctx.today - timedelta(days=1))


# ---------------------------------------------------------------------------------------------------- parallel
def _spend_and_add(ctx: Context) -> list[Option]:
    period = last_month(ctx.today)
    ((receipt, amount),) = pick_receipts(ctx, 1)
    card = ctx.rng.random() < 0.5
    add_args = add_arguments(receipt, amount, ctx.today, card=card)
    out = []
    if ctx.position == 0:
        category = ctx.pick(list(_CATEGORIES))
        ask = (
            f"How much did I spend on {nick(category)} last month? Also add today's {receipt.payee} receipt, "
            f"{number(amount)} {receipt.spoken}{paid_phrase(card)}."
        )
        mode: Mode = "first"
        ref = None
    else:
        previous = [s for s in ctx.spends if s[0] == ctx.position - 1 and s[2].label == "last month"]
        if not previous:
            return []
        choices = [c for c in _CATEGORIES if _disjoint(c, previous[-1][1])]
        if not choices:
            return []
        category = ctx.pick(choices)
        ask = (
            f"Same question for {nick(category)}, and add today's {receipt.payee} receipt: {number(amount)} "
            f"{receipt.spoken}{paid_phrase(card)}."
        )
        mode, ref = "partial", ctx.position - 1

    def build(rec: Recorder) -> str:
        _, spent = _record_spend(ctx, rec, period, category)
        _, memo = record_add(ctx, rec, add_args)
        ctx.salient[ctx.position] = memo.category
        return f"{spent} I also {_added_sentence(memo)}."

    out.append(_option(TaskType.PARALLEL, "spend_and_add", ask, mode, ref, build))
    return out


def _two_balances(ctx: Context) -> list[Option]:
    out = []
    pair = ctx.rng.sample(list(_BANK), 2)
    pair.sort(key=_BANK.index)
    if ctx.position == 0:
        text = ctx.pick(
            [
                f"How do {the_nick(pair[0])} and {the_nick(pair[1])} look right now?",
                f"What are my {nick(pair[0])} and {nick(pair[1])} balances?",
            ]
        )
        mode: Mode = "first"
        ref = None
    else:
        memo = next((m for m in ctx.memos_of(ctx.position - 1)), None)
        if memo is None or memo.payment not in _BANK or ctx.position - 1 not in ctx.wrote:
            return []
        other = CHECKING if memo.payment != CHECKING else SAVINGS
        pair = sorted([memo.payment, other], key=_BANK.index)
        text = f"How do {the_nick(pair[0])} and {the_nick(pair[1])} look after that?"
        mode, ref = "coref", ctx.position - 1

    def build(rec: Recorder) -> str:
        sentences = [_record_balance(ctx, rec, account)[1] for account in pair]
        return " ".join(sentences)  # about two accounts: no single topic for "that" to point at

    out.append(_option(TaskType.PARALLEL, "two_balances", text, mode, ref, build))
    return out


def _two_spendings(ctx: Context) -> list[Option]:
    if ctx.position == 0:
        period = ctx.pick([last_month(ctx.today), this_month(ctx.today)])
        a, b = ctx.rng.sample([c for c in _CATEGORIES if c != "Expenses:Food"], 2)
        text = f"Compare my {nick(a)} and {nick(b)} spending {period.label}."
        mode: Mode = "first"
        ref = None
    else:
        previous = [s for s in ctx.spends if s[0] == ctx.position - 1]
        if not previous:
            return []
        _, last, period, _ = previous[-1]
        choices = [c for c in _CATEGORIES if c != "Expenses:Food" and _disjoint(c, last)]
        if len(choices) < 2:
            return []
        a, b = ctx.rng.sample(choices, 2)
        text = f"Now {nick(a)} and {nick(b)} for the same period."
        mode, ref = "partial", ctx.position - 1

    def build(rec: Recorder) -> str:
        sentences = [_record_spend(ctx, rec, period, c)[1] for c in (a, b)]
        return " ".join(sentences)  # about two categories: no single topic for "that" to point at

    return [_option(TaskType.PARALLEL, "two_spendings", text, mode, ref, build)]


def _two_adds(ctx: Context) -> list[Option]:
    (r1, a1), (r2, a2) = pick_receipts(ctx, 2)
    if ctx.position == 0:
        card = ctx.rng.random() < 0.5
        where = "on my card" if card else "from checking"
        text = (
            f"Add two receipts from today, both {where}: {r1.payee} {number(a1)} {r1.spoken}, and {r2.payee} "
            f"{number(a2)} {r2.spoken}."
        )
        mode: Mode = "first"
        ref = None
        if not card:
            return []  # "from checking" names the default: the gold would have to guess whether to spell it out
    else:
        memo = next((m for m in ctx.memos_of(ctx.position - 1) if m.added and m.payment == CREDIT_CARD), None)
        if memo is None:
            return []
        card = True
        text = (
            f"Two more from today on the same card: {r1.payee} {number(a1)} {r1.spoken}, and {r2.payee} "
            f"{number(a2)} {r2.spoken}."
        )
        mode, ref = "partial", ctx.position - 1

    def build(rec: Recorder) -> str:
        _, m1 = record_add(ctx, rec, add_arguments(r1, a1, ctx.today, card=card))
        _, m2 = record_add(ctx, rec, add_arguments(r2, a2, ctx.today, card=card))
        ctx.salient[ctx.position] = CREDIT_CARD if card else CHECKING
        return f"Done: I {_added_sentence(m1)} and {_added_sentence(m2)}."

    return [_option(TaskType.PARALLEL, "two_adds", text, mode, ref, build)]


def _amend_and_spend(ctx: Context) -> list[Option]:
    out = []
    period = last_month(ctx.today)
    for memo, mode in memo_targets(ctx):
        if memo.day < this_month(ctx.today).start or not can_amend(ctx, memo):
            continue  # the summary of last month must not see the amended transaction
        new = corrected_amount(ctx, memo.amount)
        category = ctx.pick(list(_CATEGORIES))
        if mode == "coref":
            text = f"Make it {number(new)} instead. And how much did I spend on {nick(category)} last month?"
        else:
            which = "I added earlier" if memo.added else of_day(memo.day, ctx.today)
            text = (
                f"Change the {memo.payee} {txn_noun(memo)} {which} to {number(new)}, and tell me how much I spent "
                f"on {nick(category)} last month."
            )

        def build(rec: Recorder, memo: Memo = memo, new: Decimal = new, category: str = category) -> str:
            _, after = record_amend_amount(ctx, rec, memo, new)
            _, spent = _record_spend(ctx, rec, period, category)
            ctx.salient[ctx.position] = category
            return f"Updated {after.id} ({after.payee}) to {money(after.amount)}. {spent}"

        out.append(_option(TaskType.PARALLEL, "amend_and_spend", text, mode, memo.task, build))
    return out


def _recategorize_and_balance(ctx: Context) -> list[Option]:
    out = []
    for memo, mode in memo_targets(ctx):
        if not can_move(ctx, memo) or memo.payment not in _BANK:
            continue
        fix = RECATEGORIZATIONS[memo.category]
        if mode == "coref":
            text = f"Put it under {nick(fix.target)}, {fix.reason}. And what's my {nick(memo.payment)} balance now?"
        else:
            text = (
                f"Move the {memo.payee} {txn_noun(memo)} {of_day(memo.day, ctx.today)} to {nick(fix.target)} "
                f"({fix.reason}), and tell me my {nick(memo.payment)} balance."
            )

        def build(rec: Recorder, memo: Memo = memo, target: str = fix.target) -> str:
            _, old, after = record_recategorize(ctx, rec, memo, target)
            _, balance = _record_balance(ctx, rec, memo.payment)
            ctx.salient[ctx.position] = target
            return f"Moved {after.id} ({after.payee}) from {old} to {target}. {balance}"

        out.append(_option(TaskType.PARALLEL, "recategorize_and_balance", text, mode, memo.task, build))
    return out


def _salient_pair(ctx: Context) -> list[Option]:
    """The always-available follow-up: two views of the account an earlier task was about."""
    out = []
    for task, account, close, mode in ctx.salient_targets():
        label = "that" if close else "the category from my first question"
        if account.startswith("Expenses"):
            last, now = last_month(ctx.today), this_month(ctx.today)
            text = f"How much went into {label} last month, and how much so far this month?"

            def build(rec: Recorder, account: str = account, last: Period = last, now: Period = now) -> str:
                first = _record_spend(ctx, rec, last, account)[1]
                second = _record_spend(ctx, rec, now, account)[1]
                ctx.salient[ctx.position] = account
                return f"{first} {second}"

        elif account in _BANK:
            month_end = last_month(ctx.today).end
            label = "that account" if close else "the account from my first question"
            text = f"What's in {label} now, and what was in it at the end of {month_end_phrase(month_end)}?"
            if account == CREDIT_CARD:
                it = "it" if close else "the card"
                text = f"What do I owe on {it} now, and what did I owe at the end of {month_end_phrase(month_end)}?"

            def build(rec: Recorder, account: str = account, month_end: date = month_end) -> str:
                first = _record_balance(ctx, rec, account)[1]
                second = _record_balance(ctx, rec, account, as_of=month_end.isoformat())[1]
                ctx.salient[ctx.position] = account
                return f"{first} {second}"

        else:
            continue
        out.append(
            _option(TaskType.PARALLEL, "salient_pair", text, mode, task, build, key=("pair", account), weight=0.35)
        )
    return out


# ---------------------------------------------------------------------------------------------------- sequential
def _find_then(ctx: Context) -> list[Option]:
    """Find a charge by payee and day, then fix its amount, move it, or delete it."""
    out = []
    targets = _recent_targets(ctx)
    if not targets:
        return out
    first = ctx.position == 0
    # Later turns lean on the store of a transaction talked about before ("that store ... too").
    anchors: list[tuple[Memo | None, Mode]] = [(None, "first")] if first else []
    for memo, mode in [] if first else memo_targets(ctx):
        if mode == "coref" or len(ctx.live_memos()) == 1:  # "the receipt we talked about earlier" must be unique
            anchors.append((memo, mode))
    for memo, mode in anchors:
        pool = [t for t in targets if memo is None or (t["payee"] == memo.payee and t["id"] != memo.id)]
        if not pool:
            continue
        target = ctx.pick(pool)
        day = date.fromisoformat(target["date"])
        preview = ctx.memo_from(target, added=False)
        new = corrected_amount(ctx, preview.amount)
        when = day_phrase(day, ctx.today)
        if memo is None:
            text = ctx.pick(
                [
                    f"The {preview.payee} charge {when} was actually {number(new)}, not "
                    f"{number(preview.amount)}. I typed it wrong; can you fix it?",
                    f"Can you correct the {preview.payee} charge from {month_day(day)}? It should be {number(new)}.",
                ]
            )
            ref = None
        elif mode == "coref":
            text = (
                f"That store got it wrong {when} too: that charge should be {number(new)}, not "
                f"{number(preview.amount)}."
            )
            ref = memo.task
        else:
            text = (
                f"The store from the {txn_noun(memo)} we talked about earlier also got it wrong {when}: it should "
                f"be {number(new)}, not {number(preview.amount)}."
            )
            ref = memo.task

        def build(rec: Recorder, target: dict[str, Any] = target, new: Decimal = new) -> str:
            find_idx, found = _find_one(ctx, rec, target)
            _, after = record_amend_amount(ctx, rec, found, new, deps=(find_idx,))
            ctx.salient[ctx.position] = after.category
            return (
                f"Found it ({after.id}, {month_day(after.day)}) and changed it from {money(found.amount)} to "
                f"{money(after.amount)}."
            )

        out.append(_option(TaskType.SEQUENTIAL, "find_amend", text, mode, ref, build))
    if first:
        movable = [t for t in targets if can_move(ctx, ctx.memo_from(t, added=False))]
        if movable:
            target = ctx.pick(movable)
            preview = ctx.memo_from(target, added=False)
            fix = RECATEGORIZATIONS[preview.category]
            text = (
                f"Move the {preview.payee} charge {day_phrase(preview.day, ctx.today)} to {nick(fix.target)}; "
                f"{fix.reason}."
            )

            def build_move(rec: Recorder, target: dict[str, Any] = target, goal: str = fix.target) -> str:
                find_idx, found = _find_one(ctx, rec, target)
                _, old, _moved = record_recategorize(ctx, rec, found, goal, (find_idx,))
                ctx.salient[ctx.position] = goal
                return f"Found {found.id} ({found.payee}, {money(found.amount)}) and moved it from {old} to {goal}."

            out.append(_option(TaskType.SEQUENTIAL, "find_recategorize", text, "first", None, build_move))
        target = ctx.pick(targets)
        preview = ctx.memo_from(target, added=False)
        text = f"Delete the {preview.payee} charge {day_phrase(preview.day, ctx.today)}; it was refunded in full."

        def build_delete(rec: Recorder, target: dict[str, Any] = target) -> str:
            find_idx, found = _find_one(ctx, rec, target)
            _, _result = rec.call("delete_transaction", {"transaction_id": found.id}, (find_idx,))
            ctx.touched.add(found.id)
            ctx.salient[ctx.position] = found.category
            return f"Found {found.id} ({found.payee}, {money(found.amount)} on {month_day(found.day)}) and deleted it."

        out.append(_option(TaskType.SEQUENTIAL, "find_delete", text, "first", None, build_delete))
    return out


def _add_then_balance(ctx: Context) -> list[Option]:
    ((receipt, amount),) = pick_receipts(ctx, 1)
    if ctx.position == 0:
        card = ctx.rng.random() < 0.5
        tail = "then tell me what I owe on the card" if card else "then tell me what's left in checking"
        text = f"Log today's {receipt.payee} receipt, {number(amount)} {receipt.spoken}{paid_phrase(card)}, and {tail}."
        mode: Mode = "first"
        ref = None
    else:
        memo = next((m for m in ctx.memos_of(ctx.position - 1) if m.added and m.payment == CREDIT_CARD), None)
        if memo is None:
            return []
        card = True
        text = (
            f"One more from today on the same card: {receipt.payee}, {number(amount)} {receipt.spoken}. Then tell "
            "me what I owe on it."
        )
        mode, ref = "partial", ctx.position - 1
    account = CREDIT_CARD if card else CHECKING

    def build(rec: Recorder) -> str:
        add_idx, memo = record_add(ctx, rec, add_arguments(receipt, amount, ctx.today, card=card))
        _, balance = _record_balance(ctx, rec, account, deps=(add_idx,))
        ctx.salient[ctx.position] = account
        return f"I {_added_sentence(memo)}. {balance}"

    return [_option(TaskType.SEQUENTIAL, "add_then_balance", text, mode, ref, build)]


def _sweep_to_savings(ctx: Context) -> list[Option]:
    if ctx.position != 0:
        return []
    balance = Decimal(ctx.episode.call("get_balance", {"account": CHECKING}).result["balances"]["USD"])
    floors = [f for f in (1500, 2000, 2500, 3000, 4000, 5000) if balance - f > 100]
    if not floors:
        return []
    floor = ctx.pick(floors)
    text = (
        f"Move everything above ${floor:,} in checking over to savings. Record it today with Chase as the payee and "
        "'Transfer to savings' as the description."
    )

    def build(rec: Recorder) -> str:
        idx, result = rec.call("get_balance", {"account": CHECKING})
        current = Decimal(result["balances"]["USD"])
        amount = current - floor
        args = {
            "date": ctx.today.isoformat(),
            "payee": "Chase",
            "narration": "Transfer to savings",
            "amount": float(amount),
            "expense_account": SAVINGS,
        }
        _, memo = record_add(ctx, rec, args, deps=(idx,))
        ctx.balances.append((ctx.position, CHECKING, f"{current:.2f}", None))
        ctx.salient[ctx.position] = SAVINGS
        return f"Checking had {money(current)}, so I moved {money(amount)} to savings ({memo.id})."

    return [_option(TaskType.SEQUENTIAL, "sweep_to_savings", text, "first", None, build)]


# ---------------------------------------------------------------------------------------------------- mixed
def _find_two_then_move(ctx: Context) -> list[Option]:
    if ctx.position != 0:
        return []
    targets = _recent_targets(ctx)
    ledger = ctx.ledger()
    pairs = []
    by_payee: dict[str, list[dict[str, Any]]] = {}
    for t in targets:
        by_payee.setdefault(t["payee"], []).append(t)
    for payee, rows in by_payee.items():
        rows.sort(key=lambda r: r["date"])
        for a, b in itertools.pairwise(rows):
            d1, d2 = date.fromisoformat(a["date"]), date.fromisoformat(b["date"])
            if d1 == d2 or (d2 - d1).days > 6:
                continue
            inside = [t for t in ledger if t["payee"] == payee and a["date"] <= t["date"] <= b["date"]]
            cats = {ctx.memo_from(r, added=False).category for r in (a, b)}
            if len(inside) == 2 and "Expenses:Travel" not in cats:
                pairs.append((a, b))
    if not pairs:
        return []
    a, b = ctx.pick(pairs)
    d1, d2 = date.fromisoformat(a["date"]), date.fromisoformat(b["date"])
    payee = a["payee"]
    text = (
        f"My two {payee} charges between {month_day(d1)} and {month_day(d2)} were for the Denver trip. Move both "
        "to travel."
    )

    def build(rec: Recorder) -> str:
        args = {"payee": payee, "start_date": d1.isoformat(), "end_date": d2.isoformat()}
        find_idx, result = rec.call("find_transactions", args)
        rows = result["transactions"]
        lines = []
        for row in rows:
            record_recategorize(ctx, rec, ctx.memo_from(row, added=False), "Expenses:Travel", (find_idx,))
            lines.append(f"{row['id']} ({month_day(date.fromisoformat(row['date']))})")
        ctx.salient[ctx.position] = "Expenses:Travel"
        return f"Moved both {payee} charges to Expenses:Travel: {' and '.join(lines)}."

    return [_option(TaskType.MIXED, "find_two_then_move", text, "first", None, build)]


def _spend_and_fix(ctx: Context) -> list[Option]:
    if ctx.position != 0:
        return []
    targets = _recent_targets(ctx, this_month_only=True)
    if not targets:
        return []
    target = ctx.pick(targets)
    preview = ctx.memo_from(target, added=False)
    new = corrected_amount(ctx, preview.amount)
    category = ctx.pick(list(_CATEGORIES))
    period = last_month(ctx.today)
    text = (
        f"How much did I spend on {nick(category)} last month? Also, the {preview.payee} charge "
        f"{day_phrase(preview.day, ctx.today)} should be {number(new)}, not {number(preview.amount)}."
    )

    def build(rec: Recorder) -> str:
        _, spent = _record_spend(ctx, rec, period, category)
        find_idx, found = _find_one(ctx, rec, target)
        _, after = record_amend_amount(ctx, rec, found, new, deps=(find_idx,))
        ctx.salient[ctx.position] = category
        return (
            f"{spent} I also corrected {after.id} ({after.payee}, {month_day(after.day)}) from "
            f"{money(found.amount)} to {money(after.amount)}."
        )

    return [_option(TaskType.MIXED, "spend_and_fix", text, "first", None, build)]


def _write_then_two(ctx: Context) -> list[Option]:
    """A write, then two reads that depend on it: the payment account's balance and the month's category total."""
    out = []
    now = this_month(ctx.today)
    if ctx.position == 0:
        ((receipt, amount),) = pick_receipts(ctx, 1)
        card = ctx.rng.random() < 0.5
        parent = receipt.account.rsplit(":", 1)[0] if receipt.account.count(":") > 1 else receipt.account
        account = CREDIT_CARD if card else CHECKING
        text = (
            f"Add today's {receipt.payee} receipt, {number(amount)} {receipt.spoken}{paid_phrase(card)}. Then show me "
            f"my {nick(account)} balance and what I've spent on {nick(parent)} this month."
        )

        def build(rec: Recorder) -> str:
            add_idx, memo = record_add(ctx, rec, add_arguments(receipt, amount, ctx.today, card=card))
            _, balance = _record_balance(ctx, rec, account, deps=(add_idx,))
            _idx, result = rec.call("spending_summary", spend_arguments(now, parent), (add_idx,))
            ctx.spends.append((ctx.position, parent, now, result["total"].get("USD", "0.00")))
            ctx.salient[ctx.position] = parent
            return f"I {_added_sentence(memo)}. {balance} {spend_sentence(result, now, parent)}"

        out.append(_option(TaskType.MIXED, "add_then_two", text, "first", None, build))
        return out
    for memo, mode in memo_targets(ctx):
        if memo.payment not in _BANK or memo.day < now.start or not can_amend(ctx, memo):
            continue
        if not memo.category.startswith("Expenses"):
            continue
        new = corrected_amount(ctx, memo.amount)
        parent = memo.category
        if mode == "coref":
            text = (
                f"Make it {number(new)}. Then what's my {nick(memo.payment)} balance, and what have I spent on "
                f"{nick(parent)} this month?"
            )
        else:
            which = "I added earlier" if memo.added else of_day(memo.day, ctx.today)
            text = (
                f"Change the {memo.payee} {txn_noun(memo)} {which} to {number(new)}, then show me my "
                f"{nick(memo.payment)} balance and this month's {nick(parent)} total."
            )

        def build_amend(rec: Recorder, memo: Memo = memo, new: Decimal = new, parent: str = parent) -> str:
            amend_idx, after = record_amend_amount(ctx, rec, memo, new)
            _, balance = _record_balance(ctx, rec, memo.payment, deps=(amend_idx,))
            _idx, result = rec.call("spending_summary", spend_arguments(now, parent), (amend_idx,))
            ctx.spends.append((ctx.position, parent, now, result["total"].get("USD", "0.00")))
            ctx.salient[ctx.position] = parent
            return f"Updated {after.id} to {money(after.amount)}. {balance} {spend_sentence(result, now, parent)}"

        out.append(_option(TaskType.MIXED, "amend_then_two", text, mode, memo.task, build_amend))
    return out


def _salient_compare(ctx: Context) -> list[Option]:
    """The other always-available follow-up: the account an earlier task was about next to a sibling account."""
    out = []
    for task, account, close, mode in ctx.salient_targets():
        if account in _CATEGORIES:
            other = next(
                c for c in _CATEGORIES if c != account and not account.startswith(c) and not c.startswith(account)
            )
            period = this_month(ctx.today)
            label = "that" if close else "the category from my first question"
            text = f"How does {label} compare with {nick(other)} so far this month?"

            def build(rec: Recorder, account: str = account, other: str = other, period: Period = period) -> str:
                first = _record_spend(ctx, rec, period, account)[1]
                second = _record_spend(ctx, rec, period, other)[1]
                ctx.salient[ctx.position] = account
                return f"{first} {second}"

        elif account in _BANK:
            other = CHECKING if account != CHECKING else SAVINGS
            label = "that account" if close else "the account from my first question"
            text = f"Put {label} next to {the_nick(other)}: what are both at right now?"

            def build(rec: Recorder, account: str = account, other: str = other) -> str:
                sentences = [_record_balance(ctx, rec, a)[1] for a in (account, other)]
                ctx.salient[ctx.position] = account
                return " ".join(sentences)

        else:
            continue
        out.append(
            _option(TaskType.PARALLEL, "salient_compare", text, mode, task, build, key=("compare", account), weight=0.3)
        )
    return out


def multi_options(ctx: Context) -> list[Option]:
    """Every multi-tool task (Parallel, Sequential, Mixed) that fits the conversation so far."""
    out: list[Option] = []
    for make in (
        _spend_and_add,
        _two_balances,
        _two_spendings,
        _two_adds,
        _amend_and_spend,
        _recategorize_and_balance,
        _find_then,
        _add_then_balance,
        _sweep_to_savings,
        _find_two_then_move,
        _spend_and_fix,
        _write_then_two,
    ):
        out.extend(make(ctx))
    if ctx.position > 0:
        out.extend(_salient_pair(ctx))
        out.extend(_salient_compare(ctx))
    return out
