"""Building one ledger session from the templates: a coarse-type pattern filled task by task on a live episode.

Each session gets its own generated ledger (seed stored in ``Session.extra["ledger_seed"]``), or starts from a
user's own ledger (:class:`OwnBooks`: the file's name and SHA-256 stored instead, ``ledger_file`` and
``ledger_sha256``), and four tasks whose coarse
types follow a pattern with a chosen number of instruction transitions (0-3). Tasks are filled by templates
(:mod:`.single`, :mod:`.multi`, :mod:`.clarify`, :mod:`.chat`) that read the session's memory, so later tasks refer
back to earlier ones (coreference, partial information, long-range dependency). Every gold call is executed on a
fresh episode in session order while the task is built, so observations are real and later ids come from earlier
writes; each task stores the canonical ledger state its gold calls leave behind.

Which template fills a position is weighted by a :class:`Balancer`: the counts of what earlier sessions chose, so
the suite's mix stays near its targets. That makes a session depend on the sessions before it; the provider
(:mod:`.provider`) decides which earlier sessions count (those of the same block of 256).
"""

from __future__ import annotations

import hashlib
import random
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Any

from toolwild.core.answers import answer_problems
from toolwild.core.grounding import ungrounded_identifiers
from toolwild.core.hidden_intent import CARRY_OVER, SAME_REQUEST, check_subtypes
from toolwild.core.patterns import BUCKET_CYCLE, Pattern, patterns_with
from toolwild.core.references import ambiguous_references
from toolwild.core.session import Session
from toolwild.core.state_change import expectation
from toolwild.core.task import CoarseType, NodeKind, Task, TaskType, TurnSubtype, shape_problem
from toolwild.core.tool import Tool
from toolwild.core.wild import WILD_KEY, Wild, wild_behaviours
from toolwild.envs.domains.ledger.book import load_ledger_file
from toolwild.envs.domains.ledger.tools import LedgerEpisode
from toolwild.errors import ConfigError, DataError
from toolwild.synth.providers.ledger.chat import chat_options
from toolwild.synth.providers.ledger.clarify import clarify_options
from toolwild.synth.providers.ledger.common import corrected_amount
from toolwild.synth.providers.ledger.multi import multi_options
from toolwild.synth.providers.ledger.own_books import profile_of
from toolwild.synth.providers.ledger.phrasing import number
from toolwild.synth.providers.ledger.picks import SETS_UP_PICKS
from toolwild.synth.providers.ledger.profile import LedgerProfile
from toolwild.synth.providers.ledger.scenario import (
    Context,
    GenerationError,
    Option,
    Recorder,
    call_key,
    subtype_for,
)
from toolwild.synth.providers.ledger.single import single_options
from toolwild.synth.providers.ledger.voice import reasons, topic_of
from toolwild.synth.voice import Voice

__all__ = ["Balancer", "Built", "OwnBooks", "build_session", "chart_line", "gold_findings", "ledger_seed_for"]

_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_OPTIONS: dict[CoarseType, Callable[[Context], list[Option]]] = {
    CoarseType.SINGLE: single_options,
    CoarseType.MULTI: multi_options,
    CoarseType.CLARIFY: clarify_options,
    CoarseType.CHAT: chat_options,
}
_SUBTYPE_TARGET = {TurnSubtype.COREFERENTIAL: 0.42, TurnSubtype.PARTIAL: 0.32, TurnSubtype.LONG_RANGE: 0.26}
_MULTI_TARGET = {TaskType.PARALLEL: 0.45, TaskType.SEQUENTIAL: 0.25, TaskType.MIXED: 0.30}
_MAX_ATTEMPTS = 80
_REASONS = reasons()
_SLIP_RATE = 0.35
_WILD_TARGET = {
    Wild.FRAGMENT: 0.07,
    Wild.CONDITIONAL: 0.11,
    Wild.PICK: 0.09,
    Wild.PARTS: 0.07,
    Wild.CORRECTION: 0.06,
    Wild.BUNDLE: 0.065,
}
"""The share of tasks each wild behaviour is steered towards (above the issue's 5%: a block's draws vary)."""
_WILD_BOOST = 30.0
_FOLLOW_UPS = frozenset(
    {
        "amend_amount",
        "amend_date",
        "amend_missing",
        "amend_and_spend",
        "amend_then_two",
        "category_check",
        "confirm_write",
        "delete",
        "recategorize",
        "recategorize_missing",
        "recategorize_and_balance",
    }
)
"""Templates that act on an earlier write (the heart of a write-back agent): preferred whenever they fit."""


