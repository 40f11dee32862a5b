"""Reading JSON and JSONL files record by record, with errors that name the file, line and field.

One bad line must not cost the rest of a file: :func:`read_jsonl` yields ``(line_number, object)`` pairs and a
caller that converts each object into a model decides, through :class:`LoadReport`, whether a bad record stops the
load or is counted and skipped.

Every parse goes through :func:`parse_json`, which bounds what the standard parser lets through: nesting deeper than
:data:`MAX_JSON_DEPTH` (Python's parser raises ``RecursionError`` near 1,000 levels, and every recursive walk after
it near the same), integers longer than Python converts, ``NaN`` and ``Infinity`` (Python reads them, JSON has no
such values), and ``\\u`` escapes that encode half a character (text that cannot be written back as UTF-8). Each
becomes a :class:`DataError` with the file and line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError

from toolwild.core.files import MAX_FILE_BYTES, decode_text, iter_text_lines, read_text_file
from toolwild.errors import DataError

__all__ = [
    "MAX_JSON_DEPTH",
    "LoadReport",
    "load_records",
    "parse_json",
    "read_json_file",
    "read_jsonl",
    "validation_to_data_error",
]

T = TypeVar("T")

MAX_JSON_DEPTH = 100
"""Deepest nesting of arrays and objects accepted. Real records nest fewer than 15 levels (a schema inside a tool
inside a session); 100 leaves room for any honest data and keeps every recursive walk after the load (JSON Schema
validation takes about 7 stack frames per level) well inside Python's recursion limit of 1,000."""
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _located(message: str, file: str | Path | None, line: int | None) -> DataError:
    return DataError(message, file=file, line=line)


_CONTAINERS = (dict, list)


def _nests_deeper(value: Any, max_depth: int) -> bool:
    """Whether a parsed value nests deeper than ``max_depth``: level by level, each level the containers of the one
    before (no recursion, so a deep value cannot exhaust the stack here; about a fifth of the parse's own time)."""
    if type(value) not in _CONTAINERS:
        return False
    level = [value]
    for _ in range(max_depth):
        below: list[Any] = []
        for node in level:
            below += [c for c in (node.values() if type(node) is dict else node) if type(c) in _CONTAINERS]
        if not below:
            return False
        level = below
    return True


def _has_lone_surrogate(value: Any) -> bool:
    """Whether any string (key or value) of a parsed value holds half a surrogate pair. Iterative: depth is already
    bounded, but nothing here should depend on it."""
    stack: list[Any] = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            if _has_surrogate(node):
                return True
        elif isinstance(node, dict):
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


class _NotJson(Exception):
    """Python's parser met ``NaN``/``Infinity``/``-Infinity``, which it accepts and JSON does not."""


def _not_json(constant: str) -> Any:
    """Refuse the non-standard constants: a value no other JSON reader (the published harness included) reads."""
    raise _NotJson(constant)


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def parse_json(
    text: str | bytes,
    *,
    file: str | Path | None = None,
    line: int | None = None,
    max_depth: int = MAX_JSON_DEPTH,
) -> Any:
    """Parse one JSON document, bounded (see the module docstring).

    Args:
        text: the document.
        file: named in errors.
        line: the document's first line in ``file`` (for a JSONL record); None for a whole file, whose errors name
            the line the parser stopped at.
        max_depth: deepest nesting accepted.

    Raises:
        DataError: not JSON, too deep, an integer too long to convert, or a lone surrogate.
    """
    if isinstance(text, bytes):
        text = decode_text(text, file=file, line=line)
    try:
        value = json.loads(text, parse_constant=_not_json)
    except _NotJson as exc:
        raise _located(f"invalid JSON: {exc.args[0]} is not a JSON value", file, line) from None
    except json.JSONDecodeError as exc:
        at = line if line is not None else exc.lineno
        raise _located(f"invalid JSON: {exc.msg} (column {exc.colno})", file, at) from None
    except RecursionError:
        raise _located(f"JSON nested deeper than {max_depth} levels", file, line) from None
    except ValueError as exc:  # e.g. an integer literal longer than Python's conversion limit
        raise _located(f"invalid JSON: {exc}", file, line) from None
    if text.count("[") + text.count("{") > max_depth and _nests_deeper(value, max_depth):
        raise _located(f"JSON nested deeper than {max_depth} levels", file, line)
    if _SURROGATE_ESCAPE.search(text) is not None and _has_lone_surrogate(value):
        raise _located("a \\u escape encodes half a character (a lone surrogate), which is not text", file, line)
    return value


def read_json_file(path: str | Path, *, max_bytes: int = MAX_FILE_BYTES) -> Any:
    """One JSON document from a file: decoded (UTF-8), size- and depth-bounded, errors naming file and line."""
    return parse_json(read_text_file(path, max_bytes=max_bytes), file=path)


def read_jsonl(path: str | Path) -> Iterator[tuple[int, Any]]:
    """Yield ``(1-based line number, parsed JSON)`` for each non-blank line.

    Raises:
        DataError: when the file cannot be opened. A line that is not UTF-8, too long or not valid JSON is yielded
            as a DataError in place of its value (naming file and line), so the caller can decide to skip it and
            continue with the next one.
    """
    for number, text in iter_text_lines(path):
        if isinstance(text, DataError):
            yield number, text
            continue
        if not text.strip():
            continue
        try:
            yield number, parse_json(text, file=path, line=number)
        except DataError as exc:
            yield number, exc


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
        skip_invalid: count and skip bad records (bad bytes, bad JSON, bad content) instead of raising.
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
