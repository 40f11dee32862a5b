"""Clarify tasks: the request lacks a required detail, so the agent must ask before calling the tool.

The gold DAG is ``ask -> [ask ->] call -> answer``; each ask names the tool and the missing required parameters,
its observation is the gold question and ``user_input`` the user's reply, which supplies the missing detail.
"""

from __future__ import annotations

import calendar
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from functools import partial
from typing import Any

from toolwild.core.hidden_intent import states
from toolwild.core.task import TaskType
from toolwild.core.wild import Wild
from toolwild.synth.providers.ledger.catalog import Receipt
from toolwild.synth.providers.ledger.common import (
    add_arguments,
    balance_sentence,
    can_amend,
    can_move,
    choose_card,
    corrected_amount,
    fresh_amount,
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
from toolwild.synth.providers.ledger.phrasing import capital, last_month, number, of_day, this_month
from toolwild.synth.providers.ledger.picks import pick_clarify_options
from toolwild.synth.providers.ledger.scenario import (
    Context,
    Memo,
    Mode,
    Option,
    Recorder,
    memo_targets,
    option,
    own_slip,
)

__all__ = ["clarify_options"]

_option = partial(option, TaskType.CLARIFY)


@dataclass(frozen=True)
class _Lean:
    """What a later request to add a receipt leaves out because an earlier turn was about it: the receipt's
    category ("to that category too") or the account that paid ("paid from that account").

    Why: a request missing a detail at a later turn must still lean on the conversation (every later task carries
    a hidden-intent label, and :func:`~toolwild.core.hidden_intent.check_subtypes` believes one only where the
    values bear it out); "add today's receipt" alone leans on nothing.
    """

    account: str
    mode: Mode
    task: int
    words: str
    """How the request points at it: "to that category too", ", paid from the account from my first question"."""
    receipt: Receipt
    amount: Decimal
    payment: str | None
    """The account that paid, when that is what is left out (None: the category is)."""


def _category_target(ctx: Context) -> tuple[str, Mode, int, str] | None:
    """The spending category a later question can point at instead of naming: the previous task's ("that
    category") or the first task's ("the category from my first question"); None when neither was about one."""
    for task, account, close, mode in ctx.salient_targets():
        if account.startswith("Expenses:") and (close or task == 0):
            return account, mode, task, "that category" if close else "the category from my first question"
    return None


def _lean(ctx: Context) -> _Lean | None:
    """A target an add at a later turn can leave out, with a receipt that fits it (None when there is none)."""
    for task, account, close, mode in ctx.salient_targets():
        if not (close or task == 0):
            continue
        if account.startswith("Expenses:"):
            # a receipt of that category whose description does not name it ("for groceries" would)
            fits = [
                r for r in ctx.profile.receipts if r.account == account and not states(r.spoken, account, ctx.chart)
            ]
            if fits:
                receipt = ctx.pick(fits)
                label = "that category" if close else "the category from my first question"
                words = f" to {label} too"
                return _Lean(account, mode, task, words, receipt, fresh_amount(ctx, receipt.low, receipt.high), None)
        elif account in ctx.profile.banks and ctx.profile.receipts:
            ((receipt, amount),) = pick_receipts(ctx, 1)
            if account == ctx.profile.card:
                words = ", charged to that card" if close else ", charged to the card from my first question"
            else:
                words = ", paid from that account" if close else ", paid from the account from my first question"
            return _Lean(account, mode, task, words, receipt, amount, account)
    return None


def _lean_arguments(ctx: Context, lean: _Lean) -> dict[str, Any]:
    """Gold ``add_transaction`` arguments of a leaning add: the account the user pointed at is always passed (they
    named it, if only by pointing), the default one included."""
    args = add_arguments(ctx, lean.receipt, lean.amount, ctx.today, card=False)
    if lean.payment is not None:
        args["payment_account"] = lean.payment
    return args


def _add_missing_amount(ctx: Context) -> list[Option]:
    out: list[Option] = []
    if not ctx.profile.receipts:
        return out
    card_account = ctx.profile.card
    same_card = next((m for m in ctx.memos_of(ctx.position - 1) if m.added and m.payment == card_account), None)
    mode: Mode
    ref: int | None
    args: dict[str, Any]
    if ctx.position == 0:
        ((receipt, amount),) = pick_receipts(ctx, 1)
        chosen = choose_card(ctx)
        if chosen is None:
            return out
        text = ctx.pick(
            [
                f"Add today's {receipt.payee} receipt {receipt.spoken}{paid_phrase(ctx, chosen)}.",
                f"I've got a {receipt.payee} receipt from today {receipt.spoken}{paid_phrase(ctx, chosen)}. Log it?",
                f"Can you put in today's {receipt.payee} receipt {receipt.spoken}{paid_phrase(ctx, chosen)}?",
                f"Record a {receipt.payee} purchase from today {receipt.spoken}{paid_phrase(ctx, chosen)}.",
            ]
        )
        args = add_arguments(ctx, receipt, amount, ctx.today, card=chosen)
        mode, ref = "first", None
    elif same_card is not None:
        ((receipt, amount),) = pick_receipts(ctx, 1)
        text = f"Add one more from today on the same card: {receipt.payee}, {receipt.spoken}."
        args = add_arguments(ctx, receipt, amount, ctx.today, card=True)
        mode, ref = "partial", same_card.task
    elif (lean := _lean(ctx)) is not None:
        receipt, amount = lean.receipt, lean.amount
        text = ctx.pick(
            [
                f"Add today's {receipt.payee} receipt {receipt.spoken}{lean.words}.",
                f"Log a {receipt.payee} receipt from today {receipt.spoken}{lean.words}.",
                f"There's also today's {receipt.payee} receipt {receipt.spoken}{lean.words}. Put it in?",
            ]
        )
        args = _lean_arguments(ctx, lean)
        mode, ref = lean.mode, lean.task
    else:
        return out
    reply = ctx.pick(
        [
            f"{said(ctx, amount)}.",
            f"It was {said(ctx, amount)}.",
            f"{number(amount)} dollars." if ctx.profile.currency == "USD" else f"{said(ctx, amount)}.",
        ]
    )

    def build(rec: Recorder) -> str:
        ask = rec.ask("add_transaction", ["amount"], f"Sure. What was the total on the {receipt.payee} receipt?", reply)
        _, memo = record_add(ctx, rec, args, (ask,))
        ctx.salient[ctx.position] = memo.category
        return (
            f"Added {memo.id}: {memo.payee}, {ctx.money(memo.amount)}, booked to {memo.category} and paid from "
            f"{memo.payment}."
        )

    out.append(_option("add_missing_amount", text, mode, ref, build))
    return out


def _add_missing_two(ctx: Context) -> list[Option]:
    if not ctx.profile.receipts:
        return []
    mode: Mode
    ref: int | None
    args: dict[str, Any]
    if ctx.position == 0:
        ((receipt, amount),) = pick_receipts(ctx, 1)
        chosen = choose_card(ctx)
        if chosen is None:
            return []
        text = ctx.pick(
            [
                f"Add a receipt from today {receipt.spoken}{paid_phrase(ctx, chosen)}.",
                f"I need to log a receipt from today {receipt.spoken}{paid_phrase(ctx, chosen)}.",
                f"Got a receipt from today {receipt.spoken}{paid_phrase(ctx, chosen)}; can you add it?",
                f"Please record today's receipt {receipt.spoken}{paid_phrase(ctx, chosen)}.",
            ]
        )
        args = add_arguments(ctx, receipt, amount, ctx.today, card=chosen)
        mode, ref = "first", None
    else:
        lean = _lean(ctx)
        if lean is None:
            return []
        receipt, amount = lean.receipt, lean.amount
        text = ctx.pick(
            [
                f"Add a receipt from today {receipt.spoken}{lean.words}.",
                f"One more receipt from today {receipt.spoken}{lean.words}, please log it.",
                f"There's another receipt from today {receipt.spoken}{lean.words}. Add it?",
            ]
        )
        args = _lean_arguments(ctx, lean)
        mode, ref = lean.mode, lean.task

    def build(rec: Recorder) -> str:
        first = rec.ask(
            "add_transaction",
            ["payee", "amount"],
            "Sure. Where was it from, and how much was it?",
            f"It's from {receipt.payee}.",
        )
        second = rec.ask(
            "add_transaction",
            ["amount"],
            f"Thanks. And how much was the {receipt.payee} receipt?",
            f"{said(ctx, amount)}.",
            (first,),
        )
        _, memo = record_add(ctx, rec, args, (second,))
        ctx.salient[ctx.position] = memo.category
        return (
            f"Added {memo.id}: {memo.payee}, {ctx.money(memo.amount)}, booked to {memo.category} and paid from "
            f"{memo.payment}."
        )

    return [_option("add_missing_two", text, mode, ref, build)]


def _balance_missing_account(ctx: Context) -> list[Option]:
    if ctx.position != 0:
        return []  # later, the account talked about would answer "which account?": not a real clarification
    if len(ctx.profile.banks) < 2:
        return []  # with one bank account, "which account?" has one answer: not a real clarification either
    account = ctx.pick(list(ctx.profile.banks))
    text = ctx.pick(
        [
            "What's my balance?",
            "How much money do I have?",
            "Can you check my balance?",
            "What's the balance at the moment?",
            "How much is in my account?",
            "Where does my balance stand?",
        ]
    )
    mode, ref = "first", None
    nick = ctx.nick(account)
    reply = ctx.pick([ctx.profile.bank_reply(account), f"The {nick} one.", f"{capital(nick)}, I mean.", f"For {nick}."])
    question = ctx.profile.which_bank()

    def build(rec: Recorder) -> str:
        ask = rec.ask("get_balance", ["account"], question, reply)
        _, result = rec.call("get_balance", {"account": account}, (ask,))
        ctx.balances.append((ctx.position, account, ctx.profile.amount_of(result["balances"]), None))
        ctx.salient[ctx.position] = account
        return balance_sentence(ctx, result)

    key = ("balance", account, None)
    fragments = ["balance?", "balance pls", "what's the balance", "how much have I got", "money left?", "balance now?"]
    return [_option("balance_missing_account", text, mode, ref, build, key=key, fragments=fragments)]


def _spend_missing_period(ctx: Context) -> list[Option]:
    if ctx.spends or not ctx.profile.clarify_categories:
        return []  # a period already talked about would answer "which period?": not a real clarification
    mode: Mode
    ref: int | None
    if ctx.position == 0:
        category = ctx.pick(list(ctx.profile.clarify_categories))
        nick = ctx.nick(category)
        text = ctx.pick(
            [
                f"How much have I spent on {nick}?",
                f"What's my total for {nick}?",
                f"What have I put into {nick}?",
                f"How much went on {nick}?",
            ]
        )
        mode, ref = "first", None
    else:
        target = _category_target(ctx)
        if target is None:
            return []
        category, mode, ref, label = target
        text = ctx.pick(
            [f"How much have I spent on {label}?", f"What's the total for {label}?", f"How much went into {label}?"]
        )
    period = ctx.pick([last_month(ctx.today), this_month(ctx.today)])
    reply = "Last month." if period.label == "last month" else "This month so far."

    def build(rec: Recorder) -> str:
        ask = rec.ask("spending_summary", ["start_date", "end_date"], "For which period?", reply)
        _, result = rec.call("spending_summary", spend_arguments(period, category), (ask,))
        ctx.spends.append((ctx.position, category, period, ctx.profile.amount_of(result["total"])))
        ctx.salient[ctx.position] = category
        return spend_sentence(ctx, result, period, category)

    return [
        _option(
            "spend_missing_period", text, mode, ref, build, key=("spend", category, period.start_iso, period.end_iso)
        )
    ]


def _which(ctx: Context, memo: Memo) -> str:
    return "I added earlier" if memo.added else of_day(memo.day, ctx.today)


def _recategorize_missing(ctx: Context) -> list[Option]:
    out = []
    for memo, mode in memo_targets(ctx):
        if not can_move(ctx, memo):
            continue
        fix = ctx.profile.recategorizations[memo.category]
        if mode == "coref":
            text = ctx.pick(
                [
                    "That one's in the wrong category.",
                    "Hmm, that's filed under the wrong category.",
                    "That landed in the wrong category.",
                    "Wrong category on that one, I'm afraid.",
                ]
            )
        else:
            text = f"The {memo.payee} {txn_noun(memo)} {_which(ctx, memo)} is in the wrong category."
        reply = f"Put it under {ctx.nick(fix.target)}; {fix.reason}."

        def build(rec: Recorder, memo: Memo = memo, target: str = fix.target, reply: str = reply) -> str:
            ask = rec.ask("recategorize", ["new_account"], "Which category should it go under?", reply)
            # a move shows two categories (from, to): no single topic for "that category"
            _, old, after = record_recategorize(ctx, rec, memo, target, (ask,))
            return f"Moved {after.id} ({after.payee}, {ctx.money(after.amount)}) from {old} to {target}."

        out.append(_option("recategorize_missing", text, mode, memo.task, build))
    return out


def _amend_missing(ctx: Context) -> list[Option]:
    out = []
    for memo, mode in memo_targets(ctx):
        if not can_amend(ctx, memo):
            continue
        new = corrected_amount(ctx, memo.amount)
        text = (
            ctx.pick(
                [
                    "The amount on that is wrong.",
                    "That amount isn't right.",
                    "Hold on, the amount on that is off.",
                    "I got the amount on that wrong.",
                ]
            )
            if mode == "coref"
            else f"The amount on the {memo.payee} {txn_noun(memo)} {_which(ctx, memo)} is wrong."
        )
        reply = f"It should be {number(new)}."

        def build(rec: Recorder, memo: Memo = memo, new: Decimal = new, reply: str = reply) -> str:
            ask = rec.ask(
                "amend_transaction", ["amount"], f"What should the amount be? It's {ctx.money(memo.amount)} now.", reply
            )
            _, after = record_amend_amount(ctx, rec, memo, new, (ask,))
            ctx.salient[ctx.position] = after.category
            return (
                f"Done: {after.id} ({after.payee}) is now {ctx.money(after.amount)} instead of "
                f"{ctx.money(memo.amount)}."
            )

        out.append(_option("amend_missing", text, mode, memo.task, build, wild=own_slip(memo)))
    return out


def _nth(n: int) -> str:
    """``14th``, ``1st``, ``22nd``, ``13th``."""
    suffix = "th" if 11 <= n % 100 <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _add_date_in_parts(ctx: Context) -> list[Option]:
    """An old receipt whose date the user gives in two parts: the day first, the month only when asked again (the
    published "the second half is ..."): a call after the first reply passes a wrong date."""
    if not ctx.profile.receipts:
        return []
    mode: Mode
    ref: int | None
    if ctx.position == 0:
        ((receipt, amount),) = pick_receipts(ctx, 1)
        chosen = choose_card(ctx)
        if chosen is None:
            return []
        words = paid_phrase(ctx, chosen)
        args = add_arguments(ctx, receipt, amount, ctx.today, card=chosen)
        mode, ref = "first", None
    else:
        lean = _lean(ctx)
        if lean is None:
            return []
        receipt, amount, words = lean.receipt, lean.amount, lean.words
        args = _lean_arguments(ctx, lean)
        mode, ref = lean.mode, lean.task
    payment = args.get("payment_account", ctx.profile.default_payment)
    days = [
        d
        for d in (ctx.today - timedelta(days=k) for k in range(6, 40))
        if d >= ctx.earliest and ctx.profile.writable(receipt.account, d) and ctx.profile.writable(payment, d)
    ]
    if not days:
        return []
    day = ctx.pick(days)
    args = {**args, "date": day.isoformat()}
    month = calendar.month_name[day.month]
    text = ctx.pick(
        [
            f"I found an old {receipt.payee} receipt {receipt.spoken}{words}: {said(ctx, amount)}. Can you add it?",
            f"Please add a {receipt.payee} receipt from a while back, {said(ctx, amount)} {receipt.spoken}{words}.",
            f"There's an older {receipt.payee} receipt I never logged: {said(ctx, amount)} {receipt.spoken}{words}.",
        ]
    )
    first = ctx.pick(
        [
            f"It says the {_nth(day.day)}, but the month is smudged.",
            f"The {_nth(day.day)} of... hang on, I can't read the month.",
            f"The {_nth(day.day)}. I'll have to look for the month.",
        ]
    )
    second = ctx.pick([f"{month}.", f"Found it: {month}.", f"It was {month}.", f"{month}, I'm sure now."])

    def build(rec: Recorder) -> str:
        ask = rec.ask("add_transaction", ["date"], f"Sure. What date is on the {receipt.payee} receipt?", first)
        again = rec.ask("add_transaction", ["date"], f"The {_nth(day.day)} of which month?", second, (ask,))
        _, memo = record_add(ctx, rec, args, (again,))
        ctx.salient[ctx.position] = memo.category
        return (
            f"Added {memo.id}: {memo.payee}, {ctx.money(memo.amount)} on {memo.day.isoformat()}, booked to "
            f"{memo.category} and paid from {memo.payment}."
        )

    return [_option("add_date_in_parts", text, mode, ref, build, wild=(Wild.PARTS,))]


def clarify_options(ctx: Context) -> list[Option]:
    """Every Clarify task that fits the conversation so far."""
    out: list[Option] = []
    for make in (
        _add_missing_amount,
        _add_missing_two,
        _balance_missing_account,
        _spend_missing_period,
        _recategorize_missing,
        _amend_missing,
        pick_clarify_options,
        _add_date_in_parts,
    ):
        out.extend(make(ctx))
    return out
