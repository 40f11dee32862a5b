"""The machinery every ledger task template shares: a gold recorder that replays calls on a live episode, the
session's memory of what was said and written, and the option a template offers for the next task.

Gold observations are *recorded*, never invented: every call node is executed on the session's episode when the
task is built, so a later task's arguments (the id an add returned, the id a search found) come from real results.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal
from typing import Any, Literal

from toolwild.core.task import Action, GoldNode, TaskType, TurnSubtype, answer_node, ask_node
from toolwild.core.wild import Wild
from toolwild.envs.domains.ledger.tools import LedgerEpisode
from toolwild.errors import ToolwildError
from toolwild.synth.providers.ledger.profile import LedgerProfile

__all__ = [
    "Context",
    "GenerationError",
    "Memo",
    "Mode",
    "Option",
    "Recorder",
    "call_key",
    "own_slip",
    "subtype_for",
]

Mode = Literal["first", "coref", "partial", "long"]
"""How a task leans on the conversation: not at all (first turn), a pronoun for something just said, an omitted
detail the context supplies, or an explicit reference to something two or more tasks back."""


class GenerationError(ToolwildError):
    """A gold call failed while recording (a bug in a template, never a property of the data)."""


class Recorder:
    """Builds one task's gold DAG while executing its calls on the session's episode."""

    def __init__(self, episode: LedgerEpisode) -> None:
        self.episode = episode
        self.nodes: list[GoldNode] = []

    def call(self, name: str, arguments: dict[str, Any], deps: tuple[int, ...] = ()) -> tuple[int, Any]:
        """Execute a gold call, record it with its real observation, and return (node index, result)."""
        observation = self.episode.call(name, arguments)
        if not observation.ok:
            raise GenerationError(f"gold call {name}({arguments}) failed: {observation.error}")
        idx = len(self.nodes)
        self.nodes.append(
            GoldNode(
                idx=idx,
                action=Action(name=name, arguments=arguments),
                observation=observation.model_dump(mode="json", include={"ok", "result"}),
                dependency_list=list(deps),
            )
        )
        return idx, observation.result

    def ask(self, tool_name: str, missing: list[str], question: str, reply: str, deps: tuple[int, ...] = ()) -> int:
        """Record a clarification: the gold question and the user's reply."""
        self.nodes.append(ask_node(len(self.nodes), tool_name, missing, question, reply, list(deps)))
        return len(self.nodes) - 1

    def answer(self, text: str) -> None:
        """Record the sink: the final answer, depending on every node nothing else depends on."""
        self.nodes.append(answer_node(self.nodes, text))


@dataclass
class Memo:
    """A transaction the conversation has talked about (added, found, or changed), as of task ``task``."""

    id: str
    day: date
    payee: str
    narration: str
    amount: Decimal
    category: str
    payment: str
    task: int
    added: bool


@dataclass
class Option:
    """One way to fill the next task: its text, type, what it leans on, and how to record its gold."""

    template: str
    type: TaskType
    utterance: str
    mode: Mode
    ref: int | None
    build: Callable[[Recorder], str]
    """Executes the gold calls on the recorder and returns the final answer text."""
    key: tuple[Any, ...] | None = None
    """What the task asks for (e.g. ``("balance", account, None)``): a session never asks the same thing twice."""
    weight: float = 1.0
    """Relative preference; the generic follow-ups that always fit weigh less than the specific ones."""
    fragments: tuple[str, ...] = ()
    """Terse ways to ask the same ("checking balance?"): a user's voice may say one of them instead."""
    wild: tuple[Wild, ...] = ()
    """The wild behaviours the task shows whatever the wording (a conditional, a pick from a list, ...)."""


