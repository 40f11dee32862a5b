"""Gold final answers of generated tool tasks: what the results say, told to the user in plain sentences.

The answer is training data: it must never be a JSON dump and never state a value the results do not hold (the rule
is :func:`toolwild.core.answers.answer_problems`). :func:`template_answer` writes it offline for any environment
(built-in, imported SynthTools, replayed WildToolBench tools), from the tool's name and the result's shape:

- a dict: "I placed the order: the order id is ord-0001, the item is flour and the units are 1." (keys in words,
  nested dicts flattened two levels, at most a few fields);
- a list of scalars: "I listed the items: apple, coffee, flour, sugar and tea." (at most ten, then "and more");
- a list of dicts: one short entry per element, headed by its identifying field (at most five, then "and more");
- nothing (``None``, ``true``, empty): "Done: I restocked.".

It only copies values out of the results (never a count, a sum or a number of its own), words keys and tool names in
lower case, and checks its own text: when a detailed answer is too long or breaks the rule, it says less (fewer
fields, fewer elements), down to one value per call. :func:`write_answer` lets a model write the answer under the
same check, with the template as the fallback.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from toolwild.core.answers import answer_limit, answer_problems, decoded, is_reportable, observation_result
from toolwild.core.hidden_intent import mentions, scalar_values
from toolwild.core.tool import Effect, Tool
from toolwild.llm.client import LLM
from toolwild.llm.structured import write_checked
from toolwild.synth.utterances import humanize

__all__ = ["Call", "capability_answer", "recall_answer", "template_answer", "write_answer"]

Call = tuple[Tool, dict[str, Any], Any]
"""One gold call: the tool, its arguments, and its result (or its ``{"ok":..,"result":..}`` observation)."""

_PAST = {
    "add": "added",
    "apply": "applied",
    "book": "booked",
    "buy": "bought",
    "cancel": "cancelled",
    "find": "found",
    "get": "got",
    "issue": "issued",
    "lend": "lent",
    "pay": "paid",
    "plan": "planned",
    "sell": "sold",
    "send": "sent",
    "set": "set",
    "ship": "shipped",
    "stop": "stopped",
    "submit": "submitted",
    "transfer": "transferred",
    "write": "wrote",
    "run": "ran",
    "make": "made",
    "read": "read",
    "put": "put",
    "reset": "reset",
    "cut": "cut",
}
_LOOKUPS = frozenset("fetch get lookup query read retrieve show view".split())
_READ_VERBS = _LOOKUPS | frozenset("list find search check count calculate compute compare estimate".split())
_REGULAR = frozenset(
    "analyze approve assign block borrow calculate change check close compare compute confirm convert create delete "
    "detect download edit estimate export generate import list load monitor move notify open order place post "
    "predict process publish rate record refund register reject remove renew rent reserve reset restock return "
    "review schedule search share start track update upgrade upload validate verify".split()
)
_LEVELS = (
    # fields of a dict, elements of a list of scalars, elements of a list of dicts, fields per element
    (8, 10, 5, 3),
    (5, 5, 3, 2),
    (3, 3, 2, 1),
    (1, 1, 1, 0),
)
_SHORTEN_AT = 100
"""A string longer than the reportable limit is cut at a word boundary near this many characters."""
_OPENERS_WRITE = ("", "", "Done. ", "All set. ", "Sure thing. ")
_OPENERS_READ = ("", "", "Here's what I found. ", "Sure. ", "I looked into it. ")
_JOINERS = ("Then ", "After that, ", "Also, ", "Next, ")
# Chat answers (no call): a value of the conversation said back, or what the assistant can do. ``{k}`` the key in
# words, ``{v}`` the value, ``{be}`` is/are; ``{names}`` the tools in words.
_RECALL_ANSWERS = (
    "That was {k} {v}.", "It was {v}.", "The {k} {be} {v}.", "You had {v} for the {k}.", "That would be {v}.",
    "The {k} there {be} {v}.", "We had {v} as the {k}.", "Sure, the {k} {be} {v}.",
    "Looking back, the {k} {be} {v}.", "It's {v}.", "No problem, the {k} {be} {v}.", "That one was {v}.",
)  # fmt: skip
_CAPABILITY_ANSWERS = (
    "Happy to help with {k} {v}. I can {names}.", "Sure, I can help with {v}. I can {names}.",
    "Glad to help with {v}. Here is what I can do: {names}.", "Of course. For {k} {v} or anything else, I can {names}.",
    "I can help with {v}, yes. My tools let me {names}.", "Sounds good. I am able to {names}, so {v} is covered.",
    "Let's look at {v} together. I can {names}.",
)  # fmt: skip
_CAPABILITY_ONLY = (
    "I can help with these: {names}.", "Here is what I can do: {names}.", "I am able to {names}.",
    "My tools cover these: {names}.", "I can {names}.",
)  # fmt: skip


@dataclass(frozen=True)
class _Action:
    """How one call is told: a clause with the assistant as subject, or a noun that "says" the result."""

    clause: str
    """``I placed the order`` / ``I restocked``; empty when the tool's name starts with no known verb."""
    noun: str
    """What the tool gives, in words (``order``, ``items``, ``spending summary``)."""


