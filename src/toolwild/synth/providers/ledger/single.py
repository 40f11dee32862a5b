"""Single-Tool tasks: one call answers the request (a balance, a summary, one add or one correction)."""

from __future__ import annotations

from dataclasses import replace
from datetime import date, timedelta
from decimal import Decimal
from functools import partial
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
from toolwild.synth.providers.ledger.conditionals import conditional_follow_ups, conditional_options
from toolwild.synth.providers.ledger.phrasing import (
    day_phrase,
    last_month,
    month_before_last,
    month_day,
    month_end_phrase,
    number,
    of_day,
    this_month,
)
from toolwild.synth.providers.ledger.picks import pick_options
from toolwild.synth.providers.ledger.scenario import Context, Memo, Mode, Option, Recorder, option, own_slip

__all__ = ["single_options"]


# ---------------------------------------------------------------------------------------------------- balances
def _balance_build(ctx: Context, account: str, as_of: str | None = None) -> Any:
    def build(rec: Recorder) -> str:
        args: dict[str, Any] = {"account": account}
        if as_of:
            args["date"] = as_of
        _, result = rec.call("get_balance", args)
        ctx.salient[ctx.position] = account
        ctx.balances.append((ctx.position, account, ctx.profile.amount_of(result["balances"]), as_of))
        return balance_sentence(ctx, result)

    return build


_option = partial(option, TaskType.SINGLE)


def _balances(ctx: Context) -> list[Option]:
    out = []
    banks = list(ctx.profile.banks)
    if ctx.position == 0:
        if not banks:
            return out
        account = ctx.pick(banks)
        text = ctx.pick(list(ctx.profile.balance_questions(account)))
        nick = ctx.nick(account)
        fragments = [f"{nick} balance?", f"balance on {nick} pls", f"{nick} - how much?"]
        out.append(
            _option(
                "balance",
                text,
                "first",
                None,
                _balance_build(ctx, account),
                key=("balance", account, None),
                fragments=fragments,
            )
        )
        month_end = last_month(ctx.today).end
        cash = [a for a in (ctx.profile.checking, ctx.profile.savings) if a is not None]
        if not cash:
            return out
        account = ctx.pick(cash)
        nick, then = ctx.nick(account), month_end_phrase(month_end)
        text = ctx.pick(
            [
                f"What was in {nick} at the end of {then}?",
                f"How much did {nick} have at the end of {then}?",
                f"Where was {nick} at the close of {then}?",
            ]
        )
        build = _balance_build(ctx, account, month_end.isoformat())
        key = ("balance", account, month_end.isoformat())
        fragments = [f"{nick} at end of {then}?", f"{nick}, end of {then}"]
        out.append(_option("balance_as_of", text, "first", None, build, key=key, fragments=fragments))
        return out
    previous = [b for b in ctx.balances if b[0] == ctx.position - 1]
    if len(previous) == 1:  # "and X?" / "what was it then?" carry one account
        _, account, _, as_of = previous[-1]
        others = [a for a in banks if a != account]
        if as_of is None and others:
            other = ctx.pick(others)
            text = ctx.pick([f"And {ctx.the_nick(other)}?", f"What about {ctx.the_nick(other)}?"])
            build = _balance_build(ctx, other)
            out.append(
                _option("balance_partial", text, "partial", ctx.position - 1, build, key=("balance", other, None))
            )
        # one month further back than the previous question
        anchor = ctx.today if as_of is None else date.fromisoformat(as_of)
        month_end = last_month(anchor).end
        if month_end >= ctx.earliest:
            then = month_end_phrase(month_end)
            text = ctx.pick(
                [
                    f"And what was it at the end of {then}?",
                    f"And at the end of {then}?",
                    f"What about at the end of {then}?",
                    f"And back at the end of {then}?",
                ]
            )
            build = _balance_build(ctx, account, month_end.isoformat())
            key = ("balance", account, month_end.isoformat())
            out.append(_option("balance_as_of_partial", text, "partial", ctx.position - 1, build, key=key))
    return out