def option(
    kind: TaskType,
    template: str,
    utterance: str,
    mode: Mode,
    ref: int | None,
    build: Any,
    *,
    key: tuple[Any, ...] | None = None,
    weight: float = 1.0,
    fragments: tuple[str, ...] | list[str] = (),
    wild: tuple[Wild, ...] = (),
) -> Option:
    """An option of a given task type (task modules bind ``kind`` once with ``functools.partial``)."""
    return Option(
        template=template,
        type=kind,
        utterance=utterance,
        mode=mode,
        ref=ref,
        build=build,
        key=key,
        weight=weight,
        fragments=tuple(fragments),
        wild=wild,
    )


def own_slip(memo: Memo) -> tuple[Wild, ...]:
    """The behaviour a correction of ``memo`` shows: a correction of the user's own words when the user gave the
    transaction in this conversation (an add), none when it was already in the books (fixing the books is not
    correcting oneself)."""
    return (Wild.CORRECTION,) if memo.added else ()


def memo_targets(ctx: Context) -> list[tuple[Memo, Mode]]:
    """What a follow-up can refer to: the previous task's single memo (coreference), else an unambiguous earlier one
    (long-range)."""
    out: list[tuple[Memo, Mode]] = []
    if ctx.position == 0:
        return out
    memo = ctx.single_memo(ctx.position - 1)
    if memo:
        out.append((memo, "coref"))
    earlier = [m for m in ctx.earlier_memos() if ctx.unambiguous(m)]
    if earlier:
        out.append((earlier[0], "long"))
    return out


def call_key(name: str, arguments: dict[str, Any]) -> tuple[Any, ...] | None:
    """The key a read call answers under (the same keys templates give their options), None for writes."""
    if name == "get_balance":
        return ("balance", arguments["account"], arguments.get("date"))
    if name == "spending_summary":
        return ("spend", arguments.get("category", "Expenses"), arguments["start_date"], arguments["end_date"])
    if name == "list_accounts":
        return ("accounts", arguments.get("prefix", ""))
    if name == "find_transactions":
        return ("find", arguments.get("payee"), arguments.get("start_date"), arguments.get("end_date"))
    return None


def subtype_for(position: int, mode: Mode, ref: int | None) -> TurnSubtype:
    """The hidden-intent label of a task from how it leans on the conversation."""
    if position == 0:
        return TurnSubtype.FIRST
    if mode == "partial":
        return TurnSubtype.PARTIAL
    if ref is not None and ref <= position - 2:
        return TurnSubtype.LONG_RANGE
    return TurnSubtype.COREFERENTIAL


