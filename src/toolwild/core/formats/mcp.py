"""MCP tool listings as toolwild tools and environments (pure data: no ``mcp`` import here).

The input is a server's ``tools/list`` answer in its wire form (camelCase keys: ``name``, ``description``,
``inputSchema``, ``outputSchema``, ``annotations``, ``title`` ...), all pages joined, so this module converts a listing
saved as JSON as well as one a live client just fetched (``toolwild.envs.mcp`` does the fetching).

Mapping: ``inputSchema`` -> ``parameters``, ``outputSchema`` -> ``returns``, and the annotations' ``readOnlyHint``
-> ``effect``: ``read`` only when the server says ``readOnlyHint: true``; anything else is a ``write``, because MCP's
own default is "not read-only" and calling a write a read would let generation treat a state change as free. Every
field we do not model (the raw annotations, ``title``, ``icons``, ``_meta`` ...) is kept under ``extra["mcp"]``, so
nothing the server said is lost.

A tool whose schema is not usable JSON Schema (or that repeats a name, or has none) is an error that names the tool
and the field, like every other importer; with ``skip_invalid`` it is skipped and reported instead, so one broken
tool of a fifty-tool server need not block the other forty-nine.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from toolwild.core.environment import BackendKind, Environment, McpServer
from toolwild.core.schema import schema_defect, undeclared_required
from toolwild.core.tool import Effect, Tool
from toolwild.errors import DataError

__all__ = ["SkippedTool", "effect_from_annotations", "environment_from_mcp", "tool_from_mcp", "tools_from_mcp"]

_MODELLED = {"name", "description", "inputSchema", "outputSchema"}


class SkippedTool(BaseModel):
    """A listed tool that was not imported, and why (the field names the part of the listing at fault)."""

    model_config = ConfigDict(extra="forbid")

    name: str
    field: str
    reason: str


def effect_from_annotations(annotations: Any) -> Effect:
    """``read`` when the server marks the tool ``readOnlyHint: true``, else ``write`` (MCP's default)."""
    return Effect.READ if isinstance(annotations, dict) and annotations.get("readOnlyHint") is True else Effect.WRITE


def tool_from_mcp(raw: Any, index: int = 0) -> Tool:
    """One listed tool as a :class:`Tool`.

    Raises:
        DataError: no name, or an input/output schema that is not usable JSON Schema; the field is
            ``tools[index].<key>`` and the message names the tool.
    """
    where = f"tools[{index}]"
    if not isinstance(raw, dict):
        raise DataError("a listed tool must be a JSON object", field=where)
    name = raw.get("name")
    if not isinstance(name, str) or not name.strip() or not name.isprintable():
        raise DataError("a listed tool has no usable name", field=f"{where}.name")
    parameters = raw.get("inputSchema")
    if (problem := schema_defect(parameters)) is not None:
        raise DataError(f"tool {name!r}: input schema {problem}", field=f"{where}.inputSchema")
    if (undeclared := undeclared_required(parameters)) is not None:  # the environment file would not load
        raise DataError(
            f"tool {name!r}: input schema requires {undeclared[1]!r}, which none of its properties declares",
            field=f"{where}.inputSchema.{undeclared[0]}",
        )
    returns = raw.get("outputSchema")
    if returns is not None and (problem := schema_defect(returns, object_type=False)) is not None:
        raise DataError(f"tool {name!r}: output schema {problem}", field=f"{where}.outputSchema")
    description = raw.get("description")
    if not isinstance(description, str) or not description.strip():
        title = raw.get("title") or (raw.get("annotations") or {}).get("title")
        description = title if isinstance(title, str) else ""
    extra = {key: value for key, value in raw.items() if key not in _MODELLED}
    return Tool(
        name=name,
        description=description,
        parameters=parameters,
        returns=returns,
        effect=effect_from_annotations(raw.get("annotations")),
        extra={"mcp": extra} if extra else {},
    )


def tools_from_mcp(listing: list[Any], *, skip_invalid: bool = False) -> tuple[list[Tool], list[SkippedTool]]:
    """Every listed tool converted, in listing order, and the ones skipped (only with ``skip_invalid``).

    Raises:
        DataError: the first unusable tool or repeated name (without ``skip_invalid``).
    """
    tools: list[Tool] = []
    skipped: list[SkippedTool] = []
    seen: dict[str, int] = {}
    for index, raw in enumerate(listing):
        try:
            tool = tool_from_mcp(raw, index)
            if tool.name in seen:
                raise DataError(
                    f"tool name {tool.name!r} repeats tools[{seen[tool.name]}]", field=f"tools[{index}].name"
                )
        except DataError as exc:
            if not skip_invalid:
                raise
            name = raw.get("name") if isinstance(raw, dict) else None
            skipped.append(SkippedTool(name=str(name or f"#{index}"), field=exc.field or "", reason=exc.message))
            continue
        seen[tool.name] = index
        tools.append(tool)
    return tools, skipped


def environment_from_mcp(
    listing: list[Any],
    *,
    env_id: str,
    server: McpServer,
    backend: BackendKind = BackendKind.MCP,
    description: str = "",
    source: dict[str, Any] | None = None,
    skip_invalid: bool = False,
) -> tuple[Environment, list[SkippedTool]]:
    """An environment of a server's tools that remembers how to reach the server.

    ``backend``: ``mcp`` (calls go to the live server) or ``llm`` (a model simulates the tools from their schemas and
    descriptions, starting from an empty state). ``replay`` and ``python`` are refused: a listing has no recorded
    answers and no code.

    Raises:
        DataError: an unusable tool (see :func:`tools_from_mcp`), no tool at all, or a backend that cannot run it.
    """
    if backend in (BackendKind.REPLAY, BackendKind.PYTHON):
        lacks = "recorded answers" if backend is BackendKind.REPLAY else "code"
        raise DataError(
            f"an MCP tool listing has no {lacks} to run as a {backend.value} environment: choose mcp (the live "
            "server) or llm (simulated)"
        )
    tools, skipped = tools_from_mcp(listing, skip_invalid=skip_invalid)
    if not tools:
        why = f" ({len(skipped)} skipped as unusable)" if skipped else ""
        raise DataError(f"the server lists no usable tool{why}", field="tools")
    environment = Environment(
        id=env_id,
        description=description,
        tools=tools,
        backend=backend,
        mcp=server,
        source={"format": "mcp", **(source or {})},
    )
    return environment, skipped
