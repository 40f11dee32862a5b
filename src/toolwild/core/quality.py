"""How good a suite is as training data: varied wording, real answers, unambiguous references, labels that hold.

A suite can be valid (every gold path scores, every call replays) and still teach a model the wrong things: the same
templated sentence a thousand times, a final answer that dumps JSON at the user, a tool description pasted into what
the user says, a reference with two candidates. These figures make that visible, for any suite (``toolwild validate
--quality``) and for every generated one (the ``quality`` block of ``SUITE.jsonl.report.json``):

- **distinct user turns**: the user's turns are the task utterances and the replies to asks; two are the same when
  they match after lower-casing and collapsing whitespace (:func:`distinct_key`);
- **distinct utterances**: the same over the task utterances alone (the first thing a user says in a task);
- **repeated turns**: the most times one user turn occurs in the suite, how many turns occur twice or more, and the
  (up to five) most repeated with their counts;
- **distinct-n** (n = 2, 3) over the utterances: distinct word n-grams / all word n-grams, across the suite;
- **distinct first four words**: the task utterances' openings, their first four words (:func:`words`; all of them
  when fewer), as distinct openings / utterances;
- **answers**: tool tasks (tasks with a call) whose gold final answer passes
  :func:`toolwild.core.answers.answer_problems` against the task's own call results and the earlier tasks';
- **chat answers**: chat tasks (no call node, a final answer) and how many distinct final answers they have
  (:func:`distinct_key` of the answer);
- **ambiguity**: references the checker :func:`toolwild.core.references.ambiguous_references` finds, and (for a
  generation run) the task attempts dropped as ``ambiguous_reference``;
- **copied description spans**: user turns sharing a span of 6+ words with a tool description of the session
  (:func:`toolwild.core.overlap.copied_description_spans`);
- **subtypes**: per hidden-intent label, how many tasks carry it and how many of those the values bear out (no
  label finding of :func:`toolwild.core.hidden_intent.check_subtypes` for the task; its ambiguity findings are the
  figure above, not counted twice);
- **wild behaviours**: per :class:`~toolwild.core.wild.Wild` behaviour, the tasks that carry it (the generator's
  record, :func:`toolwild.core.wild.wild_behaviours`) and their share of all tasks; all six are listed, at 0 for a
  suite that records none;
- **semantic diversity** (when the caller gives a :class:`TextEncoder`): over a sample of at most
  :data:`SEMANTIC_SAMPLE` distinct utterances, the share whose nearest other sampled utterance has cosine >= tau
  (near-duplicates in meaning, which distinct-n misses when the words change but the request does not), the mean
  cosine of all pairs, and the **near-paraphrase share** over utterances rather than distinct texts: each sampled
  text counted as often as the suite says it (an exact repeat is a paraphrase at cosine 1, so a text said twice or
  more has one), the share of those utterances that have another utterance at cosine >= tau. Core knows no encoder
  (they live in ``toolwild.synth``): the caller wraps one.

Streaming: :class:`QualityCounter` takes one session at a time and keeps only counters, 64-bit digests of what must
be told apart (turns with their counts, n-grams, openings, chat answers), a few examples (the texts of the current
most repeated turns among them) and the bounded utterance sample with a count per sampled text, so a 100,000-session
suite is never held a second time.
"""

from __future__ import annotations

import hashlib
import heapq
import json
import re
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from toolwild.core.answers import answer_problems
from toolwild.core.grounding import ungrounded_identifiers
from toolwild.core.hidden_intent import check_subtypes
from toolwild.core.overlap import copied_description_spans
from toolwild.core.references import AMBIGUOUS_REFERENCE, ambiguous_references
from toolwild.core.session import Session, Suite
from toolwild.core.task import NodeKind, Task, TurnSubtype
from toolwild.core.wild import Wild, wild_behaviours
from toolwild.errors import MissingDependencyError