@dataclass(frozen=True)
class _Style:
    """The wording choices of one call, drawn once so that every detail level words it the same way."""

    connector: int
    fields: int
    bare: int


def _words(name: str) -> list[str]:
    """Lower-case words of a name, without digits or punctuation (a key ``q1_total`` is said "total": a number that
    is not in the results must not appear)."""
    words = [re.sub(r"[^a-z]", "", w) for w in humanize(name).split() if not any(c.isdigit() for c in w)]
    return [w for w in words if w]


def _past(verb: str) -> str:
    if verb in _PAST:
        return _PAST[verb]
    if verb.endswith("e"):
        return verb + "d"
    if verb.endswith("y") and verb[-2:-1] not in ("a", "e", "i", "o", "u"):
        return verb[:-1] + "ied"
    return verb + "ed"


def _action(tool: Tool) -> _Action:
    words = _words(tool.name) or ["tool"]
    verb, rest = words[0], " ".join(words[1:])
    if verb in _LOOKUPS:
        return _Action(f"I checked the {rest}" if rest else "I checked", rest or "result")
    if verb in _PAST or verb in _REGULAR:
        past = _past(verb)
        return _Action(f"I {past} the {rest}" if rest else f"I {past}", rest or "result")
    return _Action("", " ".join(words))


def _plural(label: str) -> bool:
    last = label.split()[-1] if label.split() else label
    return last.endswith("s") and not last.endswith(("ss", "us", "is"))


# ---------------------------------------------------------------------------------------------- values
def _scalar(value: Any) -> str | None:
    """A scalar as the answer says it (copied from the result), or None when it cannot be said."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    if not isinstance(value, str) or set(value) & set('"{}[]'):
        return None
    text = " ".join(value.split())
    if not any(c.isalnum() for c in text):
        return None
    if len(text) <= 120:
        return text
    cut = text[:_SHORTEN_AT].rsplit(" ", 1)[0].rstrip(",;:")
    return f"{cut}…" if cut else None


def _series(items: list[str], cap: int) -> str:
    shown = items[:cap]
    if len(items) > cap:
        return ", ".join(shown) + " and more"
    if len(shown) == 1:
        return shown[0]
    return ", ".join(shown[:-1]) + " and " + shown[-1]


def _heading(element: dict[str, Any]) -> tuple[str | None, str | None]:
    """An element's identifying field (id, name, title, a ``*_id``), else its first reportable scalar."""
    keys = list(element)
    ranked = sorted(
        keys,
        key=lambda k: (
            0 if k.lower() in ("id", "name", "title") else 1 if k.endswith(("_id", "Id", "_name", "Name")) else 2,
            keys.index(k),
        ),
    )
    for key in ranked:
        value = element[key]
        if is_reportable(value) and _scalar(value) is not None:
            return key, _scalar(value)
    return None, None


def _leaf(value: Any, cap: int) -> tuple[str | None, bool, bool]:
    """A field's value as words (scalars; lists of scalars; lists of dicts by their headings), whether it reads as
    several, and whether the words hold a reportable scalar of the result."""
    if isinstance(value, list):
        said = [(v, w) for v, w in ((v, _element(v)) for v in value) if w]
        if not said:
            return None, False, False
        shown = _shown(said, cap)
        more = " and more" if len(said) > cap else ""
        words = _series([w for _, w in shown], len(shown)) + more
        return words, len(said) > 1, any(is_reportable(_plain(v)) for v, _ in shown)
    if isinstance(value, dict):
        return None, False, False
    return _scalar(value), False, is_reportable(value)


