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
from toolwild.core.wild import Wild
from toolwild.synth.providers.ledger.common import (
    add_arguments,
    balance_sentence,
    can_amend,
    can_move,
    choose_card,
    corrected_amount,
    paid_phrase,
    pick_receipts,
    record_add,
    record_amend_amount,
    record_recategorize,
    said,
    spend_arguments,
    spend_sentence,
    txn_noun,
)
from toolwild.synth.providers.ledger.conditionals import conditional_options, conditional_pairs
from toolwild.synth.providers.ledger.phrasing import (
    Period,
    capital,
    day_phrase,
    last_month,
    month_before_last,
    month_day,
    month_end_phrase,
    number,
    of_day,
    this_month,
)
from toolwild.synth.providers.ledger.picks import pick_multi_options
from toolwild.synth.providers.ledger.scenario import (
    Context,
    GenerationError,
    Memo,
    Mode,
    Option,
    Recorder,
    memo_targets,
    option,
    own_slip,
)

__all__ = ["multi_options"]

_option = option


def _added_sentence(ctx: Context, memo: Memo) -> str:
    return f"added {memo.id} ({memo.payee}, {ctx.money(memo.amount)}, {memo.category}, paid from {memo.payment})"


def _disjoint(a: str, b: str) -> bool:
    return not (a == b or a.startswith(b + ":") or b.startswith(a + ":"))


def _record_spend(ctx: Context, rec: Recorder, period: Period, category: str) -> tuple[int, str]:
    idx, result = rec.call("spending_summary", spend_arguments(period, category))
    ctx.spends.append((ctx.position, category, period, ctx.profile.amount_of(result["total"])))
    return idx, spend_sentence(ctx, result, period, category)


def _record_balance(
    ctx: Context, rec: Recorder, account: str, deps: tuple[int, ...] = (), as_of: str | None = None
) -> tuple[int, str]:
    args: dict[str, Any] = {"account": account}
    if as_of:
        args["date"] = as_of
    idx, result = rec.call("get_balance", args, deps)
    ctx.balances.append((ctx.position, account, ctx.profile.amount_of(result["balances"]), as_of))
    return idx, balance_sentence(ctx, result)


def _find_one(ctx: Context, rec: Recorder, target: dict[str, Any]) -> tuple[int, Memo]:
    args = {"payee": target["payee"], "start_date": target["date"], "end_date": target["date"]}
    idx, result = rec.call("find_transactions", args)
    if result["count"] != 1:
        raise GenerationError(f"search for {args} found {result['count']} transactions, expected 1")
    memo = ctx.memo_from(result["transactions"][0], added=False)
    return idx, memo


def _recent_targets(ctx: Context, *, this_month_only: bool = False) -> list[dict[str, Any]]:
    start = this_month(ctx.today).start if this_month_only else last_month(ctx.today).start
    targets = ctx.seed_targets(start, ctx.today - timedelta(days=1))
    return [t for t in targets if ctx.writable(ctx.memo_from(t, added=False))]


# ---------------------------------------------------------------------------------------------------- parallel
def _spend_and_add(ctx: Context) -> list[Option]:
    period = last_month(ctx.today)
    categories = list(ctx.profile.compare_categories)
    if not ctx.profile.receipts or not categories:
        return []
    ((receipt, amount),) = pick_receipts(ctx, 1)
    card = choose_card(ctx)
    if card is None:
        return []
    add_args = add_arguments(ctx, receipt, amount, ctx.today, card=card)
    out = []
    if ctx.position == 0:
        category = ctx.pick(categories)
        ask = (
            f"How much did I spend on {ctx.nick(category)} last month? Also add today's {receipt.payee} receipt, "
            f"{said(ctx, amount)} {receipt.spoken}{paid_phrase(ctx, card)}."
        )
        mode: Mode = "first"
        ref = None
    else:
        previous = [s for s in ctx.spends if s[0] == ctx.position - 1]
        if not previous or any(s[2].label != "last month" for s in previous):
            return []  # "same question" must carry one period: last month's
        choices = [c for c in categories if _disjoint(c, previous[-1][1])]
        if not choices:
            return []
        category = ctx.pick(choices)
        ask = (
            f"Same question for {ctx.nick(category)}, and add today's {receipt.payee} receipt: {said(ctx, amount)} "
            f"{receipt.spoken}{paid_phrase(ctx, card)}."
        )
        mode, ref = "partial", ctx.position - 1

    def build(rec: Recorder) -> str:
        _, spent = _record_spend(ctx, rec, period, category)
        _, memo = record_add(ctx, rec, add_args)
        ctx.salient[ctx.position] = memo.category
        return f"{spent} I also {_added_sentence(ctx, memo)}."

    out.append(_option(TaskType.PARALLEL, "spend_and_add", ask, mode, ref, build, wild=(Wild.BUNDLE,)))
    return out


