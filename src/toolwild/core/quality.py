"""How good a suite is as training data: varied wording, real answers, unambiguous references, labels that hold.

A suite can be valid (every gold path scores, every call replays) and still teach a model the wrong things: the same
templated sentence a thousand times, a final answer that dumps JSON at the user, a tool description pasted into what
the user says, a reference with two candidates. These figures make that visible, for any suite (``toolwild validate
--quality``) and for every generated one (the ``quality`` block of ``SUITE.jsonl.report.json``):

- **distinct user turns**: the user's turns are the task utterances and the replies to asks; two are the same when
  they match after lower-casing and collapsing whitespace;
- **distinct-n** (n = 2, 3) over the utterances: distinct word n-grams / all word n-grams, across the suite;
- **answers**: tool tasks (tasks with a call) whose gold final answer passes
  :func:`toolwild.core.answers.answer_problems` against the task's own call results and the earlier tasks';
- **ambiguity**: references the checker :func:`toolwild.core.references.ambiguous_references` finds, and (for a
  generation run) the task attempts dropped as ``ambiguous_reference``;
- **copied description spans**: user turns sharing a span of 6+ words with a tool description of the session
  (:func:`toolwild.core.overlap.copied_description_spans`);
- **subtypes**: per hidden-intent label, how many tasks carry it and how many of those the values bear out (no
  label finding of :func:`toolwild.core.hidden_intent.check_subtypes` for the task; its ambiguity findings are the
  figure above, not counted twice).

Streaming: :class:`QualityCounter` takes one session at a time and keeps only counters, 64-bit digests of what must
be told apart (turns and n-grams) and a few examples, so a 100,000-session suite is never held a second time.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from toolwild.core.answers import answer_problems
from toolwild.core.hidden_intent import check_subtypes
from toolwild.core.overlap import copied_description_spans
from toolwild.core.references import AMBIGUOUS_REFERENCE, ambiguous_references
from toolwild.core.session import Session, Suite
from toolwild.core.task import NodeKind, Task, TurnSubtype

__all__ = [
    "AMBIGUOUS_DROP",
    "AmbiguityQuality",
    "AnswerQuality",
    "CopiedSpanQuality",
    "DistinctCount",
    "Example",
    "QualityCounter",
    "SubtypeBacking",
    "SuiteQuality",
    "distinct_key",
    "suite_quality",
    "user_turns",
    "words",
]

AMBIGUOUS_DROP = AMBIGUOUS_REFERENCE
MAX_EXAMPLES = 5
"""Examples kept per figure: enough to see the pattern, few enough for a report a person reads."""
_EXAMPLE_CHARS = 200
_WORD = re.compile(r"\w+(?:['’.,\-]\w+)*")
"""A word: letters/digits, with inner apostrophes, hyphens and number punctuation kept ("don't", "1,250.00")."""


class Example(BaseModel):
    """One case behind a figure, to be looked at: where it is and what is wrong."""

    model_config = ConfigDict(extra="forbid")

    session: str
    task: int
    text: str
    """The text concerned (shortened): the answer, the user turn."""
    why: list[str] = Field(default_factory=list)


class DistinctCount(BaseModel):
    """How many of ``count`` items are distinct, and the share."""

    model_config = ConfigDict(extra="forbid")

    count: int = 0
    distinct: int = 0
    share: float | None = None
    """``distinct / count`` (None when there is nothing to count)."""


class AnswerQuality(BaseModel):
    """Tool tasks whose gold final answer passes the answer check."""

    model_config = ConfigDict(extra="forbid")

    tool_tasks: int = 0
    passing: int = 0
    share: float | None = None
    failures: list[Example] = Field(default_factory=list)
    """Up to five answers that fail, with the check's problems."""


class AmbiguityQuality(BaseModel):
    """Ambiguous references: what generation dropped and what the checker finds in the suite."""

    model_config = ConfigDict(extra="forbid")

    generation_drops: int | None = None
    """Task attempts dropped as ``ambiguous_reference`` by the run that made the suite (None: not a generation run)."""
    findings: int = 0
    """Checker findings in the suite."""
    tasks: int = 0
    """Tasks with at least one finding."""
    examples: list[Example] = Field(default_factory=list)