def _shown(said: list[tuple[Any, str]], cap: int) -> list[tuple[Any, str]]:
    """The first ``cap`` of (value, words), the last swapped for the first reportable one when none is."""
    shown = said[:cap]
    if not any(is_reportable(_plain(v)) for v, _ in shown):
        extra = next((p for p in said if is_reportable(_plain(p[0]))), None)
        if extra is not None:
            shown = [*shown[:-1], extra]
    return shown


def _element(value: Any, depth: int = 0) -> str | None:
    """One list element in words: a scalar, a dict by its heading, a nested list by its first few elements."""
    if isinstance(value, dict):
        return _heading(value)[1]
    if isinstance(value, list):
        if depth >= 2:
            return None
        said = [(v, w) for v, w in ((v, _element(v, depth + 1)) for v in value) if w]
        return _series([w for _, w in _shown(said, 3)], 3) if said else None
    return _scalar(value)


def _fields(result: dict[str, Any], list_cap: int) -> list[tuple[str, str, bool, bool]]:
    """(label, words, plural, reportable) of a dict's fields, nested dicts flattened two levels; a value said once."""
    out: list[tuple[str, str, bool, bool]] = []
    seen: set[str] = set()
    for key, value in result.items():
        pairs = [(key, value)]
        if isinstance(value, dict):
            pairs = [(f"{key} {k}", v) for k, v in value.items()]
        for path, leaf in pairs:
            words, several, reportable = _leaf(leaf, list_cap)
            if words is None or words in seen:
                continue
            seen.add(words)
            label = " ".join(_words(path)) or "value"
            out.append((label, words, several or _plural(label), reportable))
    return out


def _plain(value: Any) -> Any:
    """The scalar an element is said by (a nested list: its first reportable one)."""
    if isinstance(value, dict):
        return _heading(value)[1]
    if isinstance(value, list):
        return next((p for p in (_plain(v) for v in value[:50]) if is_reportable(p)), None)
    return value


def _pick(fields: list[tuple[str, str, bool, bool]], cap: int) -> list[tuple[str, str, bool, bool]]:
    """The first ``cap`` fields, one of them reportable when any is (the answer must report something)."""
    chosen = fields[:cap]
    if not any(f[3] for f in chosen):
        extra = next((f for f in fields if f[3]), None)
        if extra is not None:
            chosen = [*chosen[: max(cap - 1, 0)], extra] if cap else [extra]
    return chosen


# ---------------------------------------------------------------------------------------------- sentences
def _facts(fields: list[tuple[str, str, bool, bool]], style: int) -> str:
    if style == 1:
        return ", ".join(f"{label} {words}" for label, words, _, _ in fields)
    parts = [f"the {label} {'are' if plural else 'is'} {words}" for label, words, plural, _ in fields]
    return _series(parts, len(parts))


def _done(action: _Action, style: _Style, first: bool) -> str:
    if not action.clause:
        return f"Done with the {action.noun}." if first else f"The {action.noun} is done."
    return f"Done: {action.clause}." if first and style.bare == 0 else f"{action.clause}."


def _dict_sentence(action: _Action, result: dict[str, Any], style: _Style, level: tuple[int, ...]) -> str | None:
    fields = _pick(_fields(result, level[1]), level[0])
    if not fields:
        return None
    if style.fields == 1:
        facts = _facts(fields, 1)
        return f"{action.clause} ({facts})." if action.clause else f"The {action.noun} has {facts}."
    facts = _facts(fields, 0)
    if not action.clause:
        return f"The {action.noun} says {facts}."
    if style.connector == 0:
        return f"{action.clause}: {facts}."
    if style.connector == 1:
        return f"{action.clause}. {facts[0].upper()}{facts[1:]}."
    return f"{action.clause}, and {facts}."