def _salient_balance(ctx: Context) -> list[Option]:
    """The always-available follow-up: the balance of the account an earlier task was about."""
    out = []
    for task, account, close, mode in ctx.salient_targets():
        if account.startswith("Equity"):
            continue
        back = "Going back to my first question: "
        if account.startswith("Liabilities"):
            text = (
                "How much do I owe on it right now?"
                if close
                else f"What do I owe now on {ctx.pointer(account, close=False)}?"
            )
        elif account.startswith("Expenses"):
            words = ctx.profile
            text = (
                ctx.pick(
                    [
                        f"How much has gone into that category in total {words.so_far}?",
                        f"And what's the running total for that category {words.this_year}?",
                        f"How much have I put into that category {words.since_start}?",
                    ]
                )
                if close
                else f"{back}how much has gone into that category in total {words.this_year}?"
            )
        elif account.startswith("Income"):
            text = (
                f"How much has come in from that {ctx.profile.so_far}?"
                if close
                else f"{back}how much has come in {ctx.profile.this_year}?"
            )
        else:
            text = (
                ctx.pick(
                    [
                        f"What's the balance of {ctx.pointer(account, close=True)} right now?",
                        f"How much is in {ctx.pointer(account, close=True)} right now?",
                    ]
                )
                if close
                else ctx.pick(
                    [
                        f"What's in {ctx.pointer(account, close=False)} now?",
                        f"How much is left in {ctx.pointer(account, close=False)} today?",
                    ]
                )
            )
        build = _balance_build(ctx, account)
        out.append(_option("salient_balance", text, mode, task, build, key=("balance", account, None), weight=0.35))
    return out


def _paid_by_name(ctx: Context, memo: Memo) -> bool:
    """Whether the user named the account that paid (a receipt they added on the card or from a named account):
    only then is "the account I paid that with" one value of the conversation; the default account shows only as
    a posting among the transaction's others."""
    return (
        memo.added
        and memo.payment in ctx.profile.banks
        and memo.payment != ctx.profile.default_payment
        and memo.category.startswith("Expenses")
    )


def _payment_balance(ctx: Context) -> list[Option]:
    out = []
    memo = ctx.single_memo(ctx.position - 1)
    if memo and _paid_by_name(ctx, memo):
        text = "What's the balance on the account I paid that with?"
        build = _balance_build(ctx, memo.payment)
        out.append(_option("payment_balance", text, "coref", memo.task, build, key=("balance", memo.payment, None)))
    for memo in [m for m in ctx.earlier_memos() if ctx.unambiguous(m)][:1]:
        if _paid_by_name(ctx, memo):
            text = f"What's the balance now on the account I paid that {memo.payee} {txn_noun(memo)} with?"
            build = _balance_build(ctx, memo.payment)
            out.append(_option("payment_balance", text, "long", memo.task, build, key=("balance", memo.payment, None)))
    return out


# ---------------------------------------------------------------------------------------------------- summaries
def _spend_build(ctx: Context, period: Any, category: str) -> Any:
    def build(rec: Recorder) -> str:
        _, result = rec.call("spending_summary", spend_arguments(period, category))
        ctx.salient[ctx.position] = category
        ctx.spends.append((ctx.position, category, period, ctx.profile.amount_of(result["total"])))
        return spend_sentence(ctx, result, period, category)

    return build


