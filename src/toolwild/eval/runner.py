"""Running a whole suite: concurrency, per-session time limit, append-only checkpoint, resume, outcome classes.

Each finished session is appended to ``trajectories.jsonl`` at once (one line, flushed), so a killed run loses
nothing it finished. Resuming reads that file, drops what is not final (a torn last line, sessions lost to provider
or harness errors), and runs only the sessions still missing: none redone, none lost, none duplicated.

Three outcome classes, never mixed: a *model failure* fails its task (recorded in the trajectory, scored);
a *provider error* (after retries) leaves its session out of accuracy and listed; a *harness error* (an environment
that raised, a toolwild bug) is listed, stops the run from starting more sessions, and makes the command exit
non-zero.

Trials (``RunConfig.trials`` = k): every session is run k times; the unit of work, of the checkpoint and of resuming
is one (session, trial) pair. Trial 0 keeps the run directory's own files (``trajectories.jsonl``,
``verdicts.jsonl``), so a run of one trial is byte for byte a run from before trials and every reader of one trial
(``show``, ``report``'s viewer, ``compare``, ``--export-wtb-result``) reads trial 0 as it always did; trial t >= 1
keeps the same two files in ``trials/<t>/``. Each trial's file is resumed exactly as a one-trial run's is.

Forked runs (``RunConfig.history`` = ``forked``): every session is run once per task boundary i (a *fork*: tasks
before i teacher-forced, tasks from i on free; see :mod:`toolwild.eval.session`). The unit is one (session, fork)
pair and the layout is that of trials: fork 0 (the plain free run) keeps the run directory's own files, so every
reader of one run (``show``, ``report``'s viewer, ``compare``, ``--export-wtb-result``) reads the free run; fork
i >= 1 keeps ``trajectories.jsonl`` and ``verdicts.jsonl`` in ``forks/<i>/``, with a line for each session of more
than i tasks. A fork's trajectory holds every task of its session: the teacher-forced ones as their gold steps
(what the agent was shown), so it scores and shows like any other. A forked run has one trial and the recorded
user (more is refused: the forks already multiply the work).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
)

from toolwild.core.files import write_text_atomic
from toolwild.core.formats.results import append_trajectory, task_digest, trajectory_mismatch
from toolwild.core.formats.wtb import load_wtb_suite
from toolwild.core.jsonl import read_jsonl, validation_to_data_error
from toolwild.core.session import Session, Suite
from toolwild.core.trajectory import Step, Trajectory, TrajectoryStatus
from toolwild.core.verdict import ScoringMode, SessionVerdict
from toolwild.envs.registry import session_environment
from toolwild.errors import (
    CacheMissError,
    ConfigError,
    DataError,
    HarnessError,
    ScoringError,
    TransientBackendError,
)
from toolwild.eval.agents.base import Agent, AgentContext
from toolwild.eval.agents.model import ModelAgent
from toolwild.eval.interactive import run_interactive_session, score_interactive_suite, score_with_user
from toolwild.eval.scoring.dag import GoldDag
from toolwild.eval.scoring.session import failed_session, score_session, score_suite
from toolwild.eval.session import HistoryMode, run_session
from toolwild.eval.user import UserSimulator
from toolwild.eval.user_audit import UserAuditReport, load_user_audit, user_failures
from toolwild.llm.client import LLM
from toolwild.run import Executor, LocalExecutor, Unit
from toolwild.run.lock import OutputLock

__all__ = [
    "FORKS",
    "TRAJECTORIES",
    "TRIALS",
    "USER_AUDIT",
    "VERDICTS",
    "EncodedVerdicts",
    "EvalWorker",
    "RescoredRun",
    "RunConfig",
    "RunProgress",
    "SessionTrial",
    "agent_for_trial",
    "check_exists",
    "check_fork",
    "check_result_file",
    "check_run_suite",
    "check_trial",
    "fork_count",
    "fork_dir",
    "fork_sessions",
    "forked_task_runs",
    "load_run_config",
    "load_run_trajectories",
    "mark_user_failures",
    "missing_note",
    "rescore_run",
    "result_missing_note",
    "run_suite",
    "run_trials",
    "score_forks",
    "score_trials",
    "trial_dir",
    "verdict_line",
    "write_fork_verdicts",
    "write_trial_verdicts",
    "write_verdicts",
]

TRAJECTORIES = "trajectories.jsonl"
VERDICTS = "verdicts.jsonl"
"""Per-session verdicts of a run, rewritten whole at the end (like metrics.json), so a resumed run's file is whole."""
TRIALS = "trials"
"""Folder of a trial run that holds trials 1..k-1 (``trials/<t>/trajectories.jsonl``, ``trials/<t>/verdicts.jsonl``)."""
FORKS = "forks"
"""Folder of a forked run that holds forks 1..n-1 (``forks/<i>/trajectories.jsonl``, ``forks/<i>/verdicts.jsonl``)."""
USER_AUDIT = "user_audit.json"
"""The audit of a run's simulated user (``--user model:M``), made before the agent runs: what
``--exclude-user-failures`` reads."""
log = logging.getLogger(__name__)


