"""`Trajectory`: what an agent did in a session, step by step, with cost and errors.

A *step* is one assistant turn: text, a batch of tool calls, or (when the reply could not be parsed) an error.
Tool-call arguments are kept as the raw string the model produced: the published scorer orders calls by that raw
string, and a model that emits invalid JSON must be scored as such, not repaired on the way in.
"""

from __future__ import annotations

import hashlib
import json
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Step", "TaskTrajectory", "ToolCall", "Trajectory", "TrajectoryStatus", "state_digest"]


def state_digest(state: Any) -> str:
    """SHA-256 of a state's canonical JSON: two states are equal exactly when their digests are."""
    text = json.dumps(state, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class ToolCall(BaseModel):
    """One call as the model wrote it."""

    model_config = ConfigDict(extra="forbid")

    id: str | None = None
    name: str
    arguments: str = "{}"
    """The raw JSON text of the arguments (possibly invalid JSON)."""

    @classmethod
    def of(cls, name: str, arguments: dict[str, Any] | str, *, id: str | None = None) -> ToolCall:
        """Build a call; a dict is encoded the way the published harness encodes gold arguments."""
        raw = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
        return cls(id=id, name=name, arguments=raw)


class Step(BaseModel):
    """One assistant turn."""

    model_config = ConfigDict(extra="forbid")

    content: str | None = None
    tool_calls: list[ToolCall] | None = None
    reasoning: str | None = None
    parse_error: str | None = None
    """Set when the reply's tool calls could not be read at all (the published ``parse tool_calls failed``)."""
    observations: list[str] | None = None
    """What the agent was shown after this step: one tool message per call (JSON text), in the harness's order."""
    user_reply: str | None = None
    """The user's reply when the step was accepted as a clarification question."""
    latency_s: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None

    @property
    def is_empty(self) -> bool:
        """No tool calls and no text: the published harness treats this as an error."""
        return not self.tool_calls and not self.content and self.parse_error is None


class TaskTrajectory(BaseModel):
    """The steps of one task."""

    model_config = ConfigDict(extra="forbid")

    task_index: int
    steps: list[Step] = Field(default_factory=list)
    state_digest: str | None = None
    """Free-running runs on a stateful environment: SHA-256 of the canonical state after the task."""
    state_diff: list[dict[str, Any]] | None = None
    """Differences from the task's expected state (first 20), when the suite gives one."""
    writes: int | None = None
    """Write calls the agent made in this task that wrote, or that the environment refused as duplicates of an
    earlier write (stateful environments): the doubled writes are what the redundant-write count is about."""


class TrajectoryStatus(StrEnum):
    """How a session's run ended."""

    OK = "ok"
    INFERENCE_ERROR = "inference_error"
    """The model/harness failed (the published result holds an error string): counts as 4 failed tasks."""
    INFRA_ERROR = "infra_error"
    """The provider failed after retries: reported apart, excluded from accuracy unless asked."""


class Trajectory(BaseModel):
    """What an agent did in one session."""

    model_config = ConfigDict(extra="forbid")

    format_version: int = 1
    session_id: str
    model: str | None = None
    status: TrajectoryStatus = TrajectoryStatus.OK
    error: str | None = None
    tasks: list[TaskTrajectory] = Field(default_factory=list)
