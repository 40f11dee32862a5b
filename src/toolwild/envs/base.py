"""The environment interface: isolated episodes that answer tool calls from explicit state.

An :class:`EnvironmentBackend` describes a tool set and starts :class:`Episode` objects with ``reset(seed=...)``;
every episode owns its state (a copy), so concurrent episodes never see each other's writes. A call returns an
:class:`Observation`: a result, or a typed :class:`ToolError` the agent sees (an environment error is an answer, not
a crash). ``state()`` is a JSON snapshot; :func:`diff_states` says what changed between two snapshots.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict

from toolwild.core.schema import schema_errors
from toolwild.core.tool import Tool

__all__ = [
    "EnvironmentBackend",
    "Episode",
    "Observation",
    "ToolError",
    "ToolErrorKind",
    "diff_states",
    "precheck",
]


class ToolErrorKind(StrEnum):
    """How a call can fail (the error modes of a tool's contract)."""

    UNKNOWN_TOOL = "unknown_tool"
    INVALID_ARGUMENTS = "invalid_arguments"
    PRECONDITION_FAILED = "precondition_failed"
    NOT_FOUND = "not_found"
    DUPLICATE = "duplicate"
    REJECTED = "rejected"
    """The environment refused a write that would leave it invalid (e.g. an unbalanced transaction)."""
    NO_RECORDING = "no_recording"
    """A replayed environment has no recorded answer for this call."""
    SIMULATION_FAILED = "simulation_failed"
    """The simulator could not produce a valid answer; the state is unchanged (the environment's fault, not the
    agent's: runs report these apart)."""
    UNAVAILABLE = "unavailable"
    """The environment's service could not answer: a live server (``mcp``) that did not start, died, timed out or
    broke its own contract. Like ``simulation_failed`` it is the environment's fault, not the agent's; whether the
    call had an effect is unknown."""


class ToolError(BaseModel):
    """A typed failure of one call, shown to the agent."""

    model_config = ConfigDict(extra="forbid")

    kind: ToolErrorKind
    message: str


class Observation(BaseModel):
    """The answer to one call."""

    model_config = ConfigDict(extra="forbid")

    ok: bool
    result: Any = None
    error: ToolError | None = None

    @classmethod
    def failure(cls, kind: ToolErrorKind, message: str) -> Observation:
        """A failed call's observation."""
        return cls(ok=False, error=ToolError(kind=kind, message=message))

    def to_text(self) -> str:
        """The JSON text a model is shown as the tool message."""
        if self.ok:
            return self.model_dump_json(include={"ok", "result"})
        return self.model_dump_json(include={"ok", "error"})


class Episode(ABC):
    """One isolated run of an environment."""

    @abstractmethod
    def call(self, name: str, arguments: dict[str, Any]) -> Observation:
        """Execute one tool call."""

    async def acall(self, name: str, arguments: dict[str, Any]) -> Observation:
        """Execute one tool call from async code: the way the runner calls every environment.

        Code-backed episodes answer at once (this default); a simulated episode awaits its model here.
        """
        return self.call(name, arguments)

    @abstractmethod
    def state(self) -> dict[str, Any]:
        """A JSON snapshot of the current state."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release files or memory held by the episode."""


class EnvironmentBackend(ABC):
    """A tool set and a way to start isolated episodes."""

    id: str = "environment"
    observable_state: bool = True
    """False when ``state()`` cannot see the service's state (a live MCP server answers calls but has no state API):
    then state checks and the "a write changed nothing" rule of generation do not apply to it."""

    @property
    @abstractmethod
    def tools(self) -> list[Tool]:
        """The tools an agent may call."""

    @abstractmethod
    def reset(self, *, seed: int = 0) -> Episode:
        """Start a fresh, isolated episode."""


def precheck(tool: Tool | None, name: str, arguments: Any) -> Tool | Observation:
    """The tool to run, or what a service answers before running anything: unknown tool, arguments not an object,
    or every schema violation at once. Backends without code (replay, llm) share it, so a call is refused the same
    way whoever answers it."""
    if tool is None:
        return Observation.failure(ToolErrorKind.UNKNOWN_TOOL, f"no tool {name!r}")
    if not isinstance(arguments, dict):
        return Observation.failure(ToolErrorKind.INVALID_ARGUMENTS, "arguments must be a JSON object")
    problems = schema_errors(tool.parameters, arguments)
    if problems:
        return Observation.failure(ToolErrorKind.INVALID_ARGUMENTS, "; ".join(problems))
    return tool


def diff_states(before: Any, after: Any, path: str = "") -> list[dict[str, Any]]:
    """What changed between two JSON snapshots, as ``{"path", "before", "after"}`` entries (``None`` = absent)."""
    if isinstance(before, dict) and isinstance(after, dict):
        out: list[dict[str, Any]] = []
        for key in sorted(set(before) | set(after), key=str):
            sub = f"{path}/{key}"
            if key not in before:
                out.append({"path": sub, "before": None, "after": after[key]})
            elif key not in after:
                out.append({"path": sub, "before": before[key], "after": None})
            else:
                out.extend(diff_states(before[key], after[key], sub))
        return out
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        out = []
        for i, (a, b) in enumerate(zip(before, after, strict=True)):
            out.extend(diff_states(a, b, f"{path}/{i}"))
        return out
    return [] if before == after else [{"path": path or "/", "before": before, "after": after}]