def trial_dir(run_dir: Path, trial: int) -> Path:
    """Where trial ``trial`` keeps its trajectories and verdicts: the run directory itself for trial 0 (a run of one
    trial is exactly a run from before trials), ``trials/<t>/`` for the others."""
    return run_dir if trial == 0 else run_dir / TRIALS / str(trial)


def fork_dir(run_dir: Path, fork: int) -> Path:
    """Where fork ``fork`` of a forked run keeps its trajectories and verdicts: the run directory itself for fork 0
    (the free run), ``forks/<i>/`` for the others."""
    return run_dir if fork == 0 else run_dir / FORKS / str(fork)


def _part_dir(run_dir: Path, trial: int, fork: int) -> Path:
    """The folder of one trial or one fork (a run has several of one kind at most)."""
    return fork_dir(run_dir, fork) if fork else trial_dir(run_dir, trial)


def fork_count(suite: Suite) -> int:
    """Forks of a forked run: one per task boundary of its longest session (fork i runs the sessions of more than
    i tasks)."""
    return max((len(s.tasks) for s in suite.sessions), default=0)


def fork_sessions(suite: Suite, fork: int) -> Suite:
    """The sessions fork ``fork`` runs: those with more than ``fork`` tasks (in the suite's order)."""
    return suite.model_copy(update={"sessions": [s for s in suite.sessions if len(s.tasks) > fork]})