__all__ = [
    "AMBIGUOUS_DROP",
    "CHECKS_VERSION",
    "SEMANTIC_SAMPLE",
    "SEMANTIC_TAU",
    "AmbiguityQuality",
    "AnswerQuality",
    "CopiedSpanQuality",
    "DistinctCount",
    "Example",
    "QualityCounter",
    "RepeatedTurn",
    "RepeatedTurns",
    "SemanticDiversity",
    "SimilarPair",
    "SimpleEncoder",
    "SubtypeBacking",
    "SuiteQuality",
    "TextEncoder",
    "WildRate",
    "distinct_key",
    "semantic_diversity",
    "session_checks",
    "suite_quality",
    "user_turns",
    "words",
]

AMBIGUOUS_DROP = AMBIGUOUS_REFERENCE
MAX_EXAMPLES = 5
"""Examples kept per figure: enough to see the pattern, few enough for a report a person reads."""
_EXAMPLE_CHARS = 200
OPENING_WORDS = 4
"""Words of an utterance's opening (the distinct first four words figure)."""
_WORD = re.compile(r"\w+(?:['’.,\-]\w+)*")
"""A word: letters/digits, with inner apostrophes, hyphens and number punctuation kept ("don't", "1,250.00")."""
SEMANTIC_SAMPLE = 2000
"""Distinct utterances embedded at most: all pairs of 2,000 are 2 million cosines (milliseconds), and the embedding
is the cost (about 20 s with MiniLM on 2 cores). A larger suite is measured on a sample, so the near-duplicate share
of two suites is comparable at the same sample size."""
SEMANTIC_TAU = 0.85
"""The near-duplicate threshold: dedup's published one (``toolwild.synth.embedding.DEFAULT_TAU``, not importable
from core), at which a reworded or reordered sentence stays a duplicate with MiniLM."""
_MIN_FITTED = 200
"""Texts a corpus-fitted encoder needs (see ``toolwild.synth.embedders.token.TokenEmbedder``)."""
_BLOCK = 512


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


class GroundingQuality(BaseModel):
    """Gold identifiers the agent was never shown (:func:`toolwild.core.grounding.ungrounded_identifiers`)."""

    model_config = ConfigDict(extra="forbid")

    tool_tasks: int = 0
    """Tasks with at least one gold call."""
    tasks: int = 0
    """Tool tasks with at least one ungrounded identifier."""
    identifiers: int = 0
    """Ungrounded gold argument values, in all."""
    examples: list[Example] = Field(default_factory=list)


class CopiedSpanQuality(BaseModel):
    """User turns that repeat 6+ words of a tool description of their session."""

    model_config = ConfigDict(extra="forbid")

    turns: int = 0
    examples: list[Example] = Field(default_factory=list)


class RepeatedTurn(BaseModel):
    """One user turn and how many times the suite says it."""

    model_config = ConfigDict(extra="forbid")

    text: str
    """The turn as said when it joined the most repeated (shortened; other times may differ in case and spacing)."""
    count: int


class RepeatedTurns(BaseModel):
    """How often the same user turn (:func:`distinct_key`) comes back across the suite."""

    model_config = ConfigDict(extra="forbid")

    most: int = 0
    """The most times one user turn occurs (0: no turns; 1: none repeats)."""
    repeated: int = 0
    """Distinct user turns that occur twice or more."""
    examples: list[RepeatedTurn] = Field(default_factory=list)
    """Up to five of the most repeated turns (each occurring twice or more), the most repeated first, then by text;
    where more turns tie for the last places than there is room, those kept are the ones that were among the most
    repeated first."""


class WildRate(BaseModel):
    """The tasks that carry one wild behaviour."""

    model_config = ConfigDict(extra="forbid")

    tasks: int = 0
    share: float | None = None
    """``tasks`` / all tasks of the suite (None when it has none)."""


class SubtypeBacking(BaseModel):
    """Tasks labelled with one hidden-intent subtype, and how many of them the values bear out."""

    model_config = ConfigDict(extra="forbid")

    labels: int = 0
    value_backed: int = 0