def _salient_history(ctx: Context) -> list[Option]:
    """Another always-available follow-up: where the account an earlier task was about stood a month ago."""
    out = []
    for task, account, close, mode in ctx.salient_targets():
        if ":" not in account or account.startswith(("Equity", "Income")):
            continue
        pointer = ctx.pointer(account, close)
        if account.startswith("Expenses"):
            period = last_month(ctx.today)
            text = ctx.pick(
                [
                    f"What did {pointer} come to last month?",
                    f"And last month, what was the total for {pointer}?",
                    f"How much went into {pointer} last month?",
                ]
            )
            build = _spend_build(ctx, period, account)
            key: tuple[Any, ...] = ("spend", account, period.start_iso, period.end_iso)
        else:
            month_end = last_month(ctx.today).end
            then = month_end_phrase(month_end)
            text = ctx.pick(
                [
                    f"And where did {pointer} stand at the end of {then}?",
                    f"What was {pointer} at, back at the end of {then}?",
                    f"Rewind to the end of {then}: what did {pointer} show?",
                ]
            )
            build = _balance_build(ctx, account, month_end.isoformat())
            key = ("balance", account, month_end.isoformat())
        out.append(_option("salient_history", text, mode, task, build, key=key, weight=0.3))
    return out


def _spending(ctx: Context) -> list[Option]:
    out = []
    categories = list(ctx.profile.spend_categories)
    if ctx.position == 0:
        if not categories:
            return out
        category = ctx.pick(categories)
        period = ctx.pick([last_month(ctx.today), this_month(ctx.today)])
        nick = ctx.nick(category)
        text = ctx.pick(
            [
                f"How much did I spend on {nick} {period.label}?",
                f"What did {nick} cost me {period.label}?",
                f"What was my {nick} bill {period.label}?",
                f"How much went on {nick} {period.label}?",
            ]
        )
        key = ("spend", category, period.start_iso, period.end_iso)
        fragments = [f"{nick} {period.label}?", f"{nick} total {period.label}", f"total on {nick} {period.label}?"]
        build = _spend_build(ctx, period, category)
        out.append(_option("spending", text, "first", None, build, key=key, fragments=fragments))
        return out
    previous = [s for s in ctx.spends if s[0] == ctx.position - 1]
    if previous and len({s[2] for s in previous}) == 1:  # "what about X?" carries the one period asked about
        _, category, period, _ = previous[-1]
        choices = [c for c in categories if all(c != s[1] and not c.startswith(s[1] + ":") for s in previous)]
        if not choices:
            return out
        other = ctx.pick(choices)
        text = ctx.pick([f"What about {ctx.nick(other)}?", f"And {ctx.nick(other)}?"])
        build = _spend_build(ctx, period, other)
        key = ("spend", other, period.start_iso, period.end_iso)
        out.append(_option("spending_partial", text, "partial", ctx.position - 1, build, key=key))
        if period.label == "last month" and len(previous) == 1:  # after two categories, "the month before" of which?
            earlier = month_before_last(ctx.today)
            text = ctx.pick(["And the month before?", "What about the month before that?", "And the previous month?"])
            build = _spend_build(ctx, earlier, category)
            key = ("spend", category, earlier.start_iso, earlier.end_iso)
            out.append(_option("spending_partial", text, "partial", ctx.position - 1, build, key=key))
    return out


def _listing(accounts: list[str], limit: int = 400) -> str:
    """Accounts as an answer lists them: all of them, or, past ``limit`` characters (a user's own books may have 40
    expense accounts), grouped by their first two parts with each group's last parts, the largest groups by their
    first account only (an answer is read, not scanned: the answer check allows 600 characters and no count the
    results do not hold)."""
    plain = ", ".join(accounts)
    if len(plain) <= limit:
        return plain
    groups: dict[str, list[str]] = {}
    for account in accounts:
        parts = account.split(":")
        groups.setdefault(":".join(parts[:2]), []).append(":".join(parts[2:]))
    said = []
    for group, rest in groups.items():
        leaves = [r for r in rest if r]
        if not leaves:
            said.append(group)
        elif len(", ".join(leaves)) <= 60:
            said.append(f"{group} ({', '.join(leaves)})")
        else:
            said.append(f"{group} (with {leaves[0]} and the other accounts under it)")
    return "; ".join(said)


