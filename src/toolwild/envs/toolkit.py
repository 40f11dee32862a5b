"""Python tools: typed methods on a :class:`Toolkit`, each marked with its effect (the tau2-bench pattern).

The method's signature is the parameter schema (via pydantic) and its Google-style docstring is the description
(first paragraph) and the parameter descriptions (``Args:``), so a tool is written once. Arguments are validated
against the signature before the method runs: invalid arguments never reach the code. A method raises
:class:`ToolFailure` to return a typed error to the agent.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import Any, TypeVar, get_type_hints

from pydantic import ConfigDict, ValidationError, create_model

from toolwild.core.tool import Effect, Tool
from toolwild.envs.base import Episode, Observation, ToolErrorKind
from toolwild.errors import ToolwildError

__all__ = ["ToolFailure", "Toolkit", "tool"]

F = TypeVar("F", bound=Callable[..., Any])
_ARG_LINE = re.compile(r"^\s{4,}(\w+)(?:\s*\(.*?\))?:\s*(.*)$")


def _is_number_schema(schema: Any) -> bool:
    """True for a parameter declared a JSON number or integer (alone, or in an ``anyOf`` such as ``number | null``)."""
    if not isinstance(schema, dict):
        return False
    if schema.get("type") in ("number", "integer"):
        return True
    return any(_is_number_schema(sub) for sub in schema.get("anyOf", []))


_SPECS: dict[type, list[Tool]] = {}
"""Each toolkit class's tools, built once (see :meth:`Toolkit.tool_specs`)."""


class ToolFailure(ToolwildError):
    """Raised by a tool to answer with a typed error."""

    def __init__(self, kind: ToolErrorKind, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


def tool(*, effect: Effect, consumes: tuple[str, ...] = (), produces: tuple[str, ...] = ()) -> Callable[[F], F]:
    """Mark a toolkit method as a tool with a read or write effect, and the entity types it takes and returns (so
    task generation can chain it)."""

    def mark(fn: F) -> F:
        fn.__toolwild_effect__ = effect  # type: ignore[attr-defined]
        fn.__toolwild_entities__ = (list(consumes), list(produces))  # type: ignore[attr-defined]
        return fn

    return mark


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    doc = inspect.cleandoc(doc or "")
    parts = doc.split("\n\n")
    description = " ".join(parts[0].split()) if parts and parts[0] else ""
    args: dict[str, str] = {}
    in_args = False
    current: str | None = None
    for line in doc.splitlines():
        if line.strip() in ("Args:", "Arguments:"):
            in_args = True
            continue
        if in_args:
            if line.strip().endswith(":") and not line.startswith(" "):
                break
            m = _ARG_LINE.match("    " + line) if not line.startswith("    ") else _ARG_LINE.match(line)
            if m and (line.startswith("    ") and not line.startswith("        ")):
                current = m.group(1)
                args[current] = m.group(2).strip()
            elif current and line.strip():
                args[current] += " " + line.strip()
    return description, args


class Toolkit(Episode):
    """Base class of a Python domain's episode: subclasses hold the state and define ``@tool`` methods."""

    _tool_methods: dict[str, Callable[..., Any]]
    _number_params: dict[str, frozenset[str]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._tool_methods = {
            name: fn for name, fn in inspect.getmembers(cls, inspect.isfunction) if hasattr(fn, "__toolwild_effect__")
        }
        cls._arg_models = {}
        for name, fn in cls._tool_methods.items():
            hints = get_type_hints(fn)
            fields: dict[str, Any] = {}
            for pname, param in list(inspect.signature(fn).parameters.items())[1:]:
                default = ... if param.default is inspect.Parameter.empty else param.default
                fields[pname] = (hints.get(pname, Any), default)
            cls._arg_models[name] = create_model(
                f"{cls.__name__}_{name}_args", __config__=ConfigDict(extra="forbid", strict=False), **fields
            )
        # pydantic's lax mode takes ``true`` as the number 1, so ``amount: true`` would book 1.00 and ``units: true``
        # restock one unit: no tool means a boolean as a number, so those parameters refuse one before validation
        cls._number_params = {
            name: frozenset(
                p for p, schema in model.model_json_schema().get("properties", {}).items() if _is_number_schema(schema)
            )
            for name, model in cls._arg_models.items()
        }

    @classmethod
    def tool_specs(cls) -> list[Tool]:
        """The tools of this toolkit (schema from signatures, descriptions from docstrings).

        Built once per class (pydantic's schema generation costs ~13 ms a toolkit, and scoring asks for the tools
        of every task); each caller gets its own deep copy, so no caller can change another's tools.
        """
        cached = _SPECS.get(cls)
        if cached is None:
            cached = _SPECS[cls] = cls._build_tool_specs()
        return [t.model_copy(deep=True) for t in cached]

    @classmethod
    def _build_tool_specs(cls) -> list[Tool]:
        specs = []
        for name, fn in sorted(cls._tool_methods.items()):
            description, arg_docs = _parse_docstring(fn.__doc__ or "")
            schema = cls._arg_models[name].model_json_schema()
            schema.pop("title", None)
            for pname, prop in schema.get("properties", {}).items():
                prop.pop("title", None)
                if pname in arg_docs:
                    prop["description"] = arg_docs[pname]
            schema.setdefault("required", [])
            consumes, produces = getattr(fn, "__toolwild_entities__", ([], []))
            specs.append(
                Tool(
                    name=name,
                    description=description,
                    parameters=schema,
                    effect=fn.__toolwild_effect__,
                    consumes=consumes,
                    produces=produces,
                )
            )
        return specs

    @classmethod
    def effect_of(cls, name: str) -> Effect | None:
        """Read or write, for a tool name (None if unknown)."""
        fn = cls._tool_methods.get(name)
        return fn.__toolwild_effect__ if fn else None

    def call(self, name: str, arguments: dict[str, Any]) -> Observation:
        """Validate the arguments against the signature, run the tool, and wrap the outcome."""
        fn = self._tool_methods.get(name)
        if fn is None:
            return Observation.failure(ToolErrorKind.UNKNOWN_TOOL, f"no tool {name!r}")
        if not isinstance(arguments, dict):
            return Observation.failure(ToolErrorKind.INVALID_ARGUMENTS, "arguments must be an object")
        for param in self._number_params[name]:
            if isinstance(arguments.get(param), bool):
                return Observation.failure(
                    ToolErrorKind.INVALID_ARGUMENTS, f"{param}: a boolean is not a number (got {arguments[param]!r})"
                )
        try:
            parsed = self._arg_models[name].model_validate(arguments)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or '(arguments)'}: {e['msg']}" for e in exc.errors()
            )
            return Observation.failure(ToolErrorKind.INVALID_ARGUMENTS, problems)
        try:
            result = fn(self, **dict(parsed))
        except ToolFailure as failure:
            return Observation.failure(failure.kind, failure.message)
        return Observation(ok=True, result=result)