def _list_sentence(action: _Action, result: list[Any], style: _Style, level: tuple[int, ...]) -> str | None:
    dicts = [e for e in result if isinstance(e, dict)]
    if dicts and len(dicts) == len(result):
        entries = [e for e in (_entry(d, level[3], level[1]) for d in dicts) if e]
        body = "; ".join(entries[: level[2]]) + ("; and more" if len(entries) > level[2] else "")
    else:
        body = _leaf(result, level[1])[0] or ""
    if not body:
        return None
    plural = _plural(action.noun)
    if action.clause and style.connector != 2:
        return f"{action.clause}: {body}."
    return f"The {action.noun} {'are' if plural else 'is'} {body}."


def _entry(element: dict[str, Any], n_fields: int, list_cap: int) -> str | None:
    key, head = _heading(element)
    if head is None:
        return None
    rest = [f for f in _fields({k: v for k, v in element.items() if k != key}, list_cap) if f[1] != head]
    if not rest or n_fields == 0:
        return head
    return f"{head} ({_facts(rest[:n_fields], 1)})"


def _scalar_sentence(action: _Action, result: Any) -> str | None:
    words = _scalar(result)
    if words is None:
        return None
    if action.clause:
        return f"{action.clause}: {words}."
    return f"The {action.noun} {'are' if _plural(action.noun) else 'is'} {words}."


def _empty(result: Any) -> bool:
    if result is None or result is True or result == "" or result == [] or result == {}:
        return True
    if isinstance(result, dict):
        return all(_empty(v) or v is False for v in result.values())
    return False


def _sentence(tool: Tool, result: Any, style: _Style, level: tuple[int, ...], first: bool) -> str:
    action = _action(tool)
    text: str | None = None
    if not _empty(result):
        if isinstance(result, dict):
            text = _dict_sentence(action, result, style, level)
        elif isinstance(result, list):
            text = _list_sentence(action, result, style, level)
        else:
            text = _scalar_sentence(action, result)
    text = text or _done(action, style, first)
    return _with_something(text, result)


def _with_something(text: str, result: Any) -> str:
    """The sentence, with one deeper value added when it says none of the result's reportable ones (a value nested
    deeper than the two levels said): the answer must report something of every call."""
    reportable = [v for v in scalar_values(result) if is_reportable(v)]
    if not reportable or any(mentions(text, v) for v in reportable):
        return text
    key, value = _deep(result, "value") or ("value", reportable[0])
    label = " ".join(_words(key)) or "value"
    return f"{text[:-1]}, and the {label} {'are' if _plural(label) else 'is'} {_scalar(value)}."


def _deep(value: Any, key: str) -> tuple[str, Any] | None:
    """The first reportable scalar of a value, with the key it sits under."""
    if isinstance(value, dict):
        items: list[tuple[str, Any]] = [(str(k), v) for k, v in value.items()]
    elif isinstance(value, list):
        items = [(key, v) for v in value[:50]]
    else:
        return (key, value) if is_reportable(value) and _scalar(value) is not None else None
    for k, v in items:
        found = _deep(v, k)
        if found:
            return found
    return None


def _decode(result: Any) -> Any:
    """A call's result, out of its envelope and, when it is a string holding JSON, parsed."""
    return decoded(observation_result(result))


def _writes(tool: Tool) -> bool:
    """Whether a call changes something (its effect; when unknown, a name that does not start with a lookup)."""
    if tool.effect is not None:
        return tool.effect is not Effect.READ
    words = _words(tool.name)
    return not words or words[0] not in _READ_VERBS


def _joiners(n: int, rng: random.Random) -> list[str]:
    """``n`` sentence joiners, none twice in a row."""
    out: list[str] = []
    for _ in range(n):
        out.append(rng.choice([j for j in _JOINERS if not out or j != out[-1]]))
    return out


def _join(sentences: list[str], opener: str, joiners: list[str]) -> str:
    out = []
    for i, sentence in enumerate(sentences):
        if i == 0:
            out.append(sentence if sentence.startswith("Done") else opener + sentence)
            continue
        joiner = joiners[i - 1]
        if sentence.startswith("I "):
            out.append(joiner + sentence)
        else:
            out.append(joiner + sentence[0].lower() + sentence[1:])
    return " ".join(out)


