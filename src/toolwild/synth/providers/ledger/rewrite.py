"""The ledger's model writer: a made session's utterances reworded by a model, each kept only where every check holds.

Why after the build: a ledger session is built from the templates on a live episode, its words chosen among the
voice's realisations so that every gold check passes (:func:`.builder._said`). A model given ``--model`` rewords
those words in the user's voice; the tasks, gold paths and replies stay as built, so the session's place in the
balance of its block does not change and a rewording can run while the next session of the block is built.

What a rewording must keep (otherwise it changes the task, not its words):

- the rules of ``--perturb paraphrase`` (:func:`toolwild.synth.paraphrase.rewording_problems`): the same values
  stated and withheld, no added number, the reference markers and the tools' names in words exactly where the
  original has them, no tool description copied, written as the user;
- the ledger's own way of stating values (:func:`toolwild.core.hidden_intent.states`): an account said by its last
  part ("my checking balance"), a date in words ("the end of March"); the rewording states exactly the values and
  chart accounts the original states, keeps every number the original says (a condition's threshold, a slip's
  wrong amount), and keeps the pointing nouns ("that category", "the card") and the verbs that name a parameter
  ("I paid that with");
- the gold checks of the session with the new words (:func:`.builder.gold_findings`: grounding, hidden-intent
  labels, unambiguous references, the answer check), first against the template's other turns, then once more
  with every earlier rewording kept, in task order (a rewording that only fails beside another falls back).

A rewording that breaks a rule is sent back once with what is wrong (:func:`toolwild.llm.structured.write_checked`),
then the template's words are kept: a fallback. Tasks whose wild behaviour lives in the form of the words (a
fragment, a conditional, a pick from a list, a correction: :data:`KEPT_FORMS`) are not offered (no check could tell
that a rewording kept the form, and the session's record says the task shows it). Replies to asks are not reworded.
Who wrote each utterance goes to ``Session.extra["utterance_sources"]`` (``model``, ``template-fallback``, or
``template`` for a task not offered), as the graph builder records it, so the generation report counts both.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

from toolwild.core.hidden_intent import mentions, spoken_names, states
from toolwild.core.references import key_words, kind_roots
from toolwild.core.session import Session
from toolwild.core.wild import Wild, wild_behaviours
from toolwild.llm.client import LLM
from toolwild.llm.structured import write_checked
from toolwild.synth.paraphrase import (
    REWORDING_SYSTEM,
    Rewording,
    rewording_brief,
    rewording_problems,
    rewording_values,
)
from toolwild.synth.providers.ledger.builder import gold_findings

__all__ = ["KEPT_FORMS", "SOURCES_KEY", "ledger_rewording_problems", "reword_session"]

SOURCES_KEY = "utterance_sources"
"""The key of :attr:`Session.extra` that says who wrote each task's utterance (the graph builder's key)."""

KEPT_FORMS = frozenset({Wild.FRAGMENT, Wild.CONDITIONAL, Wild.PICK, Wild.CORRECTION})
"""Wild behaviours carried by the form of the words: a task showing one keeps the template's words."""

_NAME = re.compile(r"(?<![\w:])[A-Za-z][\w-]*(?::[A-Za-z0-9][\w-]*)+")
"""A hierarchical account name as the session's context lists it (``Assets:Bank:Checking``)."""
_NUMBER = re.compile(r"\S*\d\S*")
_EDGES = ".,;:!?()[]{}\"'$€£%"


# ---------------------------------------------------------------------------------------------- the rules
def _chart(context: str) -> list[str]:
    """The accounts the context lists, their parents (``Expenses:Food``) and their roots (``Expenses``): every name
    a user can state by saying it the way people do (:func:`toolwild.core.hidden_intent.states`)."""
    out: set[str] = set()
    for name in _NAME.findall(context):
        parts = name.split(":")
        out |= {":".join(parts[:k]) for k in range(1, len(parts) + 1)}
    return sorted(out)


def _numbers(text: str) -> list[str]:
    """The numbers the words say, as typed (``63.20``, ``2,000``, ``3rd``)."""
    return list(dict.fromkeys(t.strip(_EDGES) for t in _NUMBER.findall(text) if t.strip(_EDGES)))


def _keeps_number(text: str, number: str) -> bool:
    plain = number.replace(",", "")
    return any(mentions(text, n) for n in {number, plain}) or number.lower() in text.lower()


def _spoken(text: str, value: str) -> str | None:
    """The words ``text`` names the account ``value`` with ("credit card"), the longest first; None: it does not."""
    low = text.lower()
    return next((n for n in sorted(spoken_names(value), key=len, reverse=True) if n in low), None)


