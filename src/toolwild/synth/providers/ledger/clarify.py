"""Clarify tasks: the request lacks a required detail, so the agent must ask before calling the tool.

The gold DAG is ``ask -> [ask ->] call -> answer``; each ask names the tool and the missing required parameters,
its observation is the gold question and ``user_input`` the user's reply, which supplies the missing detail.
"""

from __future__ import annotations

from decimal import Decimal
from functools import partial

from toolwild.core.task import TaskType
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
from toolwild.synth.providers.ledger.phrasing import last_month, number, of_day, this_month
from toolwild.synth.providers.ledger.scenario import Context, Memo, Mode, Option, Recorder, memo_targets, option

__all__ = ["clarify_options"]

_option = partial(option, TaskType.CLARIFY)


def _later_mode(ctx: Context) -> tuple[Mode, int | None]:
    """A request missing a detail is Partial Information whenever it is not the first turn."""
    return ("first", None) if ctx.position == 0 else ("partial", None)


def _add_missing_amount(ctx: Context) -> list[Option]:
    out: list[Option] = []
    if not ctx.profile.receipts:
        return out
    ((receipt, amount),) = pick_receipts(ctx, 1)
    card_account = ctx.profile.card
    same_card = next((m for m in ctx.memos_of(ctx.position - 1) if m.added and m.payment == card_account), None)
    mode: Mode
    if same_card is not None:
        card = True
        text = f"Add one more from today on the same card: {receipt.payee}, {receipt.spoken}."
        mode, ref = "partial", same_card.task
    else:
        chosen = choose_card(ctx)
        if chosen is None:
            return out
        card = chosen
        text = f"Add today's {receipt.payee} receipt {receipt.spoken}{paid_phrase(ctx, card)}."
        mode, ref = _later_mode(ctx)
    reply = ctx.pick(
        [
            f"{said(ctx, amount)}.",
            f"It was {said(ctx, amount)}.",
            f"{number(amount)} dollars." if ctx.profile.currency == "USD" else f"{said(ctx, amount)}.",
        ]
    )

    def build(rec: Recorder) -> str:
        ask = rec.ask("add_transaction", ["amount"], f"Sure. What was the total on the {receipt.payee} receipt?", reply)
        _, memo = record_add(ctx, rec, add_arguments(ctx, receipt, amount, ctx.today, card=card), (ask,))
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
    ((receipt, amount),) = pick_receipts(ctx, 1)
    chosen = choose_card(ctx)
    if chosen is None:
        return []
    card = chosen
    text = f"Add a receipt from today {receipt.spoken}{paid_phrase(ctx, card)}."
    mode, ref = _later_mode(ctx)

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
        _, memo = record_add(ctx, rec, add_arguments(ctx, receipt, amount, ctx.today, card=card), (second,))
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
    text = "What's my balance?" if ctx.position == 0 else "And what's my balance?"
    mode, ref = _later_mode(ctx)
    reply = ctx.profile.bank_reply(account)
    question = ctx.profile.which_bank()

    def build(rec: Recorder) -> str:
        ask = rec.ask("get_balance", ["account"], question, reply)
        _, result = rec.call("get_balance", {"account": account}, (ask,))
        ctx.balances.append((ctx.position, account, ctx.profile.amount_of(result["balances"]), None))
        ctx.salient[ctx.position] = account
        return balance_sentence(ctx, result)

    return [_option("balance_missing_account", text, mode, ref, build, key=("balance", account, None))]


def _spend_missing_period(ctx: Context) -> list[Option]:
    if ctx.spends or not ctx.profile.clarify_categories:
        return []  # a period already talked about would answer "which period?": not a real clarification
    category = ctx.pick(list(ctx.profile.clarify_categories))
    period = ctx.pick([last_month(ctx.today), this_month(ctx.today)])
    text = f"How much have I spent on {ctx.nick(category)}?"
    mode, ref = _later_mode(ctx)
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
            text = "That one's in the wrong category."
        else:
            text = f"The {memo.payee} {txn_noun(memo)} {_which(ctx, memo)} is in the wrong category."
        reply = f"Put it under {ctx.nick(fix.target)}; {fix.reason}."

        def build(rec: Recorder, memo: Memo = memo, target: str = fix.target, reply: str = reply) -> str:
            ask = rec.ask("recategorize", ["new_account"], "Which category should it go under?", reply)
            _, old, after = record_recategorize(ctx, rec, memo, target, (ask,))
            ctx.salient[ctx.position] = target
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
            "The amount on that is wrong."
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

        out.append(_option("amend_missing", text, mode, memo.task, build))
    return out


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
    ):
        out.extend(make(ctx))
    return out