class CopiedSpanQuality(BaseModel):
    """User turns that repeat 6+ words of a tool description of their session."""

    model_config = ConfigDict(extra="forbid")

    turns: int = 0
    examples: list[Example] = Field(default_factory=list)


class SubtypeBacking(BaseModel):
    """Tasks labelled with one hidden-intent subtype, and how many of them the values bear out."""

    model_config = ConfigDict(extra="forbid")

    labels: int = 0
    value_backed: int = 0


class SuiteQuality(BaseModel):
    """The quality figures of a suite (see the module docstring)."""

    model_config = ConfigDict(extra="forbid")

    sessions: int = 0
    tasks: int = 0
    user_turns: DistinctCount = Field(default_factory=DistinctCount)
    distinct_2: DistinctCount = Field(default_factory=DistinctCount)
    """Word bigrams of the utterances: ``count`` all, ``distinct`` distinct, ``share`` distinct-2."""
    distinct_3: DistinctCount = Field(default_factory=DistinctCount)
    answers: AnswerQuality = Field(default_factory=AnswerQuality)
    ambiguity: AmbiguityQuality = Field(default_factory=AmbiguityQuality)
    copied_description_spans: CopiedSpanQuality = Field(default_factory=CopiedSpanQuality)
    subtypes: dict[str, SubtypeBacking] = Field(default_factory=dict)
    """Per subtype label (the published names), in :class:`~toolwild.core.task.TurnSubtype` order."""


def distinct_key(text: str) -> str:
    """What makes two user turns "the same": the text lower-cased with whitespace runs collapsed."""
    return " ".join(text.lower().split())


def words(text: str) -> list[str]:
    """The lower-cased words of a text (punctuation between words is not a word)."""
    return _WORD.findall(text.lower())


def user_turns(task: Task) -> list[str]:
    """What the user says in a task: the utterance, then each reply to an ask."""
    return [task.utterance, *(n.user_input for n in task.gold if n.kind is NodeKind.ASK and n.user_input is not None)]


def _digest(text: str) -> bytes:
    """A 64-bit digest: exact enough to tell turns and n-grams apart (a collision among millions is ~1e-7), a fixed
    eight bytes whatever the text's length, and the same in every process (``hash()`` is salted per process)."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest()


def _share(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def _short(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _EXAMPLE_CHARS else flat[: _EXAMPLE_CHARS - 1] + "…"


def _call_results(task: Task) -> list[Any]:
    return [n.observation for n in task.call_nodes]


def _final_answer(task: Task) -> str | None:
    """The text of the task's last answer node (a non-string answer as its JSON, which the check then rejects)."""
    answers = [n.observation for n in task.gold if n.kind is NodeKind.ANSWER]
    if not answers or answers[-1] is None:
        return None
    last = answers[-1]
    return last if isinstance(last, str) else json.dumps(last, ensure_ascii=False)


