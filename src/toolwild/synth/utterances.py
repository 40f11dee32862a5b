"""What the user says: template wording of generated tasks, and model-written wording checked against the gold.

A task's wording has hard rules, whoever writes it: every value the user supplies is stated (the agent cannot guess
it), and every value the task leaves to the conversation (a reference, an omission, a withheld parameter that an ask
must recover) is *not* stated. Templates meet the rules by construction; a model's utterance is checked against
them (:func:`wording_problems`) and retried, and a run falls back to the template when the model cannot meet them,
counting how often.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from toolwild.core.hidden_intent import mentions, scalar_values
from toolwild.core.tool import Tool
from toolwild.errors import StructuredOutputError
from toolwild.llm.client import LLM
from toolwild.llm.structured import InvalidReply, generate_checked

__all__ = [
    "Phrase",
    "Wording",
    "humanize",
    "render_value",
    "template_utterance",
    "wording_problems",
    "write_utterance",
]

_VERBS = frozenset(
    "add analyze apply approve assign block book borrow calculate cancel change check close compare compute confirm "
    "convert create delete detect download edit estimate export fetch find generate get import issue lend list "
    "lookup monitor move notify open order pay place post predict process publish query rate record refund "
    "register reject remove renew rent reserve reset restock retrieve return review schedule search send set "
    "share start stop submit track transfer update upgrade upload validate verify".split()
)
_OPENERS = (("Please", "."), ("Can you", "?"), ("Could you", "?"), ("I need you to", "."), ("Go ahead and", "."))


def humanize(name: str) -> str:
    """``place_order`` / ``PlaceOrder`` / ``Amount_Consistency_Checker`` -> words in lower case."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name).replace("_", " ").replace("-", " ")
    return " ".join(spaced.lower().split())


def _verb(tool: Tool, ambiguous: bool) -> str:
    """How the user names what a tool does: by its name (explicit) or by its description (ambiguous)."""
    if ambiguous and tool.description:
        first = tool.description.strip().split(". ")[0].rstrip(".").strip()
        if 3 <= len(first.split()) <= 18:
            return f"help with this: {first[0].lower()}{first[1:]}"
    words = humanize(tool.name)
    return words if words.split()[0] in _VERBS else f"run the {words}"


def render_value(value: Any) -> str:
    """A value as a user would type it."""
    if isinstance(value, list):
        return ", ".join(render_value(v) for v in value)
    if isinstance(value, dict):
        return " and ".join(f"{humanize(str(k))} {render_value(v)}" for k, v in value.items())
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


@dataclass
class Phrase:
    """One call of a task as the user asks for it."""

    tool: Tool
    stated: dict[str, Any] = field(default_factory=dict)
    """Arguments whose values the user says."""
    refer: dict[str, str] = field(default_factory=dict)
    """Arguments the user points to instead of stating: parameter -> ``coref`` / ``long`` / ``partial``."""
    fed: dict[str, tuple[int, str]] = field(default_factory=dict)
    """Arguments taken from an earlier call of the same task: parameter -> (call position, entity)."""


@dataclass
class Wording:
    """Everything needed to word a task, and the rules any wording must keep."""

    kind: str
    """``single``, ``parallel``, ``sequential``, ``mixed``, ``clarify``, ``chat-first``, ``chat-recall``,
    ``partial`` (the same tool as an earlier task, with only the changed values said)."""
    phrases: list[Phrase] = field(default_factory=list)
    hidden: list[Any] = field(default_factory=list)
    """Values the wording must not state (references, omissions, withheld parameters)."""
    ambiguous: bool = False
    recall: tuple[str, str] | None = None
    """For ``chat-recall``: (the key asked about, ``coref`` / ``long`` / ``partial``); for ``chat-first``: (the key,
    the value) the user names in passing."""
    first_reference: bool = False
    """A long-range reference that points at the first task (worded "my first request")."""

    @property
    def stated(self) -> list[Any]:
        """Values the wording must state."""
        named = [self.recall[1]] if self.kind == "chat-first" and self.recall else []
        return named + [v for p in self.phrases for v in scalar_values(p.stated)]


def _args(phrase: Phrase, first_reference: bool) -> str:
    parts = [f"{humanize(p)} {render_value(v)}" for p, v in phrase.stated.items()]
    for p, how in phrase.refer.items():
        if how == "coref":
            parts.append(f"the same {humanize(p)} as just now")
        elif how == "long":
            where = "my first request" if first_reference else "earlier in our chat"
            parts.append(f"the {humanize(p)} from {where}")
    return " and ".join(parts)


def _clause(phrase: Phrase, ambiguous: bool, first_reference: bool, position: int) -> str:
    text = _verb(phrase.tool, ambiguous)
    args = _args(phrase, first_reference)
    fed = [f"the {humanize(entity)} from the {_ORDINAL[i]} step" for i, entity in phrase.fed.values()]
    if fed:
        text += " using " + " and ".join(fed)
        if args:
            text += f", with {args}"
    elif args:
        text += f" for {args}"
    return text