def _two_balances(ctx: Context) -> list[Option]:
    out = []
    banks = ctx.profile.banks
    if len(banks) < 2:
        return out
    pair = ctx.rng.sample(list(banks), 2)
    pair.sort(key=banks.index)
    if ctx.position == 0:
        text = ctx.pick(
            [
                f"How do {ctx.the_nick(pair[0])} and {ctx.the_nick(pair[1])} look right now?",
                f"What are my {ctx.nick(pair[0])} and {ctx.nick(pair[1])} balances?",
            ]
        )
        mode: Mode = "first"
        ref = None
    else:
        memo = next((m for m in ctx.memos_of(ctx.position - 1) if m.added), None)
        if memo is None or memo.payment not in banks or ctx.position - 1 not in ctx.wrote:
            return []
        if memo.payment == ctx.profile.default_payment:
            return []  # the write did not name it: "the account I paid that from" would be read off its postings
        other = ctx.profile.sibling(memo.payment)
        if other is None:
            return []
        pair = [memo.payment, other]
        paid = "charged that to" if memo.payment == ctx.profile.card else "paid that from"
        text = f"How do the account I {paid} and {ctx.the_nick(other)} look now?"
        mode, ref = "coref", ctx.position - 1

    def build(rec: Recorder) -> str:
        sentences = [_record_balance(ctx, rec, account)[1] for account in pair]
        return " ".join(sentences)  # about two accounts: no single topic for "that" to point at

    out.append(_option(TaskType.PARALLEL, "two_balances", text, mode, ref, build))
    return out


def _both_again(ctx: Context) -> list[Option]:
    """A follow-up on a task about two accounts: the same two again, a month further back ("And both for
    March?"). Both are meant, so the reference has one reading though it points at two values."""
    if ctx.position == 0:
        return []
    spends = [s for s in ctx.spends if s[0] == ctx.position - 1]
    balances = [b for b in ctx.balances if b[0] == ctx.position - 1]
    if len(spends) == 2 and not balances and spends[0][2] == spends[1][2] and spends[0][1] != spends[1][1]:
        period = spends[0][2]
        earlier = month_before_last(ctx.today) if period.label == "last month" else last_month(ctx.today)
        pair = [s[1] for s in spends]
        text = f"And both for {earlier.name}?"

        def build(rec: Recorder) -> str:
            return " ".join(_record_spend(ctx, rec, earlier, c)[1] for c in pair)

        key: tuple[Any, ...] = ("both", *pair, earlier.start_iso)
    elif len(balances) == 2 and not spends and all(b[3] is None for b in balances) and balances[0][1] != balances[1][1]:
        month_end = last_month(ctx.today).end
        accounts = [b[1] for b in balances]
        text = f"And where were both at the end of {month_end_phrase(month_end)}?"

        def build(rec: Recorder) -> str:
            return " ".join(_record_balance(ctx, rec, a, as_of=month_end.isoformat())[1] for a in accounts)

        key = ("both", *accounts, month_end.isoformat())
    else:
        return []
    return [_option(TaskType.PARALLEL, "both_again", text, "partial", ctx.position - 1, build, key=key)]


