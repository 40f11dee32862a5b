"""Conditional requests: what the user wants done depends on what a tool returns ("if checking has more than $3,000,
move $500 to savings; if not, just tell me what's in it").

The gold follows the branch the ledger's state selects: the threshold is drawn well clear of the real figure (at
least :data:`_MARGIN` away), so exactly one branch is right. Taken, the task is a chain (the read, then the action
that waits for it: Sequential Multi-Tool); not taken, it is the read alone and an answer that says why nothing else
was done (Single-Tool). Either way the wrong branch is a wrong path: an extra write, or a missing one.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from toolwild.core.task import TaskType
from toolwild.core.wild import Wild
from toolwild.synth.providers.ledger.common import balance_sentence, record_add, spend_arguments, spend_sentence
from toolwild.synth.providers.ledger.phrasing import capital, last_month, month_before_last
from toolwild.synth.providers.ledger.scenario import Context, Option, Recorder, option

__all__ = ["conditional_follow_ups", "conditional_options", "conditional_pairs"]

_MARGIN = Decimal(100)
_MOVES = (200, 250, 300, 400, 500)
_IF = (Wild.CONDITIONAL,)
_ONE_READ = frozenset(
    {
        "balance",
        "balance_partial",
        "salient_balance",
        "balance_missing_account",
        "spending",
        "spending_partial",
        "spend_missing_period",
        "memo_category_month",
        "pick_listed",
        "salient_history",
        "pick_of_two",
    }
)
"""Templates whose task is one read of one figure (a balance, a category's total)."""


def _limit(ctx: Context, figure: int) -> str:
    currency = ctx.profile.currency
    return f"${figure:,}" if currency == "USD" else f"{figure:,} {currency}"


def _threshold(ctx: Context, value: Decimal, taken: bool, steps: tuple[int, ...]) -> int | None:
    """A round threshold the value is clearly over (``taken``) or clearly not over."""
    fits = [s for s in steps if (value - s > _MARGIN if taken else s - value > _MARGIN)]
    return ctx.pick(fits) if fits else None


def _transfer(ctx: Context, move: int, *, named: bool) -> dict[str, Any]:
    """Gold ``add_transaction`` arguments of the books' transfer from checking to savings (the profile's sweep
    payee and narration); the paying account is passed when it is not the default, or when the user pointed at it
    (``named``: "move $250 from it")."""
    checking, savings, sweep = ctx.profile.checking, ctx.profile.savings, ctx.profile.sweep
    assert checking is not None and savings is not None and sweep is not None  # callers check the profile has them
    args: dict[str, Any] = {
        "date": ctx.today.isoformat(),
        "payee": sweep.payee,
        "narration": sweep.narration,
        "amount": float(move),
        "expense_account": savings,
    }
    if named or checking != ctx.profile.default_payment:
        args["payment_account"] = checking
    if ctx.profile.currency != "USD":
        args["currency"] = ctx.profile.currency
    return args


def _sweep_if(ctx: Context, taken: bool) -> list[Option]:
    """If checking holds more than a threshold, move a fixed amount to savings (recorded as the books' transfer)."""
    checking, savings, sweep = ctx.profile.checking, ctx.profile.savings, ctx.profile.sweep
    if checking is None or savings is None or sweep is None:
        return []
    currency = ctx.profile.currency
    held = ctx.episode.call("get_balance", {"account": checking}).result["balances"].get(currency)
    if held is None:
        return []
    balance = Decimal(held)
    steps = (500, 1000, 1500, 2000, 2500, 3000, 4000, 5000, 7500, 10000, 15000)
    floor = _threshold(ctx, balance, taken, steps)
    if floor is None:
        return []
    moves = [m for m in _MOVES if not taken or balance - m > 0]
    move = ctx.pick(moves)
    nick_from, nick_to = ctx.nick(checking), ctx.nick(savings)
    record = f"Record it today with {sweep.payee} as the payee and '{sweep.narration}' as the description."
    text = ctx.pick(
        [
            f"If {nick_from} has more than {_limit(ctx, floor)}, move {_limit(ctx, move)} over to {nick_to}; if not, "
            f"just tell me what's in it. {record}",
            f"Check {nick_from}: if it's above {_limit(ctx, floor)}, put {_limit(ctx, move)} into {nick_to}, "
            f"otherwise leave it alone and tell me the balance. {record}",
            f"Only if {nick_from} is over {_limit(ctx, floor)}: transfer {_limit(ctx, move)} to {nick_to}. Either way, "
            f"tell me where {nick_from} stands. {record}",
        ]
    )

    def build(rec: Recorder) -> str:
        idx, result = rec.call("get_balance", {"account": checking})
        current = Decimal(result["balances"][currency])
        ctx.balances.append((ctx.position, checking, f"{current:.2f}", None))
        if not taken:
            ctx.salient[ctx.position] = checking
            return (
                f"{capital(nick_from)} has {ctx.money(current)}, which is not over your limit, so I didn't move "
                "anything."
            )
        args = _transfer(ctx, move, named=False)
        _, memo = record_add(ctx, rec, args, deps=(idx,))
        ctx.ruled.add(memo.id)
        return (
            f"{capital(nick_from)} had {ctx.money(current)}, over your limit, so I moved {ctx.money(move)} to "
            f"{nick_to} ({memo.id})."
        )

    kind = TaskType.SEQUENTIAL if taken else TaskType.SINGLE
    key = ("conditional_sweep", checking)
    return [option(kind, "conditional_sweep", text, "first", None, build, key=key, wild=(Wild.CONDITIONAL,))]


def _compare_if(ctx: Context, taken: bool) -> list[Option]:
    """If a category came to more than a threshold last month, compare it with the month before."""
    categories = list(ctx.profile.spend_categories)
    if not categories:
        return []
    category = ctx.pick(categories)
    last, before = last_month(ctx.today), month_before_last(ctx.today)
    if before.start < ctx.earliest:
        return []
    total = ctx.episode.call("spending_summary", spend_arguments(last, category)).result["total"]
    value = Decimal(ctx.profile.amount_of(total))
    steps = (50, 100, 150, 200, 250, 300, 400, 500, 750, 1000, 1500, 2000)
    limit = _threshold(ctx, value, taken, steps)
    if limit is None:
        return []
    nick = ctx.nick(category)
    text = ctx.pick(
        [
            f"If I spent more than {_limit(ctx, limit)} on {nick} last month, how does that compare with the month "
            "before? If not, the total is all I need.",
            f"How much went on {nick} last month? If it's over {_limit(ctx, limit)}, also pull the month before so I "
            "can compare.",
            f"Did {nick} go past {_limit(ctx, limit)} last month? If so, show me the month before too; otherwise "
            "just last month.",
        ]
    )

    def build(rec: Recorder) -> str:
        idx, result = rec.call("spending_summary", spend_arguments(last, category))
        got = ctx.profile.amount_of(result["total"])
        ctx.spends.append((ctx.position, category, last, got))
        first = spend_sentence(ctx, result, last, category)
        if not taken:
            ctx.salient[ctx.position] = category
            return f"{first} That is not over your limit, so I left the month before out."
        _, earlier = rec.call("spending_summary", spend_arguments(before, category), (idx,))
        ctx.spends.append((ctx.position, category, before, ctx.profile.amount_of(earlier["total"])))
        ctx.salient[ctx.position] = category
        return f"{first} That is over your limit. {spend_sentence(ctx, earlier, before, category)}"

    kind = TaskType.SEQUENTIAL if taken else TaskType.SINGLE
    key = ("spend", category, last.start_iso, last.end_iso)
    return [option(kind, "conditional_compare", text, "first", None, build, key=key, wild=(Wild.CONDITIONAL,))]


def conditional_options(ctx: Context, *, taken: bool) -> list[Option]:
    """The conditional requests that fit the session's first task: those whose condition holds (``taken``: for a
    Multi-Tool slot) or does not (for a Single-Tool slot)."""
    if ctx.position != 0:
        return []
    return [*_sweep_if(ctx, taken), *_compare_if(ctx, taken)]


def _only_read(ctx: Context) -> bool:
    """Whether the previous task was one read and nothing else (so "that" is its one figure)."""
    return ctx.templates.get(ctx.position - 1, "") in _ONE_READ


def _spend_follow_up(ctx: Context, taken: bool) -> list[Option]:
    """After one category's total for a month: "if that's over $X, show me the month before too". The figure is
    already in the conversation, so the condition needs no call: taken, one call (Single-Tool); not taken, none
    (Chat)."""
    spends = [s for s in ctx.spends if s[0] == ctx.position - 1]
    if len(spends) != 1 or spends[0][2].label not in ("last month", "this month"):
        return []
    _, category, period, total = spends[0]
    if ctx.salient.get(ctx.position - 1) != category or not _only_read(ctx):
        return []  # the previous task was about more than this figure: "that" would have two readings
    before = month_before_last(ctx.today) if period.label == "last month" else last_month(ctx.today)
    said = before.name if period.label == "last month" else "last month"  # "February": a date the words state
    if before.start < ctx.earliest or ("spend", category, before.start_iso, before.end_iso) in ctx.used:
        return []
    value = Decimal(total)
    limit = _threshold(ctx, value, taken, (50, 100, 150, 200, 250, 300, 400, 500, 750, 1000, 1500, 2000))
    if limit is None:
        return []
    text = ctx.pick(
        [
            f"If that's more than {_limit(ctx, limit)}, show me {said} as well.",
            f"Is that over {_limit(ctx, limit)}? If it is, I want {said} too.",
            f"Should that be above {_limit(ctx, limit)}, pull {said} so I can compare.",
        ]
    )
    nick = ctx.nick(category)
    if taken:

        def build(rec: Recorder) -> str:
            _, result = rec.call("spending_summary", spend_arguments(before, category))
            ctx.spends.append((ctx.position, category, before, ctx.profile.amount_of(result["total"])))
            ctx.salient[ctx.position] = category
            return f"Yes, it's over your limit. {spend_sentence(ctx, result, before, category)}"

        kind = TaskType.SINGLE
    else:

        def build(rec: Recorder) -> str:
            ctx.salient[ctx.position] = category
            return (
                f"No: {nick} came to {ctx.money(value)} in {period.name}, which is not over your limit, so there's "
                f"no need to pull {said}."
            )

        kind = TaskType.CHAT
    key = ("spend", category, before.start_iso, before.end_iso) if taken else ("conditional", ctx.position - 1)
    ref = ctx.position - 1
    return [option(kind, "conditional_follow_up", text, "coref", ref, build, key=key, wild=_IF, weight=3.0)]


def _balance_follow_up(ctx: Context, taken: bool) -> list[Option]:
    """After checking's balance: "if that's more than $X, move $Y to savings" (the figure is in the conversation:
    taken, one write, Single-Tool; not taken, none, Chat)."""
    checking, savings, sweep = ctx.profile.checking, ctx.profile.savings, ctx.profile.sweep
    balances = [b for b in ctx.balances if b[0] == ctx.position - 1]
    if checking is None or savings is None or sweep is None or len(balances) != 1:
        return []
    _, account, figure, as_of = balances[0]
    if account != checking or as_of is not None or ctx.wrote or not _only_read(ctx):
        return []  # a write since would make the figure stale; a task about more than checking, "that" ambiguous
    value = Decimal(figure)
    steps = (500, 1000, 1500, 2000, 2500, 3000, 4000, 5000, 7500, 10000, 15000)
    floor = _threshold(ctx, value, taken, steps)
    if floor is None:
        return []
    move = ctx.pick([m for m in _MOVES if value - m > 0] or [_MOVES[0]])
    nick_to = ctx.nick(savings)
    record = f"Record it today with {sweep.payee} as the payee and '{sweep.narration}' as the description."
    text = ctx.pick(
        [
            f"If that's more than {_limit(ctx, floor)}, move {_limit(ctx, move)} from it to {nick_to}. {record}",
            f"OK, and if that's above {_limit(ctx, floor)}, take {_limit(ctx, move)} out of it and put that into "
            f"{nick_to}. {record}",
        ]
    )
    if taken:

        def build(rec: Recorder) -> str:
            _, memo = record_add(ctx, rec, _transfer(ctx, move, named=True))
            ctx.ruled.add(memo.id)
            return f"It's over your limit, so I moved {ctx.money(move)} to {nick_to} ({memo.id})."

        kind = TaskType.SINGLE
    else:

        def build(rec: Recorder) -> str:
            ctx.salient[ctx.position] = checking
            has = f"{capital(ctx.nick(checking))} has {ctx.money(value)}"
            return f"{has}, not over your limit, so I didn't move anything."

        kind = TaskType.CHAT
    key = ("conditional", ctx.position - 1)
    ref = ctx.position - 1
    return [option(kind, "conditional_follow_up", text, "coref", ref, build, key=key, wild=_IF, weight=3.0)]


def _follow_up_pair(ctx: Context) -> list[Option]:
    """A taken conditional on the previous task's figure that needs two calls (a Multi-Tool slot): "if that's
    more than $X, move $Y to savings and tell me what savings has then", or "if that's over $X, show me the two
    months before"."""
    out = []
    checking, savings, sweep = ctx.profile.checking, ctx.profile.savings, ctx.profile.sweep
    balances = [b for b in ctx.balances if b[0] == ctx.position - 1]
    if checking and savings and sweep and len(balances) == 1 and not ctx.wrote:
        _, account, figure, as_of = balances[0]
        value = Decimal(figure)
        floor = _threshold(ctx, value, True, (500, 1000, 1500, 2000, 2500, 3000, 4000, 5000, 7500, 10000))
        if account == checking and as_of is None and floor is not None and _only_read(ctx):
            move = ctx.pick([m for m in _MOVES if value - m > 0] or [_MOVES[0]])
            nick_to = ctx.nick(savings)
            record = f"Record it today with {sweep.payee} as the payee and '{sweep.narration}' as the description."
            text = (
                f"If that's more than {_limit(ctx, floor)}, move {_limit(ctx, move)} from it to {nick_to} and tell "
                f"me what {nick_to} has after that. {record}"
            )

            def build(rec: Recorder) -> str:
                idx, memo = record_add(ctx, rec, _transfer(ctx, move, named=True))
                ctx.ruled.add(memo.id)
                _, result = rec.call("get_balance", {"account": savings}, (idx,))
                return (
                    f"It's over your limit, so I moved {ctx.money(move)} to {nick_to} ({memo.id}). "
                    f"{balance_sentence(ctx, result)}"
                )

            key = ("conditional", ctx.position - 1)
            kind = TaskType.SEQUENTIAL
            ref = ctx.position - 1
            out.append(option(kind, "conditional_pair", text, "coref", ref, build, key=key, wild=_IF, weight=3.0))
    return out


def conditional_follow_ups(ctx: Context, *, taken: bool) -> list[Option]:
    """Conditionals on a figure the previous task gave (``taken``: for a Single-Tool slot; not taken: for a Chat
    slot, as nothing needs a call)."""
    if ctx.position == 0:
        return []
    return [*_spend_follow_up(ctx, taken), *_balance_follow_up(ctx, taken)]


def conditional_pairs(ctx: Context) -> list[Option]:
    """Taken conditionals on the previous task's figure that need two calls (for a Multi-Tool slot)."""
    return _follow_up_pair(ctx) if ctx.position > 0 else []
