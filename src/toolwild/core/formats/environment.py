"""Reading and writing environment files (``*.env.json``: one :class:`~toolwild.core.environment.Environment`)."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from toolwild.core.environment import Environment
from toolwild.core.files import write_text_atomic
from toolwild.core.jsonl import validation_to_data_error
from toolwild.errors import DataError

__all__ = ["ENV_SUFFIX", "load_environment", "write_environment"]

ENV_SUFFIX = ".env.json"


def load_environment(path: str | Path) -> Environment:
    """Load one environment file.

    Raises:
        DataError: the file is missing, not JSON (with its line), or not an environment (with the field).
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise DataError(f"cannot read environment file: {exc.strerror}", file=path) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(f"not JSON: {exc.msg} (column {exc.colno})", file=path, line=exc.lineno) from None
    try:
        return Environment.model_validate(data)
    except ValidationError as exc:
        raise validation_to_data_error(exc).located(file=path) from None


def write_environment(environment: Environment, path: str | Path) -> Path:
    """Write an environment file atomically (a killed write never leaves half a file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = environment.model_dump(mode="json", exclude_defaults=True)
    # the version and the backend are always written: a reader should not have to know our defaults
    data = {"format_version": environment.format_version, "backend": environment.backend.value, **data}
    return write_text_atomic(path, json.dumps(data, indent=1, ensure_ascii=False) + "\n")