def _two_spendings(ctx: Context) -> list[Option]:
    leaves = list(ctx.profile.leaf_categories)
    if ctx.position == 0:
        if len(leaves) < 2:
            return []
        period = ctx.pick([last_month(ctx.today), this_month(ctx.today)])
        a, b = ctx.rng.sample(leaves, 2)
        text = f"Compare my {ctx.nick(a)} and {ctx.nick(b)} spending {period.label}."
        mode: Mode = "first"
        ref = None
    else:
        previous = [s for s in ctx.spends if s[0] == ctx.position - 1]
        if not previous:
            return []
        _, last, period, _ = previous[-1]
        choices = [c for c in leaves if _disjoint(c, last)]
        if len(choices) < 2:
            return []
        a, b = ctx.rng.sample(choices, 2)
        text = f"Now {ctx.nick(a)} and {ctx.nick(b)} for the same period."
        mode, ref = "partial", ctx.position - 1

    def build(rec: Recorder) -> str:
        sentences = [_record_spend(ctx, rec, period, c)[1] for c in (a, b)]
        return " ".join(sentences)  # about two categories: no single topic for "that" to point at

    return [_option(TaskType.PARALLEL, "two_spendings", text, mode, ref, build)]


def _two_adds(ctx: Context) -> list[Option]:
    if len(ctx.profile.receipts) < 2:
        return []
    (r1, a1), (r2, a2) = pick_receipts(ctx, 2)
    if ctx.position == 0:
        card = bool(choose_card(ctx))
        where = paid_phrase(ctx, True).removeprefix(", ") if card else "from checking"
        text = (
            f"Add two receipts from today, both {where}: {r1.payee} {said(ctx, a1)} {r1.spoken}, and {r2.payee} "
            f"{said(ctx, a2)} {r2.spoken}."
        )
        mode: Mode = "first"
        ref = None
        if not card:
            return []  # "from checking" names the default: the gold would have to guess whether to spell it out
    else:
        memo = next((m for m in ctx.memos_of(ctx.position - 1) if m.added and m.payment == ctx.profile.card), None)
        if memo is None:
            return []
        card = True
        text = (
            f"Two more from today on the same card: {r1.payee} {said(ctx, a1)} {r1.spoken}, and {r2.payee} "
            f"{said(ctx, a2)} {r2.spoken}."
        )
        mode, ref = "partial", ctx.position - 1

    def build(rec: Recorder) -> str:
        _, m1 = record_add(ctx, rec, add_arguments(ctx, r1, a1, ctx.today, card=card))
        _, m2 = record_add(ctx, rec, add_arguments(ctx, r2, a2, ctx.today, card=card))
        ctx.salient[ctx.position] = m1.payment
        return f"Done: I {_added_sentence(ctx, m1)} and {_added_sentence(ctx, m2)}."

    return [_option(TaskType.PARALLEL, "two_adds", text, mode, ref, build)]


def _amend_and_spend(ctx: Context) -> list[Option]:
    out: list[Option] = []
    if not ctx.profile.compare_categories:
        return out
    period = last_month(ctx.today)
    for memo, mode in memo_targets(ctx):
        if memo.day < this_month(ctx.today).start or not can_amend(ctx, memo):
            continue  # the summary of last month must not see the amended transaction
        new = corrected_amount(ctx, memo.amount)
        category = ctx.pick(list(ctx.profile.compare_categories))
        if mode == "coref":
            text = f"Make it {number(new)} instead. And how much did I spend on {ctx.nick(category)} last month?"
        else:
            which = "I added earlier" if memo.added else of_day(memo.day, ctx.today)
            text = (
                f"Change the {memo.payee} {txn_noun(memo)} {which} to {number(new)}, and tell me how much I spent "
                f"on {ctx.nick(category)} last month."
            )

        def build(rec: Recorder, memo: Memo = memo, new: Decimal = new, category: str = category) -> str:
            _, after = record_amend_amount(ctx, rec, memo, new)
            _, spent = _record_spend(ctx, rec, period, category)
            ctx.salient[ctx.position] = category
            return f"Updated {after.id} ({after.payee}) to {ctx.money(after.amount)}. {spent}"

        wild = (Wild.BUNDLE, *own_slip(memo))
        out.append(_option(TaskType.PARALLEL, "amend_and_spend", text, mode, memo.task, build, wild=wild))
    return out


