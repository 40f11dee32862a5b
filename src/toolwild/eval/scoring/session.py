"""Scoring whole sessions and suites from trajectories."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from toolwild.core.formats.openai_tools import to_openai_tools_for_api
from toolwild.core.session import Session, Suite
from toolwild.core.tool import Effect
from toolwild.core.trajectory import TaskTrajectory, Trajectory, TrajectoryStatus, state_digest
from toolwild.core.verdict import ErrorClass, ScoringMode, SessionVerdict, TaskVerdict
from toolwild.errors import ScoringError
from toolwild.eval.scoring.dag import GoldDag
from toolwild.eval.scoring.task import score_task

__all__ = ["api_parameters", "failed_session", "score_session", "score_suite"]


def api_parameters(session: Session) -> dict[str, dict[str, Any]]:
    """Tool name -> parameter schema as the model saw it (``float`` mapped to ``number``, as published)."""
    return {t["function"]["name"]: t["function"].get("parameters", {}) for t in to_openai_tools_for_api(session.tools)}


def failed_session(session: Session, mode: ScoringMode, reason: str, *, infra: bool = False) -> SessionVerdict:
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
        infra_error=infra,
        transitions=session.transitions,
        tasks=tasks,
    )


def score_session(session: Session, trajectory: Trajectory, *, mode: ScoringMode = ScoringMode.WTB) -> SessionVerdict:
    """Score every task of a session from the agent's recorded steps."""
    if trajectory.session_id != session.id:
        raise ScoringError(f"trajectory {trajectory.session_id!r} does not belong to session {session.id!r}")
    if trajectory.status is not TrajectoryStatus.OK:
        return failed_session(
            session,
            mode,
            trajectory.error or trajectory.status.value,
            infra=trajectory.status is TrajectoryStatus.INFRA_ERROR,
        )
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
            _score_state(session, i, record, verdict)
        tasks.append(verdict)
    return SessionVerdict(session_id=session.id, mode=mode, transitions=session.transitions, tasks=tasks)


def _write_tools(session: Session) -> set[str]:
    """Names of the session's write tools: from the suite record, else from the environment's declarations."""
    declared = session.extra.get("write_tools")
    if isinstance(declared, list):
        return {str(n) for n in declared}
    if session.environment:
        from toolwild.envs.registry import environment_tools
        from toolwild.errors import ConfigError

        try:
            return {t.name for t in environment_tools(session.environment) if t.effect is Effect.WRITE}
        except ConfigError:  # an environment file not found from here: the suite's own tool list still says it
            pass
    return {t.name for t in session.tools if t.effect is Effect.WRITE}


def _score_state(session: Session, index: int, record: TaskTrajectory, verdict: TaskVerdict) -> None:
    """State-based checks of a free-running task: expected state reached, writes not repeated."""
    task = session.tasks[index]
    if record.state_digest is not None and task.expected_state is not None:
        verdict.state_match = record.state_digest == state_digest(task.expected_state)
    if record.writes is not None:
        writers = _write_tools(session)
        gold_writes = sum(1 for n in task.gold if n.name in writers)
        verdict.redundant_writes = max(0, record.writes - gold_writes)


def score_suite(
    suite: Suite,
    trajectories: Iterable[Trajectory],
    *,
    mode: ScoringMode = ScoringMode.WTB,
    missing_as_failed: bool = True,
) -> list[SessionVerdict]:
    """Score a suite; sessions with no trajectory count as failed inference unless ``missing_as_failed`` is off."""
    by_id: dict[str, Trajectory] = {}
    for traj in trajectories:
        if suite.session(traj.session_id) is None:
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
        out.append(score_session(session, traj, mode=mode))
    return out
