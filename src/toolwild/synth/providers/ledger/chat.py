"""Chat tasks: answered from the conversation or general knowledge, with no tool call.

A chat after a write ("Is that category right?") is the interesting case: everything needed is already in the
history (the add's observation), so calling a tool again is a Wrong Refusal in the published taxonomy.
"""

from __future__ import annotations

from decimal import Decimal
from functools import partial
from typing import Any

from toolwild.core.task import TaskType
from toolwild.core.wild import Wild
from toolwild.synth.providers.ledger.catalog import ways
from toolwild.synth.providers.ledger.common import txn_noun
from toolwild.synth.providers.ledger.conditionals import conditional_follow_ups
from toolwild.synth.providers.ledger.picks import ORDINALS, mentioned_two
from toolwild.synth.providers.ledger.scenario import Context, Mode, Option, Recorder, memo_targets, option

__all__ = ["chat_options"]

_ROOT_EXPLANATIONS = {
    "Assets": "an asset account: money you have. Its balance is positive and goes up when money comes in.",
    "Liabilities": "a liability account: money you owe. Beancount shows it as a negative balance that shrinks as you "
    "pay it off.",
    "Expenses": "an expense category: it collects what you spend on one kind of thing, and only ever grows "
    "(refunds aside).",
    "Income": "an income account: where money comes from. It is negative in Beancount because money flows out of it "
    "into your accounts.",
    "Equity": "an equity account: it holds the opening balances the books started from.",
}

_option = partial(option, TaskType.CHAT)


_ANSWER_OPENERS = (
    "",
    "",
    "Good question. ",
    "Sure. ",
    "Happy to explain. ",
    "Short version: ",
    "Of course. ",
    "Right, so: ",
    "Glad you asked. ",
    "No problem. ",
    "Here's how it works. ",
    "Let me put it simply. ",
)
_ANSWER_CLOSERS = (
    "",
    "",
    " Anything else you'd like to look at?",
    " Let me know if you want more detail.",
    " Shall I pull up the entries behind it?",
    " Happy to go deeper on any of this.",
    " Just ask if something there looks off.",
    " Want me to check any figures next?",
    " I can walk you through an example if that helps.",
)


def framed(ctx: Context, text: str) -> str:
    """A chat answer as an assistant says it to this user: the same content, with a varied first and last word
    (a training set that answers every user in one fixed sentence teaches a template, not a conversation)."""
    return f"{ctx.pick(list(_ANSWER_OPENERS))}{text}{ctx.pick(list(_ANSWER_CLOSERS))}"


def _answer(ctx: Context, text: str, account: str, concept: tuple[int, int] | None = None) -> Any:
    def build(rec: Recorder) -> str:
        ctx.salient[ctx.position] = account
        if concept is not None:
            ctx.concepts[ctx.position] = concept
        return framed(ctx, text)

    return build


def _concepts(ctx: Context) -> list[Option]:
    chains = ctx.profile.concept_chains
    if ctx.position == 0:
        out = []
        if chains:
            chain = ctx.rng.randrange(len(chains))
            concept = chains[chain][0]
            build = _answer(ctx, concept.answer, concept.account, (chain, 0))
            out.append(_option("concept", ctx.pick(ways(concept.question)), "first", None, build))
        if ctx.profile.greetings:
            greeting = ctx.pick(list(ctx.profile.greetings))
            build = _answer(ctx, greeting.reply, greeting.account)
            out.append(_option("greeting", ctx.pick(ways(greeting.text)), "first", None, build))
        return out
    previous = ctx.concepts.get(ctx.position - 1)
    if previous is None:
        return []
    chain, step = previous
    if step + 1 >= len(chains[chain]):
        return []
    concept = chains[chain][step + 1]
    build = _answer(ctx, concept.answer, concept.account, (chain, step + 1))
    return [_option("concept_next", ctx.pick(ways(concept.question)), "coref", ctx.position - 1, build)]