def _recategorize_and_balance(ctx: Context) -> list[Option]:
    out = []
    for memo, mode in memo_targets(ctx):
        if not can_move(ctx, memo) or memo.payment not in ctx.profile.banks:
            continue
        fix = ctx.profile.recategorizations[memo.category]
        if mode == "coref":
            text = (
                f"Put it under {ctx.nick(fix.target)}, {fix.reason}. And what's my {ctx.nick(memo.payment)} balance "
                "now?"
            )
        else:
            text = (
                f"Move the {memo.payee} {txn_noun(memo)} {of_day(memo.day, ctx.today)} to {ctx.nick(fix.target)} "
                f"({fix.reason}), and tell me my {ctx.nick(memo.payment)} balance."
            )

        def build(rec: Recorder, memo: Memo = memo, target: str = fix.target) -> str:
            _, old, after = record_recategorize(ctx, rec, memo, target)
            _, balance = _record_balance(ctx, rec, memo.payment)
            return f"Moved {after.id} ({after.payee}) from {old} to {target}. {balance}"

        out.append(
            _option(TaskType.PARALLEL, "recategorize_and_balance", text, mode, memo.task, build, wild=(Wild.BUNDLE,))
        )
    return out


def _salient_pair(ctx: Context) -> list[Option]:
    """The always-available follow-up: two views of the account an earlier task was about."""
    out = []
    for task, account, close, mode in ctx.salient_targets():
        label = "that category" if close else "the category from my first question"
        if account.startswith("Expenses"):
            last, now = last_month(ctx.today), this_month(ctx.today)
            text = ctx.pick(
                [
                    f"How much went into {label} last month, and how much so far this month?",
                    f"Last month versus this month so far: what did {label} come to?",
                    f"Give me {label} for last month and for this month so far.",
                    f"What did {label} total last month, and where is it this month so far?",
                ]
            )

            def build(rec: Recorder, account: str = account, last: Period = last, now: Period = now) -> str:
                first = _record_spend(ctx, rec, last, account)[1]
                second = _record_spend(ctx, rec, now, account)[1]
                ctx.salient[ctx.position] = account
                return f"{first} {second}"

        elif account in ctx.profile.banks:
            month_end = last_month(ctx.today).end
            label = ctx.pointer(account, close)
            then = month_end_phrase(month_end)
            text = ctx.pick(
                [
                    f"What's in {label} now, and what was in it at the end of {then}?",
                    f"How has {label} moved since the end of {then}? Give me both figures.",
                    f"Show me {label} today and at the end of {then}.",
                ]
            )
            if account == ctx.profile.card:
                text = f"What do I owe on {label} now, and what did I owe at the end of {month_end_phrase(month_end)}?"

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
                f"Found it ({after.id}, {month_day(after.day)}) and changed it from {ctx.money(found.amount)} to "
                f"{ctx.money(after.amount)}."
            )

        out.append(_option(TaskType.SEQUENTIAL, "find_amend", text, mode, ref, build))
    if first:
        movable = [t for t in targets if can_move(ctx, ctx.memo_from(t, added=False))]
        if movable:
            target = ctx.pick(movable)
            preview = ctx.memo_from(target, added=False)
            fix = ctx.profile.recategorizations[preview.category]
            text = (
                f"Move the {preview.payee} charge {day_phrase(preview.day, ctx.today)} to {ctx.nick(fix.target)}; "
                f"{fix.reason}."
            )

            def build_move(rec: Recorder, target: dict[str, Any] = target, goal: str = fix.target) -> str:
                find_idx, found = _find_one(ctx, rec, target)
                # a move shows two categories (from, to): no single topic for "that category"
                _, old, _moved = record_recategorize(ctx, rec, found, goal, (find_idx,))
                return f"Found {found.id} ({found.payee}, {ctx.money(found.amount)}) and moved it from {old} to {goal}."

            out.append(_option(TaskType.SEQUENTIAL, "find_recategorize", text, "first", None, build_move))
        target = ctx.pick(targets)
        preview = ctx.memo_from(target, added=False)
        text = f"Delete the {preview.payee} charge {day_phrase(preview.day, ctx.today)}; it was refunded in full."

        def build_delete(rec: Recorder, target: dict[str, Any] = target) -> str:
            find_idx, found = _find_one(ctx, rec, target)
            _, _result = rec.call("delete_transaction", {"transaction_id": found.id}, (find_idx,))
            ctx.touched.add(found.id)
            ctx.salient[ctx.position] = found.category
            return (
                f"Found {found.id} ({found.payee}, {ctx.money(found.amount)} on {month_day(found.day)}) and deleted it."
            )

        out.append(_option(TaskType.SEQUENTIAL, "find_delete", text, "first", None, build_delete))
    return out


