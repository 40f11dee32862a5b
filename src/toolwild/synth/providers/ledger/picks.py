"""Picks from a list the assistant just gave: "the second one", "the last of those", "the bigger of the two".

Real users point into the list they were just shown instead of repeating a name or an id (the published
benchmark's "the second one among the above three"). The list is the previous task's result, in the order the tool
returned it (a search lists its transactions by date, ``list_accounts`` its accounts by name), so the pick has one
reading whatever the agent's own answer said; a descriptive pick ("the bigger of the two") names a property the
results decide, and is offered only when they decide it (no tie).
"""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from functools import partial
from typing import Any

from toolwild.core.task import TaskType
from toolwild.core.wild import Wild
from toolwild.synth.providers.ledger.common import (
    balance_sentence,
    can_amend,
    corrected_amount,
    record_amend_amount,
    spend_arguments,
    spend_sentence,
)
from toolwild.synth.providers.ledger.phrasing import last_month, month_before_last, month_day, month_end_phrase, number
from toolwild.synth.providers.ledger.scenario import Context, Option, Recorder, option

__all__ = [
    "ORDINALS",
    "SETS_UP_PICKS",
    "mentioned_two",
    "ordinal",
    "pick_clarify_options",
    "pick_multi_options",
    "pick_options",
]

ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth")
_COUNTS = ("", "one", "two", "three", "four", "five", "six")

_option = partial(option, TaskType.SINGLE)
_PICK = (Wild.PICK,)

SETS_UP_PICKS = frozenset(
    {"find", "find_partial", "list_accounts", "two_spendings", "two_balances", "salient_compare", "two_adds"}
)
"""Templates whose answer is a list or two figures side by side: what a pick can point into."""


def ordinal(k: int, n: int) -> str:
    """How a user names item ``k`` (0-based) of a list of ``n``: "the last" for the last of three or more, else its
    ordinal ("second")."""
    return "last" if k == n - 1 and n >= 3 else ORDINALS[k]


def _found_rows(ctx: Context) -> list[dict[str, Any]]:
    """The transactions the previous task's search listed, in its order (empty when it was not a search of 2-6)."""
    previous = [f for f in ctx.finds if f[0] == ctx.position - 1]
    if not previous or not 2 <= len(previous[-1][3]) <= len(ORDINALS):
        return []
    ledger = {t["id"]: t for t in ctx.ledger()}
    ids = previous[-1][3]
    return [ledger[i] for i in ids] if all(i in ledger for i in ids) else []


def _pick_found(ctx: Context) -> list[Option]:
    """Correct the k-th transaction of the search just listed ("the second one among those three")."""
    rows = _found_rows(ctx)
    if not rows:
        return []
    n = len(rows)
    choices = [
        k
        for k, row in enumerate(rows)
        if row["id"] not in ctx.touched | ctx.amended
        and can_amend(ctx, ctx.memo_from(row, added=False, task=ctx.position - 1))
    ]
    if not choices:
        return []
    k = ctx.pick(choices)
    memo = ctx.memo_from(rows[k], added=False, task=ctx.position - 1)
    new = corrected_amount(ctx, memo.amount)
    which, count = ordinal(k, n), _COUNTS[n]
    text = ctx.pick(
        [
            f"The {which} one among those {count} should be {number(new)}, not {number(memo.amount)}.",
            f"Of those {count}, the {which} is wrong: make it {number(new)} instead of {number(memo.amount)}.",
            f"Fix the {which} of those {count} for me: {number(new)}, not {number(memo.amount)}.",
            f"The {which} one in the list is off. It should read {number(new)}, not {number(memo.amount)}.",
        ]
    )

    def build(rec: Recorder) -> str:
        _, after = record_amend_amount(ctx, rec, memo, new)
        ctx.salient[ctx.position] = after.category
        return (
            f"Done: {after.id} ({after.payee}, {month_day(after.day)}) is now {ctx.money(after.amount)} instead of "
            f"{ctx.money(memo.amount)}."
        )

    return [_option("pick_found", text, "coref", ctx.position - 1, build, weight=5.0, wild=(Wild.PICK,))]