def _category_check(ctx: Context) -> list[Option]:
    out = []
    for memo, mode in memo_targets(ctx):
        if not memo.category.startswith("Expenses"):
            continue
        text = (
            ctx.pick(
                [
                    "Is that category right?",
                    "Wait, is that the right category for it?",
                    "Hmm, did that land in the right category?",
                    "Does that category actually make sense for it?",
                    "Is that really where it belongs, category-wise?",
                ]
            )
            if mode == "coref"
            else f"Did the {memo.payee} {txn_noun(memo)} end up in the right category?"
        )
        same = ctx.aliases(memo.id)
        moved = any(m.id in same and m.category != memo.category for m in ctx.memos)
        usual = {r.payee: r.account for r in ctx.profile.receipts}
        if moved:
            reason = "that's where you asked me to move it"
        elif not ctx.profile.narration_reasons:
            reason = (
                f"that's where your {memo.payee} purchases usually go"
                if usual.get(memo.payee) == memo.category
                else f"that's the category for {ctx.nick(memo.category)}"
            )
        elif memo.category in ctx.profile.recategorizations and memo.narration:
            reason = f"it's a {memo.narration.lower()} purchase, which is what {ctx.nick(memo.category)} is for"
        else:
            reason = f"that's the category for {ctx.nick(memo.category)}"
        answer = (
            f"Yes: {memo.id} ({memo.payee}, {ctx.money(memo.amount)}) is booked to {memo.category}, and {reason}. "
            "If it was really something else, tell me and I'll move it."
        )
        build = _answer(ctx, answer, memo.category)
        key = ("check", memo.id, memo.category)
        out.append(_option("category_check", text, mode, memo.task, build, key=key))
    return out


def _confirm_write(ctx: Context) -> list[Option]:
    task = ctx.position - 1
    if ctx.position == 0 or task not in ctx.wrote:
        return []
    memos = ctx.memos_of(task)
    ids = ", ".join(m.id for m in memos) or "the change"
    text = ctx.pick(
        [
            "Great, so that's saved in the ledger now?",
            "And that's actually written to the file?",
            "Is that saved for real now, or still pending?",
            "Did that go into the file already?",
            "So the ledger on disk has that change now?",
            "Just to be sure: that change is stored, yes?",
            "Nothing else I need to do to keep that change?",
        ]
    )
    answer = (
        f"Yes. {ids} {'is' if len(memos) <= 1 else 'are'} saved: the file was only replaced after beancount loaded "
        "the new version with no errors, so the ledger still validates."
    )
    build = _answer(ctx, answer, ctx.salient.get(task, "Expenses"))
    return [_option("confirm_write", text, "coref", task, build, key=("confirm", task))]


def _recall(ctx: Context) -> list[Option]:
    out = []
    if ctx.position == 0:
        return out
    # only what was answered two or more turns ago: asking again right after the answer is no real question
    for task, account, value, as_of in ctx.balances[-1:]:
        mode: Mode = "long"
        if as_of is not None or account.startswith("Expenses") or task > ctx.position - 2:
            continue
        text = f"Sorry, what was my {ctx.nick(account)} balance again?"
        if account.startswith("Liabilities"):
            answer = f"When I checked, you owed {ctx.money(-Decimal(value))} on {ctx.the_nick(account)}."
        else:
            answer = f"When I checked, {ctx.nick(account)} was at {ctx.money(value)}."
        out.append(_option("recall_balance", text, mode, task, _answer(ctx, answer, account), key=("recall", task)))
    for task, category, period, total in ctx.spends[-1:]:
        if task > ctx.position - 2:
            continue
        mode = "long"
        text = f"Remind me, how much was {ctx.nick(category)} for {period.name}?"
        answer = f"{ctx.money(total)} on {ctx.nick(category)} in {period.name}."
        out.append(_option("recall_spending", text, mode, task, _answer(ctx, answer, category), key=("recall", task)))
    return out


