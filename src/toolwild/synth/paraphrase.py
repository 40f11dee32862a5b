"""``--perturb``: a suite's utterances reworded by a model (``paraphrase``), and the whole perturbation of a suite.

Why a rewording has rules: a hidden-intent task is hard *because* its utterance leaves a value to the conversation,
and an explicit one is easy because it states it. A paraphrase that states a withheld value, drops a stated one, or
loses the words that say which earlier value is meant ("the amount I asked for") changes the task, not its wording,
and the accuracy delta would measure the change. So a rewording must keep, relative to the original utterance, the
same values stated and the same withheld, add no number, keep the reference markers and the tools' names in words
exactly where the original has them, and copy no tool description: the rules of ``synth sessions``
(:func:`toolwild.synth.utterances.wording_problems`), read from the suite itself since a suite does not keep the
generator's notes. A rewording that breaks them is sent back once with what is wrong (the checked writer of
:func:`toolwild.llm.structured.write_checked`), then the original utterance is kept: a *fallback*, counted and
recorded per session. Replies to clarification questions are not reworded.

:func:`perturb_with_model` applies a whole ``--perturb`` value: ``paraphrase`` first, then the code kinds of
:mod:`toolwild.core.perturb` with the built-in environments' tools as the distractor pool and each environment's
write tools looked up (the scorer needs them under their new names). :func:`write_perturbed_suite` does it on a
suite file, which is what ``eval``, ``validate`` and ``synth sessions`` call.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from toolwild.core.formats.wtb import load_wtb_suite, write_wtb_suite
from toolwild.core.hidden_intent import mentions, scalar_values
from toolwild.core.overlap import copied_description_spans
from toolwild.core.perturb import PerturbationRecord, parse_kinds, perturb_suite, suite_perturbation
from toolwild.core.references import ARG_MARKERS, FIRST_MARKERS, RESULT_MARKERS, humanize
from toolwild.core.session import Session, Suite
from toolwild.core.tool import Effect, Tool
from toolwild.errors import ConfigError
from toolwild.llm.client import LLM
from toolwild.llm.structured import write_checked

__all__ = [
    "REWORDING_SYSTEM",
    "ParaphraseReport",
    "PerturbOutcome",
    "Rewording",
    "builtin_tools",
    "paraphrase_suite",
    "perturb_with_model",
    "rewording_brief",
    "rewording_problems",
    "rewording_values",
    "write_perturbed_suite",
]

_MARKERS = (*ARG_MARKERS, *RESULT_MARKERS, *FIRST_MARKERS)
_VOICES = ("the user", "the assistant", "no tool")
_WITH_DIGIT = re.compile(r"\S*\d\S*")
_EDGES = ".,;:!?()[]{}\"'$€£%"
_CONCURRENCY = 32
"""Rewordings asked for at once (the client's own limit still applies)."""

REWORDING_SYSTEM = (
    "You reword what a user typed to an assistant that can call tools, the way another person would say the same "
    "thing. Keep the meaning and every detail. State every value under 'keep these values' exactly as written. Never "
    "state a value under 'do not say': the assistant must take it from the conversation or ask for it. Keep every "
    "phrase under 'keep these words' word for word. Add no number, and do not copy the tools' descriptions. Write "
    "as the user, in the first person. Reply with JSON only."
)
"""The rewording model's instructions (the user message is :func:`rewording_brief`, the reply a :class:`Rewording`);
the ledger's model writer (:mod:`toolwild.synth.providers.ledger.rewrite`) asks the same way."""


class Rewording(BaseModel):
    """A rewording's reply: one JSON object with the new utterance."""

    model_config = ConfigDict(extra="forbid")

    utterance: str = Field(description="The same request in other words, as the user would type it.")


# ---------------------------------------------------------------------------------------------- the rules
def rewording_values(session: Session, index: int) -> list[Any]:
    """The values a rewording of task ``index`` must state or withhold exactly as the original does: the task's own
    gold arguments, the earlier tasks' (what a reference points at), and the values users named in passing."""
    found: list[Any] = []
    for task in session.tasks[: index + 1]:
        for node in task.call_nodes:
            found += scalar_values(node.action.arguments)
    named = session.extra.get("mentioned_values")
    if isinstance(named, list):
        found += scalar_values(named)
    out: list[Any] = []
    for value in found:
        if value not in out:
            out.append(value)
    return out


def _phrases(session: Session) -> list[str]:
    """Phrases whose presence a rewording must keep: the reference markers, and each tool's name in words (a task
    worded by what a tool does must not start naming it, nor the other way round)."""
    return list(dict.fromkeys([*_MARKERS, *(humanize(t.name) for t in session.tools if t.name)]))


def _says(text: str, phrase: str) -> bool:
    return re.search(rf"(?<![\w]){re.escape(phrase)}(?![\w])", text.lower()) is not None


def rewording_problems(text: str, original: str, session: Session, index: int) -> list[str]:
    """What a rewording of task ``index``'s utterance gets wrong against the original (empty when it is fair).

    Each problem is a ``- utterance: ...`` line the model is shown to fix.
    """
    problems: list[str] = []
    low, before = text.lower(), original.lower()
    if not text.strip() or len(text) > 600:
        problems.append("- utterance: must be one to a few sentences (1-600 characters)")
    if " ".join(text.lower().split()) == " ".join(original.lower().split()):
        problems.append("- utterance: reword it: this is the original text")
    for value in rewording_values(session, index):
        was, now = mentions(original, value), mentions(text, value)
        if was and not now:
            problems.append(f"- utterance: must state the value {value!r} exactly, as the original does")
        elif now and not was:
            problems.append(f"- utterance: must not state {value!r} (the original leaves it to the conversation)")
    for token in dict.fromkeys(t.strip(_EDGES) for t in _WITH_DIGIT.findall(text)):
        if token and token.lower() not in before and not mentions(original, token):
            problems.append(f"- utterance: must not add the number {token!r}")
    for phrase in _phrases(session):
        was, now = _says(original, phrase), _says(text, phrase)
        if was and not now:
            problems.append(f"- utterance: must keep the words {phrase!r}")
        elif now and not was:
            problems.append(f"- utterance: must not use the words {phrase!r}")
    if any(voice in low and voice not in before for voice in _VOICES):
        problems.append("- utterance: write as the user, in the first person (not about 'the user')")
    copied = set(copied_description_spans(text, session.tools)) - set(copied_description_spans(original, session.tools))
    for span in sorted(copied):
        problems.append(f"- utterance: must not copy the tool description ({span!r}); say it in your own words")
    return problems


def rewording_brief(session: Session, index: int) -> dict[str, Any]:
    """What the model is told about task ``index``'s utterance: the earlier user turns, the words to reword, the
    values to keep and to leave out, and the phrases to keep (:data:`REWORDING_SYSTEM` says what to do with them)."""
    original = session.tasks[index].utterance
    values = rewording_values(session, index)
    return {
        "conversation so far (user turns)": [t.utterance for t in session.tasks[:index]],
        "reword": original,
        "keep these values": [v for v in values if mentions(original, v)],
        "do not say": [v for v in values if not mentions(original, v)],
        "keep these words": [p for p in _phrases(session) if _says(original, p)],
    }


# ---------------------------------------------------------------------------------------------- rewording
class ParaphraseReport(BaseModel):
    """How a suite's rewording went."""

    model_config = ConfigDict(extra="forbid")

    utterances: int = 0
    reworded: int = 0
    fallbacks: int = 0
    """Utterances whose rewording broke the rules twice: the original was kept."""
    by_session: dict[str, tuple[list[int], list[int]]] = Field(default_factory=dict)
    """Session id -> (tasks reworded, tasks that fell back)."""


async def _reword(llm: LLM, session: Session, index: int, seed: int, gate: asyncio.Semaphore) -> tuple[str, bool]:
    original = session.tasks[index].utterance
    messages = [
        {"role": "system", "content": REWORDING_SYSTEM},
        {"role": "user", "content": json.dumps(rewording_brief(session, index), ensure_ascii=False)},
    ]
    async with gate:
        return await write_checked(
            llm,
            messages,
            Rewording,
            "utterance",
            lambda text: rewording_problems(text, original, session, index),
            original,
            name="paraphrase",
            role="paraphraser",
            seed=seed,
            max_tokens=200,
        )


async def paraphrase_suite(suite: Suite, llm: LLM, *, seed: int = 0) -> tuple[Suite, ParaphraseReport]:
    """Every task utterance reworded by ``llm`` under :func:`rewording_problems`, or kept (and counted) when the
    model cannot; the rest of the suite is unchanged. Each rewording sees the original earlier turns, so the
    utterances are asked for all at once; the client's cache makes a second run free and identical."""
    gate = asyncio.Semaphore(_CONCURRENCY)
    jobs = [(s, i) for s in suite.sessions for i in range(len(s.tasks))]
    results = await asyncio.gather(*(_reword(llm, s, i, seed, gate) for s, i in jobs))
    report = ParaphraseReport(utterances=len(jobs))
    texts: dict[tuple[str, int], str] = {}
    for (session, index), (text, by_model) in zip(jobs, results, strict=True):
        done, kept = report.by_session.setdefault(session.id, ([], []))
        (done if by_model else kept).append(index)
        texts[(session.id, index)] = text
    report.reworded = sum(len(d) for d, _ in report.by_session.values())
    report.fallbacks = report.utterances - report.reworded
    sessions = [
        s.model_copy(
            update={"tasks": [t.model_copy(update={"utterance": texts[(s.id, i)]}) for i, t in enumerate(s.tasks)]}
        )
        for s in suite.sessions
    ]
    return suite.model_copy(update={"sessions": sessions}), report


# ---------------------------------------------------------------------------------------------- the whole --perturb
@dataclass
class PerturbOutcome:
    """A perturbed suite and what was done to it."""

    suite: Suite
    record: PerturbationRecord
    paraphrase: ParaphraseReport | None = None

    def summary(self) -> str:
        """One line for the terminal: the kinds, the seed, the base and, for ``paraphrase``, the fallbacks."""
        line = f"perturbed: {self.record.label()}, a perturbation of suite {self.record.base[:12]}"
        if self.paraphrase is not None:
            p = self.paraphrase
            line += (
                f"; paraphrase: {p.reworded} of {p.utterances} utterance(s) reworded, {p.fallbacks} kept the original "
                "(rewording broke the wording rules)"
            )
        return line


def builtin_tools() -> list[Tool]:
    """The built-in environments' tools (the distractor pool beside the suite's own other sessions)."""
    from toolwild.envs.registry import ENVIRONMENTS, environment_tools

    return [t for env_id in sorted(ENVIRONMENTS) for t in environment_tools(env_id)]


def _write_tool_lookup(base_dir: Path | None):
    """The write tools of a session's environment, by its declarations (None when it cannot be described)."""
    from toolwild.envs.registry import environment_tools

    def lookup(session: Session) -> Collection[str] | None:
        if not session.environment:
            return None
        try:
            tools = environment_tools(session.environment, base_dir=base_dir)
        except ConfigError:
            return None
        return {t.name for t in tools if t.effect is Effect.WRITE}

    return lookup


async def perturb_with_model(
    suite: Suite,
    kinds: str,
    *,
    seed: int = 0,
    llm: LLM | None = None,
    base_dir: Path | None = None,
    pool: list[Tool] | None = None,
) -> PerturbOutcome:
    """The perturbed copy a ``--perturb`` value asks for (see the module docstring).

    Args:
        suite: the base suite (its fingerprint is recorded as the base).
        kinds: the ``--perturb`` value.
        seed: the same seed gives the same copy (and, with a cached or deterministic model, the same rewording).
        llm: the model that rewords utterances (needed for ``paraphrase`` only).
        base_dir: where the sessions' environment files resolve (the suite's folder).
        pool: the distractor pool (default: the built-in environments' tools).

    Raises:
        ConfigError: a bad value, ``paraphrase`` without a model, or a suite that is already a perturbation.
    """
    parsed = parse_kinds(kinds)
    base = suite.fingerprint()
    report = None
    if any(k.name == "paraphrase" for k in parsed):
        if llm is None:
            raise ConfigError("--perturb paraphrase needs a model to reword the utterances")
        if suite_perturbation(suite) is not None:
            raise ConfigError("the suite is already a perturbation: perturb its base suite")
        suite, report = await paraphrase_suite(suite, llm, seed=seed)
    perturbed = perturb_suite(
        suite,
        parsed,
        seed,
        pool=builtin_tools() if pool is None else pool,
        write_tools=_write_tool_lookup(base_dir),
        base=base,
        paraphrased=report.by_session if report is not None else None,
    )
    record = suite_perturbation(perturbed)
    assert record is not None
    return PerturbOutcome(perturbed, record, report)


async def perturbed_copy(
    suite: Suite,
    kinds: str,
    *,
    seed: int = 0,
    model: str | None = None,
    base_url: str | None = None,
    cache: Path | None = None,
    base_dir: Path | None = None,
) -> PerturbOutcome:
    """The perturbed copy of ``suite`` that a ``--perturb`` value asks for (:func:`perturb_with_model`), with the
    model that rewords utterances built from its name (``model``, ``base_url``, its response ``cache``) only for
    ``paraphrase``, and closed when done: what ``validate --perturb`` and ``evaluate(perturb=...)`` share.

    Raises:
        ConfigError: ``paraphrase`` without a model, or a bad value (see :func:`perturb_with_model`).
    """
    from toolwild.llm.registry import create_llm

    paraphrase = any(k.name == "paraphrase" for k in parse_kinds(kinds))
    if paraphrase and model is None:
        raise ConfigError("--perturb paraphrase needs a model to reword the utterances: give --perturb-model M")
    llm = create_llm(model, base_url=base_url, cache=cache) if paraphrase and model is not None else None
    try:
        return await perturb_with_model(suite, kinds, seed=seed, llm=llm, base_dir=base_dir)
    finally:
        if llm is not None:
            await llm.aclose()


def _anchored(suite: Suite, folder: Path) -> Suite:
    """Environment files and ledger snapshots named relative to the suite's folder, made absolute (the perturbed
    copy is written elsewhere, e.g. into a run folder)."""
    sessions = []
    for session in suite.sessions:
        update: dict[str, Any] = {}
        env = session.environment
        if env and not Path(env).is_absolute() and (folder / env).is_file():
            update["environment"] = str((folder / env).resolve())
        ledger = session.extra.get("ledger_file")
        if isinstance(ledger, str) and not Path(ledger).is_absolute() and (folder / ledger).is_file():
            update["extra"] = {**session.extra, "ledger_file": str((folder / ledger).resolve())}
        sessions.append(session.model_copy(update=update) if update else session)
    return suite.model_copy(update={"sessions": sessions})


async def write_perturbed_suite(
    source: Path,
    out: Path,
    kinds: str,
    *,
    seed: int = 0,
    llm: LLM | None = None,
    skip_invalid: bool = False,
) -> PerturbOutcome:
    """Read the suite at ``source``, perturb it and write the copy to ``out`` (which may be ``source`` itself:
    the suite is read whole first, and the copy is written atomically). References to files beside ``source`` are
    made absolute when ``out`` lives in another folder.
    """
    suite, _report = load_wtb_suite(source, skip_invalid=skip_invalid)
    folder = source.resolve().parent
    outcome = await perturb_with_model(suite, kinds, seed=seed, llm=llm, base_dir=folder)
    if out.resolve().parent != folder:
        outcome.suite = _anchored(outcome.suite, folder)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_wtb_suite(outcome.suite, out)
    return outcome