def pick_clarify_options(ctx: Context) -> list[Option]:
    """Picks a Clarify slot can hold: a found transaction with a wrong amount (:func:`_pick_found_missing`), or the
    balance of one of two accounts at a month's end (:func:`_pick_two_missing`)."""
    return [*_pick_found_missing(ctx), *_pick_two_missing(ctx)]


def _pick_found_missing(ctx: Context) -> list[Option]:
    """The k-th transaction of the search just listed has a wrong amount, and the user does not say the right one
    until asked ("The second one among those three is wrong." - "What should it be?" - "It should be 45.10.")."""
    rows = _found_rows(ctx) if ctx.position > 0 else []
    choices = [
        k
        for k, row in enumerate(rows)
        if row["id"] not in ctx.touched | ctx.amended
        and can_amend(ctx, ctx.memo_from(row, added=False, task=ctx.position - 1))
    ]
    if not choices:
        return []
    n, k = len(rows), ctx.pick(choices)
    memo = ctx.memo_from(rows[k], added=False, task=ctx.position - 1)
    new = corrected_amount(ctx, memo.amount)
    which, count = ordinal(k, n), _COUNTS[n]
    text = ctx.pick(
        [
            f"The {which} one among those {count} has the wrong amount.",
            f"Of those {count}, the {which} one is off.",
            f"The amount on the {which} of those {count} is wrong.",
        ]
    )

    def build(rec: Recorder) -> str:
        question = f"What should the amount be? It's {ctx.money(memo.amount)} now."
        ask = rec.ask("amend_transaction", ["amount"], question, f"It should be {number(new)}.")
        _, after = record_amend_amount(ctx, rec, memo, new, (ask,))
        ctx.salient[ctx.position] = after.category
        return f"Done: {after.id} ({after.payee}) is now {ctx.money(after.amount)} instead of {ctx.money(memo.amount)}."

    kind = TaskType.CLARIFY
    return [option(kind, "pick_found_missing", text, "coref", ctx.position - 1, build, weight=5.0, wild=(Wild.PICK,))]


def _listed(ctx: Context) -> list[str]:
    """The categories the previous task listed (``list_accounts`` of Expenses, every one named in its answer)."""
    if not ctx.templates.get(ctx.position - 1, "").startswith("list_accounts"):
        return []
    if ctx.salient.get(ctx.position - 1) != "Expenses":
        return []
    return list(ctx.listed.get(ctx.position - 1, ()))


def _pick_listed(ctx: Context) -> list[Option]:
    """Ask about the k-th category of the list just given ("the third one on that list")."""
    listed = _listed(ctx)
    if len(listed) < 2:
        return []
    n = len(listed)
    k = ctx.pick(list(range(min(n, len(ORDINALS)))) + ([n - 1] if n > len(ORDINALS) else []))
    category = listed[k]
    which = "last" if k == n - 1 else ORDINALS[k]
    period = last_month(ctx.today)
    text = ctx.pick(
        [
            f"How much went into the {which} one on that list last month?",
            f"The {which} one you listed: what did it come to last month?",
            f"Take the {which} of those. How much did I put into it last month?",
        ]
    )

    def build(rec: Recorder) -> str:
        _, result = rec.call("spending_summary", spend_arguments(period, category))
        ctx.salient[ctx.position] = category
        ctx.spends.append((ctx.position, category, period, ctx.profile.amount_of(result["total"])))
        return spend_sentence(ctx, result, period, category)

    key = ("spend", category, period.start_iso, period.end_iso)
    return [_option("pick_listed", text, "coref", ctx.position - 1, build, key=key, weight=5.0, wild=(Wild.PICK,))]


