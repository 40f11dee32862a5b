"""References a later task makes to earlier ones, and when such a reference is ambiguous.

A user who says "the same units as just now" points at a span of the conversation (the previous task) and a name
(``units``). The reference is only fair when exactly one distinct value answers it there: if the previous task both
asked to restock 3 units and got back a stock level of 19 units, "the same units" has two candidates, and a gold call
that picks one of them is a guess. A wording can narrow the candidates by naming their source:

- the *channel*: what the user asked for or gave (the call's arguments and the user's own words; marker phrases
  such as "I asked for") or what came back (the call's results; "came back with");
- the *call*: the tool's name in words ("the restock").

The generator words references with these markers (:class:`Pointer`), and the checker
(:func:`ambiguous_references`) reads them back from the text alone, so any suite can be checked, published ones
included.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence, Set
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, Literal

from toolwild.core.answers import decoded, observation_result
from toolwild.core.hidden_intent import (
    ROOT_NOUNS,
    ROOT_VERBS,
    SubtypeFinding,
    carries_request,
    needed_values,
    shown_text,
    states,
    task_text,
)
from toolwild.core.session import Session
from toolwild.core.task import NodeKind, Task, TurnSubtype
from toolwild.core.tool import Tool

__all__ = [
    "AMBIGUOUS_REFERENCE",
    "ARG_MARKERS",
    "FIRST_MARKERS",
    "KEY_WORDS",
    "RESULT_MARKERS",
    "Candidate",
    "Pointer",
    "ambiguous_references",
    "anchors",
    "candidates",
    "channels_named",
    "humanize",
    "key_matches",
    "key_words",
    "kind_roots",
    "leaves",
    "picked",
    "resolve",
    "result_key",
    "same_value",
    "singular",
    "span_of",
]

AMBIGUOUS_REFERENCE = "ambiguous_reference"
"""Why a generated task attempt was dropped when more than one earlier value answers its reference."""
ARG_MARKERS = ("i asked for", "i gave", "i wanted", "i said", "same again")
"""Phrases that point at what the user asked for (a call's arguments, the user's words). "The same again" repeats a
request, so it means the request's arguments, never what came back."""
RESULT_MARKERS = ("came back with", "you got back", "it returned", "it reported")
"""Phrases that point at what a call gave back (its result)."""
FIRST_MARKERS = ("my first request", "my first question", "the first thing i asked")
"""Phrases that point a long-range reference at the first task only."""


KEY_WORDS: dict[str, tuple[str, ...]] = {"paid": ("payment",), "charged": ("payment",)}
"""Verbs that name the parameter a value stood under: "the account I paid that with" is a payment account."""


def kind_roots(text: str) -> set[str]:
    """The roots the reference nouns of ``text`` narrow to ("that category" -> Expenses, Income; see
    :data:`toolwild.core.hidden_intent.ROOT_NOUNS`). Only a pointing noun phrase counts ("that category", "the
    card"), never one that names its thing ("my Slate card")."""
    low = text.lower()
    out: set[str] = set()
    for noun, roots in ROOT_NOUNS.items():
        if re.search(rf"\b(?:that|this|the|same)\s+(?:right\s+|wrong\s+|same\s+)?{noun}\b", low):
            out |= set(roots)
    for verb, roots in ROOT_VERBS.items():
        if re.search(rf"\b{verb}\b", low):
            out |= set(roots)
    return out


def key_words(text: str) -> set[str]:
    """The parameter words the verbs of ``text`` name ("I paid that with" -> ``payment``; :data:`KEY_WORDS`)."""
    low = text.lower()
    return {w for verb, words in KEY_WORDS.items() if re.search(rf"\b{verb}\b", low) for w in words}


@dataclass(frozen=True)
class Pointer:
    """How a task's wording points at an earlier value instead of stating it.

    ``how`` is the reference's reach: ``coref`` (the previous task), ``long`` (two or more tasks back; ``first``
    narrows it to task 0), ``partial`` (the same request again). ``source`` names the channel when the name alone is
    ambiguous: ``arg`` (wording uses one of :data:`ARG_MARKERS`) or ``result`` (:data:`RESULT_MARKERS`); ``tool``
    names the earlier call's tool when the channel is not enough.
    """

    how: Literal["coref", "long", "partial"]
    source: Literal["", "arg", "result"] = ""
    tool: str = ""
    first: bool = False