_ORDINAL = ("first", "second", "third", "fourth", "fifth")


def template_utterance(wording: Wording, rng: random.Random) -> str:
    """The template wording of a task (meets the rules of :func:`wording_problems` by construction)."""
    opener, end = rng.choice(_OPENERS)
    ph = wording.phrases
    fr = wording.first_reference
    if wording.kind == "chat-first":
        if wording.recall is not None:
            key, value = wording.recall
            return f"Hi! I'm sorting out {humanize(key)} {value} today. What can you help me with?"
        return rng.choice(("Hi! What can you help me with here?", "Hello, what kinds of things can you do for me?"))
    if wording.kind == "chat-recall":
        assert wording.recall is not None
        key, how = wording.recall
        if how == "coref":
            return f"Thanks. Just so I have it right, which {humanize(key)} was that just now?"
        if how == "partial":
            return f"And the {humanize(key)}?"
        where = "my first request" if fr else "a while ago"
        return f"Going back to {where}: what was the {humanize(key)} there?"
    if wording.kind == "partial":
        changed = _args(ph[0], fr)
        return rng.choice((f"Now the same again, but with {changed}.", f"And with {changed} instead?"))
    clauses = [_clause(p, wording.ambiguous, fr, i) for i, p in enumerate(ph)]
    if wording.kind == "sequential":
        return f"{opener} {clauses[0]}, then {', then '.join(clauses[1:])}{end}"
    if len(clauses) == 1:
        return f"{opener} {clauses[0]}{end}"
    return f"{opener} {', '.join(clauses[:-1])}, and also {clauses[-1]}{end}"


def wording_problems(text: str, wording: Wording) -> list[str]:
    """What an utterance gets wrong: a stated value missing, a hidden value given away, or a bad length."""
    problems = []
    if not text.strip() or len(text) > 600:
        problems.append("- utterance: must be one to a few sentences (1-600 characters)")
    for value in wording.stated:
        if not mentions(text, value):
            problems.append(f"- utterance: must state the value {render_value(value)!r} exactly")
    for value in wording.hidden:
        if mentions(text, value):
            problems.append(f"- utterance: must not state {render_value(value)!r} (the assistant must infer it)")
    low = text.lower()
    if any(voice in low for voice in ("the user", "the assistant", "no tool")):
        problems.append("- utterance: write as the user, in the first person (not about 'the user')")
    pointers = [p for phrase in wording.phrases for p in phrase.refer]
    if wording.kind == "chat-recall" and wording.recall is not None:
        pointers.append(wording.recall[0])
    for param in pointers:
        if not any(word in low for word in humanize(param).split()):
            problems.append(f"- utterance: must say which {humanize(param)} is meant (e.g. 'the same one as before')")
    return problems


class _Utterance(BaseModel):
    model_config = ConfigDict(extra="forbid")

    utterance: str = Field(description="What the user types, in their own words.")


_SYSTEM = (
    "You write what a user types to an assistant that can call tools. Write one natural request in the user's voice. "
    "State every value listed under 'say' exactly as given. Never state the values listed under 'do not say': the "
    "user expects the assistant to take them from the conversation or to ask. Reply with JSON only."
)


async def write_utterance(
    llm: LLM, wording: Wording, history: list[str], template: str, *, service: str = "", seed: int = 0
) -> tuple[str, bool]:
    """A model-written utterance that keeps the wording's rules, or the template when the model cannot.

    ``history`` is the session's earlier user turns (so references are to what was really said), ``service`` what
    the environment is. Returns (text, written by the model).
    """
    calls = [
        {
            "tool": p.tool.name,
            "what it does": p.tool.description,
            "say": {k: render_value(v) for k, v in p.stated.items()},
        }
        for p in wording.phrases
    ]
    brief = {
        "the service": service or "an assistant with tools",
        "conversation so far (user turns)": history,
        "the request asks for": calls or "no tool: a question the assistant answers from the conversation",
        "do not say": [render_value(v) for v in wording.hidden],
        "a correct example": template,
    }
    messages = [
        {"role": "system", "content": _SYSTEM},
        {"role": "user", "content": json.dumps(brief, ensure_ascii=False)},
    ]

    def check(text: str) -> str:
        try:
            reply = _Utterance.model_validate_json(text)
        except ValueError as exc:
            raise InvalidReply(f"- reply: not the JSON object asked for ({str(exc)[:200]})") from None
        problems = wording_problems(reply.utterance, wording)
        if problems:
            raise InvalidReply("\n".join(problems))
        return reply.utterance.strip()

    try:
        text = await generate_checked(
            llm,
            messages,
            _Utterance.model_json_schema(),
            check,
            name="utterance",
            role="user-writer",
            max_attempts=2,
            seed=seed,
            max_tokens=200,
        )
    except StructuredOutputError:
        return template, False
    return text, True