def ledger_seed_for(seed: int, index: int) -> int:
    """The ledger seed of session ``index`` of a suite generated with ``seed``."""
    return seed * 10_000 + index


@dataclass(frozen=True)
class OwnBooks:
    """A user's own ledger that every session starts from, and what the templates know about it.

    Read once per suite (loading and profiling a real ledger takes a while); every session's episode starts from
    a fresh copy of the file and what it includes, so the user's file is never written.
    """

    path: Path
    ref: str
    """How the sessions name the file (``extra["ledger_file"]``; the evaluation opens it relative to the suite)."""
    sha256: str
    """The main file's bytes, pinned in every session: gold recorded on other books does not apply."""
    profile: LedgerProfile

    @classmethod
    def read(cls, path: Path, ref: str | None = None) -> OwnBooks:
        """Load and profile ``path``.

        Raises:
            ConfigError: the file is missing or does not load cleanly (the message names the file, line and
                directive), or it has no purchases to draw accounts from.
        """
        loaded = load_ledger_file(path)
        digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
        profile = profile_of(loaded)
        if not profile.banks:
            raise ConfigError(
                f"ledger {path}: no purchase in {profile.currency} is paid from an Assets or Liabilities account (a "
                "transaction of two postings: an Expenses account and the account that paid), so there is no bank "
                "account or card to make sessions about"
            )
        return cls(Path(path), ref or str(path), digest, profile)

    def episode(self) -> LedgerEpisode:
        """A fresh episode on a copy of the books, "today" being the profile's."""
        return LedgerEpisode(ledger_path=self.path, today=self.profile.today)


class Balancer:
    """Keeps the suite's mix close to its targets by weighting each choice against what is already over-used.

    Only counts are kept, so the state after a set of sessions does not depend on the order they were noted in:
    a resumed run rebuilds it from the sessions already made (:meth:`of_session`).
    """

    def __init__(self) -> None:
        self.subtypes: Counter[TurnSubtype] = Counter()
        self.multi: Counter[TaskType] = Counter()
        self.templates: Counter[str] = Counter()
        self.wild: Counter[str] = Counter()

    def weight(self, option: Option, position: int, *, extra: Balancer | None = None) -> float:
        """How much to prefer ``option`` given the choices so far (``extra``: the current session's)."""
        subtypes = self.subtypes + (extra.subtypes if extra else Counter())
        multi = self.multi + (extra.multi if extra else Counter())
        templates = self.templates + (extra.templates if extra else Counter())
        wild = self.wild + (extra.wild if extra else Counter())
        weight = option.weight / (1 + templates[option.template])
        tasks = sum(templates.values()) + 1
        # the behaviours a real user shows are rarer than the templates that carry them: the further a behaviour is
        # below its share, the more an option showing it (or, for a pick, giving the list it needs) is preferred
        wanted = [*option.wild, *([Wild.PICK] if option.template in SETS_UP_PICKS else [])]
        if wanted:
            need = max((_WILD_TARGET[w] / (wild[w.value] / tasks + 0.005)) ** 4 for w in wanted)
            if need > 1:
                weight *= min(_WILD_BOOST, need)
        if option.template in _FOLLOW_UPS:
            weight *= 2.0
        if position > 0:
            subtype = subtype_for(position, option.mode, option.ref)
            total = sum(subtypes.values()) + 1
            weight *= _SUBTYPE_TARGET[subtype] / ((subtypes[subtype] + 1) / total)
        if option.type.is_multi:
            total = sum(multi.values()) + 1
            weight *= (_MULTI_TARGET[option.type] / ((multi[option.type] + 1) / total)) ** 2
        return weight

    def short_of(self, behaviour: Wild, *, extra: Balancer | None = None) -> bool:
        """Whether the suite so far shows ``behaviour`` in fewer tasks than its target share."""
        tasks = sum(self.templates.values()) + (sum(extra.templates.values()) if extra else 0) + 1
        shown = self.wild[behaviour.value] + (extra.wild[behaviour.value] if extra else 0)
        return shown / tasks < _WILD_TARGET[behaviour]

    def note(self, task: Task, template: str, wild: list[Wild] | list[str] = ()) -> None:  # type: ignore[assignment]
        """Count one chosen task (and the wild behaviours it shows)."""
        self.templates[template] += 1
        self.wild.update(str(w) for w in wild)
        if task.subtype is not TurnSubtype.FIRST:
            self.subtypes[task.subtype] += 1
        if task.type.is_multi:
            self.multi[task.type] += 1

    def add(self, other: Balancer) -> None:
        """Count everything ``other`` counted."""
        self.subtypes.update(other.subtypes)
        self.multi.update(other.multi)
        self.templates.update(other.templates)
        self.wild.update(other.wild)

    @classmethod
    def of_session(cls, session: Session | None) -> Balancer:
        """What one made session counts for (nothing for a session that could not be built).

        Raises:
            DataError: the session does not say which template made each task (it was not made by the ledger
                templates, or its ``ledger_templates`` key was stripped).
        """
        counted = cls()
        if session is None:
            return counted
        templates = session.extra.get("ledger_templates")
        if not isinstance(templates, list) or len(templates) != len(session.tasks):
            raise DataError(
                f"session {session.id!r} does not list the template of each of its {len(session.tasks)} tasks, so "
                "the ledger templates cannot continue after it",
                field="ledger_templates",
            )
        wilds = wild_behaviours(session.extra, len(session.tasks), session=session.id)
        for task, template, wild in zip(session.tasks, templates, wilds, strict=True):
            counted.note(task, str(template), wild)
        return counted


