"""Value-level checks of hidden-intent subtypes: a label is believed only when the conversation bears it out.

A later task of a session leans on what was said before. Which task it leans on is visible in the values: the gold
calls of a coreferential task use a value that the *previous* task showed and that the task's own words do not
state; a long-range task uses a value shown two or more tasks back and absent from the task before it. So the
check reads only the session's text and gold, never a generator's notes:

- the *needed values* of a task are the scalar argument values of its gold calls that neither its own words (the
  utterance and the user's replies to asks) nor the observations of its own earlier calls contain; a task without
  calls (chat) needs the earlier values its gold answer quotes and its utterance does not;
  (or a value an earlier user named in passing, noted in ``Session.extra["mentioned_values"]`` and believed only
  where that task's words contain it);
- a value *appears in* an earlier task when that task's utterance, replies, gold arguments, observations or answer
  contain it as a whole token (case-insensitive; numbers in their usual spellings).

Rules: ``First Turn`` only at position 0. ``Coreferential Reference``: some needed value appears in task i-1.
``Partial Information``: some needed value appears in an earlier task. ``Long-Range Dependency``: some needed value
appears in a task at least two positions back and neither in task i-1 nor in the task itself.
"""

from __future__ import annotations

import calendar
import functools
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

from toolwild.core.session import Session
from toolwild.core.task import NodeKind, Task, TurnSubtype

__all__ = [
    "ROOT_NOUNS",
    "ROOT_VERBS",
    "SubtypeFinding",
    "TextMemo",
    "ancestors",
    "carries_request",
    "check_subtypes",
    "context_day",
    "day_phrases",
    "mentions",
    "needed_values",
    "scalar_values",
    "shown_text",
    "spoken_names",
    "states",
    "task_text",
]


class TextMemo:
    """Answers already worked out about a text: per text (and context), a dict of value -> answer, for the last
    ``size`` texts asked about (least recently used dropped), each dict holding at most ``per_text`` answers.

    Why: the checks of gold (the label check, the reference check, grounding) ask the same few questions of the
    same conversation text again and again: for each candidate wording while a task is built, again when the
    session is verified, and again when the suite's quality is counted. Each answer is a handful of regular
    expression searches; a kept one is a dict lookup. Bounded both ways, so memory stays flat in the number of
    sessions (a text is kept once per entry, as the key)."""

    def __init__(self, size: int = 512, per_text: int = 4096) -> None:
        self.size = size
        self.per_text = per_text
        self._texts: OrderedDict[Hashable, dict[Hashable, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._texts)

    def clear(self) -> None:
        with self._lock:
            self._texts.clear()

    def answer(self, key: Hashable, value: Any, work: Callable[[], Any]) -> Any:
        """The kept answer about ``value`` in ``key``'s text, or ``work()`` (then kept). A value that cannot be a
        key (unhashable) is worked out every time."""
        try:
            slot = (type(value), value)
            hash(slot)
        except TypeError:
            return work()
        with self._lock:
            answers = self._texts.get(key)
            if answers is None:
                answers = self._texts[key] = {}
                if len(self._texts) > self.size:
                    self._texts.popitem(last=False)
            else:
                self._texts.move_to_end(key)
            if slot in answers:
                return answers[slot]
        found = work()
        with self._lock:
            if len(answers) >= self.per_text:
                answers.clear()
            answers[slot] = found
        return found


_MENTIONS = TextMemo()
_STATES = TextMemo()


@dataclass(frozen=True)
class SubtypeFinding:
    """A task whose label the values do not support, and why."""

    task_index: int
    subtype: TurnSubtype
    message: str
    kind: str = "label"
    """``label``: the values do not bear the label out; ``ambiguous``: the task points at an earlier value that is
    not the only one answering it (:func:`toolwild.core.references.ambiguous_references`)."""


def scalar_values(value: Any) -> list[Any]:
    """The scalar leaves of a JSON value (strings, numbers; booleans and nulls carry no reference)."""
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in scalar_values(v)]
    if isinstance(value, list):
        return [leaf for v in value for leaf in scalar_values(v)]
    if isinstance(value, bool) or value is None:
        return []
    if isinstance(value, str):
        return [value] if value.strip() else []
    if isinstance(value, int | float):
        return [value]
    return []


def _spellings(value: Any) -> list[str]:
    """How a value may be written: as given, and a number (or numeric string, as money often is) also with two
    decimals and with thousands separators ("13000.00" is said "$13,000.00")."""
    out: set[str] = set()
    if isinstance(value, str):
        out.add(value.strip().lower())
        try:
            number = float(value.replace(",", ""))
        except ValueError:
            return sorted(out)
        if not re.fullmatch(r"-?[\d,]+(\.\d+)?", value.strip()):
            return sorted(out)
        value = number
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int):
        out |= {str(value), f"{value:,}"}
    else:
        out |= {repr(value), f"{value:.2f}", f"{value:,.2f}"}
    if abs(value) >= 1000 or isinstance(value, float):
        out.add(f"{value:,.2f}")
    return sorted(out)