def _add_then_balance(ctx: Context) -> list[Option]:
    if not ctx.profile.receipts:
        return []
    ((receipt, amount),) = pick_receipts(ctx, 1)
    if ctx.position == 0:
        chosen = choose_card(ctx)
        if chosen is None:
            return []
        card = chosen
        checking = ctx.nick(ctx.profile.checking) if ctx.profile.checking else ""
        tail = "then tell me what I owe on the card" if card else f"then tell me what's left in {checking}"
        text = (
            f"Log today's {receipt.payee} receipt, {said(ctx, amount)} {receipt.spoken}{paid_phrase(ctx, card)}, and "
            f"{tail}."
        )
        mode: Mode = "first"
        ref = None
    else:
        memo = next((m for m in ctx.memos_of(ctx.position - 1) if m.added and m.payment == ctx.profile.card), None)
        if memo is None:
            return []
        card = True
        text = (
            f"One more from today on the same card: {receipt.payee}, {said(ctx, amount)} {receipt.spoken}. Then tell "
            "me what I owe on it."
        )
        mode, ref = "partial", ctx.position - 1
    args = add_arguments(ctx, receipt, amount, ctx.today, card=card)

    def build(rec: Recorder) -> str:
        add_idx, memo = record_add(ctx, rec, args)
        _, balance = _record_balance(ctx, rec, memo.payment, deps=(add_idx,))
        ctx.salient[ctx.position] = memo.payment
        return f"I {_added_sentence(ctx, memo)}. {balance}"

    return [_option(TaskType.SEQUENTIAL, "add_then_balance", text, mode, ref, build)]


def _sweep_to_savings(ctx: Context) -> list[Option]:
    checking, savings, sweep = ctx.profile.checking, ctx.profile.savings, ctx.profile.sweep
    if ctx.position != 0 or checking is None or savings is None or sweep is None:
        return []
    currency = ctx.profile.currency
    held = ctx.episode.call("get_balance", {"account": checking}).result["balances"].get(currency)
    if held is None:
        return []
    balance = Decimal(held)
    floors = [f for f in (1500, 2000, 2500, 3000, 4000, 5000) if balance - f > 100]
    if not floors:
        return []
    floor = ctx.pick(floors)
    limit = f"${floor:,}" if currency == "USD" else f"{floor:,} {currency}"
    text = (
        f"Move everything above {limit} in {ctx.nick(checking)} over to {ctx.nick(savings)}. Record it today with "
        f"{sweep.payee} as the payee and '{sweep.narration}' as the description."
    )

    def build(rec: Recorder) -> str:
        idx, result = rec.call("get_balance", {"account": checking})
        current = Decimal(result["balances"][currency])
        amount = current - floor
        args: dict[str, Any] = {
            "date": ctx.today.isoformat(),
            "payee": sweep.payee,
            "narration": sweep.narration,
            "amount": float(amount),
            "expense_account": savings,
        }
        if checking != ctx.profile.default_payment:
            args["payment_account"] = checking
        if currency != "USD":
            args["currency"] = currency
        _, memo = record_add(ctx, rec, args, deps=(idx,))
        ctx.ruled.add(memo.id)
        ctx.balances.append((ctx.position, checking, f"{current:.2f}", None))
        # about two accounts (checking and savings): no single topic for "that account" to point at
        return (
            f"{capital(ctx.nick(checking))} had {ctx.money(current)}, so I moved {ctx.money(amount)} to "
            f"{ctx.nick(savings)} ({memo.id})."
        )

    return [_option(TaskType.SEQUENTIAL, "sweep_to_savings", text, "first", None, build)]