@dataclass
class Built:
    """What building one session gave: the session, or why it could not be built."""

    session: Session | None
    reasons: list[str] = field(default_factory=list)
    """One line per pattern that could not be filled, and the error that ended the session (when it is None)."""


def _build_task(ctx: Context, option: Option) -> tuple[Task, bool]:
    rec = Recorder(ctx.episode)
    writes_before = len(ctx.episode.writes)
    before = ctx.state()  # the previous task's end state (the session's start for the first): the change's base
    answer = option.build(rec)
    rec.answer(answer)
    task = Task(
        utterance=option.utterance,
        type=option.type,
        subtype=subtype_for(ctx.position, option.mode, option.ref),
        gold=rec.nodes,
        **expectation(before, ctx.state()),
    )
    problem = shape_problem(task)
    if problem:
        raise GenerationError(problem)
    return task, len(ctx.episode.writes) > writes_before


def _env_info(rng: random.Random, today: date, chart: str) -> str:
    """The session's context: the date line of the published format and, on the next line, the chart of accounts."""
    clock = f"{rng.randint(8, 21):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}"
    return f"{today.isoformat()} {clock} {_WEEKDAYS[today.weekday()]}\n{chart}"


def chart_line(episode: LedgerEpisode) -> str:
    """The chart of accounts as the session's context gives it to the agent.

    Why: a ledger assistant knows the books' accounts, as a person's accountant does; without them a gold call
    passing ``Expenses:Transport`` for "transport" (or ``Liabilities:US:Chase:Slate`` for "my Slate card" on a
    user's own books) measures guessing. The open accounts at the session's start are exactly what
    ``list_accounts`` answers, so the lookup stays possible and is never needed (about 100 tokens on the built-in
    ledger, 14 accounts).
    """
    return "Ledger accounts: " + ", ".join(sorted(episode.ledger().open_accounts()))