class TextEncoder(Protocol):
    """What the semantic figure needs of an encoder; the caller wraps one (core cannot import ``toolwild.synth``).

    ``embed`` returns one row per text (float; rows are normalised here, so cosine is a dot product); ``label`` says
    which encoder it is (recorded in the figure); ``corpus_fitted`` marks an encoder that learns from the texts it
    embeds and so needs 200+ of them. Both are read again after ``embed``: an encoder loaded on its first use (some
    take seconds to load, wasted on a suite too small to measure) may know exactly what it is only then, and may
    raise :class:`~toolwild.errors.MissingDependencyError` from ``embed`` (the figure then says why it is missing).
    """

    @property
    def label(self) -> str: ...

    @property
    def corpus_fitted(self) -> bool: ...

    def embed(self, texts: Sequence[str]) -> Any: ...


@dataclass(frozen=True)
class SimpleEncoder:
    """A :class:`TextEncoder` made of a function and its label."""

    embed: Callable[[Sequence[str]], Any]
    label: str
    corpus_fitted: bool = False


class SimilarPair(BaseModel):
    """Two sampled utterances at cosine >= tau: what the encoder takes for the same request."""

    model_config = ConfigDict(extra="forbid")

    cosine: float
    first: Example
    second: Example


class SemanticDiversity(BaseModel):
    """How varied the utterances are in meaning, measured on a sample (see the module docstring)."""

    model_config = ConfigDict(extra="forbid")

    encoder: str
    """Which encoder made the vectors (its label, with its fallback note when it is one)."""
    tau: float
    of: int
    """Distinct utterances in the suite (lower-cased, whitespace collapsed)."""
    sampled: int
    """Of those, how many were embedded (at most :data:`SEMANTIC_SAMPLE`; a sample fixed by the texts alone)."""
    near_duplicates: int
    """Sampled utterances whose nearest other sampled utterance has cosine >= ``tau``."""
    near_duplicate_share: float
    utterances: int
    """The task utterances the sampled texts stand for: each sampled text counted as often as the suite has it
    (:func:`distinct_key`)."""
    near_paraphrases: int
    """Of those utterances, how many have another utterance at cosine >= ``tau``: every occurrence of a sampled text
    said twice or more (an exact repeat, cosine 1), and every occurrence of one whose nearest other sampled text has
    cosine >= ``tau``. Only sampled texts are neighbours, so on a sample this is a lower bound per text; exact when
    the suite has at most :data:`SEMANTIC_SAMPLE` distinct utterances."""
    near_paraphrase_share: float
    """``near_paraphrases / utterances``: the share of utterances with a near-paraphrase."""
    mean_cosine: float
    """The mean cosine of all pairs of sampled utterances: lower is more varied."""
    examples: list[SimilarPair] = Field(default_factory=list)
    """Up to five near-duplicate pairs, the closest first."""


class SuiteQuality(BaseModel):
    """The quality figures of a suite (see the module docstring)."""

    model_config = ConfigDict(extra="forbid")

    sessions: int = 0
    tasks: int = 0
    user_turns: DistinctCount = Field(default_factory=DistinctCount)
    utterances: DistinctCount = Field(default_factory=DistinctCount)
    """Task utterances (``count``, one a task) and how many are distinct (:func:`distinct_key`)."""
    repeated_turns: RepeatedTurns = Field(default_factory=RepeatedTurns)
    distinct_2: DistinctCount = Field(default_factory=DistinctCount)
    """Word bigrams of the utterances: ``count`` all, ``distinct`` distinct, ``share`` distinct-2."""
    distinct_3: DistinctCount = Field(default_factory=DistinctCount)
    first_words: DistinctCount = Field(default_factory=DistinctCount)
    """Task utterances (``count``) and their distinct openings of :data:`OPENING_WORDS` words (``distinct``)."""
    answers: AnswerQuality = Field(default_factory=AnswerQuality)
    chat_answers: DistinctCount = Field(default_factory=DistinctCount)
    """Chat tasks (no call node, a final answer: ``count``) and their distinct final answers (``distinct``)."""
    ambiguity: AmbiguityQuality = Field(default_factory=AmbiguityQuality)
    grounding: GroundingQuality = Field(default_factory=GroundingQuality)
    copied_description_spans: CopiedSpanQuality = Field(default_factory=CopiedSpanQuality)
    subtypes: dict[str, SubtypeBacking] = Field(default_factory=dict)
    """Per subtype label (the published names), in :class:`~toolwild.core.task.TurnSubtype` order."""
    wild: dict[str, WildRate] = Field(default_factory=lambda: {w.value: WildRate() for w in Wild})
    """Per wild behaviour (every one of :class:`~toolwild.core.wild.Wild`, in its order): the tasks that carry it."""
    semantic: SemanticDiversity | None = None
    """Semantic diversity of the utterances (None: not measured; :attr:`semantic_note` says why)."""
    semantic_note: str | None = None
    """Why :attr:`semantic` is None."""


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