@dataclass
class Context:
    """What a session has established so far; templates read it to phrase references and pick real targets."""

    episode: LedgerEpisode
    today: date
    rng: random.Random
    profile: LedgerProfile
    """The books' accounts, receipts and payees (:class:`.profile.LedgerProfile`)."""
    chart: str = ""
    """The chart of accounts the session's context shows the agent (``builder.chart_line``)."""
    position: int = 0
    memos: list[Memo] = field(default_factory=list)
    deleted: set[str] = field(default_factory=set)
    touched: set[str] = field(default_factory=set)
    salient: dict[int, str] = field(default_factory=dict)
    """Task index -> the account that task was about (every task has one)."""
    balances: list[tuple[int, str, str, str | None]] = field(default_factory=list)
    """(task, account, balance in the operating currency, as-of date or None)."""
    spends: list[tuple[int, str, Any, str]] = field(default_factory=list)
    """(task, category, Period, total)."""
    finds: list[tuple[int, str, Any, list[str]]] = field(default_factory=list)
    """(task, payee, Period, ids found)."""
    listed: dict[int, list[str]] = field(default_factory=dict)
    """Task index -> the accounts its answer listed in full, in the tool's order (what "the third one" counts)."""
    concepts: dict[int, tuple[int, int]] = field(default_factory=dict)
    """Task index -> (concept chain, step) for concept chats."""
    templates: dict[int, str] = field(default_factory=dict)
    wrote: set[int] = field(default_factory=set)
    """Tasks whose gold calls changed the ledger."""
    amended: set[str] = field(default_factory=set)
    """Transactions whose amount the session already corrected (corrected once, never re-corrected)."""
    ruled: set[str] = field(default_factory=set)
    """Transactions whose amount the assistant worked out from a rule the user set ("everything above $3,000"):
    their amount is never "corrected" (:func:`.common.can_amend`)."""
    moved: set[str] = field(default_factory=set)
    """Transactions the session already recategorized."""
    renamed: dict[str, str] = field(default_factory=dict)
    """Old address -> new one, for transactions addressed by their content (a user's ledger without ``id:``
    metadata): an edit gives such a transaction a new address, and the old one no longer finds it."""
    used: set[Any] = field(default_factory=set)
    """Keys and utterances of the tasks so far (no repeats within a session)."""
    earliest: date = date.min
    """The first day of the ledger (no question reaches before it)."""
    _state_of: Any = field(default=None, repr=False)
    _state: dict[str, Any] = field(default_factory=dict, repr=False)

    # ------------------------------------------------------------------ memory of transactions
    def memo_from(self, txn: dict[str, Any], *, added: bool, task: int | None = None) -> Memo:
        """A memo of a transaction in canonical form (not stored)."""
        postings = txn["postings"]
        category = next(
            (p["account"] for p in postings if p["account"].startswith("Expenses")),
            next((p["account"] for p in postings if Decimal(p["amount"]) > 0), postings[0]["account"]),
        )
        payment = next((p["account"] for p in postings if p["account"] != category), category)
        return Memo(
            id=txn["id"],
            day=date.fromisoformat(txn["date"]),
            payee=txn["payee"],
            narration=txn["narration"],
            amount=max(abs(Decimal(p["amount"])) for p in postings),
            category=category,
            payment=payment,
            task=self.position if task is None else task,
            added=added,
        )

    def remember(self, txn: dict[str, Any], *, added: bool, was: str | None = None) -> Memo:
        """Note a transaction (canonical form) as talked about in the current task (``was``: its address before
        the write that returned it, when that write changed the address)."""
        if was is not None and was != txn["id"]:
            self.renamed[was] = txn["id"]
            for seen in (self.amended, self.moved, self.touched):
                if was in seen:
                    seen.add(txn["id"])
        added = added or any(m.id in (txn["id"], was) and m.added for m in self.memos)
        memo = self.memo_from(txn, added=added)
        self.memos.append(memo)
        if not added:
            self.touched.add(memo.id)
        return memo

    def aliases(self, txn_id: str) -> set[str]:
        """Every address the transaction now at ``txn_id`` had in this session (itself included)."""
        out = {txn_id}
        grew = True
        while grew:
            before = len(out)
            out |= {old for old, new in self.renamed.items() if new in out}
            grew = len(out) > before
        return out

    def unambiguous(self, memo: Memo) -> bool:
        """True when no other live transaction of the conversation has the same payee (so naming it is enough)."""
        return sum(1 for m in self.live_memos() if m.payee == memo.payee) == 1

    def live_memos(self) -> list[Memo]:
        """The latest memo of each transaction still in the ledger, most recently mentioned first."""
        seen: set[str] = set()
        out: list[Memo] = []
        for memo in reversed(self.memos):
            if memo.id in seen:
                continue
            seen.add(memo.id)
            if memo.id not in self.deleted and memo.id not in self.renamed:
                out.append(memo)
        return out

    def memos_of(self, task: int) -> list[Memo]:
        """Live transactions last mentioned in ``task``."""
        return [m for m in self.live_memos() if m.task == task]

    def single_memo(self, task: int) -> Memo | None:
        """The one transaction ``task`` was about, if it was about exactly one (so "it" is unambiguous)."""
        memos = self.memos_of(task)
        return memos[0] if len(memos) == 1 else None

    def salient_targets(self) -> list[tuple[int, str, bool, Mode]]:
        """``(task, account, close, mode)`` for each account a later turn can point back to: the previous task's
        (``close``, coreference) or the first task's (long range, named as "my first question", which only task 0
        can be); in task order. A root of the chart ("Expenses" after a listing of categories) is a group, not an
        account one points back at: a later "how much is in those?" needs nothing the words do not say."""
        out: list[tuple[int, str, bool, Mode]] = []
        for task, account in sorted(self.salient.items()):
            if ":" not in account:
                continue
            close = task == self.position - 1
            if close or task == 0:
                out.append((task, account, close, "coref" if close else "long"))
        return out

    def pointer(self, account: str, close: bool) -> str:
        """How a later turn points at an account an earlier turn was about: by the noun of its kind ("that
        category", "that bank account", "that card"; "the category from my first question" at long range), so the
        words narrow the reference to one root of the chart (``toolwild.core.references.kind_roots``) where "that"
        alone would also fit the other account of a purchase (the card that paid for it)."""
        root = account.split(":", 1)[0]
        if root in ("Expenses", "Income"):
            noun = "category"
        elif account == self.profile.card:
            noun = "card"
        elif root == "Assets":
            noun = "bank account"
        else:
            noun = "account"
        return f"that {noun}" if close else f"the {noun} from my first question"

    def earlier_memos(self) -> list[Memo]:
        """Live transactions last mentioned two or more tasks ago (long-range targets)."""
        return [m for m in self.live_memos() if m.task <= self.position - 2]

    # ------------------------------------------------------------------ the ledger as it is now
    def ledger(self) -> list[dict[str, Any]]:
        """The current canonical transactions (read only: the list is shared until the ledger changes)."""
        return self.state()["ledger"]

    def state(self) -> dict[str, Any]:
        """The episode's state, worked out again only when the ledger changed since the last call.

        Why: templates and the recorder ask for the state several times per task while most tasks write nothing,
        and putting some 150 transactions in canonical form was a fifth of the generation time. The episode hands
        out a new loaded ledger on every write, so its identity says whether the state is still the same.
        """
        loaded = self.episode.ledger()
        if loaded is not self._state_of:
            self._state = self.episode.state()
            self._state_of = loaded
        return self._state

    def seed_targets(self, start: date, end: date) -> list[dict[str, Any]]:
        """Untouched, two-posting expense transactions from the original data in ``[start, end]`` whose payee
        occurs once on its day, so a payee + date search finds exactly one (in the operating currency, at no cost
        or price: the amount a user corrects is one plain number)."""
        ledger = self.ledger()
        mine = {m.id for m in self.memos}
        per_day: dict[tuple[str, str], int] = {}
        for t in ledger:
            per_day[(t["payee"], t["date"])] = per_day.get((t["payee"], t["date"]), 0) + 1
        out = []
        for t in ledger:
            day = date.fromisoformat(t["date"])
            if not start <= day <= end or t["id"] in mine or t["payee"] not in self.profile.findable_payees:
                continue
            if len(t["postings"]) != 2 or per_day[(t["payee"], t["date"])] != 1:
                continue
            if any(p["currency"] != self.profile.currency or "cost" in p or "price" in p for p in t["postings"]):
                continue
            if not any(p["account"].startswith("Expenses") for p in t["postings"]):
                continue
            out.append(t)
        return out

    def pick(self, items: list[Any]) -> Any:
        """A seeded choice."""
        return items[self.rng.randrange(len(items))]

    # ------------------------------------------------------------------ the books' words
    def nick(self, account: str) -> str:
        """How the user says an account."""
        return self.profile.nick(account)

    def the_nick(self, account: str) -> str:
        """The nickname with the article a sentence needs."""
        return self.profile.the_nick(account)

    def money(self, amount: Decimal | str) -> str:
        """An amount in the books' currency, as the answers say it."""
        return self.profile.money(amount)

    def writable(self, memo: Memo) -> bool:
        """Whether the transaction's amount can change, or it can go, without breaking a balance assertion."""
        return self.profile.writable(memo.payment, memo.day) and self.profile.writable(memo.category, memo.day)