def _accounts_build(ctx: Context, prefix: str) -> Any:
    def build(rec: Recorder) -> str:
        _, result = rec.call("list_accounts", {"prefix": prefix})
        ctx.salient[ctx.position] = prefix
        kind = "categories" if prefix == "Expenses" else "accounts"
        accounts = [row["account"] for row in result]
        said = _listing(accounts)
        if said == ", ".join(accounts):  # listed in full and in order: "the third one" has one reading
            ctx.listed[ctx.position] = accounts
        return f"Here are the {kind} there: {said}."

    return build


def _list_accounts(ctx: Context) -> list[Option]:
    if ctx.position == 0:
        text = ctx.pick(
            [
                "Which spending categories do I have set up?",
                "What expense categories does my ledger have?",
                "Can you list the categories I file expenses under?",
            ]
        )
        fragments = ["my expense categories?", "list of categories pls"]
        build = _accounts_build(ctx, "Expenses")
        return [_option("list_accounts", text, "first", None, build, key=("accounts", "Expenses"), fragments=fragments)]
    out = []
    if (
        ctx.templates.get(ctx.position - 1, "").startswith("list_accounts")
        and ctx.salient.get(ctx.position - 1) == "Expenses"
    ):
        text = "And which bank accounts?"
        build = _accounts_build(ctx, "Assets")
        out.append(
            _option("list_accounts_partial", text, "partial", ctx.position - 1, build, key=("accounts", "Assets"))
        )
    return out


# ---------------------------------------------------------------------------------------------------- searches
def _find_build(ctx: Context, payee: str, period: Any) -> Any:
    def build(rec: Recorder) -> str:
        args = {"payee": payee, "start_date": period.start_iso, "end_date": period.end_iso}
        _, result = rec.call("find_transactions", args)
        rows = result["transactions"]
        ids = [row["id"] for row in rows]
        ctx.finds.append((ctx.position, payee, period, ids))
        found = {p["account"] for row in rows for p in row["postings"] if p["account"].startswith("Expenses")}
        if len(found) == 1:  # the search's topic is a category only when all it found went to one
            ctx.salient[ctx.position] = found.pop()
        if len(rows) == 1:
            ctx.remember(rows[0], added=False)
        if not rows:
            return f"The search for {payee} found 0 transactions in that period."  # nothing to date it by
        listed = "; ".join(
            f"{month_day(date.fromisoformat(row['date']))}: "
            f"{ctx.money(max(Decimal(p['amount']) for p in row['postings']))} "
            f"({row['id']})"
            for row in rows
        )
        return f"You have {len(rows)} {payee} transaction{'s' if len(rows) != 1 else ''} in {period.name}: {listed}."

    return build


def _payees_in(ctx: Context, period: Any) -> list[str]:
    targets = ctx.seed_targets(period.start, period.end)
    return sorted({t["payee"] for t in targets})


def _find(ctx: Context) -> list[Option]:
    period = last_month(ctx.today)
    if ctx.position == 0:
        payees = _payees_in(ctx, period)
        if not payees:
            return []
        payee = ctx.pick(payees)
        text = ctx.pick(
            [
                f"Show me my {payee} purchases from last month.",
                f"What did I buy at {payee} last month?",
                f"List last month's {payee} transactions for me.",
            ]
        )
        fragments = [f"{payee} purchases last month?", f"last month's {payee} charges"]
        return [_option("find", text, "first", None, _find_build(ctx, payee, period), fragments=fragments)]
    previous = [f for f in ctx.finds if f[0] == ctx.position - 1]
    if previous:
        _, payee, period, _ = previous[-1]
        others = [p for p in _payees_in(ctx, period) if p != payee]
        if others:
            other = ctx.pick(others)
            return [
                _option("find_partial", f"And {other}?", "partial", ctx.position - 1, _find_build(ctx, other, period))
            ]
    return []