def _said_as(text: str, value: Any) -> str:
    """How ``text`` says ``value`` (an account by a spoken name, when it is one), for the model's feedback."""
    said = _spoken(text, value) if isinstance(value, str) and ":" in value else None
    return f"{said!r} ({value})" if said else repr(value)


def ledger_rewording_problems(text: str, session: Session, index: int) -> list[str]:
    """What a rewording of task ``index``'s utterance gets wrong (empty when it may be kept): the paraphrase rules,
    the ledger's own way of stating values, and the gold checks of the session with the new words (see the module
    docstring). Each problem is a ``- where: what`` line the model is shown to fix."""
    original = session.tasks[index].utterance
    context = session.env_info
    problems = rewording_problems(text, original, session, index)
    names = [v for v in [*rewording_values(session, index), *_chart(context)] if isinstance(v, str)]
    for value in dict.fromkeys(names):
        was, now = states(original, value, context), states(text, value, context)
        if (was, now) == (mentions(original, value), mentions(text, value)):
            continue  # said or left out verbatim: the paraphrase rules above have judged it
        if was and not now:
            problems.append(f"- utterance: must still name {_said_as(original, value)}, as the original does")
        elif now and not was:
            problems.append(f"- utterance: must not name {_said_as(text, value)} (the original does not)")
    for number in _numbers(original):
        if not _keeps_number(text, number):
            problems.append(f"- utterance: must keep the number {number!r} as the original says it")
    if kind_roots(text) != kind_roots(original) or key_words(text) != key_words(original):
        problems.append(
            "- utterance: must point at the earlier thing as the original does (keep words like 'that category', "
            "'the card', 'I paid that with')"
        )
    if problems:
        return list(dict.fromkeys(problems))
    return [f"- utterance: {finding}" for finding in gold_findings(_with_utterance(session, index, text), index)]


def _with_utterance(session: Session, index: int, text: str) -> Session:
    tasks = list(session.tasks)
    tasks[index] = tasks[index].model_copy(update={"utterance": text})
    return session.model_copy(update={"tasks": tasks})


def _brief(session: Session, index: int) -> dict[str, Any]:
    """The paraphrase brief, with the words the ledger's rules keep on top (numbers, accounts as said)."""
    brief = rewording_brief(session, index)
    original = session.tasks[index].utterance
    context = session.env_info
    said = [_spoken(original, v) for v in _chart(context) if ":" in v and states(original, v, context)]
    keep = [*brief["keep these words"], *_numbers(original), *(s for s in said if s)]
    brief["keep these words"] = list(dict.fromkeys(keep))
    return brief


# ---------------------------------------------------------------------------------------------- rewording
async def _reword(llm: LLM, session: Session, index: int, seed: int) -> tuple[str, bool]:
    messages = [
        {"role": "system", "content": REWORDING_SYSTEM},
        {"role": "user", "content": json.dumps(_brief(session, index), ensure_ascii=False)},
    ]
    return await write_checked(
        llm,
        messages,
        Rewording,
        "utterance",
        lambda text: ledger_rewording_problems(text, session, index),
        session.tasks[index].utterance,
        name="ledger utterance",
        role="user-writer",
        seed=seed,
        max_tokens=200,
    )


async def reword_session(llm: LLM, session: Session, *, seed: int) -> Session:
    """``session`` with each offered task's utterance reworded by ``llm`` where every check holds (see the module
    docstring), and who wrote each one in ``extra["utterance_sources"]``.

    The tasks are asked for at once (each sees the template's earlier turns, the client's cache makes a second run
    free and identical); the rewordings are then kept in task order, each only when the gold checks of its own and
    every later task still pass beside the ones kept before it, so the result does not depend on which reply came
    first. ``seed``: the session's (task ``i`` asks with ``seed * 100 + i``, as the graph builder does).
    """
    n = len(session.tasks)
    wilds = wild_behaviours(session.extra, n, session=session.id)
    offered = [i for i in range(n) if not KEPT_FORMS.intersection(wilds[i])]
    replies = await asyncio.gather(*(_reword(llm, session, i, seed * 100 + i) for i in offered))
    sources = ["template"] * n
    current = session
    for i, (text, by_model) in zip(offered, replies, strict=True):
        sources[i] = "template-fallback"
        if not by_model:
            continue
        candidate = _with_utterance(current, i, text)
        if any(gold_findings(candidate, j) for j in range(i, n)):
            continue
        current, sources[i] = candidate, "model"
    return current.model_copy(update={"extra": {**current.extra, SOURCES_KEY: sources}})