def _value_label(earlier: list[Task], task: Task, context: str = "") -> tuple[Task, list[str]]:
    """The task with the hidden-intent label its values bear out, when the template's label is not and another is;
    with the label check's findings of the task returned (empty when its label holds: :func:`gold_findings` takes
    them instead of checking the same label again).

    A template labels by what it refers to ("my first question" is long range), but the value may have been shown
    again since (then the previous task holds it: coreference). Labels the values cannot decide (a concept chat, an
    omitted amount) keep the template's label.
    """

    def findings(subtype: TurnSubtype) -> list[str]:
        candidate = task.model_copy(update={"subtype": subtype})
        session = Session(id="check", env_info=context, tools=[], tasks=[*earlier, candidate])
        return _label_findings(session, len(earlier))

    own = findings(task.subtype)
    if not own or not earlier:
        return task, own
    for subtype in (TurnSubtype.COREFERENTIAL, TurnSubtype.LONG_RANGE, TurnSubtype.PARTIAL):
        if subtype is not task.subtype and not findings(subtype):
            return task.model_copy(update={"subtype": subtype}), []
    return task, own


def _label_findings(session: Session, index: int) -> list[str]:
    """The label check's findings of task ``index`` (it reads the tasks, the context line and ``extra``)."""
    return [f"{f.subtype.value}: {f.message}" for f in check_subtypes(session, only=index)]


class _DeadEnd(Exception):
    """No template fits the next position of a pattern (the session is retried with another pattern)."""


def gold_findings(session: Session, index: int, *, labels: list[str] | None = None) -> list[str]:
    """What the gold checks say of task ``index`` of a session being built: identifiers the agent was never shown
    (:func:`~toolwild.core.grounding.ungrounded_identifiers`), a hidden-intent label the values do not bear out
    (:func:`~toolwild.core.hidden_intent.check_subtypes`), references with a second reading
    (:func:`~toolwild.core.references.ambiguous_references`): the checks ``toolwild validate --subtypes
    --grounding`` runs; and a final answer that fails the answer check (:func:`~toolwild.core.answers.answer_problems`,
    what ``validate --quality`` counts).

    Each check looks at task ``index`` alone (the earlier tasks as its conversation). ``labels``: the label check's
    findings when already known (:func:`_value_label` has just checked that very label)."""
    out = [f.message for f in ungrounded_identifiers(session, only=index)]
    out += _label_findings(session, index) if labels is None else labels
    out += [f.message for f in ambiguous_references(session, only=index)]
    task = session.tasks[index]
    answers = [n.observation for n in task.gold if n.kind is NodeKind.ANSWER]
    if task.call_nodes and answers and isinstance(answers[-1], str):
        earlier = [n.observation for t in session.tasks[:index] for n in t.call_nodes]
        results = [n.observation for n in task.call_nodes]
        out += [f"answer: {p}" for p in answer_problems(answers[-1], results, earlier)]
    return out


_SLIPS = (
    "{wrong}, sorry, {right}",
    "{wrong} - no wait, {right}",
    "{wrong}... I mean {right}",
    "{wrong}, no, make that {right}",
    "{wrong} (typo, it's {right})",
)
"""How a user corrects an amount they just typed ("42.10 - no wait, 41.20"): the gold passes the second."""


def _typed_amounts(task: Task) -> list[str]:
    """The amounts of the receipts a task's gold adds, as the user types them (``42.10``): what a slip can get
    wrong (a correction of the books' amount already says two amounts, a slip there would read as a third)."""
    out = []
    for node in task.call_nodes:
        amount = node.action.arguments.get("amount")
        if node.name == "add_transaction" and isinstance(amount, int | float):
            out.append(number(Decimal(str(amount))))
    return out


def _slipped(text: str, amounts: list[str], ctx: Context) -> str | None:
    """``text`` with the user first typing a wrong amount and correcting it, or None (no amount it says once)."""
    for right in amounts:
        if len(re.findall(rf"(?<![\d.]){re.escape(right)}(?![\d])", text)) == 1:
            wrong = number(corrected_amount(ctx, Decimal(right)))
            slip = ctx.pick(list(_SLIPS)).format(wrong=wrong, right=right)
            return re.sub(rf"(?<![\d.]){re.escape(right)}(?![\d])", slip, text, count=1)
    return None


def _fragment(text: str, fragments: tuple[str, ...]) -> bool:
    """Whether ``text`` is one of the template's fragments as the voice said it (lower case, no final mark, a word
    after it)."""
    low = text.lower()
    return any(low.startswith(f.lower().rstrip("?.!")) for f in fragments)


