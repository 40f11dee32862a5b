"""Running a whole suite: concurrency, per-session timeout, append-only checkpoint, resume, infra errors.

Each finished session is appended to ``trajectories.jsonl`` at once (one line, flushed), so a killed run loses
nothing it finished. Resuming reads that file, drops what is not final (a torn last line, sessions lost to provider
errors), and runs only the sessions still missing: none redone, none lost, none duplicated.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from toolwild.core.files import write_text_atomic
from toolwild.core.formats.results import append_trajectory
from toolwild.core.session import Session, Suite
from toolwild.core.trajectory import Trajectory, TrajectoryStatus
from toolwild.core.verdict import ScoringMode, SessionVerdict
from toolwild.envs.registry import get_environment
from toolwild.errors import BackendError, ConfigError, DataError, TransientBackendError
from toolwild.eval.agents.base import Agent
from toolwild.eval.scoring.dag import GoldDag
from toolwild.eval.scoring.session import failed_session, score_session
from toolwild.eval.session import HistoryMode, run_session
from toolwild.llm.client import LLM

__all__ = ["RunConfig", "RunProgress", "load_run_trajectories", "run_suite"]

TRAJECTORIES = "trajectories.jsonl"
log = logging.getLogger(__name__)


class RunConfig(BaseModel):
    """Everything needed to reproduce a run (saved as ``config.json``; never holds a secret)."""

    model_config = ConfigDict(extra="forbid")

    format_version: int = 1
    suite: str
    agent: str = "model"
    model: str | None = None
    base_url: str | None = None
    prompt_mode: bool | None = None
    history: HistoryMode = HistoryMode.WTB
    mode: ScoringMode = ScoringMode.WTB
    concurrency: int = Field(default=8, ge=1)
    session_timeout_s: float | None = 1800.0
    max_steps_per_task: int = Field(default=32, ge=1)
    temperature: float = 0.0
    seed: int = 0
    max_tokens: int | None = 1024
    count_infra_errors: bool = False
    cache: str = "read-write"
    env_model: str | None = None
    """The model that simulates ``llm`` environments (free mode), if the suite uses any."""


@dataclass
class RunProgress:
    """Live counters for the progress display."""

    total: int
    done: int = 0
    skipped: int = 0
    tasks: int = 0
    tasks_correct: int = 0
    infra_errors: int = 0
    inference_errors: int = 0
    tokens: int = 0

    @property
    def task_accuracy(self) -> float:
        """Running task accuracy over the sessions finished so far."""
        return self.tasks_correct / self.tasks if self.tasks else 0.0


def load_run_trajectories(run_dir: Path, *, repair: bool = False) -> list[Trajectory]:
    """Finished trajectories of a run directory (last line per session wins).

    Args:
        run_dir: the run directory.
        repair: rewrite the file without a torn last line and without infra-error sessions (used when resuming,
            so that the resumed run appends the redone sessions without duplicating them).
    """
    path = run_dir / TRAJECTORIES
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    kept: dict[str, tuple[str, Trajectory]] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            traj = Trajectory.model_validate_json(line)
        except ValueError as exc:
            if number == len(lines):  # a write cut short by a kill: the session simply was not finished
                continue
            raise DataError(f"not a trajectory: {exc}", file=path, line=number) from None
        kept[traj.session_id] = (line, traj)
    final = {sid: v for sid, v in kept.items() if v[1].status is not TrajectoryStatus.INFRA_ERROR}
    if repair:
        write_text_atomic(path, "".join(line + "\n" for line, _ in final.values()))
        return [t for _, t in final.values()]
    return [t for _, t in kept.values()]


async def _run_one(session: Session, agent: Agent, config: RunConfig, simulator: LLM | None) -> Trajectory:
    try:
        environment = (
            get_environment(session.environment, simulator=simulator, base_dir=Path(config.suite).parent)
            if session.environment and config.history is HistoryMode.FREE
            else None
        )
        coro = run_session(
            session,
            agent,
            history=config.history,
            scoring_mode=config.mode,
            max_steps_per_task=config.max_steps_per_task,
            environment=environment,
        )
        if config.session_timeout_s is None:
            return await coro
        return await asyncio.wait_for(coro, config.session_timeout_s)
    except (TransientBackendError, TimeoutError) as exc:
        reason = str(exc) or "session timed out"
        return Trajectory(session_id=session.id, model=agent.name, status=TrajectoryStatus.INFRA_ERROR, error=reason)
    except BackendError as exc:
        return Trajectory(
            session_id=session.id, model=agent.name, status=TrajectoryStatus.INFERENCE_ERROR, error=str(exc)
        )
    except Exception as exc:  # a bug in an agent, environment or toolwild itself must not end the whole run
        log.exception("session %s failed inside the harness", session.id)
        return Trajectory(
            session_id=session.id,
            model=agent.name,
            status=TrajectoryStatus.INFRA_ERROR,
            error=f"internal error: {type(exc).__name__}: {exc}",
        )


async def run_suite(
    suite: Suite,
    agent: Agent,
    config: RunConfig,
    run_dir: Path,
    *,
    resume: bool = False,
    on_progress: Callable[[RunProgress], None] | None = None,
    simulator: LLM | None = None,
) -> list[SessionVerdict]:
    """Run every session not yet finished in ``run_dir`` and return the verdicts of all sessions of the suite.

    ``simulator`` answers the calls of sessions whose environment is model-simulated (free mode).
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    config_path = run_dir / "config.json"
    if resume:
        if not config_path.exists():
            raise ConfigError(f"{run_dir} is not a run directory (no config.json)")
        done = {t.session_id: t for t in load_run_trajectories(run_dir, repair=True)}
    else:
        if (run_dir / TRAJECTORIES).exists() and (run_dir / TRAJECTORIES).stat().st_size:
            raise ConfigError(f"{run_dir} already holds a run; use --resume to continue it or choose another --name")
        done = {}
    config_path.write_text(config.model_dump_json(indent=2) + "\n", encoding="utf-8")
    unknown = [sid for sid in done if suite.session(sid) is None]
    if unknown:
        raise ConfigError(f"{run_dir} holds sessions that are not in the suite: {unknown[:3]}")
    if (
        config.history is HistoryMode.FREE
    ):  # a missing environment or simulator is a setup error: say it before any call
        for ref in sorted({s.environment for s in suite.sessions if s.environment}):
            get_environment(ref, simulator=simulator, base_dir=Path(config.suite).parent)
    progress = RunProgress(total=len(suite.sessions))
    verdicts: dict[str, SessionVerdict] = {}

    def account(verdict: SessionVerdict, traj: Trajectory) -> None:
        verdicts[verdict.session_id] = verdict
        progress.done += 1
        if traj.status is TrajectoryStatus.INFRA_ERROR:
            progress.infra_errors += 1
        elif traj.status is TrajectoryStatus.INFERENCE_ERROR:
            progress.inference_errors += 1
        if not verdict.infra_error:
            progress.tasks += len(verdict.tasks)
            progress.tasks_correct += sum(t.label == "correct" for t in verdict.tasks)
        progress.tokens += sum((s.input_tokens or 0) + (s.output_tokens or 0) for t in traj.tasks for s in t.steps)
        if on_progress is not None:
            on_progress(progress)

    for sid, traj in done.items():
        session = suite.session(sid)
        assert session is not None
        account(score_session(session, traj, mode=config.mode), traj)
        progress.skipped += 1
    # Longest sessions first (by gold steps): with N sessions at once, a long one started last would leave the
    # other slots idle while it finishes.
    todo = sorted(
        (s for s in suite.sessions if s.id not in done),
        key=lambda s: -sum(GoldDag.from_task(t).min_length for t in s.tasks),
    )
    limit = asyncio.Semaphore(config.concurrency)
    with (run_dir / TRAJECTORIES).open("a", encoding="utf-8") as handle:

        async def worker(session: Session) -> None:
            async with limit:
                traj = await _run_one(session, agent, config, simulator)
            append_trajectory(handle, traj)
            account(score_session(session, traj, mode=config.mode), traj)

        await asyncio.gather(*(worker(s) for s in todo))
    return [verdicts.get(s.id) or failed_session(s, config.mode, "not run") for s in suite.sessions]
