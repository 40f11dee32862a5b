"""Trajectory files: toolwild's own ``trajectories.jsonl`` and the published result format, told apart per line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import IO, Any

from pydantic import ValidationError

from toolwild.core.formats.wtb_result import check_result_against_suite, trajectory_from_wtb_result
from toolwild.core.jsonl import LoadReport, load_records, validation_to_data_error
from toolwild.core.session import Session, Suite
from toolwild.core.task import Task
from toolwild.core.trajectory import Trajectory, state_digest
from toolwild.errors import DataError, ScoringError

__all__ = ["append_trajectory", "load_trajectories", "task_digest", "trajectory_mismatch"]


def task_digest(task: Task) -> str:
    """SHA-256 of what a task asks (its request, type and gold calls with their order), recorded with each task's
    steps so that a trajectory can be checked against a suite task by task, as a published result is checked by its
    recorded request. Observations and expected states are left out: the same question asked of a re-recorded
    environment is the same task."""
    gold = [[n.action.name, n.action.arguments, n.dependency_list] for n in task.gold]
    return state_digest({"utterance": task.utterance, "type": task.type.value, "gold": gold})


def trajectory_mismatch(trajectory: Trajectory, session: Session) -> DataError | None:
    """Why a toolwild trajectory is not a run of this session, naming its first task that differs (the field
    ``tasks[k].task_digest``); None when every stamped task matches. Unstamped tasks (files written before the
    digest existed) are not judged here."""
    n = len(session.tasks)
    for k, record in enumerate(trajectory.tasks):
        if record.task_digest is None:
            continue
        field = f"tasks[{k}].task_digest"
        if not 0 <= record.task_index < n:
            return DataError(
                f"session {trajectory.session_id!r} has {n} task(s) in the suite, but these are the steps of its "
                f"task {record.task_index + 1}: the results belong to another suite",
                field=field,
            )
        task = session.tasks[record.task_index]
        if record.task_digest != task_digest(task):
            return DataError(
                f"session {trajectory.session_id!r}, task {record.task_index + 1}/{n}: these steps were run on "
                f"another task than the suite's (which asks {task.utterance[:80]!r}; task digest "
                f"{record.task_digest[:12]} here, {task_digest(task)[:12]} in the suite): the results belong to "
                "another suite",
                field=field,
            )
    return None


def _is_published(obj: Any) -> bool:
    return isinstance(obj, dict) and "result" in obj and "session_id" not in obj


def _convert(obj: Any, suite: Suite | None, path: str | Path, line: int, unchecked: list[str] | None) -> Trajectory:
    if _is_published(obj):
        trajectory = trajectory_from_wtb_result(obj)
        if suite is not None:
            check_result_against_suite(obj, suite)
        return trajectory
    try:
        trajectory = Trajectory.model_validate(obj)
    except ValidationError as exc:
        raise validation_to_data_error(exc) from None
    session = suite.session(trajectory.session_id) if suite is not None else None
    if session is not None:
        mismatch = trajectory_mismatch(trajectory, session)
        if mismatch is not None:  # a wrong suite, not a bad record: refused even with skip_invalid
            raise ScoringError(str(mismatch.located(file=path, line=line)))
        if unchecked is not None and any(t.task_digest is None for t in trajectory.tasks):
            unchecked.append(trajectory.session_id)
    return trajectory


def load_trajectories(
    path: str | Path,
    *,
    skip_invalid: bool = False,
    suite: Suite | None = None,
    unchecked: list[str] | None = None,
) -> tuple[list[Trajectory], LoadReport]:
    """Load trajectories from toolwild JSONL or the published WildToolBench result format (auto-detected per line).

    A line that is not UTF-8 or not JSON (a binary file) is a DataError naming file and line (skipped and counted
    with ``skip_invalid``). With ``suite``, every line is checked against it task by task: a published line by the
    requests it recorded (:func:`~toolwild.core.formats.wtb_result.check_result_against_suite`), a toolwild line by
    its tasks' digests (:func:`trajectory_mismatch`); a line answering other tasks than the suite's session of that
    id raises ScoringError naming file, line and field. ``unchecked`` (with ``suite``) collects the session ids of
    toolwild lines written before task digests existed, which could not be checked so.
    """
    return load_records(path, lambda i, obj: _convert(obj, suite, path, i + 1, unchecked), skip_invalid=skip_invalid)


def append_trajectory(handle: IO[str], trajectory: Trajectory, *, session: Session | None = None) -> None:
    """Append one trajectory as a JSON line and flush at once, so a killed run loses nothing it finished.

    ``session``: the session it ran; each task's steps are stamped with its task's digest (:func:`task_digest`),
    so the line can be checked against any suite it is later scored with.
    """
    if session is not None:
        digests = [task_digest(t) for t in session.tasks]
        trajectory = trajectory.model_copy(
            update={
                "tasks": [
                    t.model_copy(update={"task_digest": digests[t.task_index]})
                    if 0 <= t.task_index < len(digests)
                    else t
                    for t in trajectory.tasks
                ]
            }
        )
    handle.write(json.dumps(trajectory.model_dump(mode="json"), ensure_ascii=False) + "\n")
    handle.flush()