def _query(ctx: Context) -> list[Option]:
    if ctx.position != 0:
        return []
    start = this_month(ctx.today).start.isoformat()
    bql = ctx.pick(
        [
            f"SELECT date, payee, number WHERE account ~ '^Expenses' AND date >= {start} ORDER BY number DESC LIMIT 5",
            f"SELECT payee, sum(number) AS total WHERE account ~ '{ctx.profile.query_pattern}' AND date >= {start} "
            "GROUP BY payee "
            "ORDER BY total DESC",
        ]
    )

    def build(rec: Recorder) -> str:
        _, result = rec.call("run_query", {"bql": bql})
        if "'^Expenses'" in bql:
            ctx.salient[ctx.position] = "Expenses"
        else:  # the query is about the accounts its pattern matches: a topic only when that is one account
            matched = [a for a in ctx.episode.ledger().open_accounts() if ctx.profile.query_pattern in a]
            if len(matched) == 1:
                ctx.salient[ctx.position] = matched[0]
        rows = "; ".join(", ".join(str(cell) for cell in row) for row in result["rows"])
        return f"The query returned {result['row_count']} rows ({', '.join(result['columns'])}): {rows}."

    text = f"Run this query on my ledger for me: {bql}"
    return [_option("run_query", text, "first", None, build)]


# ---------------------------------------------------------------------------------------------------- writes
def _add_build(ctx: Context, args: dict[str, Any]) -> Any:
    def build(rec: Recorder) -> str:
        _, memo = record_add(ctx, rec, args)
        ctx.salient[ctx.position] = memo.category
        return (
            f"Added {memo.id}: {memo.payee}, {ctx.money(memo.amount)} {memo.narration.lower()} on "
            f"{memo.day.isoformat()}, booked to {memo.category} and paid from {memo.payment}."
        )

    return build


def _add(ctx: Context) -> list[Option]:
    out = []
    if not ctx.profile.receipts:
        return out
    if ctx.position == 0:
        ((receipt, amount),) = pick_receipts(ctx, 1)
        card = choose_card(ctx)
        if card is None:
            return out
        text = f"Add today's {receipt.payee} receipt: {said(ctx, amount)} {receipt.spoken}{paid_phrase(ctx, card)}."
        args = add_arguments(ctx, receipt, amount, ctx.today, card=card)
        out.append(_option("add", text, "first", None, _add_build(ctx, args)))
        return out
    memo = next((m for m in ctx.memos_of(ctx.position - 1) if m.added and m.payment == ctx.profile.card), None)
    if memo:
        ((receipt, amount),) = pick_receipts(ctx, 1)
        text = f"Add another one from today on the same card: {receipt.payee}, {said(ctx, amount)} {receipt.spoken}."
        args = add_arguments(ctx, receipt, amount, ctx.today, card=True)
        out.append(_option("add_partial", text, "partial", memo.task, _add_build(ctx, args)))
    return out


def _targets(ctx: Context) -> list[tuple[Memo, Mode]]:
    """Transactions a correction can point at: the one just discussed (coreference) or an earlier one."""
    out: list[tuple[Memo, Mode]] = []
    memo = ctx.single_memo(ctx.position - 1) if ctx.position else None
    if memo:
        out.append((memo, "coref"))
    earlier = [m for m in ctx.earlier_memos() if ctx.unambiguous(m)]
    if earlier:
        out.append((earlier[0], "long"))
    return out