def _pick_of_two(ctx: Context) -> list[Option]:
    """After two figures side by side, follow up on one of them: by a property the figures decide ("the bigger of
    the two", offered only without a tie) or by the order the user named them in ("the second one I mentioned")."""
    out = []
    task = ctx.position - 1
    balances = [b for b in ctx.balances if b[0] == task and b[3] is None]
    month_end = last_month(ctx.today).end
    if len(balances) == 2 and balances[0][1] != balances[1][1] and month_end >= ctx.earliest:
        (_, a, va, _), (_, b, vb, _) = balances
        then = month_end_phrase(month_end)
        texts: list[tuple[str, str]] = []
        if a.startswith("Assets") and b.startswith("Assets") and Decimal(va) != Decimal(vb):
            big = a if Decimal(va) > Decimal(vb) else b
            size = ctx.pick(["bigger", "larger"])
            texts += [
                (big, f"The {size} of the two: where was it at the end of {then}?"),
                (big, f"And the one with more in it, what did it have at the end of {then}?"),
                (big, f"Take the {size} one. What was its balance at the end of {then}?"),
            ]
        k = ctx.rng.randrange(2)
        which = ORDINALS[k]
        texts += [
            ((a, b)[k], f"The {which} one I mentioned: where did it stand at the end of {then}?"),
            ((a, b)[k], f"Just the {which} of the two, please: what was it at the end of {then}?"),
        ]
        account, text = ctx.pick(texts)

        def build(rec: Recorder, account: str = account, as_of: date = month_end) -> str:
            _, result = rec.call("get_balance", {"account": account, "date": as_of.isoformat()})
            ctx.salient[ctx.position] = account
            figure = ctx.profile.amount_of(result["balances"])
            ctx.balances.append((ctx.position, account, figure, as_of.isoformat()))
            return balance_sentence(ctx, result)

        key = ("balance", account, month_end.isoformat())
        out.append(_option("pick_of_two", text, "coref", task, build, key=key, weight=5.0, wild=(Wild.PICK,)))
    spends = [s for s in ctx.spends if s[0] == task]
    if len(spends) == 2 and spends[0][1] != spends[1][1] and spends[0][2] == spends[1][2]:
        (_, a, period, va), (_, b, _, vb) = spends
        earlier = month_before_last(ctx.today)
        if period.label == "last month" and earlier.start >= ctx.earliest:
            choices: list[tuple[str, str]] = []
            if Decimal(va) != Decimal(vb):
                big, small = (a, b) if Decimal(va) > Decimal(vb) else (b, a)
                word = ctx.pick(["bigger", "larger"])
                choices += [
                    (big, f"The {word} of those two: what was it the month before?"),
                    (small, "And the smaller one, how much was it the month before that?"),
                    (big, f"For whichever was {word}, show me the month before too."),
                ]
            k = ctx.rng.randrange(2)
            choices.append(((a, b)[k], f"The {ORDINALS[k]} one I mentioned: what did it come to the month before?"))
            category, text = ctx.pick(choices)

            def build_spend(rec: Recorder, category: str = category) -> str:
                _, result = rec.call("spending_summary", spend_arguments(earlier, category))
                ctx.salient[ctx.position] = category
                ctx.spends.append((ctx.position, category, earlier, ctx.profile.amount_of(result["total"])))
                return spend_sentence(ctx, result, earlier, category)

            key = ("spend", category, earlier.start_iso, earlier.end_iso)
            out.append(_option("pick_of_two", text, "coref", task, build_spend, key=key, weight=5.0, wild=(Wild.PICK,)))
    return out


def mentioned_two(ctx: Context) -> list[str]:
    """The two accounts (or categories) the previous task asked about side by side, in the order the user named
    them (empty when it was not two)."""
    task = ctx.position - 1
    balances = [b[1] for b in ctx.balances if b[0] == task and b[3] is None]
    spends = [s[1] for s in ctx.spends if s[0] == task]
    for named in (balances, spends):
        if len(named) == 2 and named[0] != named[1] and not (balances and spends):
            return named
    return []


