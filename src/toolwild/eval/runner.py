"""Running a whole suite: concurrency, per-session time limit, append-only checkpoint, resume, outcome classes.

Each finished session is appended to ``trajectories.jsonl`` at once (one line, flushed), so a killed run loses
nothing it finished. Resuming reads that file, drops what is not final (a torn last line, sessions lost to provider
or harness errors), and runs only the sessions still missing: none redone, none lost, none duplicated.

Three outcome classes, never mixed: a *model failure* fails its task (recorded in the trajectory, scored);
a *provider error* (after retries) leaves its session out of accuracy and listed; a *harness error* (an environment
that raised, a toolwild bug) is listed, stops the run from starting more sessions, and makes the command exit
non-zero.

Trials and forks are run as parts of one run: the unit of work is one (session, trial) or (session, fork) pair,
each kept and resumed in its part's folder (the layout: :mod:`toolwild.eval.run_dir`). A forked run has one trial
and the recorded user (more is refused: the forks already multiply the work).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from toolwild.core.files import write_text_atomic
from toolwild.core.formats.results import append_trajectory
from toolwild.core.session import Session, Suite
from toolwild.core.trajectory import Step, Trajectory, TrajectoryStatus
from toolwild.core.verdict import SessionVerdict
from toolwild.envs.registry import session_environment
from toolwild.errors import CacheMissError, ConfigError, HarnessError, TransientBackendError
from toolwild.eval.agents.base import Agent, AgentContext
from toolwild.eval.agents.model import ModelAgent
from toolwild.eval.build import build_agent, build_simulator, build_user
from toolwild.eval.interactive import run_interactive_session, score_with_user
from toolwild.eval.run_config import RunConfig
from toolwild.eval.run_dir import (
    CONFIG,
    TRAJECTORIES,
    fork_count,
    fork_dir,
    fork_sessions,
    forked_task_runs,
    load_run_config,
    load_run_trajectories,
    trial_dir,
)
from toolwild.eval.scoring.dag import GoldDag
from toolwild.eval.scoring.session import failed_session, score_session
from toolwild.eval.session import HistoryMode, run_session
from toolwild.eval.user import UserSimulator
from toolwild.llm.client import LLM
from toolwild.run import Executor, LocalExecutor, Unit
from toolwild.run.lock import OutputLock

__all__ = [
    "EvalWorker",
    "RunProgress",
    "SessionTrial",
    "agent_for_trial",
    "planned_progress",
    "run_suite",
    "run_trials",
]

log = logging.getLogger(__name__)


@dataclass
class RunProgress:
    """Live counters for the progress display.

    ``done``, ``tasks`` and the outcomes move when a session (a unit: a session's trial or fork) ends; ``calls``
    and ``tasks_done`` move as the agent works, so a run whose sessions each take minutes (the embedded model) is
    seen moving from its first model call. On an executor that runs the sessions elsewhere (Ray), the two are
    counted from each session's trajectory when it comes back.
    """

    total: int
    done: int = 0
    skipped: int = 0
    total_tasks: int = 0
    """Task-runs the run plays: every task of every unit (of a fork: its tasks from the fork's boundary on)."""
    tasks_done: int = 0
    """Task-runs ended so far, the resumed ones included: a running session's tasks count once the next begins."""
    calls: int = 0
    """Turns asked of the agent in this process so far (a model agent makes one model call per turn)."""
    tasks: int = 0
    tasks_correct: int = 0
    provider_errors: int = 0
    """Sessions lost to the provider (left out of accuracy)."""
    harness_errors: int = 0
    """Sessions broken by an environment or toolwild bug (the run will exit non-zero)."""
    model_failures: int = 0
    """Tasks the agent failed by its own fault (raised, unusable output, step budget, time limit)."""
    tokens: int = 0
    unit: str = "sessions"
    """What a unit of the run is, for display: ``sessions``, ``session trials`` or ``session forks``."""
    turn: str = "model calls"
    """What one of the agent's turns is, for display: ``model calls`` for a model agent, else ``steps``."""

    @property
    def task_accuracy(self) -> float:
        """Running task accuracy over the sessions finished so far."""
        return self.tasks_correct / self.tasks if self.tasks else 0.0


@dataclass(frozen=True)
class SessionTrial:
    """The payload of one unit of an evaluation: a session and which of its trials (or forks) to run."""

    session: Session
    trial: int = 0
    fork: int = 0
    """A forked run's task boundary: tasks before it teacher-forced, the rest free (0: every task free)."""


def agent_for_trial(agent: Agent, config: RunConfig, trial: int) -> Agent:
    """The agent that plays trial ``trial``.

    Trial 0 is the agent as built (so a one-trial run is unchanged). An agent with a ``for_trial(t)`` method (a
    scripted agent with a per-trial behaviour file) gives its own; a model agent sends the request seed
    ``config.seed + t`` at the configured temperature. The seed is part of the response cache's key, so a trial is
    never answered from another trial's cached replies; whether the trials then differ is the model's business (a
    model that does not sample, at temperature 0, answers every trial alike). Any other agent (the oracle) plays
    every trial alike.
    """
    if trial == 0:
        return agent
    for_trial = getattr(agent, "for_trial", None)
    if callable(for_trial):
        return for_trial(trial)
    if isinstance(agent, ModelAgent):
        return ModelAgent(
            agent.llm, temperature=agent.temperature, seed=config.seed + trial, max_tokens=agent.max_tokens
        )
    return agent


async def _run_one(
    session: Session,
    agent: Agent,
    config: RunConfig,
    simulator: LLM | None,
    *,
    user: UserSimulator | None = None,
    trial: int = 0,
    fork: int = 0,
) -> Trajectory:
    """One session (one fork of it: ``fork``), its outcome classified: model failures inside the trajectory,
    provider and harness errors (and a simulated user's failure) as the trajectory's status. With ``user``, the
    session runs interactively."""

    def ended(status: TrajectoryStatus, error: str) -> Trajectory:
        return Trajectory(session_id=session.id, model=agent.name, status=status, error=error)

    try:
        environment = (
            session_environment(session, simulator=simulator, base_dir=Path(config.suite).parent)
            if session.environment and config.history.live
            else None
        )
        if user is not None:
            run = await run_interactive_session(
                session,
                agent,
                user,
                environment=environment,
                max_steps_per_task=config.max_steps_per_task,
                time_limit_s=config.session_timeout_s,
                trial=trial,
            )
            if run.user_error is not None:
                return run.trajectory.model_copy(
                    update={"status": TrajectoryStatus.USER_ERROR, "error": run.user_error}
                )
            return run.trajectory
        return await run_session(
            session,
            agent,
            history=config.history,
            scoring_mode=config.mode,
            max_steps_per_task=config.max_steps_per_task,
            environment=environment,
            time_limit_s=config.session_timeout_s,
            forced_prefix=fork,
        )
    except TransientBackendError as exc:
        return ended(TrajectoryStatus.PROVIDER_ERROR, str(exc) or type(exc).__name__)
    except (HarnessError, CacheMissError) as exc:
        log.error("session %s: harness error: %s", session.id, exc)
        return ended(TrajectoryStatus.HARNESS_ERROR, str(exc))
    except Exception as exc:  # a bug in toolwild itself: recorded, and the run ends loudly
        log.exception("session %s failed inside the harness", session.id)
        return ended(TrajectoryStatus.HARNESS_ERROR, f"internal error: {type(exc).__name__}: {exc}")


class EvalWorker:
    """Runs sessions of a run from its config, building the agent (and simulator) on first use in whatever process
    it runs: the driver, or a Ray worker (only the config, the run directory and the live base URL travel; the URL
    stays in memory, never in a file).

    The run directory (its response cache) and the suite's environment files must be reachable from the workers at
    the same paths: on a local Ray instance they are; on a cluster, put them on shared storage (see the README).
    """

    def __init__(self, config: RunConfig, run_dir: Path, live_base_url: str | None = None) -> None:
        self.config = config
        self.run_dir = Path(run_dir)
        self.live_base_url = live_base_url
        self._opened: tuple[Agent, LLM | None, LLM | None] | None = None
        self._user: tuple[UserSimulator | None, LLM | None] = (None, None)
        self._trial_agents: dict[int, Agent] = {}

    def __getstate__(self) -> dict[str, object]:
        return {"config": self.config, "run_dir": self.run_dir, "live_base_url": self.live_base_url}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["config"], state["run_dir"], state["live_base_url"])

    async def aopen(self) -> tuple[Agent, LLM | None, LLM | None]:
        """The agent, its model client and the simulator (built once)."""
        if self._opened is None:
            live = self.config.model_copy(update={"base_url": self.live_base_url or self.config.base_url})
            agent, llm = build_agent(live, self.run_dir)
            self._opened = (agent, llm, build_simulator(live, self.run_dir, llm))
            self._user = build_user(live, self.run_dir, llm)
        return self._opened

    async def __call__(self, unit: Unit[SessionTrial]) -> Trajectory:
        agent, _llm, simulator = await self.aopen()
        trial = unit.payload.trial
        if trial not in self._trial_agents:
            self._trial_agents[trial] = agent_for_trial(agent, self.config, trial)
        user = self._user[0]
        return await _run_one(
            unit.payload.session,
            self._trial_agents[trial],
            self.config,
            simulator,
            user=user,
            trial=trial,
            fork=unit.payload.fork,
        )

    async def aclose(self) -> None:
        """Close the clients."""
        if self._opened is not None:
            _agent, llm, simulator = self._opened
            for client in {id(c): c for c in (llm, simulator, self._user[1]) if c is not None}.values():
                await client.aclose()
        self._opened = None
        self._user = (None, None)
        self._trial_agents = {}


def planned_progress(suite: Suite, config: RunConfig) -> RunProgress:
    """A run's counters before it starts: its units (every session's trials, or of a forked run one fork per task
    boundary: fork i runs the sessions of more than i tasks, so one fork per task in all) and task-runs (a fork
    plays its session's tasks from its boundary on: :func:`~toolwild.eval.run_dir.forked_task_runs`), with what
    to call them. The runner starts from it, and a caller can show the totals before the first report."""
    tasks = sum(len(s.tasks) for s in suite.sessions)
    turn = "model calls" if config.agent == "model" else "steps"
    if config.history is HistoryMode.FORKED:
        return RunProgress(total=tasks, total_tasks=forked_task_runs(suite), unit="session forks", turn=turn)
    unit = "sessions" if config.trials == 1 else "session trials"
    return RunProgress(
        total=len(suite.sessions) * config.trials, total_tasks=tasks * config.trials, unit=unit, turn=turn
    )


LIVE_EVERY_S = 0.1
"""Least time between two progress reports made while sessions run (a report per model call would cost more than
the display can show); the end of a session is always reported."""


class _Live:
    """The progress of the running units, as the agent works: turns asked of it and tasks moved past, per unit."""

    def __init__(self, progress: RunProgress, report: Callable[[RunProgress], None] | None) -> None:
        self.progress = progress
        self.report = report
        self.units: dict[str, list[int]] = {}
        """Per running unit: [turns asked, index of the task it is on]."""
        self._reported = 0.0

    def turn(self, key: str, task_index: int, first_task: int) -> None:
        """The agent was asked for a turn of task ``task_index``: the tasks before it are done."""
        state = self.units.setdefault(key, [0, first_task])
        state[0] += 1
        self.progress.calls += 1
        if task_index > state[1]:
            self.progress.tasks_done += task_index - state[1]
            state[1] = task_index
        if self.report is not None and time.monotonic() - self._reported >= LIVE_EVERY_S:
            self._reported = time.monotonic()
            self.report(self.progress)

    def finish(self, key: str, traj: Trajectory, tasks: int, first_task: int) -> None:
        """A unit ended: all its tasks are done; a unit never seen working (it ran elsewhere) brings its turns."""
        state = self.units.pop(key, None)
        if state is None:
            self.progress.calls += sum(len(t.steps) for t in traj.tasks if t.task_index >= first_task)
            state = [0, first_task]
        self.progress.tasks_done += tasks - state[1]


class _WatchedAgent:
    """A unit's agent as the runner sees it: each turn waits for ``ready`` (the preflight, run alongside the
    sessions' set-up) and is counted for the progress display (:class:`_Live`) before the agent takes it."""

    def __init__(self, agent: Agent, live: _Live, key: str, first_task: int, ready: asyncio.Future[None] | None):
        self.name = agent.name
        self._agent = agent
        self._live = live
        self._key = key
        self._first_task = first_task
        self._ready = ready

    async def next_step(self, context: AgentContext) -> Step:
        if self._ready is not None and not self._ready.done():
            await self._ready
        self._live.turn(self._key, context.task_index, self._first_task)
        return await self._agent.next_step(context)


async def run_suite(
    suite: Suite,
    agent: Agent,
    config: RunConfig,
    run_dir: Path,
    *,
    resume: bool = False,
    on_progress: Callable[[RunProgress], None] | None = None,
    simulator: LLM | None = None,
    executor: Executor | None = None,
    worker: EvalWorker | None = None,
    user: UserSimulator | None = None,
    ready: asyncio.Future[None] | None = None,
    on_result: Callable[[SessionTrial, Trajectory, SessionVerdict], None] | None = None,
) -> list[SessionVerdict]:
    """Run every session not yet finished in ``run_dir`` and return the verdicts of all sessions of the suite.

    ``simulator`` answers the calls of sessions whose environment is model-simulated (free mode). After a harness
    error no new session starts (those already running finish); sessions not run are returned as harness errors
    ("not run"), so a resumed run picks them up. ``executor``/``worker``: run the sessions elsewhere (a
    :class:`~toolwild.run.ray_executor.RayExecutor` with an :class:`EvalWorker`); results come back here, where
    alone they are written and scored. With ``config.trials`` > 1 every trial is run (see :func:`run_trials`) and
    trial 0's verdicts are returned; a forked run runs every fork (also :func:`run_trials`) and returns fork 0's.
    ``ready`` and ``on_result``: see :func:`run_trials`.
    """
    by_part = await run_trials(
        suite,
        agent,
        config,
        run_dir,
        resume=resume,
        on_progress=on_progress,
        simulator=simulator,
        executor=executor,
        worker=worker,
        user=user,
        ready=ready,
        on_result=on_result,
    )
    return by_part[0]


@dataclass(frozen=True)
class _Part:
    """One set of a run's files and the units that fill it: a trial, or a fork of a forked run."""

    folder: Path
    sessions: list[Session]
    agent: Agent
    trial: int = 0
    fork: int = 0


async def run_trials(
    suite: Suite,
    agent: Agent,
    config: RunConfig,
    run_dir: Path,
    *,
    resume: bool = False,
    on_progress: Callable[[RunProgress], None] | None = None,
    simulator: LLM | None = None,
    executor: Executor | None = None,
    worker: EvalWorker | None = None,
    user: UserSimulator | None = None,
    ready: asyncio.Future[None] | None = None,
    on_result: Callable[[SessionTrial, Trajectory, SessionVerdict], None] | None = None,
) -> list[list[SessionVerdict]]:
    """:func:`run_suite` for every trial of ``config.trials``: the verdicts of all sessions, one list per trial.

    The unit of work is one (session, trial) pair: each is appended to its trial's ``trajectories.jsonl`` when it
    ends, and a resumed run redoes no finished pair (nor any pair lost to the provider or the harness, which it
    runs again). The longest sessions start first, each with all its trials, so no slot idles at the end.

    A forked run (``--history forked``) is run the same way with forks for trials: every session once per task
    boundary i, tasks before i teacher-forced and the rest free; one list of verdicts per fork i (the sessions of
    more than i tasks, in the suite's order; fork 0 is the free run of every session), kept and resumed per
    (session, fork) (see the module docstring for the layout). It costs :func:`forked_task_runs` task-runs.

    ``ready``: the agent's turns wait until it is done (the preflight: the run sets up and the sessions start while
    it runs; a caller whose check fails cancels the run before any turn is taken). Sessions run by a ``worker``
    elsewhere start only once it is done. ``on_result``: called with every trajectory the run holds and its
    verdict, the resumed ones first, then each as its session ends (so a caller needs not read the files back, and
    can prepare what it writes at the end while the run still waits on the model).

    Raises:
        ConfigError: a forked run that asks for trials or a simulated user as well; ``run_dir`` is being written by
            another process (its pid named: one writer per run folder, see :class:`~toolwild.run.lock.OutputLock`).
    """
    with OutputLock(run_dir):  # re-entrant: the eval command already holds it for the whole run
        return await _run_parts(
            suite,
            _parts(suite, agent, config, run_dir, user),
            config,
            run_dir,
            resume=resume,
            on_progress=on_progress,
            simulator=simulator,
            executor=executor,
            worker=worker,
            user=user,
            ready=ready,
            on_result=on_result,
        )


def _parts(suite: Suite, agent: Agent, config: RunConfig, run_dir: Path, user: UserSimulator | None) -> list[_Part]:
    """The parts of a run: one per trial, or one per fork of a forked run."""
    if config.history is not HistoryMode.FORKED:
        return [
            _Part(trial_dir(run_dir, t), suite.sessions, agent_for_trial(agent, config, t), trial=t)
            for t in range(config.trials)  # a script without trial t is refused here
        ]
    if config.trials != 1:
        raise ConfigError("--history forked runs one trial: the forks already run each session once per task")
    if user is not None or config.user != "recorded":
        raise ConfigError("--history forked needs the recorded user: a simulated user does not replay gold turns")
    return [
        _Part(fork_dir(run_dir, i), fork_sessions(suite, i).sessions, agent, fork=i) for i in range(fork_count(suite))
    ]


async def _run_parts(
    suite: Suite,
    parts: list[_Part],
    config: RunConfig,
    run_dir: Path,
    *,
    resume: bool,
    on_progress: Callable[[RunProgress], None] | None,
    simulator: LLM | None,
    executor: Executor | None,
    worker: EvalWorker | None,
    user: UserSimulator | None,
    ready: asyncio.Future[None] | None,
    on_result: Callable[[SessionTrial, Trajectory, SessionVerdict], None] | None,
) -> list[list[SessionVerdict]]:
    """Run the units of every part (trial or fork) not yet finished; the verdicts of each part, in suite order."""
    run_dir.mkdir(parents=True, exist_ok=True)
    digest = suite.fingerprint()
    if resume:
        _check_resumable(run_dir, config, digest)
        done = [
            {
                t.session_id: t
                for t in load_run_trajectories(run_dir, repair=True, suite=suite, trial=p.trial, fork=p.fork)
            }
            for p in parts
        ]
    else:
        for p in parts:
            path = p.folder / TRAJECTORIES
            if path.exists() and path.stat().st_size:
                raise ConfigError(
                    f"{run_dir} already holds a run; use --resume to continue it or choose another --name"
                )
        done = [{} for _ in parts]
    config = config.model_copy(update={"suite_digest": digest})
    write_text_atomic(run_dir / CONFIG, config.model_dump_json(indent=2) + "\n")
    if config.history.live:  # a missing environment or simulator is a setup error: say it before any call
        distinct = {(s.environment, str(s.extra.get("ledger_file"))): s for s in suite.sessions if s.environment}
        for _key, first in sorted(distinct.items()):
            session_environment(first, simulator=simulator, base_dir=Path(config.suite).parent)
    progress = planned_progress(suite, config)
    live = _Live(progress, on_progress)
    verdicts: list[dict[str, SessionVerdict]] = [{} for _ in parts]
    base_dir = Path(config.suite).parent
    index = {(p.trial, p.fork): k for k, p in enumerate(parts)}

    def account(k: int, verdict: SessionVerdict, traj: Trajectory) -> None:
        verdicts[k][verdict.session_id] = verdict
        progress.done += 1
        if traj.status is TrajectoryStatus.PROVIDER_ERROR:
            progress.provider_errors += 1
        elif traj.status is TrajectoryStatus.HARNESS_ERROR:
            progress.harness_errors += 1
        run_by_agent = parts[k].fork  # a fork's earlier tasks are the gold, not the agent's: not counted
        progress.model_failures += sum(t.failure is not None for t in traj.tasks)
        if not verdict.excluded:
            mine = [t for t in verdict.tasks if t.task_index >= run_by_agent]
            progress.tasks += len(mine)
            progress.tasks_correct += sum(t.label == "correct" for t in mine)
        progress.tokens += sum((s.input_tokens or 0) + (s.output_tokens or 0) for t in traj.tasks for s in t.steps)
        if on_progress is not None:
            on_progress(progress)

    for k, found in enumerate(done):
        for sid, traj in found.items():
            session = suite.session(sid)
            assert session is not None
            progress.tasks_done += len(session.tasks) - parts[k].fork
            verdict = _score(session, traj, config, base_dir)
            if on_result is not None:
                on_result(SessionTrial(session, parts[k].trial, parts[k].fork), traj, verdict)
            account(k, verdict, traj)
            progress.skipped += 1
    todo = _longest_first(
        [
            SessionTrial(s, p.trial, p.fork)
            for s in suite.sessions
            for k, p in enumerate(parts)
            if _wanted(p, s, done[k])
        ]
    )
    halted: list[SessionTrial] = []
    with ExitStack() as stack:
        handles: list[IO[str]] = []
        for p in parts:
            p.folder.mkdir(parents=True, exist_ok=True)
            handles.append(stack.enter_context((p.folder / TRAJECTORIES).open("a", encoding="utf-8")))

        def finished(unit: Unit[SessionTrial], traj: Trajectory) -> None:
            item = unit.payload
            k = index[(item.trial, item.fork)]
            if traj.status is TrajectoryStatus.HARNESS_ERROR:
                halted.append(item)
            append_trajectory(handles[k], traj, session=item.session)
            live.finish(unit.key, traj, len(item.session.tasks), item.fork)
            verdict = _score(item.session, traj, config, base_dir)
            if on_result is not None:
                on_result(item, traj, verdict)
            account(k, verdict, traj)

        def here(unit: Unit[SessionTrial]) -> Awaitable[Trajectory]:
            """One unit in this process, its agent watched (:class:`_WatchedAgent`)."""
            item = unit.payload
            agent = _WatchedAgent(parts[index[(item.trial, item.fork)]].agent, live, unit.key, item.fork, ready)
            return _run_one(item.session, agent, config, simulator, user=user, trial=item.trial, fork=item.fork)

        if worker is not None and ready is not None:
            await ready  # the sessions run elsewhere, where nothing waits on it
        await (executor or LocalExecutor(config.concurrency)).map(
            (Unit(key=_unit_key(item, config), order=i, payload=item) for i, item in enumerate(todo)),
            worker if worker is not None else here,
            on_done=finished,
            stop=lambda: bool(halted),
        )
    return [_in_suite_order(p.sessions, config, verdicts[k], halted) for k, p in enumerate(parts)]


def _check_resumable(run_dir: Path, config: RunConfig, digest: str) -> None:
    """A resume continues the run it finds: the same suite, the same trials, the same history."""
    previous = load_run_config(run_dir)
    if previous.suite_digest is not None and previous.suite_digest != digest:
        raise ConfigError(
            f"{run_dir}: the suite changed since the run started (digest {previous.suite_digest[:12]} in the "
            f"run, {digest[:12]} now): resuming would mix two suites"
        )
    if previous.trials != config.trials:
        raise ConfigError(
            f"{run_dir}: the run has {previous.trials} trial(s), not {config.trials}: a resume keeps its trials"
        )
    if previous.history != config.history:
        raise ConfigError(
            f"{run_dir}: the run's history is {previous.history.value}, not {config.history.value}: a resume keeps it"
        )


def _wanted(part: _Part, session: Session, done: dict[str, Trajectory]) -> bool:
    """The part runs this session and has no final result for it yet."""
    return session.id not in done and len(session.tasks) > part.fork


def _longest_first(items: list[SessionTrial]) -> list[SessionTrial]:
    """Units by the gold steps they play, most first: with N units at once, a long one started last would leave
    the other slots idle while it finishes. A fork plays only the tasks from its boundary on; a session's trials
    stay together (the sort is stable)."""
    lengths: dict[str, list[int]] = {}

    def cost(item: SessionTrial) -> int:
        session = item.session
        if session.id not in lengths:
            lengths[session.id] = [GoldDag.from_task(t).min_length for t in session.tasks]
        return -sum(lengths[session.id][item.fork :])

    return sorted(items, key=cost)


def _unit_key(item: SessionTrial, config: RunConfig) -> str:
    """A unit's identity: the session id in a one-trial run (as before trials), ``<trial>:<id>`` in a trial run,
    ``f<fork>:<id>`` in a forked run (unique whatever the ids hold, since the prefix has no colon)."""
    if config.history is HistoryMode.FORKED:
        return f"f{item.fork}:{item.session.id}"
    return item.session.id if config.trials == 1 else f"{item.trial}:{item.session.id}"


def _in_suite_order(
    sessions: list[Session], config: RunConfig, verdicts: dict[str, SessionVerdict], halted: list[SessionTrial]
) -> list[SessionVerdict]:
    """One part's verdicts in the suite's order; a session the run never started (it stopped after a harness
    error) is a harness error "not run", so a resumed run picks it up."""
    out = []
    for s in sessions:
        verdict = verdicts.get(s.id)
        if verdict is None:
            first = halted[0]
            where = f"session {first.session.id!r}"
            if config.trials > 1:
                where += f" (trial {first.trial})"
            elif config.history is HistoryMode.FORKED:
                where += f" (fork {first.fork})"
            verdict = failed_session(s, config.mode, "not run: the run stopped after a harness error")
            verdict.harness_error = f"not run: the run stopped after a harness error in {where}"
        out.append(verdict)
    return out


def _score(session: Session, traj: Trajectory, config: RunConfig, base_dir: Path) -> SessionVerdict:
    """Score one session (with a simulated user, interactively); a scorer that raises is a toolwild bug, and says
    which session set it off."""
    try:
        if config.user != "recorded":
            return score_with_user(session, traj, base_dir=base_dir)
        return score_session(session, traj, mode=config.mode, base_dir=base_dir)
    except Exception as exc:
        raise HarnessError(f"scoring session {session.id!r} failed: {type(exc).__name__}: {exc}") from exc