class QualityCounter:
    """Accumulates the quality figures one session at a time (see the module docstring); :meth:`result` gives them.

    Why an accumulator: the generator writes sessions one by one and the validator may read a very large suite; both
    can feed the counter as they go instead of keeping the suite for a second pass.
    """

    def __init__(self) -> None:
        self.sessions = 0
        self.tasks = 0
        self._turns = 0
        self._distinct_turns: set[bytes] = set()
        self._ngrams: dict[int, int] = {2: 0, 3: 0}
        self._distinct_ngrams: dict[int, set[bytes]] = {2: set(), 3: set()}
        self._answers = AnswerQuality()
        self._ambiguity = AmbiguityQuality()
        self._spans = CopiedSpanQuality()
        self._labels: Counter[str] = Counter()
        self._backed: Counter[str] = Counter()

    def add(self, session: Session) -> None:
        """Count one session."""
        self.sessions += 1
        self.tasks += len(session.tasks)
        earlier: list[Any] = []
        for i, task in enumerate(session.tasks):
            self._add_turns(session, i, task)
            self._add_ngrams(task.utterance)
            self._add_answer(session, i, task, earlier)
            earlier += _call_results(task)
        self._add_subtypes(session)
        self._add_ambiguity(session)

    def _add_turns(self, session: Session, index: int, task: Task) -> None:
        for turn in user_turns(task):
            self._turns += 1
            self._distinct_turns.add(_digest(distinct_key(turn)))
            spans = copied_description_spans(turn, session.tools, n=6)
            if spans:
                self._spans.turns += 1
                if len(self._spans.examples) < MAX_EXAMPLES:
                    shown = [_short(str(s)) for s in list(spans)[:3]]
                    self._spans.examples.append(Example(session=session.id, task=index, text=_short(turn), why=shown))

    def _add_ngrams(self, utterance: str) -> None:
        tokens = words(utterance)
        for n, seen in self._distinct_ngrams.items():
            grams = [" ".join(tokens[k : k + n]) for k in range(len(tokens) - n + 1)]
            self._ngrams[n] += len(grams)
            seen.update(_digest(g) for g in grams)

    def _add_answer(self, session: Session, index: int, task: Task, earlier: list[Any]) -> None:
        if not task.call_nodes:
            return
        self._answers.tool_tasks += 1
        answer = _final_answer(task)
        problems = (
            ["the task has no final answer"]
            if answer is None
            else answer_problems(answer, _call_results(task), earlier)
        )
        if not problems:
            self._answers.passing += 1
        elif len(self._answers.failures) < MAX_EXAMPLES:
            self._answers.failures.append(
                Example(session=session.id, task=index, text=_short(answer or ""), why=[str(p) for p in problems])
            )

    def _add_subtypes(self, session: Session) -> None:
        # only the label findings: an ambiguous reference is counted apart (ambiguity), not as an unbacked label
        flagged = {f.task_index for f in check_subtypes(session) if f.kind == "label"}
        for i, task in enumerate(session.tasks):
            label = task.subtype.value
            self._labels[label] += 1
            if i not in flagged:
                self._backed[label] += 1

    def _add_ambiguity(self, session: Session) -> None:
        findings = ambiguous_references(session)
        self._ambiguity.findings += len(findings)
        self._ambiguity.tasks += len({f.task_index for f in findings})
        for f in findings:
            if len(self._ambiguity.examples) >= MAX_EXAMPLES:
                break
            task = session.tasks[f.task_index] if 0 <= f.task_index < len(session.tasks) else None
            text = _short(task.utterance) if task is not None else ""
            self._ambiguity.examples.append(Example(session=session.id, task=f.task_index, text=text, why=[f.message]))

    def result(self, *, drops: Mapping[str, int] | None = None) -> SuiteQuality:
        """The figures so far. ``drops``: the generation run's drop counts by reason (None for a suite read from a
        file, whose generation is unknown)."""
        answers = self._answers.model_copy(deep=True)
        answers.share = _share(answers.passing, answers.tool_tasks)
        ambiguity = self._ambiguity.model_copy(deep=True)
        ambiguity.generation_drops = int(drops.get(AMBIGUOUS_DROP, 0)) if drops is not None else None
        return SuiteQuality(
            sessions=self.sessions,
            tasks=self.tasks,
            user_turns=self._distinct(self._turns, self._distinct_turns),
            distinct_2=self._distinct(self._ngrams[2], self._distinct_ngrams[2]),
            distinct_3=self._distinct(self._ngrams[3], self._distinct_ngrams[3]),
            answers=answers,
            ambiguity=ambiguity,
            copied_description_spans=self._spans.model_copy(deep=True),
            subtypes={
                label: SubtypeBacking(labels=self._labels[label], value_backed=self._backed[label])
                for label in (s.value for s in TurnSubtype)
                if self._labels[label]
            },
        )

    @staticmethod
    def _distinct(count: int, seen: set[bytes]) -> DistinctCount:
        return DistinctCount(count=count, distinct=len(seen), share=_share(len(seen), count))


def suite_quality(suite: Suite | Iterable[Session], *, drops: Mapping[str, int] | None = None) -> SuiteQuality:
    """The quality figures of a suite (or any iterable of sessions, consumed once); ``drops`` as in
    :meth:`QualityCounter.result`."""
    counter = QualityCounter()
    for session in suite.sessions if isinstance(suite, Suite) else suite:
        counter.add(session)
    return counter.result(drops=drops)
