"""Trajectory files: toolwild's own ``trajectories.jsonl`` and the published result format, told apart per line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import IO, Any

from pydantic import ValidationError

from toolwild.core.formats.wtb_result import check_result_against_suite, trajectory_from_wtb_result
from toolwild.core.jsonl import LoadReport, load_records, validation_to_data_error
from toolwild.core.session import Suite
from toolwild.core.trajectory import Trajectory

__all__ = ["append_trajectory", "load_trajectories"]


def _is_published(obj: Any) -> bool:
    return isinstance(obj, dict) and "result" in obj and "session_id" not in obj


def _convert(obj: Any, suite: Suite | None) -> Trajectory:
    if _is_published(obj):
        trajectory = trajectory_from_wtb_result(obj)
        if suite is not None:
            check_result_against_suite(obj, suite)
        return trajectory
    try:
        return Trajectory.model_validate(obj)
    except ValidationError as exc:
        raise validation_to_data_error(exc) from None


def load_trajectories(
    path: str | Path, *, skip_invalid: bool = False, suite: Suite | None = None
) -> tuple[list[Trajectory], LoadReport]:
    """Load trajectories from toolwild JSONL or the published WildToolBench result format (auto-detected per line).

    A line that is not UTF-8 or not JSON (a binary file) is a DataError naming file and line (skipped and counted
    with ``skip_invalid``). With ``suite``, published lines are checked against it: a line answering other tasks
    than the suite's session of that id raises ScoringError (see
    :func:`~toolwild.core.formats.wtb_result.check_result_against_suite`).
    """
    return load_records(path, lambda _i, obj: _convert(obj, suite), skip_invalid=skip_invalid)


def append_trajectory(handle: IO[str], trajectory: Trajectory) -> None:
    """Append one trajectory as a JSON line and flush at once, so a killed run loses nothing it finished."""
    handle.write(json.dumps(trajectory.model_dump(mode="json"), ensure_ascii=False) + "\n")
    handle.flush()