class _Sample:
    """The distinct utterances with the ``size`` smallest seeded digests (a bottom-k sample), and how many there are.

    Why not a reservoir: what a reservoir keeps depends on the order texts arrive in; the smallest digests depend on
    the set of texts alone, so a suite gives the same sample streamed by the generator or read back from its file,
    in any order, and it is still a uniform random sample of the distinct utterances (the digest is the coin).
    Two texts that are the same (:func:`distinct_key`) keep the smaller (text, session, task), for the same reason.

    Each held text also keeps how often it occurs, and that count is exact: a text in the final sample has one of the
    ``size`` smallest digests of all, so of any texts seen before it too, and was held from its first occurrence on.
    """

    def __init__(self, size: int, seed: int) -> None:
        self.size = size
        self._key = str(seed).encode()
        self._seen: set[bytes] = set()
        self._held: dict[int, tuple[str, str, int]] = {}
        self._counts: dict[int, int] = {}  # occurrences of each held text
        self._heap: list[int] = []  # negated digests of the held texts: the largest on top, to be evicted first
        self.changes = 0
        """Bumped whenever the sample or the count changes (the figure is recomputed only then)."""

    @property
    def distinct(self) -> int:
        return len(self._seen)

    def add(self, text: str, session: str, task: int) -> None:
        key = distinct_key(text)
        if not key:
            return
        digest = hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=8, key=self._key).digest()
        if digest not in self._seen:
            self._seen.add(digest)
            self.changes += 1
        rank = int.from_bytes(digest, "big")
        entry = (text, session, task)
        held = self._held.get(rank)
        if held is not None:
            self._counts[rank] += 1
            self.changes += 1
            if entry < held:
                self._held[rank] = entry
        elif len(self._held) < self.size:
            self._held[rank] = entry
            self._counts[rank] = 1
            heapq.heappush(self._heap, -rank)
        elif rank < -self._heap[0]:
            evicted = -heapq.heapreplace(self._heap, -rank)
            del self._held[evicted], self._counts[evicted]
            self._held[rank] = entry
            self._counts[rank] = 1

    def entries(self) -> list[tuple[tuple[str, str, int], int]]:
        """The sampled (text, session, task), each with how often the suite has the text, sorted: the embedding and
        the figures do not depend on dict order."""
        return sorted((entry, self._counts[rank]) for rank, entry in self._held.items())