def _said(
    ctx: Context,
    voice: Voice,
    option: Option,
    task: Task,
    earlier: list[Task],
    tools: list[Tool],
    context: str,
    *,
    terse: float | None = None,
) -> tuple[Task, list[Wild], list[str]]:
    """The task as the session's user says it: the first realisation of the template's sentence (and of the replies
    to its asks) in the user's voice that passes every gold check, the template's own words last; with the
    behaviours the words show and the findings of the last realisation tried (empty when one passed).

    Some users type an amount wrong and correct it in the same breath (:data:`_SLIPS`); such a realisation is tried
    first when the draw says so, and the task then shows a correction (of the user's own words: the gold passes the
    corrected amount). ``terse``: the chance of a fragment where the template has one (None: the voice's own)."""
    plain = option.utterance
    carry = plain.lower().startswith(CARRY_OVER + SAME_REQUEST)
    texts = voice.realisations(
        plain, topic_of(option.template), fragments=option.fragments, carry=carry, first=not earlier, terse=terse
    )
    asks = [n.idx for n in task.gold if n.kind is NodeKind.ASK and n.user_input is not None]
    replies = {i: voice.reply(task.gold[i].user_input or "") for i in asks}
    tries: list[tuple[str, dict[int, str], bool]] = []
    amounts = _typed_amounts(task) if ctx.rng.random() < _SLIP_RATE else []
    for text in texts[:1] if amounts else ():
        slipped = _slipped(text, amounts, ctx)
        if slipped is not None:
            tries.append((slipped, {i: r[0] for i, r in replies.items()}, True))
        for i, forms in replies.items():
            slipped = _slipped(forms[0], amounts, ctx)
            if slipped is not None:
                tries.append((text, {**{j: r[0] for j, r in replies.items()}, i: slipped}, True))
    tries += [(text, {i: r[0] for i, r in replies.items()}, False) for text in texts]
    tries.append((plain, {i: r[-1] for i, r in replies.items()}, False))
    problems: list[str] = []
    for text, said_replies, slip in tries:
        gold = [
            n.model_copy(update={"user_input": said_replies[n.idx]}) if n.idx in said_replies else n for n in task.gold
        ]
        candidate, labels = _value_label(earlier, task.model_copy(update={"utterance": text, "gold": gold}), context)
        provisional = Session(id="check", env_info=context, tools=tools, tasks=[*earlier, candidate])
        problems = gold_findings(provisional, len(earlier), labels=labels)
        if problems:
            continue
        voice.remember(text)
        wild = list(option.wild)
        if _fragment(text, option.fragments) or (carry and len(re.split(r"(?<=[.!?])\s+", text)[-1].split()) <= 6):
            wild.insert(0, Wild.FRAGMENT)
        if slip and Wild.CORRECTION not in wild:
            wild.append(Wild.CORRECTION)
        return candidate, wild, []
    return task, [], problems


def _fill(
    pattern: Pattern, ctx: Context, balancer: Balancer, tools: list[Tool]
) -> tuple[list[Task], list[Option], list[list[Wild]]]:
    """Build the four tasks of ``pattern`` on the context's episode, or raise :class:`_DeadEnd` (no template fits a
    position, or the one drawn fails a gold check in every wording: its calls already ran on the episode, so the
    attempt ends)."""
    tasks: list[Task] = []
    chosen: list[Option] = []
    wilds: list[list[Wild]] = []
    voice = Voice(ctx.rng, _REASONS)
    pending = Balancer()  # this session's choices count towards the balance as they are made
    for position, coarse in enumerate(pattern):
        ctx.position = position
        options = [
            o for o in _OPTIONS[coarse](ctx) if o.utterance not in ctx.used and (o.key is None or o.key not in ctx.used)
        ]
        if not options:
            raise _DeadEnd(f"no {coarse.value} template fits position {position}")
        weights = [balancer.weight(o, position, extra=pending) for o in options]
        option = ctx.rng.choices(options, weights=weights, k=1)[0]
        task, wrote = _build_task(ctx, option)
        context = f"{ctx.today.isoformat()}\n{ctx.chart}"  # what the final context line says (its clock aside)
        terse = 0.9 if balancer.short_of(Wild.FRAGMENT, extra=pending) else None
        task, wild, problems = _said(ctx, voice, option, task, tasks, tools, context, terse=terse)
        if problems:
            raise _DeadEnd(f"{option.template} at position {position} ({option.utterance!r}): {problems[0]}")
        if wrote:
            ctx.wrote.add(position)
        ctx.templates[position] = option.template
        ctx.used.add(option.utterance)
        if option.key is not None:
            ctx.used.add(option.key)
        for node in task.call_nodes:  # a question already answered by any earlier call is not asked again
            ctx.used.add(call_key(node.name, node.action.arguments))
        pending.note(task, option.template, wild)
        tasks.append(task)
        chosen.append(option)
        wilds.append(wild)
    return tasks, chosen, wilds


