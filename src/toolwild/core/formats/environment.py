"""Reading and writing environment files (``*.env.json``: one :class:`~toolwild.core.environment.Environment`).

A file is checked on load, not when a call first trips over it: an environment whose tools an agent cannot call
correctly (no tools, two tools of one name, a parameter schema that is not JSON Schema, a ``$ref`` that resolves
nowhere) would otherwise run and score, and every figure over it would be wrong.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from toolwild.core.environment import Environment
from toolwild.core.files import output_file, write_text_atomic
from toolwild.core.jsonl import read_json_file, validation_to_data_error
from toolwild.core.schema import cached_schema_defect, schema_defect, undeclared_required
from toolwild.errors import DataError

__all__ = ["ENV_SUFFIX", "check_environment", "load_environment", "write_environment", "write_environment_in"]

ENV_SUFFIX = ".env.json"


def check_environment(environment: Environment) -> None:
    """Raise a DataError naming the field of the first thing that makes an environment unusable.

    Checked: a printable, non-empty id; at least one tool; unique tool names; every tool's ``parameters`` a valid
    JSON Schema of an object (WildToolBench's ``float`` read as ``number``) and its ``returns``, when given, a valid
    JSON Schema; every ``$ref`` resolvable within its schema; no parameter ``required`` that no property declares
    (valid JSON Schema, but an agent never learns the name, so every call it makes is refused: the error names the
    tool, the name and where it is required).
    """
    if not environment.id.strip() or not environment.id.isprintable():
        raise DataError("the id must be non-empty printable text", field="id")
    if not environment.tools:
        raise DataError("an environment needs at least one tool", field="tools")
    seen: dict[str, int] = {}
    for i, tool in enumerate(environment.tools):
        if not tool.name.strip() or not tool.name.isprintable():
            raise DataError("a tool name must be non-empty printable text", field=f"tools[{i}].name")
        if tool.name in seen:
            raise DataError(f"tool name {tool.name!r} repeats tools[{seen[tool.name]}]", field=f"tools[{i}].name")
        seen[tool.name] = i
        problem = _defect(tool.parameters)
        if problem is not None:
            raise DataError(problem, field=f"tools[{i}].parameters")
        if (undeclared := undeclared_required(tool.parameters)) is not None:
            where, name = undeclared
            raise DataError(
                f"tool {tool.name!r}: the required property {name!r} is not declared under properties (an agent never "
                "sees it, so every call it makes is refused); declare it or remove it from required",
                field=f"tools[{i}].parameters.{where}",
            )
        if tool.returns is not None and (problem := _defect(tool.returns, object_type=False)) is not None:
            raise DataError(problem, field=f"tools[{i}].returns")


def _defect(schema: object, *, object_type: bool = True) -> str | None:
    """:func:`~toolwild.core.schema.schema_defect`, remembered per schema (see
    :func:`~toolwild.core.schema.cached_schema_defect`); a schema JSON cannot hold is checked as it is."""
    try:
        text = json.dumps(schema, sort_keys=True)
    except (TypeError, ValueError):
        return schema_defect(schema, object_type=object_type)
    return cached_schema_defect(text, object_type=object_type)


def load_environment(path: str | Path) -> Environment:
    """Load one environment file and check it (see :func:`check_environment`).

    Raises:
        DataError: the file is missing, not UTF-8 or not JSON (with its line), not an environment, or not usable
            (with the field).
    """
    path = Path(path)
    data = read_json_file(path)
    try:
        environment = Environment.model_validate(data)
    except ValidationError as exc:
        raise validation_to_data_error(exc).located(file=path) from None
    try:
        check_environment(environment)
    except DataError as exc:
        raise exc.located(file=path) from None
    return environment


def write_environment(environment: Environment, path: str | Path) -> Path:
    """Write an environment file atomically (a killed write never leaves half a file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = environment.model_dump(mode="json", exclude_defaults=True)
    # the version and the backend are always written: a reader should not have to know our defaults
    data = {"format_version": environment.format_version, "backend": environment.backend.value, **data}
    return write_text_atomic(path, json.dumps(data, indent=1, ensure_ascii=False) + "\n")


def write_environment_in(directory: str | Path, environment: Environment) -> Path:
    """Write an environment into ``directory`` under a file name made safe from its id (``<id>.env.json``).

    Why: ids come from input (session ids, spec names, a model's answer); a raw id such as ``../../x`` or ``/tmp/x``
    would write outside the folder. The name is :func:`~toolwild.core.files.safe_filename` of the id, and the path
    is checked to stay inside ``directory``.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    return write_environment(environment, output_file(directory, environment.id, ENV_SUFFIX))