def semantic_diversity(
    entries: Sequence[tuple[str, str, int]],
    encoder: TextEncoder,
    *,
    of: int,
    tau: float = SEMANTIC_TAU,
    counts: Sequence[int] | None = None,
) -> SemanticDiversity | str:
    """The semantic figure of sampled (text, session, task) entries (``of``: distinct utterances in the suite), or
    why it is not measured. ``counts``: how often the suite has each entry's text (None: once each), which weighs the
    near-paraphrase share (see :attr:`SemanticDiversity.near_paraphrases`).

    Every text is embedded once; the cosines of all pairs are computed in blocks of rows (2,000 texts: 4 blocks of
    512 x 2,000), keeping per text its nearest other text. The mean over all pairs needs no pairs at all: with unit
    rows v_i, the sum of v_i . v_j over i != j is |sum v_i|^2 - sum |v_i|^2.
    """
    n = len(entries)
    if n < 2:
        return f"not measured: {n} distinct utterance(s), a pair needs 2"
    if encoder.corpus_fitted and n < _MIN_FITTED:
        return _too_few(n, encoder)
    try:
        raw = encoder.embed([text for text, _, _ in entries])
    except MissingDependencyError as exc:
        return f"not measured: no encoder could be loaded ({exc})"
    import numpy as np  # the base install has no numpy; an encoder that embedded comes with it

    vectors = np.asarray(raw, dtype=np.float64)
    if encoder.corpus_fitted and n < _MIN_FITTED:  # loaded on use: it may have turned out to be one
        return _too_few(n, encoder)
    if vectors.ndim != 2 or vectors.shape[0] != n:
        raise ValueError(f"the encoder returned an array of shape {vectors.shape} for {n} texts")
    weights = np.ones(n, dtype=np.int64) if counts is None else np.asarray(counts, dtype=np.int64)
    if weights.shape != (n,):
        raise ValueError(f"{len(weights)} counts for {n} sampled texts")
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    vectors = vectors / np.where(norms == 0, 1, norms)
    nearest = np.empty(n)
    partner = np.empty(n, dtype=np.int64)
    for start in range(0, n, _BLOCK):
        sims = vectors[start : start + _BLOCK] @ vectors.T
        rows = np.arange(len(sims))
        sims[rows, start + rows] = -np.inf  # a text is not its own neighbour
        partner[start : start + len(sims)] = sims.argmax(axis=1)
        nearest[start : start + len(sims)] = sims[rows, partner[start : start + len(sims)]]
    near = np.flatnonzero(nearest >= tau)
    paraphrased = int(weights[(nearest >= tau) | (weights >= 2)].sum())
    utterances = int(weights.sum())
    total = vectors.sum(axis=0)
    mean = (float(total @ total) - float((vectors * vectors).sum())) / (n * (n - 1))
    pairs: dict[tuple[int, int], float] = {}  # each near text with its nearest, a pair once (i's cosine to it)
    for i in near.tolist():
        j = int(partner[i])
        pairs.setdefault((min(i, j), max(i, j)), round(float(nearest[i]), 4))
    closest = sorted(pairs.items(), key=lambda item: (-item[1], item[0]))[:MAX_EXAMPLES]
    return SemanticDiversity(
        encoder=encoder.label,
        tau=tau,
        of=of,
        sampled=n,
        near_duplicates=len(near),
        near_duplicate_share=_share(len(near), n) or 0.0,
        utterances=utterances,
        near_paraphrases=paraphrased,
        near_paraphrase_share=_share(paraphrased, utterances) or 0.0,
        mean_cosine=round(mean, 4) + 0.0,
        examples=[
            SimilarPair(cosine=cosine, first=_sampled(entries[i]), second=_sampled(entries[j]))
            for (i, j), cosine in closest
        ],
    )


def _too_few(n: int, encoder: TextEncoder) -> str:
    return (
        f"not measured: {n} distinct utterances, and the encoder learns its weights from the texts it embeds, which "
        f"needs {_MIN_FITTED}+ (encoder {encoder.label})"
    )


def _sampled(entry: tuple[str, str, int]) -> Example:
    text, session, task = entry
    return Example(session=session, task=task, text=_short(text))


CHECKS_VERSION = 1
"""The form of :func:`session_checks`' record (a record of another form is not used: the checks run again)."""


