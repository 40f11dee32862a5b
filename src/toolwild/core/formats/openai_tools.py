"""`Tool` <-> OpenAI function tool (``{"type": "function", "function": {name, description, parameters}}``)."""

from __future__ import annotations

import json
from typing import Any

from toolwild.core.schema import cached_schema_defect
from toolwild.core.tool import Tool
from toolwild.errors import DataError

__all__ = ["from_openai_tool", "to_openai_tool", "to_openai_tools_for_api"]

_FUNCTION_KEYS = ("name", "description", "parameters")


def from_openai_tool(obj: Any, *, field: str = "tool") -> Tool:
    """Read one OpenAI function tool; unknown keys are kept in ``Tool.extra`` so writing it back loses nothing.

    Raises:
        DataError: not a function tool, or its parameters are not a JSON Schema of an object (published ``float``
            read as ``number``; see :func:`~toolwild.core.schema.schema_defect`), field named.
    """
    if not isinstance(obj, dict):
        raise DataError("expected an object", field=field)
    fn = obj.get("function")
    if not isinstance(fn, dict):
        raise DataError("missing or invalid 'function' object", field=f"{field}.function")
    name = fn.get("name")
    if not isinstance(name, str) or not name:
        raise DataError("missing function name", field=f"{field}.function.name")
    params = fn.get("parameters", {"type": "object", "properties": {}})
    if not isinstance(params, dict):
        raise DataError("parameters must be an object", field=f"{field}.function.parameters")
    problem = cached_schema_defect(json.dumps(params, sort_keys=True))
    if problem is not None:  # the scorer and the environments read these schemas: they must be JSON Schema
        raise DataError(problem, field=f"{field}.function.parameters")
    description = fn.get("description", "")
    if not isinstance(description, str):
        raise DataError("description must be a string", field=f"{field}.function.description")
    extra: dict[str, Any] = {}
    outer = {k: v for k, v in obj.items() if k not in ("function",)}
    if outer != {"type": "function"}:
        extra["outer"] = outer
    inner = {k: v for k, v in fn.items() if k not in _FUNCTION_KEYS}
    if inner:
        extra["function"] = inner
    if "description" not in fn:
        extra["no_description"] = True
    if "parameters" not in fn:
        extra["no_parameters"] = True
    return Tool(name=name, description=description, parameters=params, extra=extra)


def to_openai_tool(tool: Tool) -> dict[str, Any]:
    """Write a tool as an OpenAI function tool, restoring any keys kept from the source."""
    fn: dict[str, Any] = {"name": tool.name}
    if not tool.extra.get("no_description"):
        fn["description"] = tool.description
    if not tool.extra.get("no_parameters"):
        fn["parameters"] = tool.parameters
    fn.update(tool.extra.get("function", {}))
    outer = dict(tool.extra.get("outer", {"type": "function"}))
    outer["function"] = fn
    return outer


def to_openai_tools_for_api(tools: list[Tool]) -> list[dict[str, Any]]:
    """Tools as sent to a model: the published harness rewrites the non-standard ``float`` type to ``number``."""
    text = json.dumps([to_openai_tool(t) for t in tools], ensure_ascii=False)
    return json.loads(text.replace('"type": "float"', '"type": "number"'))