def forked_task_runs(suite: Suite) -> int:
    """Task-runs of a forked run: per session of n tasks, fork i runs its n - i last tasks, so n(n+1)/2 in all (a
    free or ``wtb`` run makes n)."""
    return sum(len(s.tasks) * (len(s.tasks) + 1) // 2 for s in suite.sessions)


class RunConfig(BaseModel):
    """Everything needed to reproduce a run (saved as ``config.json``; never holds a secret)."""

    model_config = ConfigDict(extra="forbid")

    format_version: int = 1
    suite: str
    """Absolute path of the suite file."""
    suite_digest: str | None = None
    """``Suite.fingerprint()`` of the suite the run used: re-scoring refuses any other suite."""
    agent: str = "model"
    model: str | None = None
    base_url: str | None = None
    prompt_mode: bool | None = None
    history: HistoryMode = HistoryMode.WTB
    mode: ScoringMode = ScoringMode.WTB
    concurrency: int = Field(default=8, ge=1)
    session_timeout_s: float | None = Field(default=1800.0, gt=0)
    request_timeout_s: float | None = Field(default=None, gt=0)
    """Per-request limit of the model client (None: the client's default)."""
    max_steps_per_task: int = Field(default=32, ge=1)
    temperature: float = 0.0
    seed: int = 0
    """The model's request seed of trial 0; trial t sends ``seed + t``."""
    trials: int = Field(default=1, ge=1)
    """Times every session is run (``--trials``). Left out of ``config.json`` when 1, so a one-trial run's file is
    the one written before trials existed."""
    max_tokens: int | None = 1024
    count_provider_errors: bool = Field(
        default=False, validation_alias=AliasChoices("count_provider_errors", "count_infra_errors")
    )
    cache: str = "read-write"
    env_model: str | None = None
    """The model that simulates ``llm`` environments (free mode), if the suite uses any."""
    user: str = "recorded"
    """Who answers the agent: ``recorded`` (the suite's recorded replies to the gold's questions, the published
    protocol) or ``model:M`` (a simulated user, :mod:`toolwild.eval.user`: free history, scored by
    :func:`~toolwild.eval.interactive.score_interactive_session` in ``strict`` mode)."""
    user_temperature: float = 0.0
    """Sampling temperature of a simulated user (trial t seeds it with ``seed + t``)."""
    user_prompt_version: str | None = None
    user_prompt_sha256: str | None = None
    """A simulated user's prompt file (``prompts/user.md``): its version line and the sha256 of its bytes."""
    exclude_user_failures: bool = False
    """Leave out the sessions the run's user audit (:data:`USER_AUDIT`) found the simulated user breaking."""

    @model_serializer(mode="wrap")
    def _one_trial_is_implied(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """``trials`` is written only when it is not 1 (see the field), the simulated user's fields only when there
        is one: a run of before either is written as it was."""
        data = handler(self)
        if self.trials == 1:
            data.pop("trials", None)
        if self.user == "recorded":
            for key in (
                "user",
                "user_temperature",
                "user_prompt_version",
                "user_prompt_sha256",
                "exclude_user_failures",
            ):
                data.pop(key, None)
        return data


def check_fork(config: RunConfig, suite: Suite, fork: int) -> None:
    """Refuse a fork the run does not have, naming the ones it has."""
    if fork == 0:
        return
    if config.history is not HistoryMode.FORKED:
        raise ConfigError(f"the run has no fork {fork}: it is not a forked run (--history {config.history.value})")
    if not 0 < fork < fork_count(suite):
        raise ConfigError(f"the run has no fork {fork}: it has forks 0..{fork_count(suite) - 1}")


def check_trial(config: RunConfig, trial: int) -> None:
    """Refuse a trial the run does not have, naming the ones it has."""
    if not 0 <= trial < config.trials:
        have = "only trial 0" if config.trials == 1 else f"trials 0..{config.trials - 1}"
        raise ConfigError(f"the run has no trial {trial}: it has {have}")


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

    @property
    def task_accuracy(self) -> float:
        """Running task accuracy over the sessions finished so far."""
        return self.tasks_correct / self.tasks if self.tasks else 0.0


def check_exists(path: Path) -> None:
    """Refuse a path that names nothing, before anything else is asked of it: a mistyped run folder or result file
    would otherwise be taken for a result file and get a message about a missing ``--suite``."""
    if not path.exists():
        raise ConfigError(f"no such file or folder: {path}")


def load_run_config(run_dir: Path) -> RunConfig:
    """The config of a run directory, or a ConfigError that says what is wrong with it and what to do."""
    path = run_dir / "config.json"
    if not run_dir.is_dir():
        raise ConfigError(f"{run_dir} is not a run directory (no such folder)")
    if not path.exists():
        raise ConfigError(
            f"{run_dir} is not a run directory (no config.json): if a run was killed before it started, start it "
            "again with --name"
        )
    try:
        text = path.read_bytes().decode("utf-8")
        return RunConfig.model_validate_json(text)
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except ValidationError as exc:
        raise ConfigError(f"{path}: not a run config: {validation_to_data_error(exc)}") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None


def load_run_trajectories(
    run_dir: Path,
    *,
    repair: bool = False,
    suite: Suite | None = None,
    trial: int = 0,
    fork: int = 0,
    torn: list[DataError] | None = None,
) -> list[Trajectory]:
    """Finished trajectories of a run directory (last line per session wins), of one trial (default trial 0) or one
    fork of a forked run.

    Args:
        run_dir: the run directory.
        repair: rewrite the file without a torn last line and without provider- or harness-error sessions (used
            when resuming, so that the resumed run appends the redone sessions without duplicating them).
        suite: when given, a trajectory must belong to one of its sessions and hold every task of it (a line that
            does not is not a result of this run: a DataError names it).
        trial: which trial's file (see :func:`trial_dir`).
        fork: which fork's file (see :func:`fork_dir`); with ``suite``, a session of that file must have more than
            ``fork`` tasks.
        torn: when given, a torn last line (left out: its session did not finish) is added to it as a DataError
            naming file and line, so a reader that shows the run can say so instead of leaving it out in silence.

    Raises:
        DataError: a line that is not a trajectory (bad bytes, bad JSON, bad fields), other than a torn last line.
    """
    path = _part_dir(run_dir, trial, fork) / TRAJECTORIES
    if not path.exists():
        return []
    records = list(read_jsonl(path))
    kept: dict[str, Trajectory] = {}
    for position, (number, obj) in enumerate(records, start=1):
        last = position == len(records)
        try:
            if isinstance(obj, DataError):
                raise obj
            traj = Trajectory.model_validate(obj)
        except (DataError, ValidationError) as exc:
            if last:  # a write cut short by a kill: the session simply was not finished
                if torn is not None:
                    error = exc if isinstance(exc, DataError) else validation_to_data_error(exc)
                    torn.append(
                        DataError(
                            f"the last line is cut short (a write stopped by a kill; {error.message}): its session "
                            "did not finish",
                            file=path,
                            line=number,
                        )
                    )
                continue
            error = exc if isinstance(exc, DataError) else validation_to_data_error(exc)
            raise DataError(f"not a trajectory: {error}", file=path, line=number) from None
        if suite is not None:
            session = suite.session(traj.session_id)
            if session is None:
                raise DataError(f"session {traj.session_id!r} is not in the run's suite", file=path, line=number)
            mismatch = trajectory_mismatch(traj, session)
            if mismatch is not None:
                raise mismatch.located(file=path, line=number)
            if fork >= len(session.tasks):
                raise DataError(
                    f"session {traj.session_id!r} has {len(session.tasks)} task(s): it has no fork {fork}",
                    file=path,
                    line=number,
                )
            if traj.status is TrajectoryStatus.OK and len(traj.tasks) != len(session.tasks):
                raise DataError(
                    f"session {traj.session_id!r} has {len(traj.tasks)} task(s) here and {len(session.tasks)} in "
                    "the suite: not a finished session of this run",
                    file=path,
                    line=number,
                    field="tasks",
                )
        kept[traj.session_id] = traj
    if repair:
        final = {sid: t for sid, t in kept.items() if t.final}
        lines = (json.dumps(t.model_dump(mode="json"), ensure_ascii=False) + "\n" for t in final.values())
        write_text_atomic(path, "".join(lines))
        return list(final.values())
    return list(kept.values())


EncodedVerdicts = dict[str, tuple[SessionVerdict, str]]
"""Verdict lines already encoded (:func:`verdict_line`), per session id, with the verdict each was made from."""


def verdict_line(verdict: SessionVerdict) -> str:
    """A verdict as its ``verdicts.jsonl`` line."""
    return json.dumps(verdict.model_dump(mode="json"), ensure_ascii=False) + "\n"


def write_verdicts(path: Path, verdicts: list[SessionVerdict], encoded: EncodedVerdicts | None = None) -> None:
    """One ``SessionVerdict`` per line, written atomically: the one writer of ``eval``'s ``verdicts.jsonl`` and of
    ``score --verdicts``, so both files hold the same content for the same run.

    ``encoded``: lines made as the sessions ended (``eval`` makes them while the run waits on the model), used for
    the very verdict objects they were made from; any other verdict is encoded here.
    """
    lines = []
    for v in verdicts:
        done = encoded.get(v.session_id) if encoded else None
        lines.append(done[1] if done is not None and done[0] is v else verdict_line(v))
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, "".join(lines))


def write_trial_verdicts(
    run_dir: Path, by_trial: list[list[SessionVerdict]], encoded: list[EncodedVerdicts] | None = None
) -> None:
    """Every trial's ``verdicts.jsonl`` in its own folder (trial 0's is the run's own ``verdicts.jsonl``);
    ``encoded``: each trial's lines made as its sessions ended (see :func:`write_verdicts`)."""
    for trial, verdicts in enumerate(by_trial):
        write_verdicts(trial_dir(run_dir, trial) / VERDICTS, verdicts, encoded[trial] if encoded else None)


def write_fork_verdicts(
    run_dir: Path, by_fork: list[list[SessionVerdict]], encoded: list[EncodedVerdicts] | None = None
) -> None:
    """Every fork's ``verdicts.jsonl`` in its own folder (fork 0's, the free run's, is the run's own);
    ``encoded``: as for :func:`write_trial_verdicts`."""
    for fork, verdicts in enumerate(by_fork):
        write_verdicts(fork_dir(run_dir, fork) / VERDICTS, verdicts, encoded[fork] if encoded else None)


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
            from toolwild.eval.build import build_agent, build_simulator, build_user

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
    write_text_atomic(run_dir / "config.json", config.model_dump_json(indent=2) + "\n")
    if config.history.live:  # a missing environment or simulator is a setup error: say it before any call
        distinct = {(s.environment, str(s.extra.get("ledger_file"))): s for s in suite.sessions if s.environment}
        for _key, first in sorted(distinct.items()):
            session_environment(first, simulator=simulator, base_dir=Path(config.suite).parent)
    progress = RunProgress(
        total=sum(len(p.sessions) for p in parts),
        total_tasks=sum(len(s.tasks) - p.fork for p in parts for s in p.sessions),
    )
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


def check_run_suite(config: RunConfig, suite: Suite, suite_path: Path) -> None:
    """Refuse a suite other than the run's: results of a suite whose session ids overlap would score silently."""
    if config.suite_digest is None:  # a run from before fingerprints were recorded: nothing to compare
        return
    digest = suite.fingerprint()
    if digest != config.suite_digest:
        raise ScoringError(
            f"{suite_path} is not the suite this run used (fingerprint {digest[:12]}, the run's "
            f"{config.suite_digest[:12]})"
        )


def check_result_file(results: Path, suite: Suite, suite_path: Path, unchecked: list[str]) -> str | None:
    """Check, against ``suite``, the toolwild trajectories of a result file that carry no task digest (written
    before :func:`~toolwild.core.formats.results.task_digest` was recorded; ``unchecked`` holds their session ids).

    Why: two suites can share session ids, and such results would score against the wrong tasks without a word. A
    ``trajectories.jsonl`` still in its run folder (the run's own, or a trial's or a fork's) names the suite it ran
    in ``config.json``: each unchecked session's tasks are compared with that suite's, so scoring a subset of the
    run's sessions against a bigger suite still works.

    Returns:
        None when every line is checked; else a warning to print (the sessions were matched by id alone).

    Raises:
        ScoringError: a session whose tasks differ from the run's suite's, naming the session, the task and both
            requests.
    """
    if not unchecked:
        return None
    found = _run_of_file(results)
    run_suite: Suite | None = None
    if found is not None and Path(found.suite).is_file():
        run_suite = load_wtb_suite(Path(found.suite))[0]
    if run_suite is None:
        return (
            f"{results}: {len(unchecked)} session(s) ({', '.join(unchecked[:3])}{', …' if len(unchecked) > 3 else ''}) "
            "carry no task digest (written by an older toolwild) and no run folder names their suite: they were "
            f"matched to {suite_path} by session id alone"
        )
    for sid in unchecked:
        mine, theirs = run_suite.session(sid), suite.session(sid)
        if mine is None or theirs is None:
            continue  # an id the run's suite lacks: the scorer refuses it
        for k, (ran, asked) in enumerate(zip(mine.tasks, theirs.tasks, strict=False)):
            if task_digest(ran) != task_digest(asked):
                raise ScoringError(
                    f"{results}: session {sid!r}, task {k + 1}: the run ran {ran.utterance[:80]!r} (its suite "
                    f"{found.suite if found else '?'}), but {suite_path} asks {asked.utterance[:80]!r}: the results "
                    "belong to another suite"
                )
        if len(mine.tasks) != len(theirs.tasks):
            raise ScoringError(
                f"{results}: session {sid!r} has {len(mine.tasks)} task(s) in the run's suite and "
                f"{len(theirs.tasks)} in {suite_path}: the results belong to another suite"
            )
    return None


def _run_of_file(results: Path) -> RunConfig | None:
    """The config of the run a ``trajectories.jsonl`` belongs to, if it still sits in its run folder (directly, or
    in a trial's or fork's folder); None for any other file."""
    if results.name != TRAJECTORIES:
        return None
    folder = results.resolve().parent
    candidates = [folder]
    if folder.parent.name in (TRIALS, FORKS):
        candidates.append(folder.parent.parent)
    for run_dir in candidates:
        if (run_dir / "config.json").is_file():
            try:
                return load_run_config(run_dir)
            except ConfigError:
                return None
    return None


@dataclass
class RescoredRun:
    """A run directory read back: its config, suite, trajectories, and verdicts scored again in its own mode (of
    one trial: ``trial``, or one fork of a forked run: ``fork``, whose ``suite`` is then the sessions it ran)."""

    config: RunConfig
    suite: Suite
    trajectories: list[Trajectory]
    verdicts: list[SessionVerdict]
    trial: int = 0
    fork: int = 0
    missing: list[str] = field(default_factory=list)
    """Sessions of ``suite`` with no result in the run (an unfinished run: killed, or still going), in suite order;
    with ``missing_as_failed`` their verdicts are failed ones, as ``toolwild score`` counts them."""
    torn: list[DataError] = field(default_factory=list)
    """The run's torn last line (file and line), if it has one: a write a kill cut short."""


def rescore_run(run_dir: Path, *, missing_as_failed: bool = False, trial: int = 0, fork: int = 0) -> RescoredRun:
    """Score a run again from its trajectories (no model call): what ``show``, ``report`` and ``compare`` read, so a
    run made before ``verdicts.jsonl`` existed is read the same way as a new one. ``trial``: which trial of a trial
    run, ``fork``: which fork of a forked run (default 0, the run's own files). The sessions without a result and a
    torn last line are returned (``missing``, ``torn``), so that no reader shows a part of a run as the whole."""
    config = load_run_config(run_dir)
    check_trial(config, trial)
    suite_path = Path(config.suite)
    suite, _report = load_wtb_suite(suite_path)
    check_run_suite(config, suite, suite_path)
    check_fork(config, suite, fork)
    torn: list[DataError] = []
    trajectories = load_run_trajectories(run_dir, suite=suite, trial=trial, fork=fork, torn=torn)
    if not trajectories:
        which = f" in trial {trial}" if config.trials > 1 else (f" in fork {fork}" if fork else "")
        cut = f" ({torn[0]})" if torn else ""
        raise ConfigError(f"{run_dir}: the run has no finished session{which} yet{cut}")
    part = fork_sessions(suite, fork) if fork else suite
    verdicts = _score_suite(run_dir, config, part, trajectories, mode=config.mode, missing_as_failed=missing_as_failed)
    found = {t.session_id for t in trajectories}
    missing = [s.id for s in part.sessions if s.id not in found]
    return RescoredRun(config, part, trajectories, verdicts, trial, fork, missing, torn)


def missing_note(
    run_dir: Path,
    missing: list[str],
    total: int,
    *,
    unit: str = "session(s)",
    counted: str = "they count as failed",
    limit: int = 5,
) -> str:
    """One line saying that a run is unfinished: how many sessions (or ``unit``: a trial run's (session, trial)
    pairs) have no result, the first few, how they count (``counted``: failed, as ``toolwild score`` counts them)
    and how to finish it."""
    shown = ", ".join(missing[:limit]) + (f" and {len(missing) - limit} more" if len(missing) > limit else "")
    return (
        f"{run_dir} is unfinished: {len(missing)} of {total} {unit} have no result ({shown}); {counted}, so the "
        f"figures are incomplete. Finish the run: toolwild eval --resume {run_dir}"
    )


def result_missing_note(results: Path, missing: list[str], total: int, *, limit: int = 5) -> str:
    """One line saying that a result file lacks sessions of its suite: how many, the first few ids, and how they
    count (failed, as ``toolwild score`` counts them)."""
    shown = ", ".join(missing[:limit]) + (f" and {len(missing) - limit} more" if len(missing) > limit else "")
    return (
        f"{results} has no result for {len(missing)} of {total} session(s) of the suite ({shown}): they count as failed"
    )


def score_trials(
    run_dir: Path, config: RunConfig, suite: Suite, *, mode: ScoringMode, torn: list[DataError] | None = None
) -> tuple[list[list[Trajectory]], list[list[SessionVerdict]]]:
    """Every trial of a run scored again (``toolwild score RUN_DIR``): each trial's trajectories and verdicts, a
    session without a result in a trial counting as failed in that trial (as ``score`` counts a missing session).
    A forked run's forks are its parts here (:func:`score_forks`). ``torn`` collects torn last lines (see
    :func:`load_run_trajectories`)."""
    if config.history is HistoryMode.FORKED:
        return score_forks(run_dir, config, suite, mode=mode, torn=torn)
    trajectories = [load_run_trajectories(run_dir, suite=suite, trial=t, torn=torn) for t in range(config.trials)]
    verdicts = [_score_suite(run_dir, config, suite, found, mode=mode) for found in trajectories]
    return trajectories, verdicts


def score_forks(
    run_dir: Path, config: RunConfig, suite: Suite, *, mode: ScoringMode, torn: list[DataError] | None = None
) -> tuple[list[list[Trajectory]], list[list[SessionVerdict]]]:
    """Every fork of a forked run scored again: per fork i, its trajectories and the verdicts of the sessions of
    more than i tasks, one without a result in that fork counting as failed there."""
    trajectories = [load_run_trajectories(run_dir, suite=suite, fork=i, torn=torn) for i in range(fork_count(suite))]
    verdicts = [
        _score_suite(run_dir, config, fork_sessions(suite, i), found, mode=mode) for i, found in enumerate(trajectories)
    ]
    return trajectories, verdicts


def _score_suite(
    run_dir: Path,
    config: RunConfig,
    suite: Suite,
    trajectories: list[Trajectory],
    *,
    mode: ScoringMode,
    missing_as_failed: bool = True,
) -> list[SessionVerdict]:
    """A trial's verdicts as the run scores them: interactively with a simulated user (the sessions its audit
    found broken left out when the run asked for it), else by the live loop's judge in ``mode``."""
    if config.user == "recorded":
        return score_suite(suite, trajectories, mode=mode, missing_as_failed=missing_as_failed)
    verdicts = score_interactive_suite(suite, trajectories, missing_as_failed=missing_as_failed)
    if config.exclude_user_failures and (run_dir / USER_AUDIT).exists():
        mark_user_failures(verdicts, load_user_audit(run_dir / USER_AUDIT))
    return verdicts


def mark_user_failures(verdicts: list[SessionVerdict], report: UserAuditReport) -> int:
    """Leave out (``user_error``) the sessions the user audit found the simulator breaking; returns how many."""
    broken = {b.session_id: b for b in report.broken if b.session_id in user_failures(report)}
    marked = 0
    for verdict in verdicts:
        found = broken.get(verdict.session_id)
        if found is not None and verdict.user_error is None:
            verdict.user_error = f"excluded: the user audit found the simulator breaking it ({found.why[0]})"
            marked += 1
    return marked
