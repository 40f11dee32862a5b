"""Wild sessions over any environment: patterns of coarse types, hidden-intent subtypes, verified tasks.

Each session runs on one environment (round robin over the ones given) with its own episode, and gets a pattern of
coarse types: every 4^4 ordering once per 256 sessions (``like_published``), a fixed number of instruction
transitions, or the default cycle of transition buckets (:mod:`toolwild.core.patterns`). Its tasks are built
bottom-up in order (:mod:`toolwild.synth.tasks`), later ones leaning on earlier ones with the subtype mix of the
published suite; a position that cannot be filled restarts the session, and a session that cannot be built is
reported, with every reason, and left out. Generation is deterministic for a seed (and, with a model, for its
cache): a second run writes the same suite.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from toolwild.core.environment import BackendKind
from toolwild.core.patterns import BUCKET_CYCLE, Pattern, patterns_with, published_patterns
from toolwild.core.session import Session, Suite
from toolwild.core.task import CoarseType, TaskType
from toolwild.core.tool import Effect, Tool
from toolwild.envs.base import EnvironmentBackend, Episode, Observation
from toolwild.envs.registry import describe_environment, get_environment
from toolwild.errors import TransientBackendError
from toolwild.llm.client import LLM
from toolwild.synth.chains import ToolGraph
from toolwild.synth.providers.base import SessionOutcome, SessionProvider
from toolwild.synth.tasks import Dropped, EnvHandle, SessionState, build_task
from toolwild.synth.values import Fact, facts_of, leaves

__all__ = [
    "GraphProvider",
    "SessionsConfig",
    "SessionsResult",
    "Unanswerable",
    "graph_providers",
    "load_handle",
    "pattern_chooser",
    "session_providers",
    "synth_sessions",
]

_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_SUBTYPE_MIX = {"coref": 0.42, "partial": 0.32, "long": 0.26}
"""Published shares of the later-task subtypes (Coreferential 349, Partial 240, Long-Range 179 of 768)."""
_MULTI_MIX = {TaskType.PARALLEL: 0.45, TaskType.SEQUENTIAL: 0.25, TaskType.MIXED: 0.30}


@dataclass(frozen=True)
class SessionsConfig:
    """The knobs of session generation (frozen, as every config held in memory: a run's knobs never change under
    it; what is written to disk of them is :func:`dataclasses.asdict` of it, in the report and the log's identity)."""

    n_sessions: int = 256
    seed: int = 0
    like_published: bool = False
    """Every ordering of the four coarse types once per 256 sessions (the published design)."""
    transitions: int | None = None
    """Every session with exactly this many instruction transitions (0-3); None: the default bucket cycle."""
    max_calls: int = 3
    """Calls (mini-tasks) of a multi-tool task, at most (2-4)."""
    ambiguous: float = 0.25
    """Share of tool tasks worded by what the tool does instead of its name."""
    vague: float = 0.35
    """Share of clarify tasks whose first reply is vague, forcing a second ask."""
    distractors: int = 0
    """Tools from the other environments added to each session's tool list (never part of the gold)."""
    attempts: int = 30
    """Task attempts per position before the session is restarted."""
    restarts: int = 6
    """Session restarts before the session is given up (and reported)."""
    simulator_patience: int = 8
    """Gold calls the simulator fails to answer, with no task built in between, before its environment is given up
    for the run (a model too small for the environment would otherwise burn every attempt of every session)."""
    concurrency: int = 32
    """Sessions made at once (each makes one model call at a time)."""
    id_prefix: str = "synth"
    """Session ``i`` is ``<id_prefix>_<i>`` (the suite's name): generated sessions never take the published ids
    ``wild_tool_bench_<i>``, so they cannot be mistaken for published ones."""
    ledger: str | None = None
    """The ledger's sessions start from this Beancount file (a user's own books, snapshotted beside the suite)
    instead of a generated ledger per session."""
    ledger_ref: str | None = None
    """How the sessions name that file (relative to the suite's folder), so the suite can be evaluated anywhere."""


class Unanswerable(Dropped):
    """The environment's simulator keeps failing: the environment is given up for the rest of the run."""

    def __init__(self, detail: str) -> None:
        super().__init__("the simulator cannot answer this environment", detail)


@dataclass
class SessionsResult:
    """The suite, and what was dropped on the way (by reason), and who wrote the utterances."""

    suite: Suite
    failed_sessions: list[dict[str, Any]] = field(default_factory=list)
    drops: Counter[str] = field(default_factory=Counter)
    drop_examples: dict[str, str] = field(default_factory=dict)
    utterances: Counter[str] = field(default_factory=Counter)
    answers: Counter[str] = field(default_factory=Counter)
    given_up: dict[str, str] = field(default_factory=dict)
    """Environments the run stopped using (see :class:`Unanswerable`), with why."""


def load_handle(ref: str, *, simulator: LLM | None = None, suite_ref: str | None = None) -> EnvHandle:
    """An environment (built-in id or file) ready for generation; ``suite_ref`` is how the suite names it."""
    backend: EnvironmentBackend = get_environment(ref, simulator=simulator)
    described = describe_environment(ref)
    recordings = None
    description = ""
    if described is not None:
        description = described.description
        if described.backend is BackendKind.REPLAY:
            recordings = {}
            for r in described.recordings:
                recordings.setdefault(r.name, []).append(dict(r.arguments))
    tools = list(backend.tools)
    return EnvHandle(
        ref=suite_ref or ref,
        backend=backend,
        tools=tools,
        graph=ToolGraph(tools),
        description=description,
        recordings=recordings,
    )


def _today(rng: random.Random) -> date:
    return date(2024, 1, 1) + timedelta(days=rng.randrange(366))


async def _pool(env: EnvHandle, seed: int) -> list[Fact]:
    """Values the environment itself shows: its state, and what its no-argument reads return (on a scratch episode,
    never part of the conversation)."""
    episode = env.backend.reset(seed=seed)
    try:
        pool = [Fact(-1, k, v) for k, v in leaves(episode.state(), "")]
        for tool in env.tools:
            if tool.required or tool.effect is Effect.WRITE or env.recordings is not None:
                continue
            observation = await episode.acall(tool.name, {})
            if observation.ok:
                pool += [Fact(-1, f.key, f.value) for f in facts_of(-1, tool, {}, observation.result)]
    finally:
        episode.close()
    return pool


class _Counted(Episode):
    """An episode that counts the calls made on it.

    Why: most task attempts are dropped before they call anything (nothing for a reference to point at, no plan
    fits); such an attempt left the episode as it was, so it needs no rebuild (which replays every accepted call on
    a fresh episode: about six in seven rebuilds were of that kind on ``inventory``).
    """

    def __init__(self, episode: Episode) -> None:
        self.inner = episode
        self.calls = 0

    def call(self, name: str, arguments: dict[str, Any]) -> Observation:
        self.calls += 1
        return self.inner.call(name, arguments)

    async def acall(self, name: str, arguments: dict[str, Any]) -> Observation:
        self.calls += 1
        return await self.inner.acall(name, arguments)

    def state(self) -> dict[str, Any]:
        return self.inner.state()

    def close(self) -> None:
        self.inner.close()


def _calls_made(state: SessionState) -> int | None:
    """Calls made so far on the session's episode (None: not counted)."""
    return state.episode.calls if isinstance(state.episode, _Counted) else None


async def _rebuild(state: SessionState) -> None:
    """A fresh episode with the accepted gold calls replayed (after an attempt that may have changed the state)."""
    state.episode.close()
    state.episode = _Counted(state.env.backend.reset(seed=state.seed))
    for name, arguments, recorded in state.calls:
        observation = await state.episode.acall(name, arguments)
        if observation.model_dump(mode="json", include={"ok", "result"}) != recorded:
            raise Dropped("the environment is not deterministic", f"replaying {name} gave another answer")


def _weighted_order(weights: dict[Any, float], rng: random.Random) -> list[Any]:
    """The keys in a random order where heavier ones tend to come first (weighted draws without replacement)."""
    left = dict(weights)
    order = []
    while left:
        pick = rng.choices(list(left), weights=list(left.values()), k=1)[0]
        order.append(pick)
        left.pop(pick)
    return order


def _modes(position: int, coarse: CoarseType, rng: random.Random) -> list[str]:
    """Modes to try at a position, the preferred first (weighted by the published subtype mix)."""
    if position == 0:
        return ["first"]
    modes = dict(_SUBTYPE_MIX)
    if coarse in (CoarseType.MULTI, CoarseType.CLARIFY):
        modes.pop("partial")
    if position == 1:
        modes.pop("long")
    return _weighted_order(modes, rng)


def _multi_types(env: EnvHandle, rng: random.Random) -> list[TaskType]:
    """Multi-tool types to try, the preferred first (only parallel when the graph has no edge)."""
    return _weighted_order(_MULTI_MIX if env.graph.edges else {TaskType.PARALLEL: 1.0}, rng)


async def _fill_pattern(
    state: SessionState, pattern: Pattern, config: SessionsConfig, writer: LLM | None, drops: Counter[str], examples
) -> None:
    rng = state.rng
    for position, coarse in enumerate(pattern):
        modes = _modes(position, coarse, rng)
        multis = _multi_types(state.env, rng)
        for attempt in range(config.attempts):
            # the preferred mode for two thirds of the attempts, then the others in turn
            late = attempt - (2 * config.attempts) // 3
            mode = modes[0] if late < 0 else modes[min(1 + late // 3, len(modes) - 1)]
            multi = multis[0] if attempt < config.attempts // 2 else multis[attempt % len(multis)]
            made = _calls_made(state)
            try:
                await build_task(
                    state,
                    coarse,
                    mode,
                    multi=multi if coarse is CoarseType.MULTI else None,
                    ambiguous=rng.random() < config.ambiguous,
                    vague=rng.random() < config.vague,
                    max_calls=config.max_calls,
                    writer=writer,
                )
                state.simulator_failures = 0
                break
            except Dropped as dropped:
                drops[dropped.reason] += 1
                examples.setdefault(dropped.reason, str(dropped)[:300])
                # the environment's own failures (a simulator that cannot answer, a live server that is down)
                state.simulator_failures += "simulation_failed" in dropped.reason or "unavailable" in dropped.reason
                if state.simulator_failures >= config.simulator_patience:
                    raise Unanswerable(
                        f"{state.simulator_failures} gold calls since the last task built ended in "
                        "simulation_failed or unavailable: the environment cannot answer (a simulator model too small "
                        "for it: try a larger --env-model; or a live server that is down)"
                    ) from None
                if made is None or _calls_made(state) != made:  # an attempt that called nothing changed nothing
                    await _rebuild(state)
        else:
            raise Dropped(f"no {coarse.value} task fits position {position}")


def pattern_chooser(
    config: SessionsConfig, index: int, published: list[Pattern] | None = None
) -> Callable[[random.Random], Pattern]:
    """How session ``index`` draws its pattern of coarse types: fixed (``published``, the like-published orderings
    of the seed), or from its transition bucket."""
    if config.like_published:
        orderings = published or published_patterns(config.seed)
        fixed = orderings[index % len(orderings)]
        return lambda rng: fixed
    bucket = config.transitions if config.transitions is not None else BUCKET_CYCLE[index % len(BUCKET_CYCLE)]
    candidates = patterns_with(bucket)
    return lambda rng: rng.choice(candidates)


class GraphProvider:
    """Sessions on any environment, their tasks built bottom-up from its tool graph (see the module docstring).

    Everything session ``index`` needs derives from the suite seed and ``index`` (its random stream, its episode
    seed, its pattern), so sessions can be made in any order and at any concurrency with the same result.
    """

    name = "graph"

    def __init__(
        self, env: EnvHandle, config: SessionsConfig, *, writer: LLM | None = None, distractors: list[Tool] = ()
    ) -> None:
        self.env = env
        self.config = config
        self.writer = writer
        self.distractors = list(distractors)
        self._published = published_patterns(config.seed) if config.like_published else None

    def restore(self, index: int, session: Session | None) -> None:
        """Nothing to restore: sessions do not depend on each other."""

    async def make(self, index: int) -> SessionOutcome:
        """Session ``index`` (its pool of environment values is read on a scratch episode first)."""
        config, env = self.config, self.env
        rng = random.Random(f"toolwild-synth-sessions:{config.seed}:{index}")
        env_seed = config.seed * 10_000 + index
        outcome = SessionOutcome(session=None)
        pattern_for = pattern_chooser(config, index, self._published)
        pool = await _pool(env, env_seed)
        for _restart in range(config.restarts):
            pattern = pattern_for(rng)
            today = _today(rng)
            state = SessionState(
                env=env,
                seed=env_seed,
                rng=rng,
                today=today,
                episode=_Counted(env.backend.reset(seed=env_seed)),
                pool=pool,
            )
            try:
                await _fill_pattern(state, pattern, config, self.writer, outcome.drops, outcome.drop_examples)
            except Unanswerable as hopeless:
                outcome.given_up = str(hopeless)
                outcome.reasons.append(str(hopeless))
                return outcome
            except Dropped as dead_end:
                outcome.reasons.append(f"{[c.value for c in pattern]}: {dead_end}")
                continue
            finally:
                state.episode.close()
            outcome.session = self._session(index, state, rng, env_seed, today)
            return outcome
        return outcome

    def _session(self, index: int, state: SessionState, rng: random.Random, env_seed: int, today: date) -> Session:
        tools = list(self.env.tools)
        extra_tools = (
            rng.sample(self.distractors, min(self.config.distractors, len(self.distractors)))
            if self.distractors
            else []
        )
        tools += [t for t in extra_tools if t.name not in {x.name for x in tools}]
        rng.shuffle(tools)
        clock = f"{rng.randint(8, 21):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}"
        return Session(
            id=f"{self.config.id_prefix}_{index}",
            env_info=f"{today.isoformat()} {clock} {_WEEKDAYS[today.weekday()]}",
            tools=tools,
            tasks=state.tasks,
            environment=self.env.ref,
            extra={
                "env_seed": env_seed,
                "generator": "toolwild.synth.sessions",
                "utterance_sources": state.sources,
                "answer_sources": state.answer_sources,
                "mentioned_values": state.mentioned,
                "distractors": sorted(t.name for t in extra_tools),
            },
        )


def graph_providers(envs: list[EnvHandle], config: SessionsConfig, *, writer: LLM | None = None) -> list[GraphProvider]:
    """One graph provider per environment (distractors are drawn from the other environments' tools)."""
    return [
        GraphProvider(env, config, writer=writer, distractors=[t for e in envs if e is not env for t in e.tools])
        for env in envs
    ]


def session_providers(
    envs: list[EnvHandle], config: SessionsConfig, *, writer: LLM | None = None, builder: str = "auto"
) -> list[SessionProvider]:
    """Who makes each environment's sessions: its own scenario templates where it has them (``auto``; the built-in
    ledger), the tool graph otherwise or everywhere (``graph``)."""
    providers: list[SessionProvider] = list(graph_providers(envs, config, writer=writer))
    if builder == "graph":
        return providers
    for slot, env in enumerate(envs):
        templates = template_provider(env.ref, config, slot=slot, slots=len(envs), writer=writer)
        if templates is not None:
            providers[slot] = templates
    return providers


def template_provider(
    ref: str, config: SessionsConfig, *, slot: int, slots: int, writer: LLM | None = None
) -> SessionProvider | None:
    """The scenario-template provider of a built-in environment, if it has one (``writer``: the model that rewords
    its utterances, checked; None: the templates alone)."""
    if ref != "ledger":
        return None
    from toolwild.synth.providers.ledger import LedgerTemplates

    return LedgerTemplates(
        seed=config.seed,
        like_published=config.like_published,
        stride=slots,
        offset=slot,
        id_prefix=config.id_prefix,
        ledger=Path(config.ledger) if config.ledger else None,
        ledger_ref=config.ledger_ref,
        writer=writer,
    )


async def synth_sessions(
    envs: list[EnvHandle],
    config: SessionsConfig,
    *,
    writer: LLM | None = None,
    name: str = "synth",
    progress: Callable[[], None] | None = None,
    providers: list[SessionProvider] | None = None,
) -> SessionsResult:
    """Generate ``config.n_sessions`` sessions over ``envs`` in memory (session ``i`` uses ``envs[i % len(envs)]``).

    The session job (:class:`~toolwild.synth.session_job.SessionJob`, the one ``toolwild synth sessions`` runs)
    held in memory: no unit log, no files. Why both: a suite that fits in memory (tests, benchmarks, a notebook)
    needs no resume; a run that must survive a kill and stream to disk is
    :func:`toolwild.jobs.sessions.generate_sessions`, which runs this same job under a unit log.

    Args:
        envs: environments (see :func:`load_handle`).
        config: the knobs (``config.concurrency`` sessions at once).
        writer: a model that words the utterances (checked; the template is used when it fails); None: templates.
        name: the suite's name.
        progress: called once per finished session.
        providers: who makes each environment's sessions (default: :func:`graph_providers`).
    """
    from toolwild.run import LocalExecutor
    from toolwild.synth.session_job import SessionJob

    if not envs:
        raise ValueError("no environment to generate sessions on")
    job = SessionJob(
        providers or graph_providers(envs, config, writer=writer), [e.ref for e in envs], config.n_sessions
    )
    records = []

    def keep(record):
        records.append(record)
        if progress is not None:
            progress()

    await job.run(LocalExecutor(max(1, config.concurrency)), record=keep)
    suite = Suite(name=name, source=f"toolwild synth sessions seed={config.seed}")
    report = job.assemble(sorted(records, key=lambda r: r.order), write=suite.sessions.append)
    if report.failed_units:
        first = report.failed_units[0]
        raise TransientBackendError(f"{len(report.failed_units)} session(s) lost to the provider; first: {first}")
    return SessionsResult(
        suite=suite,
        failed_sessions=report.failed_sessions,
        drops=report.drops,
        drop_examples=report.drop_examples,
        utterances=report.utterances,
        answers=report.answers,
        given_up=report.given_up,
    )