def session_checks(session: Session) -> dict[str, Any]:
    """The gold checks :class:`QualityCounter` counts for one session, as JSON: the tasks whose hidden-intent label
    the values do not bear out (``labels``), the ambiguous references and the ungrounded identifiers (``[task,
    message]`` each), and the answer check's problems of each task with calls (by task index, as a string).

    Why apart: they are most of the counting's work, and a session made in a worker process has them worked out
    there (where the same checks have just verified it, so most of their answers are kept) and sent with it: the
    process that writes the suite then only adds them up."""
    answers: dict[str, list[str]] = {}
    earlier: list[Any] = []
    for i, task in enumerate(session.tasks):
        if task.call_nodes:
            answer = _final_answer(task)
            problems = (
                ["the task has no final answer"]
                if answer is None
                else answer_problems(answer, _call_results(task), earlier)
            )
            answers[str(i)] = [str(p) for p in problems]
        earlier += _call_results(task)
    return {
        "version": CHECKS_VERSION,
        "tasks": len(session.tasks),
        # only the label findings: an ambiguous reference is counted apart (ambiguity), not as an unbacked label
        "labels": sorted({f.task_index for f in check_subtypes(session) if f.kind == "label"}),
        "ambiguity": [[f.task_index, f.message] for f in ambiguous_references(session)],
        "grounding": [[f.task_index, f.message] for f in ungrounded_identifiers(session)],
        "answers": answers,
    }


def _usable_checks(checks: Mapping[str, Any], session: Session) -> bool:
    """Whether a record of :func:`session_checks` is of this form and of a session of this many tasks."""
    return checks.get("version") == CHECKS_VERSION and checks.get("tasks") == len(session.tasks)


