"""Deterministic checks of generated tools: schema lint, contract consistency, and the entity dependency graph.

Each check returns problems as short strings (what is wrong, where), which are shown to the model to repair the
tool, or recorded as the reason a tool was dropped. Nothing here calls a model.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from toolwild.core.formats.synthtools import LintCode, lint_tool
from toolwild.core.tool import Effect, Tool

__all__ = ["CheckKind", "contract_problems", "dependency_problems", "schema_problems"]

_TOLERATED = frozenset({LintCode.NESTED_ARRAY, LintCode.FORMAT_ON_NON_STRING})
"""Lint findings that are legal JSON Schema and only worth a note, not a repair."""


class CheckKind:
    """Names of the checks, as counted in the synthesis summary."""

    SCHEMA = "schema"
    CONTRACT = "contract"
    DEPENDENCY = "dependency"


def schema_problems(tool: Tool) -> list[str]:
    """Parameters and output schema must be valid JSON Schema objects; defaults typed; arrays with items;
    ``required`` a subset of the properties."""
    problems = []
    for label, schema in (("parameters", tool.parameters), ("returns", tool.returns or {"type": "object"})):
        if schema.get("type") != "object":
            problems.append(f"{label}: must be a JSON Schema of type object")
            continue
        error = _meta_error(json.dumps(schema, sort_keys=True))
        if error is not None:
            problems.append(f"{label}: not valid JSON Schema: {error}")
    problems += [
        f"parameters.{f.parameter or '(root)'}: {f.message}" for f in lint_tool(tool) if f.code not in _TOLERATED
    ]
    return problems


@functools.lru_cache(maxsize=4096)
def _meta_error(schema_json: str) -> str | None:
    """Why a schema (as canonical JSON) is not valid JSON Schema, or None. Cached: checking against the 2020-12
    meta-schema takes about a millisecond, and tools of one run share many schemas (a repair resends them all)."""
    try:
        Draft202012Validator.check_schema(json.loads(schema_json))
    except SchemaError as exc:
        return exc.message
    return None


def contract_problems(tool: Tool) -> list[str]:
    """A write says what it changes; every tool says how it fails; a tool that needs an entity says so."""
    problems = []
    contract = tool.contract
    if contract is None or not contract.error_modes:
        problems.append("contract: list at least one error mode (how the call fails)")
    if tool.effect is Effect.WRITE and (contract is None or not contract.postconditions):
        problems.append("contract: a write tool must state a postcondition (what it changes)")
    if tool.consumes and (contract is None or not contract.preconditions):
        problems.append("contract: a tool that consumes an entity must state a precondition (e.g. that it exists)")
    return problems


def dependency_problems(tools: Iterable[Tool], seeded: Iterable[str]) -> dict[str, list[str]]:
    """Tool name -> consumed entity types that no tool produces and no seed data holds."""
    tools = list(tools)
    available = {e.lower() for e in seeded} | {p.lower() for t in tools for p in t.produces}
    out: dict[str, list[str]] = {}
    for tool in tools:
        missing = [c for c in tool.consumes if c.lower() not in available]
        if missing:
            out[tool.name] = [f"consumes {c!r}, which no tool produces and no seed data holds" for c in missing]
    return out
