"""Scoring whole sessions and suites from trajectories."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from toolwild.core.formats.openai_tools import to_openai_tools_for_api
from toolwild.core.session import Session, Suite
from toolwild.core.tool import Effect
from toolwild.core.trajectory import FailureKind, TaskTrajectory, Trajectory, TrajectoryStatus
from toolwild.core.verdict import ErrorClass, ScoringMode, SessionVerdict, TaskVerdict
from toolwild.errors import ScoringError
from toolwild.eval.scoring.dag import GoldDag
from toolwild.eval.scoring.task import score_task

__all__ = [
    "api_parameters",
    "apply_failure",
    "failed_session",
    "score_session",
    "score_state",
    "score_suite",
    "suite_folder",
]


def api_parameters(session: Session) -> dict[str, dict[str, Any]]:
    """Tool name -> parameter schema as the model saw it (``float`` mapped to ``number``, as published)."""
    return {t["function"]["name"]: t["function"].get("parameters", {}) for t in to_openai_tools_for_api(session.tools)}


def failed_session(session: Session, mode: ScoringMode, reason: str, *, provider: bool = False) -> SessionVerdict:
    """A session whose inference failed: every task counts as failed (the published scorer crashes here)."""
    tasks = [
        TaskVerdict(
            session_id=session.id,
            task_index=i,
            task_type=t.type,
            subtype=t.subtype,
            label="error",
            name_label="error",
            is_optimal=False,
            steps_used=0,
            min_length=GoldDag.from_task(t).min_length,
            progress_complete=0,
            progress_total=session.gold_size(i) if mode is ScoringMode.WTB else len(t.gold),
            error_reason=reason,
            error_class=ErrorClass.INFERENCE_FAILED,
        )
        for i, t in enumerate(session.tasks)
    ]
    return SessionVerdict(
        session_id=session.id,
        mode=mode,
        inference_error=reason,
        provider_error=provider,
        transitions=session.transitions,
        tasks=tasks,
    )


def score_session(
    session: Session,
    trajectory: Trajectory,
    *,
    mode: ScoringMode = ScoringMode.WTB,
    base_dir: Path | None = None,
) -> SessionVerdict:
    """Score every task of a session from the agent's recorded steps.

    ``base_dir`` is the suite's folder, where the session's ``environment`` file reference is resolved (its write
    tools decide which of the agent's writes were redundant); None resolves it from the working directory.
    """
    if trajectory.session_id != session.id:
        raise ScoringError(f"trajectory {trajectory.session_id!r} does not belong to session {session.id!r}")
    if trajectory.status is not TrajectoryStatus.OK:
        verdict = failed_session(
            session,
            mode,
            trajectory.error or trajectory.status.value,
            provider=trajectory.status is TrajectoryStatus.PROVIDER_ERROR,
        )
        if trajectory.status is TrajectoryStatus.HARNESS_ERROR:
            verdict.harness_error = trajectory.error or "harness error"
        if trajectory.status is TrajectoryStatus.USER_ERROR:
            verdict.user_error = trajectory.error or "the simulated user failed"
        return verdict
    if len(trajectory.tasks) > len(session.tasks):
        raise ScoringError(
            f"session {session.id!r}: trajectory has {len(trajectory.tasks)} tasks, the session {len(session.tasks)}"
        )
    params = api_parameters(session)
    by_index = {t.task_index: t for t in trajectory.tasks}
    tasks = []
    for i in range(len(session.tasks)):
        record = by_index.get(i)
        verdict = score_task(session, i, record.steps if record else [], parameters=params, mode=mode)
        if record is not None:
            score_state(session, i, record, verdict, base_dir)
            apply_failure(record, verdict)
        tasks.append(verdict)
    return SessionVerdict(session_id=session.id, mode=mode, transitions=session.transitions, tasks=tasks)


def apply_failure(record: TaskTrajectory, verdict: TaskVerdict) -> None:
    """A model failure recorded by the live loop fails the task with its reason, whatever the steps before it
    were; context truncation is carried over so the metrics can say how much of the evaluation it touched."""
    if record.context_dropped:
        verdict.context_dropped = record.context_dropped
    if record.failure is None:
        return
    verdict.failure = record.failure.kind
    verdict.label = "error"
    verdict.error_reason = verdict.error_reason or record.failure.message
    if record.failure.kind is not FailureKind.STEP_BUDGET or verdict.error_class is None:
        # an exception, unusable output or the clock: nothing the agent did was judged, so the paper's classes
        # do not apply; a step budget keeps the class of what the agent was doing
        verdict.error_class = ErrorClass.INFERENCE_FAILED
        verdict.error_reason = record.failure.message
        verdict.explanation = record.failure.message


def _write_tools(session: Session, base_dir: Path | None) -> set[str]:
    """Names of the session's write tools: from the suite record, else from the environment's declarations (its
    file resolved beside the suite), else from the session's own tool list."""
    declared = session.extra.get("write_tools")
    if isinstance(declared, list):
        return {str(n) for n in declared}
    if session.environment:
        from toolwild.envs.registry import environment_tools
        from toolwild.errors import ConfigError

        try:
            return {
                t.name for t in environment_tools(session.environment, base_dir=base_dir) if t.effect is Effect.WRITE
            }
        except ConfigError:  # an environment file not found: the suite's own tool list still says it
            pass
    return {t.name for t in session.tools if t.effect is Effect.WRITE}


def score_state(
    session: Session, index: int, record: TaskTrajectory, verdict: TaskVerdict, base_dir: Path | None
) -> None:
    """State-based checks of a free-running task: expected state reached, writes not repeated."""
    task = session.tasks[index]
    expected = task.expected_digest
    if record.state_digest is not None and expected is not None:
        verdict.state_match = record.state_digest == expected
    if record.writes is not None:
        writers = _write_tools(session, base_dir)
        gold_writes = sum(1 for n in task.gold if n.name in writers)
        verdict.redundant_writes = max(0, record.writes - gold_writes)


def suite_folder(suite: Suite) -> Path | None:
    """The folder of the file a suite was loaded from (where its environment references resolve), if any."""
    return Path(suite.source).parent if suite.source else None


def score_suite(
    suite: Suite,
    trajectories: Iterable[Trajectory],
    *,
    mode: ScoringMode = ScoringMode.WTB,
    missing_as_failed: bool = True,
    base_dir: Path | None = None,
    scorer: Callable[[Session, Trajectory, Path], SessionVerdict] | None = None,
) -> list[SessionVerdict]:
    """Score a suite; sessions with no trajectory count as failed inference unless ``missing_as_failed`` is off.

    ``base_dir``: where environment references resolve (default: the folder of the suite's file). ``scorer``: how
    one session is scored (default :func:`score_session` in ``mode``; a run with a simulated user scores its own way).
    """
    base_dir = base_dir if base_dir is not None else suite_folder(suite)
    known = {s.id for s in suite.sessions}
    by_id: dict[str, Trajectory] = {}
    for traj in trajectories:
        if traj.session_id not in known:
            raise ScoringError(f"result for unknown session {traj.session_id!r}")
        if traj.session_id in by_id:
            raise ScoringError(f"two results for session {traj.session_id!r}")
        by_id[traj.session_id] = traj
    out = []
    for session in suite.sessions:
        traj = by_id.get(session.id)
        if traj is None:
            if missing_as_failed:
                out.append(failed_session(session, mode, "no result for this session"))
            continue
        if scorer is not None:
            out.append(scorer(session, traj, base_dir))
        else:
            out.append(score_session(session, traj, mode=mode, base_dir=base_dir))
    return out