def template_answer(calls: Sequence[Call], rng: random.Random) -> str:
    """The gold final answer of a tool task, from its calls' results (passes :func:`answer_problems`).

    Args:
        calls: the task's gold calls in order: (tool, arguments, result); a recorded ``{"ok":..,"result":..}``
            observation is read as its result.
        rng: the generator's random stream (wording choices only).
    """
    results = [_decode(result) for _, _, result in calls]
    writes = any(_writes(tool) for tool, _, _ in calls)
    opener = rng.choice(_OPENERS_WRITE if writes else _OPENERS_READ)
    styles = [_Style(rng.randrange(3), rng.randrange(2), rng.randrange(2)) for _ in calls]
    joiners = _joiners(len(calls) - 1, rng)
    limit = answer_limit(len(calls))
    text = ""
    for level in _LEVELS:
        sentences = [
            _sentence(tool, r, s, level, i == 0)
            for i, ((tool, _, _), r, s) in enumerate(zip(calls, results, styles, strict=True))
        ]
        text = _join(sentences, opener, joiners)
        if len(text) <= limit and not answer_problems(text, results):
            return text
    return text


def recall_answer(key: str, value: Any, rng: random.Random) -> str:
    """The gold answer of a chat that asks for an earlier value back: the value, said once, with its key."""
    words = " ".join(_words(key)) or "value"
    said = _scalar(value) or str(value)
    return rng.choice(_RECALL_ANSWERS).format(k=words, v=said, be="are" if _plural(words) else "is")


def capability_answer(names: str, rng: random.Random, key: str = "", value: Any = None) -> str:
    """The gold answer of a first chat: what the assistant can do (``names``, the tools in words), and the entity
    the user named in passing (``key``, ``value``) when there is one."""
    if value is None:
        return rng.choice(_CAPABILITY_ONLY).format(names=names)
    words = " ".join(_words(key)) or "that"
    return rng.choice(_CAPABILITY_ANSWERS).format(k=words, v=_scalar(value) or str(value), names=names)


# ---------------------------------------------------------------------------------------------- model writer
class _Answer(BaseModel):
    model_config = ConfigDict(extra="forbid")

    answer: str = Field(description="What the assistant tells the user, in plain sentences.")


_SYSTEM = (
    "You write an assistant's final reply to a user, after the assistant called tools for them. Tell the user in one "
    "to three plain sentences what the results say. Use only numbers, dates, ids and names that appear in the "
    "results (or in the earlier results given), written as they are there; never count, add up or invent one. "
    "Never show JSON, braces or quoted keys. Reply with JSON only."
)


async def write_answer(
    llm: LLM,
    calls: Sequence[Call],
    template: str,
    *,
    seed: int,
    request: str = "",
    earlier: Sequence[Any] = (),
) -> tuple[str, bool]:
    """A model-written final answer that passes :func:`answer_problems`, or ``template`` when the model's does not.

    The model sees the calls, their results, the user's request and the template as an example; a reply that breaks
    the rule is sent back with its problems (at most two attempts). Returns (text, written by the model).

    Args:
        llm: the writer model.
        calls: the task's gold calls: (tool, arguments, result).
        template: the fallback (:func:`template_answer`).
        seed: the request's seed (the cache key: same inputs, same answer).
        request: what the user asked (the utterance), so the answer addresses it.
        earlier: results of the session's earlier tasks the answer may recall.
    """
    results = [_decode(result) for _, _, result in calls]
    brief = {
        "the user asked": request or "(not given)",
        "tool calls and results": [
            {"tool": tool.name, "what it does": tool.description, "arguments": arguments, "result": result}
            for (tool, arguments, _), result in zip(calls, results, strict=True)
        ],
        "earlier results": [observation_result(e) for e in earlier][-6:],
        "a correct example": template,
    }
    messages = [
        {"role": "system", "content": _SYSTEM},
        {"role": "user", "content": json.dumps(brief, ensure_ascii=False, default=str)},
    ]
    return await write_checked(
        llm,
        messages,
        _Answer,
        "answer",
        lambda text: [f"- answer: {p}" for p in answer_problems(text, results, earlier)],
        template,
        name="answer",
        role="answer-writer",
        seed=seed,
        max_tokens=300,
    )