def build_session(
    index: int,
    seed: int,
    balancer: Balancer,
    tools: list[Tool],
    fixed: Pattern | None = None,
    *,
    id_prefix: str = "ledger",
    books: OwnBooks | None = None,
) -> Built:
    """Session ``index`` of the suite of ``seed``, weighted by ``balancer`` (read, not changed).

    Args:
        index: the session's place in the suite (its id ``<id_prefix>_<index>``, ledger seed, random stream and
            transition bucket).
        seed: the suite seed.
        balancer: the counts of the earlier sessions that weigh on this one.
        tools: the ledger's tool specs (the same list for every session).
        fixed: forces the pattern of coarse types (retries then vary the templates, not the pattern).
        id_prefix: the suite's name, the session ids' prefix.
        books: a user's own ledger every session starts from (None: the generated ledger of the session's seed).

    Returns:
        The session, or None with the reasons when no pattern could be filled in ``_MAX_ATTEMPTS`` tries or a gold
        call failed (:class:`GenerationError`, a template bug): one session is lost, not the suite.
    """
    rng = random.Random(f"toolwild-ledger-suite:{seed}:{index}")
    ledger_seed = ledger_seed_for(seed, index)
    bucket = BUCKET_CYCLE[index % len(BUCKET_CYCLE)]
    patterns = [fixed] if fixed is not None else patterns_with(bucket)
    failures: list[str] = []
    profile = books.profile if books is not None else LedgerProfile.builtin()
    for _attempt in range(_MAX_ATTEMPTS):
        pattern = rng.choice(patterns)
        episode = books.episode() if books is not None else LedgerEpisode(seed=ledger_seed)
        today = episode.today
        try:
            ctx = Context(episode=episode, today=today, rng=rng, profile=profile, chart=chart_line(episode))
            ctx.earliest = min(date.fromisoformat(t["date"]) for t in ctx.ledger())
            try:
                tasks, chosen, wilds = _fill(pattern, ctx, balancer, tools)
            except _DeadEnd as dead_end:
                failures.append(f"{[c.value for c in pattern]}: {dead_end}")
                continue
            except GenerationError as exc:
                return Built(None, [*failures, f"{[c.value for c in pattern]}: {exc}"])
        finally:
            episode.close()
        source: dict[str, Any] = (
            {"ledger_seed": ledger_seed} if books is None else {"ledger_file": books.ref, "ledger_sha256": books.sha256}
        )
        return Built(_session(f"{id_prefix}_{index}", rng, today, ctx.chart, source, tools, tasks, chosen, wilds))
    return Built(None, [*failures, f"no pattern could be filled in {_MAX_ATTEMPTS} attempts"])


def _session(
    sid: str,
    rng: random.Random,
    today: date,
    chart: str,
    source: dict[str, Any],
    tools: list[Tool],
    tasks: list[Task],
    chosen: list[Option],
    wilds: list[list[Wild]],
) -> Session:
    """The session; ``source`` says which ledger it starts from (its seed, or a user's file and its digest)."""
    extra: dict[str, Any] = {
        **source,
        "ledger_templates": [o.template for o in chosen],
        "ledger_refs": [o.ref for o in chosen],
        WILD_KEY: [[w.value for w in ws] for ws in wilds],
    }
    return Session(
        id=sid,
        env_info=_env_info(rng, today, chart),
        tools=tools,
        tasks=tasks,
        environment="ledger",
        extra=extra,
    )
