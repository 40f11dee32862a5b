"""Reading JSONL files record by record, with errors that name the file, line and field.

One bad line must not cost the rest of a file: :func:`read_jsonl` yields ``(line_number, object)`` pairs and a
caller that converts each object into a model decides, through :class:`LoadReport`, whether a bad record stops the
load or is counted and skipped.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError

from toolwild.errors import DataError

__all__ = ["LoadReport", "load_records", "read_jsonl", "validation_to_data_error"]

T = TypeVar("T")


def read_jsonl(path: str | Path) -> Iterator[tuple[int, Any]]:
    """Yield ``(1-based line number, parsed JSON)`` for each non-blank line.

    Raises:
        DataError: for a line that is not valid JSON (naming file and line); raised lazily, at that line, so the
            caller can decide to skip it and continue with the next one.
    """
    p = Path(path)
    try:
        handle = p.open(encoding="utf-8")
    except OSError as exc:
        raise DataError(f"cannot read file: {exc.strerror or exc}", file=p) from exc
    with handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                yield number, json.loads(line)
            except json.JSONDecodeError as exc:
                yield number, DataError(f"invalid JSON: {exc.msg} (column {exc.colno})", file=p, line=number)


def validation_to_data_error(exc: ValidationError, *, prefix: str = "") -> DataError:
    """Turn pydantic's first validation error into a DataError naming the field path."""
    err = exc.errors()[0]
    loc = ".".join(str(part) for part in err.get("loc", ()))
    field_path = f"{prefix}.{loc}" if prefix and loc else (prefix or loc or None)
    return DataError(err.get("msg", "invalid value"), field=field_path)


@dataclass
class LoadReport:
    """What a load kept and what it skipped (and why)."""

    path: str
    loaded: int = 0
    skipped: list[DataError] = field(default_factory=list)

    @property
    def skipped_count(self) -> int:
        """How many records were skipped."""
        return len(self.skipped)


def load_records(
    path: str | Path,
    convert: Callable[[int, Any], T],
    *,
    skip_invalid: bool = False,
) -> tuple[list[T], LoadReport]:
    """Read a JSONL file and convert each record; stop at the first bad one unless ``skip_invalid``.

    Args:
        path: the JSONL file.
        convert: ``(0-based record line index, parsed object) -> model``; raises DataError for a bad record.
        skip_invalid: count and skip bad records instead of raising.
    """
    report = LoadReport(path=str(path))
    out: list[T] = []
    for number, obj in read_jsonl(path):
        try:
            if isinstance(obj, DataError):
                raise obj
            out.append(convert(number - 1, obj))
            report.loaded += 1
        except DataError as exc:
            located = exc.located(file=path, line=number)
            if not skip_invalid:
                raise located from None
            report.skipped.append(located)
    return out, report