def mentions(text: str, value: Any) -> bool:
    """Whether ``text`` contains ``value`` as a whole token (so 25 is not found inside 2024-07-25 or O-1025).

    Answers are kept per text (:class:`TextMemo`): the same question costs a lookup the second time."""
    return bool(_MENTIONS.answer(text, value, lambda: _mentions(text, value)))


def _mentions(text: str, value: Any) -> bool:
    low = text.lower()
    for spelling in _spellings(value):
        if spelling and re.search(rf"(?<![\w.\-/:]){re.escape(spelling)}(?![\w\-/]|:\w|\.\d)", low):
            return True
    return False


_HIERARCHICAL = re.compile(r"(?<![\w:])[A-Za-z][\w-]*(?::[A-Za-z0-9][\w-]*)+")
"""A hierarchical name as a context lists it (``Assets:Bank:Checking``; not a clock time, not "Date: ...")."""


def _humanize(part: str) -> str:
    """``CreditCard`` -> ``credit card``, ``Opening-Balances`` -> ``opening balances``."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", part).replace("_", " ").replace("-", " ")
    return " ".join(spaced.lower().split())


def spoken_names(name: str) -> set[str]:
    """How a person says a hierarchical name: its last part in words ("checking", "credit card"), or its last two
    parts ("chase slate") where the last alone is not distinctive."""
    parts = name.split(":")
    out = {_humanize(parts[-1])}
    if len(parts) >= 2:
        out.add(_humanize(" ".join(parts[-2:])))
    return {n for n in out if n}


ROOT_NOUNS: dict[str, tuple[str, ...]] = {
    "category": ("Expenses", "Income"),
    "card": ("Liabilities",),
    "bank account": ("Assets",),
}
"""How people name the top of a chart of accounts (Beancount's roots): "categories" are Expenses (or Income)
accounts, "the card" a Liabilities one, "bank accounts" Assets ones. ("Account" alone names nothing: Beancount
calls every one of them an account.) The words "which categories do I have" state the root ``Expenses``;
"that category" narrows a reference to names under it (:func:`toolwild.core.references.kind_roots`)."""


ROOT_VERBS: dict[str, tuple[str, ...]] = {"owe": ("Liabilities",)}
"""Verbs that say which root a pointed-at account is under: what one "owes" on is a Liabilities account."""


@functools.lru_cache(maxsize=256)
def _names_in(context: str) -> frozenset[str]:
    """The hierarchical names a context lists, and their parents (``Expenses:Food`` of ``Expenses:Food:Groceries``).
    Kept for the last contexts asked about (a session asks about its one context line thousands of times)."""
    out: set[str] = set()
    for name in _HIERARCHICAL.findall(context):
        parts = name.split(":")
        out |= {":".join(parts[:k]) for k in range(2, len(parts) + 1)}
    return frozenset(out)


@functools.lru_cache(maxsize=256)
def _roots_in(context: str) -> frozenset[str]:
    return frozenset(name.split(":", 1)[0] for name in _HIERARCHICAL.findall(context))


@functools.lru_cache(maxsize=4096)
def _spoken(name: str) -> frozenset[str]:
    return frozenset(spoken_names(name))


def _says(text: str, words: str) -> bool:
    """``words`` as a whole phrase of ``text``, in the singular or the plural ("restaurants" says "Restaurant",
    "groceries" says "Groceries")."""
    stem = words[:-3] + "y" if words.endswith("ies") else words.removesuffix("s")
    forms = {words, stem, stem + "s", stem[:-1] + "ies" if stem.endswith("y") else stem + "es"}
    return any(re.search(rf"(?<![\w-]){re.escape(f)}(?![\w-])", text) for f in forms if f)


_ISO_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


def _day(value: Any) -> date | None:
    if isinstance(value, str) and _ISO_DAY.fullmatch(value.strip()):
        try:
            return date.fromisoformat(value.strip())
        except ValueError:
            return None
    return None


def day_phrases(day: date, today: date) -> list[str]:
    """How a person names ``day`` when today is ``today``: "March 22", "the end of March", "today", "yesterday",
    "last month" (its first or last day), "this month", "this year" (January 1)."""
    month = calendar.month_name[day.month].lower()
    out = [f"{month} {day.day}", f"{day.day} {month}"]
    if day == today:
        out += ["today", "now", "so far"]
    if day == today - timedelta(days=1):
        out.append("yesterday")
    month_end = (day + timedelta(days=1)).day == 1
    if day.day == 1 or month_end:
        out += [month] if day.year == today.year or (today - day).days < 300 else [f"{month} {day.year}"]
        out.append(f"end of {month}" if month_end else f"start of {month}")
    this_month = today.replace(day=1)
    last_end = this_month - timedelta(days=1)
    before_end = last_end.replace(day=1) - timedelta(days=1)
    if day == this_month:
        out.append("this month")
    if day in (last_end.replace(day=1), last_end):
        out.append("last month")
    if day in (before_end.replace(day=1), before_end):
        out.append("month before last")
    if day == date(today.year, 1, 1):
        out += ["this year", "since january"]
    return out


def context_day(context: str) -> date | None:
    """The session's "today": the first ISO date of its context line (``2024-07-11 22:11:58 Thursday``)."""
    found = _ISO_DAY.search(context)
    return _day(found.group(0)) if found else None


def states(text: str, value: Any, context: str = "") -> bool:
    """Whether ``text`` states ``value`` (see :func:`_states`); answers are kept per text and what the context says
    (:class:`TextMemo`, :func:`_context_key`)."""
    return bool(_STATES.answer((text, _context_key(context)), value, lambda: _states(text, value, context)))


@functools.lru_cache(maxsize=256)
def _context_key(context: str) -> tuple[bool, str | None, tuple[str, ...]]:
    """What :func:`_states` reads of a context: whether there is one, its first ISO date (the session's "today")
    and the hierarchical names it lists. Two contexts alike in these get the same answers, so they share them: a
    generator checks a task against the context's date and chart while it builds it, and the finished session
    (whose context line adds the clock and the weekday) is checked again with the same questions."""
    found = _ISO_DAY.search(context)
    return bool(context), found.group(0) if found else None, tuple(_HIERARCHICAL.findall(context))


def _states(text: str, value: Any, context: str = "") -> bool:
    """Whether ``text`` states ``value``: it contains it (:func:`mentions`); or ``value`` is a date the words name
    relative to the context's day (:func:`day_phrases`: "today's receipt" states today, "last month" its first and
    last day); or ``value`` is a hierarchical name the session's ``context`` lists (an account of the chart the
    system message shows) and the text says it the way people do, by its last part ("my checking balance" states
    ``Assets:Bank:Checking``), where no other name of the context is said that way. A date also counts as stated
    when the words give it in parts: its day as an ordinal ("the 14th") and its month's name. So a reference is believed
    only where the words leave it open."""
    if mentions(text, value):
        return True
    if not isinstance(value, str) or not context:
        return False
    day, today = _day(value), context_day(context)
    if day is not None:
        low = text.lower()
        if today is not None and any(_says(low, p) for p in day_phrases(day, today)):
            return True
        # a date given in parts ("the 14th", then "March"): its day's ordinal and its month, anywhere in the words
        month = calendar.month_name[day.month].lower()
        return today is not None and bool(re.search(rf"\b{day.day}(?:st|nd|rd|th)\b", low)) and _says(low, month)
    low = text.lower()
    if value in _roots_in(context):  # a root, by the plural of its kind ("my spending categories": Expenses)
        plurals = [
            n[:-1] + "ies" if n.endswith("y") else n + "s" for n, roots in ROOT_NOUNS.items() if roots[0] == value
        ]
        return any(re.search(rf"(?<![\w-]){p}(?![\w-])", low) for p in plurals)
    names = _names_in(context)
    if value not in names:
        return False
    for spoken in spoken_names(value):
        if _says(low, spoken) and not any(spoken in _spoken(o) for o in names if o != value):
            return True
    return False


def task_text(task: Task) -> str:
    """What the user said in a task: the utterance and every reply to an ask."""
    replies = [n.user_input for n in task.gold if n.kind is NodeKind.ASK and n.user_input]
    return "\n".join([task.utterance, *replies])


def shown_text(task: Task) -> str:
    """Everything a task puts into the conversation."""
    parts = [task_text(task)]
    for node in task.gold:
        if node.kind is NodeKind.CALL:
            parts.append(json.dumps(node.action.arguments, ensure_ascii=False))
        parts.append(node.observation if isinstance(node.observation, str) else json.dumps(node.observation))
    return "\n".join(parts)


def needed_values(
    task: Task, earlier: list[Task] | None = None, named: list[list[Any]] | None = None, *, context: str = ""
) -> list[Any]:
    """Values a task needs from the conversation before it (see the module docstring).

    ``named``: per earlier task, values its user named in passing (a generator's note, used only where that
    task's words really contain them); a chat task may need those too. ``context``: the session's context line
    (:attr:`Session.env_info`): a name it lists that the task's words say (:func:`states`) is not needed.
    """
    own = task_text(task)
    calls = task.call_nodes
    if not calls:
        answers = [str(n.observation) for n in task.gold if n.kind is NodeKind.ANSWER]
        pool = [v for t in earlier or [] for n in t.call_nodes for v in scalar_values(n.action.arguments)]
        pool += [v for t in earlier or [] for n in t.call_nodes for v in scalar_values(n.observation)]
        for t, values in zip(earlier or [], named or [], strict=False):
            pool += [v for v in scalar_values(values) if mentions(task_text(t), v)]
        # a name of the context an earlier user said ("my checking account" says Assets:Bank:Checking)
        pool += [n for t in earlier or [] for n in sorted(_names_in(context)) if states(task_text(t), n, context)]
        out = [v for v in pool if any(states(a, v, context) for a in answers) and not states(own, v, context)]
        return list(dict.fromkeys(out))
    out: list[Any] = []
    for node in calls:
        seen = "\n".join(
            json.dumps(task.gold[a].observation)
            for a in ancestors(task, node.idx)
            if task.gold[a].kind is NodeKind.CALL
        )
        for value in scalar_values(node.action.arguments):
            if not states(own, value, context) and not mentions(seen, value) and value not in out:
                out.append(value)
    return out


def ancestors(task: Task, idx: int) -> set[int]:
    """The gold nodes node ``idx`` depends on, directly or not."""
    out: set[int] = set()
    stack = list(task.gold[idx].dependency_list)
    while stack:
        i = stack.pop()
        if i not in out:
            out.add(i)
            stack.extend(task.gold[i].dependency_list)
    return out


CARRY_OVER = ("and ", "what about ", "how about ", "now ")
"""How a fragment that leaves its request out starts ("And Beijing?", "What about the credit card?"): eight words
at most, so "and" opens a fragment, not a new request."""
SAME_REQUEST = ("same question for ", "same for ", "same again")
"""How a longer turn says it repeats the previous request ("Same question for utilities, and add ...")."""


def carries_request(task: Task, earlier: list[Task]) -> bool:
    """Whether a task leaves out *what* to do and takes it from the turn before: its words (or their last sentence,
    after an aside) are a fragment (:data:`CARRY_OVER`) or say so (:data:`SAME_REQUEST`), and the previous task
    called every tool its gold calls.

    Why: "What about the credit card?" after a balance question is Partial Information by the published
    definition (the user gives part of the request, the conversation the rest), yet it needs no earlier *value*:
    the request itself is what carries over, and the tools show it.
    """
    words = task.utterance.strip().lower()
    # the fragment may follow an aside ("The landlord wants the deposit soon. And savings?"): its last sentence
    last = re.split(r"(?<=[.!?])\s+", words)[-1]
    fragment = any(w.startswith(CARRY_OVER) and len(w.split()) <= 8 for w in {words, last})
    if not earlier or not task.call_nodes or not (fragment or words.startswith(SAME_REQUEST)):
        return False
    before = {n.name for n in earlier[-1].call_nodes}
    return all(n.name in before for n in task.call_nodes)


def check_subtypes(session: Session, *, only: int | None = None) -> list[SubtypeFinding]:
    """Every task whose hidden-intent label its values do not bear out (empty when all labels hold); ``only``: the
    findings of that task alone (a generator checking the task it just built skips the work on the others)."""
    findings: list[SubtypeFinding] = []
    shown = [shown_text(t) for t in session.tasks]
    for i, task in enumerate(session.tasks):
        if only is not None and i != only:
            continue
        if i == 0:
            if task.subtype is not TurnSubtype.FIRST:
                findings.append(SubtypeFinding(i, task.subtype, "the first task must be First Turn"))
            continue
        if task.subtype is TurnSubtype.FIRST:
            findings.append(SubtypeFinding(i, task.subtype, "only the first task can be First Turn"))
            continue
        named = session.extra.get("mentioned_values")
        needed = needed_values(
            task, session.tasks[:i], named if isinstance(named, list) else None, context=session.env_info
        )
        where = {repr(v): [j for j in range(i) if states(shown[j], v, session.env_info)] for v in needed}
        if task.subtype is TurnSubtype.COREFERENTIAL:
            ok = any(i - 1 in found for found in where.values())
            want = "a value the previous task showed"
        elif task.subtype is TurnSubtype.PARTIAL:
            ok = any(where.values()) or carries_request(task, session.tasks[:i])
            want = "a value an earlier task showed, or the previous request carried over by a fragment"
        else:
            ok = any(found and max(found) <= i - 2 for found in where.values())
            want = "a value shown two or more tasks back and not in the previous task"
        if not ok:
            detail = ", ".join(f"{k} in tasks {v}" for k, v in where.items()) or "none"
            findings.append(
                SubtypeFinding(i, task.subtype, f"needs {want}; needed values and where they appear: {detail}")
            )
    return findings