def singular(key: str) -> str:
    """``items`` -> ``item`` (good enough for keys; ``status`` and ``address`` stay)."""
    low = key.lower()
    if low.endswith("ies") and len(low) > 4:
        return low[:-3] + "y"
    if low.endswith("s") and not low.endswith(("ss", "us", "is")) and len(low) > 3:
        return low[:-1]
    return low


def key_matches(key: str, param: str) -> bool:
    """Whether a value found under ``key`` can fill parameter ``param``."""
    return singular(key) == singular(param)


def leaves(value: Any, key: str) -> list[tuple[str, Any]]:
    """``(key, scalar)`` pairs of a JSON value; list elements inherit the list's key in the singular."""
    if isinstance(value, dict):
        return [pair for k, v in value.items() for pair in leaves(v, str(k))]
    if isinstance(value, list):
        return [pair for v in value[:50] for pair in leaves(v, singular(key))]
    if isinstance(value, bool) or value is None:
        return []
    if isinstance(value, str) and not value.strip():
        return []
    return [(key, value)] if isinstance(value, str | int | float) else []


def humanize(name: str) -> str:
    """``place_order`` / ``PlaceOrder`` / ``Amount_Consistency_Checker`` -> words in lower case."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name).replace("_", " ").replace("-", " ")
    return " ".join(spaced.lower().split())


def result_key(tool: Tool | None, name: str) -> str:
    """The key a bare (list or scalar) result stands under: the tool's produced entity, else the last word of its
    name in the singular (``list_items`` -> ``item``)."""
    if tool is not None and tool.produces:
        return tool.produces[0]
    words = humanize(name).split()
    return singular(words[-1]) if words else ""


def _canon(value: Any) -> str:
    """A value as compared for "the same value": numbers (and numeric strings) by magnitude, text case-blind."""
    text = str(value).strip()
    if not isinstance(value, bool):
        try:
            number = Decimal(text.replace(",", ""))
        except InvalidOperation:
            return text.lower()
        if number.is_finite():  # by magnitude: a double-entry amount shows as 6.69 and -6.69, one quantity
            return format(abs(number).normalize(), "f")
    return text.lower()


def same_value(a: Any, b: Any) -> bool:
    """Whether two scalars are the same value (``3``, ``"3.00"`` and ``-3`` are; ``"Apple"`` and ``"apple"`` are)."""
    return _canon(a) == _canon(b)


@dataclass(frozen=True)
class Candidate:
    """A value an earlier task showed under a name: from a call's arguments (``arg``, what the user asked for), its
    result (``result``, what came back), or the user's own words (``arg``, ``tool`` empty).

    ``record`` locates the innermost object holding it (task, call, channel, then the path of keys and list indices):
    values of one record belong together (a transaction's payee, date and id), so a value the words name singles out
    its record's other values.
    """

    task: int
    tool: str
    channel: Literal["arg", "result"]
    key: str
    value: Any
    record: tuple[Any, ...] = ()


def _walk(value: Any, key: str, record: tuple[Any, ...]) -> list[tuple[str, Any, tuple[Any, ...]]]:
    """Like :func:`leaves`, with each leaf's record (list elements are records of their own)."""
    if isinstance(value, dict):
        return [leaf for k, v in value.items() for leaf in _walk(v, str(k), record)]
    if isinstance(value, list):
        out = []
        for n, v in enumerate(value[:50]):
            out += _walk(v, singular(key), (*record, key, n))
        return out
    return [(k, v, record) for k, v in leaves(value, key)]


def candidates(task: Task, index: int, tools: dict[str, Tool]) -> list[Candidate]:
    """Every named value task ``index`` showed: call arguments, call results, and ``name value`` in the user's words."""
    out: list[Candidate] = []
    keys: set[str] = set()
    for node in task.call_nodes:
        tool = tools.get(node.name)
        # a call's arguments hold its result's record: a value the words state in one singles out the other
        for key, value, record in _walk(node.action.arguments, "", (index, node.idx)):
            out.append(Candidate(index, node.name, "arg", key, value, record))
            keys.add(key)
        result = decoded(observation_result(decoded(node.observation)))
        for key, value, record in _walk(result, result_key(tool, node.name), (index, node.idx, "result")):
            out.append(Candidate(index, node.name, "result", key, value, record))
            keys.add(key)
    text = task_text(task)
    for key in sorted(keys):
        words = humanize(key)
        if not words:
            continue
        for m in re.finditer(rf"\b{re.escape(words)}s?\s+(?:is\s+|of\s+|=\s*|:\s*)?([A-Za-z0-9][\w.\-@]*)", text, re.I):
            word = m.group(1).rstrip(".")
            if any(ch.isdigit() for ch in word):  # "ip address" is a phrase, "ip 10.0.0.7" a value
                out.append(Candidate(index, "", "arg", key, word, (index, "words")))
    return out


def _related(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    """Whether two records are one object or one holds the other."""
    n = min(len(a), len(b))
    return a[:n] == b[:n]


def anchors(pool: Sequence[Candidate], text: str, exclude: Any, context: str = "") -> list[Candidate]:
    """The candidates whose value the words state (other than ``exclude``; by the session's ``context`` too:
    "restaurants" states ``Expenses:Food:Restaurants``): the records the words single out."""
    return [
        c
        for c in pool
        if not same_value(c.value, exclude) and len(str(c.value)) >= 3 and states(text, c.value, context)
    ]


def channels_named(text: str) -> set[str]:
    """The source channels a wording names by its marker phrases (``arg``, ``result``, both or none)."""
    low = text.lower()
    out = set()
    if any(m in low for m in ARG_MARKERS):
        out.add("arg")
    if any(m in low for m in RESULT_MARKERS):
        out.add("result")
    return out


def resolve(
    pool: Sequence[Candidate],
    names: Iterable[str],
    *,
    channels: Set[str] = frozenset(),
    tools: Set[str] = frozenset(),
    anchored: Sequence[Candidate] = (),
    roots: Set[str] = frozenset(),
    keys: Set[str] = frozenset(),
) -> list[Any]:
    """The distinct values a reference by ``names`` can mean among ``pool``, narrowed to the calls of ``tools``, to
    the records of the ``anchored`` values the words state ("the one on March 22"), to the names under the
    ``roots`` the words' nouns name (:func:`kind_roots`: "that category"), and to one channel, when the wording
    names them (a narrowing that would leave nothing is not applied: the wording names something else)."""
    names = list(names)
    found = [c for c in pool if any(key_matches(c.key, n) for n in names)]
    by_tool = [c for c in found if c.tool in tools]
    if by_tool:
        found = by_tool
    by_record = [c for c in found if any(_related(c.record, a.record) for a in anchored)]
    if by_record:
        found = by_record
    by_kind = [c for c in found if isinstance(c.value, str) and c.value.split(":", 1)[0] in roots]
    if by_kind:
        found = by_kind
    by_key = [c for c in found if any(w in c.key.lower() for w in keys)]
    if by_key:
        found = by_key
    if len(channels) == 1:
        by_channel = [c for c in found if c.channel in channels]
        if by_channel:
            found = by_channel
    seen: dict[str, Any] = {}
    for c in found:
        seen.setdefault(_canon(c.value), c.value)
    return list(seen.values())


def span_of(
    position: int, subtype: TurnSubtype, text: str, value: Any, shown: Sequence[str], context: str = ""
) -> list[int]:
    """The earlier tasks a reference at ``position`` points at, by its words and its label: the first task when the
    words say so ("my first question", whatever the label), the previous task (coreferential), the latest task
    showing the value (partial), else every task two or more back (long-range)."""
    if any(m in text.lower() for m in FIRST_MARKERS):
        return [0]
    if subtype is TurnSubtype.COREFERENTIAL:
        return [position - 1]
    if subtype is TurnSubtype.PARTIAL:
        latest = [j for j in range(position) if states(shown[j], value, context)]
        return latest[-1:]
    return list(range(max(0, position - 1)))


def _params_of(task: Task, value: Any) -> set[str]:
    return {
        key for node in task.call_nodes for key, leaf in leaves(node.action.arguments, "") if same_value(leaf, value)
    }


def _fed_findings(i: int, task: Task, tools: dict[str, Tool], context: str = "") -> list[SubtypeFinding]:
    """Calls of one task that take a value from the result of a call they depend on ("the item from the first step")
    when that result holds more than one value under that name (a value the words state, by the session's
    ``context`` too, is taken from the words, not from the result)."""
    own = task_text(task)
    out = []
    for node in task.call_nodes:
        # the wording names the step a value comes from ("the item from the first step"): its direct parents
        parents = [task.gold[a] for a in sorted(node.dependency_list) if task.gold[a].kind is NodeKind.CALL]
        if not parents:
            continue
        pool = [
            Candidate(i, p.name, "result", key, value, record)
            for p in parents
            for key, value, record in _walk(
                decoded(observation_result(decoded(p.observation))), result_key(tools.get(p.name), p.name), (p.idx,)
            )
        ]
        for param, value in leaves(node.action.arguments, ""):
            if states(own, value, context) or not any(same_value(c.value, value) for c in pool):
                continue
            names = {param} | {c.key for c in pool if same_value(c.value, value)}
            found = resolve(pool, names, anchored=anchors(pool, own, value), roots=kind_roots(own))
            taken = [v for n in task.call_nodes for k, v in leaves(n.action.arguments, "") if key_matches(k, param)]
            if all(any(same_value(f, t) for t in taken) for f in found):
                continue  # one call per value ("move both to travel"): every value is meant, none is guessed
            if len(found) > 1:
                options = ", ".join(repr(v) for v in found[:6])
                out.append(
                    SubtypeFinding(
                        i,
                        task.subtype,
                        f"ambiguous reference: {node.name}.{param} {value!r} is one of {len(found)} distinct values "
                        f"the calls before it returned ({options})",
                        kind="ambiguous",
                    )
                )
    return out


def _carried(task: Task, earlier: list[Task]) -> list[Any]:
    """The argument values a fragment carries over from the previous request: for each of its calls, the values
    the previous task's call of the same tool passed under the same parameter (a fragment that leaves out its
    request means that request, so those arguments have one reading)."""
    if not carries_request(task, earlier):
        return []
    out: list[Any] = []
    for node in task.call_nodes:
        for before in earlier[-1].call_nodes:
            if before.name != node.name:
                continue
            for param, value in node.action.arguments.items():
                if same_value(before.action.arguments.get(param, object()), value):
                    out.append(value)
    return out


_ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth")
_ORDINAL_PICK = re.compile(
    rf"\bthe ({'|'.join(_ORDINALS)}|last)(?: one)?\b(?= (?:one|of|on|in|among|you|I)\b| is\b|[:.,?])", re.IGNORECASE
)
_NAMED_ORDER = re.compile(r"\b(?:i mentioned|i named|i asked about|of the two)\b", re.IGNORECASE)
"""An ordinal that counts what the user named ("the second one I mentioned"), not a list a tool returned."""
_SIZE_PICK = re.compile(
    r"\b(?:the (bigger|larger|smaller) (?:one|of)|whichever was (bigger|larger|smaller)|the one with (more|less) in)\b",
    re.IGNORECASE,
)


def _list_index(record: tuple[Any, ...]) -> int | None:
    """The index of the result list element a record sits in (``(task, node, "result", key, n, ...)``)."""
    if len(record) >= 5 and record[2] == "result" and isinstance(record[4], int):
        return record[4]
    return None


def _figure(value: Any) -> Decimal | None:
    """A result's figure: an amount as tools return it (a decimal string; a bare number is a count or an id)."""
    if not isinstance(value, str):
        return None
    try:
        return Decimal(value)
    except InvalidOperation:
        return None


def picked(pool: Sequence[Candidate], text: str) -> list[Candidate]:
    """The candidates a pick from a list names, or ``[]`` when the words make none.

    An ordinal pick ("the second one among those three", "the last of those") names the k-th element of a result
    list, in the order the tool returned it: the candidates of that element's record; where the span shows no list,
    it names the k-th call, in the order the user asked for them ("the second one I mentioned"). A size pick ("the
    bigger of the two", "the one with more in it") names, of the calls that each returned one figure (an amount
    outside any list: a balance, a total), the call whose figure is the largest (or smallest): the candidates of
    that call (its arguments and its result). Why here: a pick names no value, so without it every value of the
    list is a candidate and the reference reads as ambiguous, though the list's order or its figures decide it.
    """
    ordinal = _ORDINAL_PICK.search(text)
    if ordinal is not None:
        word = ordinal.group(1).lower()
        listed = [c for c in pool if _list_index(c.record) is not None]
        if listed and not _NAMED_ORDER.search(text):
            indices = sorted({_list_index(c.record) for c in listed})  # type: ignore[type-var]
            k = indices[-1] if word == "last" else _ORDINALS.index(word)
            chosen = [c for c in listed if _list_index(c.record) == k]
            if chosen:
                return chosen
        elif _NAMED_ORDER.search(text):  # the calls in the order the user named them ("the second one I mentioned")
            calls = sorted({c.record[:2] for c in pool if c.tool and len(c.record) >= 2}, key=lambda r: r[1])
            k = len(calls) - 1 if word == "last" else _ORDINALS.index(word)
            if 2 <= len(calls) and k < len(calls):
                return [c for c in pool if c.record[:2] == calls[k]]
    size = _SIZE_PICK.search(text)
    if size is not None:
        word = next(g for g in size.groups() if g).lower()
        calls: dict[tuple[Any, ...], list[Decimal]] = {}
        for c in pool:
            if c.channel == "result" and _list_index(c.record) is None and (figure := _figure(c.value)) is not None:
                calls.setdefault(c.record[:2], []).append(figure)
        figures = {call: values[0] for call, values in calls.items() if len(values) == 1}
        if len(figures) >= 2 and len(set(figures.values())) == len(figures):
            pick = (max if word in ("bigger", "larger", "more") else min)(figures, key=lambda call: figures[call])
            return [c for c in pool if c.record[:2] == pick]
    return []


def ambiguous_references(session: Session, *, only: int | None = None) -> list[SubtypeFinding]:
    """Tasks whose words point at an earlier value that is not the only one answering the pointer.

    For each value a later task needs from the conversation (:func:`~toolwild.core.hidden_intent.needed_values`),
    the span its label points at (the previous task; the latest one showing it; two or more back, or the first task
    when the words say so), and the names it goes by (the parameter it fills, and every key it stands under there),
    the candidates are the distinct values under those names in that span's arguments, results and user's words,
    narrowed by the tools the words name and by the source markers (:data:`ARG_MARKERS`, :data:`RESULT_MARKERS`).
    A finding when the needed value is among them and more than one distinct value remains, or when the words'
    narrowing leaves other values only (they name a source, the gold took the value from another). A needed value
    the span does not show is a matter for the label check (:func:`~toolwild.core.hidden_intent.check_subtypes`).
    ``only``: the findings of that task alone (a generator checking the task it just built skips the others).
    """
    tools = {t.name: t for t in session.tools}
    shown = [shown_text(t) for t in session.tasks]
    named = session.extra.get("mentioned_values")
    findings: list[SubtypeFinding] = []
    for i, task in enumerate(session.tasks):
        if only is not None and i != only:
            continue
        findings += _fed_findings(i, task, tools, session.env_info)
        if i == 0 or task.subtype is TurnSubtype.FIRST:
            continue
        text = task_text(task)
        low = text.lower()
        answers = [str(n.observation) for n in task.gold if n.kind is NodeKind.ANSWER]
        # a reference names a call as "the restock"; the task's own verbs ("restock ...") name no earlier call
        named_tools = {
            name for name in tools if humanize(name) and re.search(rf"\bthe {re.escape(humanize(name))}\b", low)
        }
        channels = channels_named(text)
        needed = needed_values(
            task, session.tasks[:i], named if isinstance(named, list) else None, context=session.env_info
        )
        carried = _carried(task, session.tasks[:i])
        for value in needed:
            if value in carried:
                continue  # "same question for X": the previous request's own argument, one value
            span = span_of(i, task.subtype, text, value, shown, session.env_info)
            pool = [c for j in span for c in candidates(session.tasks[j], j, tools)]
            names = _params_of(task, value) | {c.key for c in pool if same_value(c.value, value)}
            if not names:
                continue
            found = resolve(
                picked(pool, text) or pool,  # "the second one": the list's order names one record
                names,
                channels=channels,
                tools=named_tools,
                anchored=anchors(pool, text, value, session.env_info),
                roots=kind_roots(text),
                keys=key_words(text),
            )
            if not task.call_nodes and all(any(states(a, v, session.env_info) for a in answers) for v in found):
                continue  # a chat answer that speaks of every candidate picks none of them
            taken = [v for n in task.call_nodes for k, v in leaves(n.action.arguments, "") if k in names]
            if len(found) > 1 and all(any(same_value(f, t) for t in taken) for f in found):
                continue  # one call per value ("and both for March?"): every value is meant, none is guessed
            where = "task " + ", ".join(str(j) for j in span)
            label = "/".join(sorted(names))
            options = ", ".join(repr(v) for v in found[:6])
            message = ""
            if len(found) > 1 and any(same_value(v, value) for v in found):
                message = f"{label} {value!r} is one of {len(found)} distinct values in {where} ({options})"
            elif found and not any(same_value(v, value) for v in found):
                if any(same_value(v, value) for v in resolve(pool, names)):
                    message = f"the words point at {label} {options} in {where}, the gold uses {value!r}"
            if message:
                findings.append(SubtypeFinding(i, task.subtype, f"ambiguous reference: {message}", kind="ambiguous"))
    return findings