def pick_multi_options(ctx: Context) -> list[Option]:
    """Two views of the k-th of the two accounts the previous task put side by side ("the second one I
    mentioned: now and at the end of March")."""
    named = mentioned_two(ctx) if ctx.position > 0 else []
    if not named:
        return []
    k = ctx.rng.randrange(2)
    account, which = named[k], ORDINALS[k]
    month_end = last_month(ctx.today).end
    if month_end < ctx.earliest:
        return []
    then = month_end_phrase(month_end)
    spending = account.startswith(("Expenses", "Income"))
    last, before = last_month(ctx.today), month_before_last(ctx.today)
    if spending and before.start < ctx.earliest:
        return []
    text = (
        ctx.pick(
            [
                f"For the {which} one I mentioned, give me last month and the month before.",
                f"Take the {which} of the two: what did it come to last month, and the month before?",
            ]
        )
        if spending
        else ctx.pick(
            [
                f"For the {which} one I mentioned: where is it now, and where was it at the end of {then}?",
                f"Take the {which} of the two and show me today's figure and the one from the end of {then}.",
            ]
        )
    )

    def build(rec: Recorder) -> str:
        sentences = []
        if spending:
            for period in (last, before):
                _, result = rec.call("spending_summary", spend_arguments(period, account))
                ctx.spends.append((ctx.position, account, period, ctx.profile.amount_of(result["total"])))
                sentences.append(spend_sentence(ctx, result, period, account))
        else:
            for as_of in (None, month_end.isoformat()):
                args = {"account": account} if as_of is None else {"account": account, "date": as_of}
                _, result = rec.call("get_balance", args)
                ctx.balances.append((ctx.position, account, ctx.profile.amount_of(result["balances"]), as_of))
                sentences.append(balance_sentence(ctx, result))
        ctx.salient[ctx.position] = account
        return " ".join(sentences)

    kind = TaskType.PARALLEL
    return [option(kind, "pick_two_views", text, "coref", ctx.position - 1, build, weight=5.0, wild=(Wild.PICK,))]


def _pick_added(ctx: Context) -> list[Option]:
    """After the user added two or more receipts in one go, correct the k-th of them ("the second one I
    mentioned should be 41.20, not 14.20"): a pick by the order the user named them, and a correction of the
    user's own words."""
    added = [m for m in ctx.memos_of(ctx.position - 1) if m.added][::-1]  # memos_of is most recent first
    if len(added) < 2 or len(added) > len(ORDINALS):
        return []
    choices = [k for k, memo in enumerate(added) if can_amend(ctx, memo)]
    if not choices:
        return []
    k = ctx.pick(choices)
    memo, which = added[k], ordinal(k, len(added))
    new = corrected_amount(ctx, memo.amount)
    text = ctx.pick(
        [
            f"The {which} one I mentioned should be {number(new)}, not {number(memo.amount)}.",
            f"Oops, the {which} of those was {number(new)}, not {number(memo.amount)}.",
        ]
    )

    def build(rec: Recorder) -> str:
        _, after = record_amend_amount(ctx, rec, memo, new)
        ctx.salient[ctx.position] = after.category
        return f"Done: {after.id} ({after.payee}) is now {ctx.money(after.amount)} instead of {ctx.money(memo.amount)}."

    wild = (Wild.PICK, Wild.CORRECTION)
    return [_option("pick_added", text, "coref", ctx.position - 1, build, weight=5.0, wild=wild)]


def _pick_two_missing(ctx: Context) -> list[Option]:
    """After two balances side by side: "where was the second one I mentioned at the end of the month?" - which
    month is asked, then the balance of the k-th account at that month's end."""
    named = mentioned_two(ctx) if ctx.position > 0 else []
    if not named or named[0].startswith(("Expenses", "Income")):
        return []
    month_end = last_month(ctx.today).end
    if month_end < ctx.earliest:
        return []
    k = ctx.rng.randrange(2)
    account, which = named[k], ORDINALS[k]
    text = ctx.pick(
        [
            f"Where was the {which} one I mentioned at the end of the month?",
            f"And the {which} of the two, what did it show at a month's end?",
        ]
    )
    reply = ctx.pick([f"The end of {month_end_phrase(month_end)}.", f"{month_end_phrase(month_end)}, the last day."])

    def build(rec: Recorder) -> str:
        ask = rec.ask("get_balance", ["date"], "The end of which month?", reply)
        _, result = rec.call("get_balance", {"account": account, "date": month_end.isoformat()}, (ask,))
        ctx.salient[ctx.position] = account
        ctx.balances.append((ctx.position, account, ctx.profile.amount_of(result["balances"]), month_end.isoformat()))
        return balance_sentence(ctx, result)

    key = ("balance", account, month_end.isoformat())
    kind = TaskType.CLARIFY
    return [option(kind, "pick_two_missing", text, "coref", ctx.position - 1, build, key=key, weight=5.0, wild=_PICK)]


def pick_options(ctx: Context) -> list[Option]:
    """Every pick from the list the previous task gave that fits the conversation (none at the first task)."""
    if ctx.position == 0:
        return []
    return [*_pick_found(ctx), *_pick_listed(ctx), *_pick_of_two(ctx), *_pick_added(ctx)]