class QualityCounter:
    """Accumulates the quality figures one session at a time (see the module docstring); :meth:`result` gives them.

    Why an accumulator: the generator writes sessions one by one and the validator may read a very large suite; both
    can feed the counter as they go instead of keeping the suite for a second pass.
    """

    def __init__(
        self,
        encoder: TextEncoder | None = None,
        *,
        encoder_missing: str | None = None,
        sample_size: int = SEMANTIC_SAMPLE,
        tau: float = SEMANTIC_TAU,
        seed: int = 0,
    ) -> None:
        """``encoder``: what measures semantic diversity (None: not measured, and ``encoder_missing`` says why in the
        figures); ``sample_size``, ``tau`` and ``seed``: the utterance sample and the near-duplicate threshold."""
        self._encoder = encoder
        self._encoder_missing = encoder_missing
        self._tau = tau
        self._sample = _Sample(sample_size, seed) if encoder is not None else None
        self._semantic: tuple[int, SemanticDiversity | None, str | None] | None = None
        self.sessions = 0
        self.tasks = 0
        self._turns = 0
        self._turn_counts: Counter[bytes] = Counter()
        self._top_turns: dict[bytes, str] = {}  # the texts of the (up to five) most repeated turns so far
        self._ngrams: dict[int, int] = {2: 0, 3: 0}
        self._distinct_ngrams: dict[int, set[bytes]] = {2: set(), 3: set()}
        self._utterances: set[bytes] = set()
        self._openings: set[bytes] = set()
        self._chats = 0
        self._chat_answers: set[bytes] = set()
        self._wild: Counter[Wild] = Counter()
        self._answers = AnswerQuality()
        self._ambiguity = AmbiguityQuality()
        self._grounding = GroundingQuality()
        self._spans = CopiedSpanQuality()
        self._labels: Counter[str] = Counter()
        self._backed: Counter[str] = Counter()

    def add(self, session: Session, *, checks: Mapping[str, Any] | None = None) -> None:
        """Count one session.

        ``checks``: what :func:`session_checks` gave for this very session (worked out where it was made, e.g. in a
        worker process, and sent with it), used instead of running the gold checks again here; None: run them.

        Raises:
            DataError: its ``extra["wild"]`` record is malformed (:func:`toolwild.core.wild.wild_behaviours`); read
                before anything is counted, so the figures so far stay whole.
        """
        behaviours = wild_behaviours(session.extra, len(session.tasks), session=session.id)
        if checks is None or not _usable_checks(checks, session):
            checks = session_checks(session)
        self.sessions += 1
        self.tasks += len(session.tasks)
        for i, task in enumerate(session.tasks):
            self._add_turns(session, i, task)
            self._add_ngrams(task.utterance)
            self._utterances.add(_digest(distinct_key(task.utterance)))
            self._openings.add(_digest(" ".join(words(task.utterance)[:OPENING_WORDS])))
            if self._sample is not None:
                self._sample.add(task.utterance, session.id, i)
            self._add_answer(session, i, task, checks["answers"].get(str(i)))
            self._add_chat_answer(task)
            self._wild.update(set(behaviours[i]))
        self._add_subtypes(session, set(checks["labels"]))
        self._add_ambiguity(session, checks["ambiguity"])
        self._add_grounding(session, checks["grounding"])

    def _add_turns(self, session: Session, index: int, task: Task) -> None:
        for turn in user_turns(task):
            self._turns += 1
            digest = _digest(distinct_key(turn))
            self._turn_counts[digest] += 1
            self._track_repeat(digest, turn)
            spans = copied_description_spans(turn, session.tools, n=6)
            if spans:
                self._spans.turns += 1
                if len(self._spans.examples) < MAX_EXAMPLES:
                    shown = [_short(str(s)) for s in list(spans)[:3]]
                    self._spans.examples.append(Example(session=session.id, task=index, text=_short(turn), why=shown))

    def _track_repeat(self, digest: bytes, turn: str) -> None:
        """Keep the text of a turn that has just joined the (up to five) most repeated ones.

        Counts only grow, so a turn outside the few never has a larger count than the least of them: it joins (and
        the least leaves; of equals, the one that joined last) the moment its count passes that one's, when its text
        is at hand.
        """
        count = self._turn_counts[digest]
        if count < 2 or digest in self._top_turns:
            return
        if len(self._top_turns) >= MAX_EXAMPLES:
            least = min(reversed(self._top_turns), key=self._turn_counts.__getitem__)  # of equals, the last in
            if count <= self._turn_counts[least]:
                return
            del self._top_turns[least]
        self._top_turns[digest] = _short(turn)

    def _add_ngrams(self, utterance: str) -> None:
        tokens = words(utterance)
        for n, seen in self._distinct_ngrams.items():
            grams = [" ".join(tokens[k : k + n]) for k in range(len(tokens) - n + 1)]
            self._ngrams[n] += len(grams)
            seen.update(_digest(g) for g in grams)

    def _add_answer(self, session: Session, index: int, task: Task, problems: list[str] | None) -> None:
        if not task.call_nodes:
            return
        self._answers.tool_tasks += 1
        answer = _final_answer(task)
        problems = problems or []
        if not problems:
            self._answers.passing += 1
        elif len(self._answers.failures) < MAX_EXAMPLES:
            self._answers.failures.append(
                Example(session=session.id, task=index, text=_short(answer or ""), why=[str(p) for p in problems])
            )

    def _add_chat_answer(self, task: Task) -> None:
        if task.call_nodes:
            return
        answer = _final_answer(task)
        if answer is not None:
            self._chats += 1
            self._chat_answers.add(_digest(distinct_key(answer)))

    def _add_subtypes(self, session: Session, flagged: set[int]) -> None:
        for i, task in enumerate(session.tasks):
            label = task.subtype.value
            self._labels[label] += 1
            if i not in flagged:
                self._backed[label] += 1

    def _add_grounding(self, session: Session, findings: list[list[Any]]) -> None:
        self._grounding.tool_tasks += sum(1 for t in session.tasks if t.call_nodes)
        self._grounding.tasks += len({index for index, _ in findings})
        self._grounding.identifiers += len(findings)
        for index, message in findings:
            if len(self._grounding.examples) >= MAX_EXAMPLES:
                break
            text = _short(session.tasks[index].utterance)
            self._grounding.examples.append(Example(session=session.id, task=index, text=text, why=[message]))

    def _add_ambiguity(self, session: Session, findings: list[list[Any]]) -> None:
        self._ambiguity.findings += len(findings)
        self._ambiguity.tasks += len({index for index, _ in findings})
        for index, message in findings:
            if len(self._ambiguity.examples) >= MAX_EXAMPLES:
                break
            task = session.tasks[index] if 0 <= index < len(session.tasks) else None
            text = _short(task.utterance) if task is not None else ""
            self._ambiguity.examples.append(Example(session=session.id, task=index, text=text, why=[message]))

    def result(self, *, drops: Mapping[str, int] | None = None) -> SuiteQuality:
        """The figures so far. ``drops``: the generation run's drop counts by reason (None for a suite read from a
        file, whose generation is unknown)."""
        answers = self._answers.model_copy(deep=True)
        answers.share = _share(answers.passing, answers.tool_tasks)
        ambiguity = self._ambiguity.model_copy(deep=True)
        ambiguity.generation_drops = int(drops.get(AMBIGUOUS_DROP, 0)) if drops is not None else None
        semantic, semantic_note = self._semantic_figure()
        return SuiteQuality(
            sessions=self.sessions,
            tasks=self.tasks,
            user_turns=self._distinct(self._turns, self._turn_counts),
            utterances=self._distinct(self.tasks, self._utterances),
            repeated_turns=self._repeated_turns(),
            distinct_2=self._distinct(self._ngrams[2], self._distinct_ngrams[2]),
            distinct_3=self._distinct(self._ngrams[3], self._distinct_ngrams[3]),
            first_words=self._distinct(self.tasks, self._openings),
            answers=answers,
            chat_answers=self._distinct(self._chats, self._chat_answers),
            ambiguity=ambiguity,
            grounding=self._grounding.model_copy(deep=True),
            copied_description_spans=self._spans.model_copy(deep=True),
            subtypes={
                label: SubtypeBacking(labels=self._labels[label], value_backed=self._backed[label])
                for label in (s.value for s in TurnSubtype)
                if self._labels[label]
            },
            wild={w.value: WildRate(tasks=self._wild[w], share=_share(self._wild[w], self.tasks)) for w in Wild},
            semantic=semantic,
            semantic_note=semantic_note,
        )

    def _repeated_turns(self) -> RepeatedTurns:
        counts = self._turn_counts
        top = sorted(((counts[d], text) for d, text in self._top_turns.items()), key=lambda ct: (-ct[0], ct[1]))
        return RepeatedTurns(
            most=max(counts.values(), default=0),
            repeated=sum(1 for c in counts.values() if c >= 2),
            examples=[RepeatedTurn(text=text, count=count) for count, text in top],
        )

    def _semantic_figure(self) -> tuple[SemanticDiversity | None, str | None]:
        """The semantic figure, or None and why; embedded once per state of the sample (``result()`` may be called
        again with other ``drops``)."""
        if self._encoder is None or self._sample is None:
            return None, self._encoder_missing or "not measured: no encoder given"
        if self._semantic is None or self._semantic[0] != self._sample.changes:
            sampled = self._sample.entries()
            figure = semantic_diversity(
                [entry for entry, _ in sampled],
                self._encoder,
                of=self._sample.distinct,
                tau=self._tau,
                counts=[count for _, count in sampled],
            )
            if isinstance(figure, str):
                self._semantic = (self._sample.changes, None, figure)
            else:
                self._semantic = (self._sample.changes, figure, None)
        _, figure, note = self._semantic
        return (figure.model_copy(deep=True) if figure is not None else None), note

    @staticmethod
    def _distinct(count: int, seen: Collection[bytes]) -> DistinctCount:
        return DistinctCount(count=count, distinct=len(seen), share=_share(len(seen), count))


def suite_quality(
    suite: Suite | Iterable[Session],
    *,
    drops: Mapping[str, int] | None = None,
    encoder: TextEncoder | None = None,
    encoder_missing: str | None = None,
) -> SuiteQuality:
    """The quality figures of a suite (or any iterable of sessions, consumed once); ``drops`` as in
    :meth:`QualityCounter.result`, ``encoder`` and ``encoder_missing`` as in :class:`QualityCounter`."""
    counter = QualityCounter(encoder, encoder_missing=encoder_missing)
    for session in suite.sessions if isinstance(suite, Suite) else suite:
        counter.add(session)
    return counter.result(drops=drops)