def _amend_amount(ctx: Context) -> list[Option]:
    out = []
    for memo, mode in _targets(ctx):
        if not can_amend(ctx, memo):
            continue
        new = corrected_amount(ctx, memo.amount)
        if mode == "coref":
            text = ctx.pick(
                [
                    f"Make it {number(new)}, not {number(memo.amount)}.",
                    f"Sorry, that should be {number(new)}, not {number(memo.amount)}.",
                ]
            )
        else:
            which = "I added earlier" if memo.added else of_day(memo.day, ctx.today)
            text = (
                f"The {memo.payee} {txn_noun(memo)} {which} should be {number(new)}, not {number(memo.amount)}. Fix it?"
            )

        def build(rec: Recorder, memo: Memo = memo, new: Any = new) -> str:
            _, after = record_amend_amount(ctx, rec, memo, new)
            ctx.salient[ctx.position] = after.category
            return (
                f"Done: {after.id} ({after.payee}, {month_day(after.day)}) is now {ctx.money(after.amount)} instead of "
                f"{ctx.money(memo.amount)}."
            )

        out.append(_option("amend_amount", text, mode, memo.task, build, wild=own_slip(memo)))
    return out


def _amend_date(ctx: Context) -> list[Option]:
    out = []
    yesterday = ctx.today - timedelta(days=1)
    for memo, mode in _targets(ctx):
        if not memo.added or memo.day != ctx.today or not ctx.writable(replace(memo, day=yesterday)):
            continue
        if mode == "coref":
            text = ctx.pick(
                ["Oh wait, that was yesterday, not today.", "Actually that was from yesterday. Fix the date?"]
            )
        else:
            text = f"The {memo.payee} receipt I added earlier is from yesterday, not today. Please change the date."

        def build(rec: Recorder, memo: Memo = memo) -> str:
            _, result = rec.call("amend_transaction", {"transaction_id": memo.id, "date": yesterday.isoformat()})
            after = ctx.remember(result["transaction"], added=True, was=memo.id)
            ctx.salient[ctx.position] = after.category
            return f"Fixed: {after.id} ({after.payee}, {ctx.money(after.amount)}) is now dated {after.day.isoformat()}."

        out.append(_option("amend_date", text, mode, memo.task, build, wild=own_slip(memo)))
    return out


def recategorize_build(ctx: Context, memo: Memo, target: str) -> Any:
    """Record a ``recategorize`` of ``memo`` to ``target`` and return the sentence confirming it."""

    def build(rec: Recorder) -> str:
        # a move shows two categories (from, to): no single topic for "that category"
        _, old, after = record_recategorize(ctx, rec, memo, target)
        return f"Moved {after.id} ({after.payee}, {ctx.money(after.amount)}) from {old} to {target}."

    return build


def _recategorize(ctx: Context) -> list[Option]:
    out = []
    for memo, mode in _targets(ctx):
        if not can_move(ctx, memo):
            continue
        fix = ctx.profile.recategorizations[memo.category]
        if mode == "coref":
            text = f"Actually, {fix.reason}. Put it under {ctx.nick(fix.target)}."
        else:
            text = (
                f"Move the {memo.payee} {txn_noun(memo)} {of_day(memo.day, ctx.today)} to {ctx.nick(fix.target)}; "
                f"{fix.reason}."
            )
        out.append(_option("recategorize", text, mode, memo.task, recategorize_build(ctx, memo, fix.target)))
    return out


def _delete(ctx: Context) -> list[Option]:
    out = []
    for memo, mode in _targets(ctx):
        if not memo.added or not ctx.writable(memo):
            continue
        transfer = not memo.category.startswith("Expenses")
        if mode == "coref":
            text = (
                "Actually, cancel that transfer. Please delete it."
                if transfer
                else "Scratch that: my partner already logged it. Please delete it."
            )
        elif transfer:
            text = f"Please delete the {memo.payee} transfer I added earlier; I changed my mind."
        else:
            text = f"Please delete the {memo.payee} receipt I added earlier; my partner had already logged it."

        def build(rec: Recorder, memo: Memo = memo) -> str:
            _, result = rec.call("delete_transaction", {"transaction_id": memo.id})
            ctx.deleted.add(memo.id)
            ctx.salient[ctx.position] = memo.category
            gone = result["deleted"]
            return (
                f"Deleted {gone['id']} ({gone['payee']}, {ctx.money(memo.amount)} on {gone['date']}). The ledger still "
                "validates."
            )

        out.append(_option("delete", text, mode, memo.task, build))
    return out


