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

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = [
    "FailureKind",
    "Step",
    "TaskFailure",
    "TaskTrajectory",
    "ToolCall",
    "Trajectory",
    "TrajectoryStatus",
    "state_digest",
]


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
    context_dropped: int | None = None
    """Messages the backend dropped from the front of the conversation to fit its context (the model did not see
    them): set when it happened, because it changes what was evaluated."""

    @property
    def is_empty(self) -> bool:
        """No tool calls and no text: the published harness treats this as an error."""
        return not self.tool_calls and not self.content and self.parse_error is None


class FailureKind(StrEnum):
    """Why a task failed for a reason of the agent's own (a *model failure*: the task counts as failed)."""

    AGENT_ERROR = "agent_error"
    """The agent raised (an agent bug, a model whose reply could not be used, a request the provider refused)."""
    MODEL_OUTPUT = "model_output"
    """The model's output could not be used at all (a tool call without a name, no valid structured reply)."""
    STEP_BUDGET = "step_budget"
    """The agent was still going after the most steps a task allows."""
    TIMEOUT = "timeout"
    """The session's wall-clock limit ran out while the agent (not the provider) was spending the time."""
    NOT_REACHED = "not_reached"
    """An earlier failure of this session (its time limit) left no time for this task."""


class TaskFailure(BaseModel):
    """A model failure of one task: its kind and what happened."""

    model_config = ConfigDict(extra="forbid")

    kind: FailureKind
    message: str


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
    failure: TaskFailure | None = None
    """Set when the task failed for a reason of the agent's own (it counts as failed, with this reason)."""
    task_digest: str | None = None
    """Which task was run: :func:`~toolwild.core.formats.results.task_digest` of the suite's task (its request,
    type and gold calls), stamped when the run appends the line. Two suites can share session ids; scoring these
    steps against another suite's task would give a number without a word, so a loader given a suite refuses a
    task whose digest differs. None in files written before it existed (they cannot be checked this way)."""

    @property
    def context_dropped(self) -> int:
        """Messages dropped to fit the backend's context, over every step of the task."""
        return sum(s.context_dropped or 0 for s in self.steps)


class TrajectoryStatus(StrEnum):
    """How a session's run ended."""

    OK = "ok"
    """The session ran; tasks the agent failed by its own fault say so in ``TaskTrajectory.failure``."""
    INFERENCE_ERROR = "inference_error"
    """The published result holds an error string instead of a log: counts as every task failed."""
    PROVIDER_ERROR = "provider_error"
    """The provider failed or timed out after retries: listed apart, excluded from accuracy unless asked."""
    HARNESS_ERROR = "harness_error"
    """A toolwild or environment bug: listed, left out of the figures, and the run exits non-zero."""
    USER_ERROR = "user_error"
    """The simulated user failed (no usable turn after its retries): the simulator's failure, never the agent's;
    listed and left out of the figures. Final: a resume keeps it (the simulator's replies are cached, it would fail
    again)."""


class Trajectory(BaseModel):
    """What an agent did in one session."""

    model_config = ConfigDict(extra="forbid")

    format_version: int = 1
    session_id: str
    model: str | None = None
    status: TrajectoryStatus = TrajectoryStatus.OK
    error: str | None = None
    tasks: list[TaskTrajectory] = Field(default_factory=list)

    @field_validator("status", mode="before")
    @classmethod
    def _legacy_status(cls, value: Any) -> Any:
        """Runs written before the three outcome classes called a provider error ``infra_error``."""
        return TrajectoryStatus.PROVIDER_ERROR if value == "infra_error" else value

    @property
    def final(self) -> bool:
        """A result to keep when resuming: provider and harness errors are run again."""
        return self.status not in (TrajectoryStatus.PROVIDER_ERROR, TrajectoryStatus.HARNESS_ERROR)