def _explain_salient(ctx: Context) -> list[Option]:
    """The always-available follow-up: what kind of account an earlier task was about."""
    out = []
    for task, account, close, mode in ctx.salient_targets():
        root = account.split(":", 1)[0]
        if root not in _ROOT_EXPLANATIONS:
            continue
        pointer = ctx.pointer(account, close=close)
        text = ctx.pick(
            [
                f"What exactly is {pointer}?",
                f"What kind of account is {pointer}, exactly?",
                f"Can you explain what {pointer} is?",
                f"I never really understood {pointer}. What is that?",
                f"In plain words, what is {pointer}?",
            ]
        )
        if close and ctx.rng.random() < 0.5:
            text = "By the way, " + text[:1].lower() + text[1:] if not text.startswith("I ") else text
        answer = f"{account} is {_ROOT_EXPLANATIONS[root]}"
        build = _answer(ctx, answer, account)
        out.append(_option("explain_account", text, mode, task, build, key=("explain", account), weight=0.35))
    return out


_ROOTS_ANSWER = (
    "Beancount has five kinds: Assets (what you have), Liabilities (what you owe), Income (where money comes from), "
    "Expenses (where it goes) and Equity (the opening balances). Every transaction moves money between them and "
    "sums to zero."
)


def _follow_ups(ctx: Context) -> list[Option]:
    """Questions about the account the previous task was about: they keep runs of chat turns possible (the
    published design puts up to four chats in a row) while still leaning on that turn (coreference)."""
    task = ctx.position - 1
    account = ctx.salient.get(task)
    if ctx.position == 0 or account is None or ":" not in account:
        return []  # a root ("Expenses") is a group, not an account whose entries one fixes
    root = account.split(":", 1)[0]
    fix = (
        f"Tell me which entry and what is wrong (amount, date or category) and I'll amend it in place; the ledger "
        f"is checked with beancount before the change to {account} is saved, so a mistake cannot slip in."
    )
    pointer = ctx.pointer(account, close=True)
    roots = _option(
        "account_kinds",
        ctx.pick(
            [
                f"And what other kinds of accounts are there besides {pointer}?",
                f"What other types of account exist apart from {pointer}?",
                f"Besides {pointer}, what kinds of accounts does Beancount have?",
                f"How many kinds of accounts are there, other than {pointer}?",
                f"Is {pointer} one of several kinds of account? Which are the others?",
            ]
        ),
        "coref",
        task,
        _answer(ctx, f"{account} is {_ROOT_EXPLANATIONS.get(root, 'one kind of account.')} {_ROOTS_ANSWER}", account),
        key=("roots",),
        weight=0.5,
    )
    fixing = _option(
        "how_to_fix",
        ctx.pick(
            [
                f"If I spot a wrong entry in {pointer}, how do I get it fixed?",
                f"What if one of the entries in {pointer} is wrong?",
                f"Say an entry in {pointer} is wrong: what do I do?",
                f"How would I correct a mistake in {pointer}?",
                f"Who fixes a bad entry in {pointer}, you or me?",
            ]
        ),
        "coref",
        task,
        _answer(ctx, fix, account),
        key=("fix", account),
        weight=0.5,
    )
    return [roots, fixing]


def _explain_picked(ctx: Context) -> list[Option]:
    """What kind of account the k-th of the two the previous task put side by side is ("the second one I
    mentioned")."""
    named = mentioned_two(ctx) if ctx.position > 0 else []
    if not named:
        return []
    k = ctx.rng.randrange(2)
    account = named[k]
    root = account.split(":", 1)[0]
    if root not in _ROOT_EXPLANATIONS:
        return []
    which = ORDINALS[k]
    text = ctx.pick(
        [
            f"The {which} one I mentioned: what kind of account is that, exactly?",
            f"What sort of account is the {which} of the two?",
        ]
    )
    build = _answer(ctx, f"{account} is {_ROOT_EXPLANATIONS[root]}", account)
    return [_option("pick_explain", text, "coref", ctx.position - 1, build, weight=5.0, wild=(Wild.PICK,))]


def chat_options(ctx: Context) -> list[Option]:
    """Every Chat task that fits the conversation so far."""
    out: list[Option] = []
    for make in (_concepts, _category_check, _confirm_write, _recall, _explain_salient, _follow_ups, _explain_picked):
        out.extend(make(ctx))
    out.extend(conditional_follow_ups(ctx, taken=False))
    return out
