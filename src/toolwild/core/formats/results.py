"""Trajectory files: toolwild's own ``trajectories.jsonl`` and the published result format, told apart per line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import IO, Any

from pydantic import ValidationError

from toolwild.core.formats.wtb_result import trajectory_from_wtb_result
from toolwild.core.jsonl import LoadReport, load_records, validation_to_data_error
from toolwild.core.trajectory import Trajectory

__all__ = ["append_trajectory", "load_trajectories"]


def _convert(_index: int, obj: Any) -> Trajectory:
    if isinstance(obj, dict) and "result" in obj and "session_id" not in obj:
        return trajectory_from_wtb_result(obj)
    try:
        return Trajectory.model_validate(obj)
    except ValidationError as exc:
        raise validation_to_data_error(exc) from None


def load_trajectories(path: str | Path, *, skip_invalid: bool = False) -> tuple[list[Trajectory], LoadReport]:
    """Load trajectories from toolwild JSONL or the published WildToolBench result format (auto-detected)."""
    return load_records(path, _convert, skip_invalid=skip_invalid)


def append_trajectory(handle: IO[str], trajectory: Trajectory) -> None:
    """Append one trajectory as a JSON line and flush at once, so a killed run loses nothing it finished."""
    handle.write(json.dumps(trajectory.model_dump(mode="json"), ensure_ascii=False) + "\n")
    handle.flush()