def _amend_found(ctx: Context) -> list[Option]:
    """After a search listed several transactions: correct "the one on <day>" (a coreference into the list)."""
    previous = [f for f in ctx.finds if f[0] == ctx.position - 1]
    if not previous or len(previous[-1][3]) < 2:
        return []
    ledger = {t["id"]: t for t in ctx.ledger()}
    rows = [ledger[i] for i in previous[-1][3] if i in ledger]
    days = [r["date"] for r in rows]
    unique = [r for r in rows if days.count(r["date"]) == 1 and r["id"] not in ctx.touched | ctx.amended]
    unique = [r for r in unique if ctx.writable(ctx.memo_from(r, added=False, task=ctx.position - 1))]
    if not unique:
        return []
    row = ctx.pick(unique)
    memo = ctx.memo_from(row, added=False, task=ctx.position - 1)
    new = corrected_amount(ctx, memo.amount)
    text = f"The one {day_phrase(memo.day, ctx.today)} should be {number(new)}, not {number(memo.amount)}."

    def build(rec: Recorder) -> str:
        _, after = record_amend_amount(ctx, rec, memo, new)
        ctx.salient[ctx.position] = after.category
        return (
            f"Done: {after.id} ({after.payee}, {month_day(after.day)}) is now {ctx.money(after.amount)} instead of "
            f"{ctx.money(memo.amount)}."
        )

    return [_option("amend_found", text, "coref", ctx.position - 1, build, wild=(Wild.PICK,))]


def _memo_follow_ups(ctx: Context) -> list[Option]:
    """Questions about a transaction just written or found: its store's other visits, its category's month."""
    out = []
    now = this_month(ctx.today)
    for memo, mode in _targets(ctx):
        if not memo.category.startswith("Expenses"):
            continue
        if mode == "coref":
            text = ctx.pick(
                [
                    "How much have I spent in that category this month, then?",
                    "So what's that category at for this month?",
                    "And how much has that category taken this month?",
                ]
            )
        else:
            text = (
                f"How much have I spent this month in the category of the {memo.payee} {txn_noun(memo)} "
                f"{_which(ctx, memo)}?"
            )
        key = ("spend", memo.category, now.start_iso, now.end_iso)
        out.append(
            _option("memo_category_month", text, mode, memo.task, _spend_build(ctx, now, memo.category), key=key)
        )
        if mode == "coref" and memo.payee in ctx.profile.findable_payees:
            text = ctx.pick(
                [
                    "What else have I bought there this month?",
                    "Have I shopped there any other time this month?",
                    "Any other purchases from that store this month?",
                ]
            )
            key = ("find", memo.payee, now.start_iso, now.end_iso)
            out.append(_option("memo_store_month", text, mode, memo.task, _find_build(ctx, memo.payee, now), key=key))
    return out


def _which(ctx: Context, memo: Memo) -> str:
    return "I added earlier" if memo.added else of_day(memo.day, ctx.today)


def single_options(ctx: Context) -> list[Option]:
    """Every Single-Tool task that fits the conversation so far."""
    out: list[Option] = []
    for make in (
        _balances,
        _spending,
        _list_accounts,
        _find,
        _query,
        _add,
        _amend_amount,
        _amend_date,
        _recategorize,
        _delete,
        _amend_found,
        _payment_balance,
        _memo_follow_ups,
    ):
        out.extend(make(ctx))
    out.extend(pick_options(ctx))
    out.extend(conditional_options(ctx, taken=False))
    out.extend(conditional_follow_ups(ctx, taken=True))
    if ctx.position > 0:
        out.extend(_salient_balance(ctx))
        out.extend(_salient_history(ctx))
    return out