# ---------------------------------------------------------------------------------------------------- mixed
def _find_two_then_move(ctx: Context) -> list[Option]:
    trip = ctx.profile.trip
    if ctx.position != 0 or trip is None:
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
            if len(inside) == 2 and trip.account not in cats and ctx.profile.writable(trip.account, d1):
                pairs.append((a, b))
    if not pairs:
        return []
    a, b = ctx.pick(pairs)
    d1, d2 = date.fromisoformat(a["date"]), date.fromisoformat(b["date"])
    payee = a["payee"]
    text = (
        f"My two {payee} charges between {month_day(d1)} and {month_day(d2)} were for {trip.name}. Move both "
        f"to {ctx.nick(trip.account)}."
    )

    def build(rec: Recorder) -> str:
        args = {"payee": payee, "start_date": d1.isoformat(), "end_date": d2.isoformat()}
        find_idx, result = rec.call("find_transactions", args)
        rows = result["transactions"]
        lines = []
        for row in rows:
            record_recategorize(ctx, rec, ctx.memo_from(row, added=False), trip.account, (find_idx,))
            lines.append(f"{row['id']} ({month_day(date.fromisoformat(row['date']))})")
        return f"Moved both {payee} charges to {trip.account}: {' and '.join(lines)}."

    return [_option(TaskType.MIXED, "find_two_then_move", text, "first", None, build)]


def _spend_and_fix(ctx: Context) -> list[Option]:
    if ctx.position != 0 or not ctx.profile.compare_categories:
        return []
    targets = _recent_targets(ctx, this_month_only=True)
    if not targets:
        return []
    target = ctx.pick(targets)
    preview = ctx.memo_from(target, added=False)
    new = corrected_amount(ctx, preview.amount)
    category = ctx.pick(list(ctx.profile.compare_categories))
    period = last_month(ctx.today)
    text = (
        f"How much did I spend on {ctx.nick(category)} last month? Also, the {preview.payee} charge "
        f"{day_phrase(preview.day, ctx.today)} should be {number(new)}, not {number(preview.amount)}."
    )

    def build(rec: Recorder) -> str:
        _, spent = _record_spend(ctx, rec, period, category)
        find_idx, found = _find_one(ctx, rec, target)
        _, after = record_amend_amount(ctx, rec, found, new, deps=(find_idx,))
        ctx.salient[ctx.position] = category
        return (
            f"{spent} I also corrected {after.id} ({after.payee}, {month_day(after.day)}) from "
            f"{ctx.money(found.amount)} to {ctx.money(after.amount)}."
        )

    return [_option(TaskType.MIXED, "spend_and_fix", text, "first", None, build, wild=(Wild.BUNDLE,))]


def _write_then_two(ctx: Context) -> list[Option]:
    """A write, then two reads that depend on it: the payment account's balance and the month's category total."""
    out = []
    now = this_month(ctx.today)
    if ctx.position == 0:
        if not ctx.profile.receipts:
            return out
        ((receipt, amount),) = pick_receipts(ctx, 1)
        chosen = choose_card(ctx)
        if chosen is None:
            return out
        card = chosen
        parent = receipt.account.rsplit(":", 1)[0] if receipt.account.count(":") > 1 else receipt.account
        args = add_arguments(ctx, receipt, amount, ctx.today, card=card)
        account = ctx.profile.card if card else ctx.profile.checking
        assert account is not None  # choose_card picks an account the books have
        text = (
            f"Add today's {receipt.payee} receipt, {said(ctx, amount)} {receipt.spoken}{paid_phrase(ctx, card)}. Then "
            f"show me my {ctx.nick(account)} balance and what I've spent on {ctx.nick(parent)} this month."
        )

        def build(rec: Recorder) -> str:
            add_idx, memo = record_add(ctx, rec, args)
            _, balance = _record_balance(ctx, rec, account, deps=(add_idx,))
            _idx, result = rec.call("spending_summary", spend_arguments(now, parent), (add_idx,))
            ctx.spends.append((ctx.position, parent, now, ctx.profile.amount_of(result["total"])))
            ctx.salient[ctx.position] = parent
            return f"I {_added_sentence(ctx, memo)}. {balance} {spend_sentence(ctx, result, now, parent)}"

        out.append(_option(TaskType.MIXED, "add_then_two", text, "first", None, build, wild=(Wild.BUNDLE,)))
        return out
    for memo, mode in memo_targets(ctx):
        if memo.payment not in ctx.profile.banks or memo.day < now.start or not can_amend(ctx, memo):
            continue
        if not memo.category.startswith("Expenses"):
            continue
        new = corrected_amount(ctx, memo.amount)
        parent = memo.category
        if mode == "coref":
            text = (
                f"Make it {number(new)}. Then what's my {ctx.nick(memo.payment)} balance, and what have I spent on "
                f"{ctx.nick(parent)} this month?"
            )
        else:
            which = "I added earlier" if memo.added else of_day(memo.day, ctx.today)
            text = (
                f"Change the {memo.payee} {txn_noun(memo)} {which} to {number(new)}, then show me my "
                f"{ctx.nick(memo.payment)} balance and this month's {ctx.nick(parent)} total."
            )

        def build_amend(rec: Recorder, memo: Memo = memo, new: Decimal = new, parent: str = parent) -> str:
            amend_idx, after = record_amend_amount(ctx, rec, memo, new)
            _, balance = _record_balance(ctx, rec, memo.payment, deps=(amend_idx,))
            _idx, result = rec.call("spending_summary", spend_arguments(now, parent), (amend_idx,))
            ctx.spends.append((ctx.position, parent, now, ctx.profile.amount_of(result["total"])))
            ctx.salient[ctx.position] = parent
            spent = spend_sentence(ctx, result, now, parent)
            return f"Updated {after.id} to {ctx.money(after.amount)}. {balance} {spent}"

        wild = (Wild.BUNDLE, *own_slip(memo))
        out.append(_option(TaskType.MIXED, "amend_then_two", text, mode, memo.task, build_amend, wild=wild))
    return out


def _salient_compare(ctx: Context) -> list[Option]:
    """The other always-available follow-up: the account an earlier task was about next to a sibling account."""
    out = []
    for task, account, close, mode in ctx.salient_targets():
        categories = ctx.profile.compare_categories
        if account in categories:
            found = next(
                (c for c in categories if c != account and not account.startswith(c) and not c.startswith(account)),
                None,
            )
            if found is None:
                continue
            other = found
            period = this_month(ctx.today)
            label = "that category" if close else "the category from my first question"
            text = ctx.pick(
                [
                    f"How does {label} compare with {ctx.nick(other)} so far this month?",
                    f"Set {label} against {ctx.nick(other)} for this month so far.",
                    f"This month so far, which is bigger: {label} or {ctx.nick(other)}?",
                ]
            )

            def build(rec: Recorder, account: str = account, other: str = other, period: Period = period) -> str:
                first = _record_spend(ctx, rec, period, account)[1]
                second = _record_spend(ctx, rec, period, other)[1]
                return f"{first} {second}"  # about two categories: no single topic for "that" to point at

        elif account in ctx.profile.banks and ctx.profile.sibling(account) is not None:
            other = ctx.profile.sibling(account) or ""
            pointer, the_other = ctx.pointer(account, close), ctx.the_nick(other)
            text = ctx.pick(
                [
                    f"Put {pointer} next to {the_other}: what are both at right now?",
                    f"Side by side, please: {pointer} and {the_other}, as of now.",
                    f"How do {pointer} and {the_other} compare at the moment?",
                    f"Current figures for {pointer} and for {the_other}?",
                ]
            )

            def build(rec: Recorder, account: str = account, other: str = other) -> str:
                sentences = [_record_balance(ctx, rec, a)[1] for a in (account, other)]
                return " ".join(sentences)  # about two accounts: no single topic for "that account" to point at

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
        _both_again,
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
    out.extend(conditional_options(ctx, taken=True))
    out.extend(conditional_pairs(ctx))
    out.extend(pick_multi_options(ctx))
    if ctx.position > 0:
        out.extend(_salient_pair(ctx))
        out.extend(_salient_compare(ctx))
    return out
