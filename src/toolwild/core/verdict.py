"""`Verdict` and `Metrics`: per-task labels and the aggregates, in the published structure plus our extensions."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from toolwild.core.task import TaskType, TurnSubtype
from toolwild.core.trajectory import FailureKind

__all__ = [
    "ArgumentCheck",
    "ErrorClass",
    "Label",
    "Metrics",
    "ScoringMode",
    "SessionVerdict",
    "StepVerdict",
    "TaskVerdict",
]

Label = Literal["correct", "error"]


class ScoringMode(StrEnum):
    """``wtb`` reproduces the published scorer, defects included; ``strict`` fixes the defects."""

    WTB = "wtb"
    STRICT = "strict"


class ErrorClass(StrEnum):
    """The paper's error columns (§7), plus one for sessions whose inference failed."""

    REFUSAL = "Refusal"
    WRONG_NAME_MISSING_INFO = "Wrong Name / Missing Info"
    WRONG_REFUSAL = "Wrong Refusal"
    REDUNDANT_CALL = "Redundant Call"
    CALL_ERROR = "Call Error"
    EARLY_TERMINATION = "Early Termination"
    PARAM_TYPE = "Type"
    PARAM_HALLUCINATION = "Hallucination"
    PARAM_VALUE = "Value"
    INFERENCE_FAILED = "Inference Failed"

    @property
    def family(self) -> str:
        """``action``, ``parameter`` or ``inference``."""
        if self in (ErrorClass.PARAM_TYPE, ErrorClass.PARAM_HALLUCINATION, ErrorClass.PARAM_VALUE):
            return "parameter"
        if self is ErrorClass.INFERENCE_FAILED:
            return "inference"
        return "action"


class ArgumentCheck(BaseModel):
    """The check of one predicted call against the gold call it was paired with."""

    model_config = ConfigDict(extra="forbid")

    name: str
    predicted: str
    """Raw predicted arguments."""
    gold: dict[str, Any]
    gold_idx: int
    result: str
    """``"correct"`` or the published error string (``"error_match: value mismatch at 'city'"`` ...)."""

    @property
    def ok(self) -> bool:
        """True when the pair passed."""
        return self.result == "correct"

    @property
    def code(self) -> str:
        """The error code without its location detail (``"error_match: value mismatch"``)."""
        for sep in (" at '", " ("):
            if sep in self.result:
                return self.result.split(sep, 1)[0]
        return self.result


class StepVerdict(BaseModel):
    """How one logged step was judged."""

    model_config = ConfigDict(extra="forbid")

    step: int
    kind: Literal["calls", "text", "empty", "unparseable"]
    name_label: Label
    error_reason: str | None = None
    called: list[str] = Field(default_factory=list)
    """Names the agent called in this step, in its order."""
    matched_nodes: list[int] = Field(default_factory=list)
    """Gold node indices this step was matched to (name-sorted, as the harness returns their observations)."""
    arguments_label: Label | None = None
    argument_checks: list[ArgumentCheck] = Field(default_factory=list)
    expected: list[str] = Field(default_factory=list)
    """A failing step: the action names legal at its position of the gold DAG (pseudo-actions included), so a
    reader sees what the agent could have done; empty on passing steps and when no step was left."""
    explanation: str = ""
    """A failing step in words: what was expected and what came (``error_reason`` keeps the published string)."""


class TaskVerdict(BaseModel):
    """The labels of one task, as the published scorer computes them (or its strict variant)."""

    model_config = ConfigDict(extra="forbid")

    session_id: str
    task_index: int
    task_type: TaskType
    subtype: TurnSubtype
    label: Label
    name_label: Label
    arguments_label: Label | None = None
    is_optimal: bool
    steps_used: int
    min_length: int
    progress_complete: int
    """Accomplish Progress numerator: published = step entries left in the log; strict = gold nodes done."""
    progress_total: int
    error_reason: str | None = None
    error_class: ErrorClass | None = None
    state_match: bool | None = None
    """Free-running on a stateful environment: the state after the task equals the expected state."""
    redundant_writes: int | None = None
    """Successful writes beyond the gold's writes for this task (a doubled write corrupts real data)."""
    failure: FailureKind | None = None
    """A model failure of this task (the agent raised, ran out of steps or time, wrote unusable output)."""
    context_dropped: int | None = None
    """Messages the backend dropped to fit its context during this task (what the model saw was cut)."""
    dropped_step: int | None = None
    """``wtb``: the step entry the published argument pass deletes after an argument error (kept in ``steps``)."""
    explanation: str = ""
    """Why the task failed (the first failing step's explanation) or why a correct task is not optimal, in words."""
    steps: list[StepVerdict] = Field(default_factory=list)


class SessionVerdict(BaseModel):
    """All task verdicts of a session."""

    model_config = ConfigDict(extra="forbid")

    session_id: str
    mode: ScoringMode
    inference_error: str | None = None
    provider_error: bool = Field(default=False, validation_alias=AliasChoices("provider_error", "infra_error"))
    """The provider failed after retries: the session is listed and left out of accuracy unless asked."""
    harness_error: str | None = None
    """A toolwild or environment bug ended this session: listed and left out; the figures are incomplete."""
    user_error: str | None = None
    """The simulated user broke this session (it failed in the run, or its audit found it unfaithful here and the
    run excludes such sessions): listed and left out of the agent's figures."""
    transitions: int
    tasks: list[TaskVerdict]

    @property
    def excluded(self) -> bool:
        """Not a result of the agent: a provider error, a harness error or the simulated user's failure."""
        return self.provider_error or self.harness_error is not None or self.user_error is not None

    @property
    def correct(self) -> bool:
        """A session is correct when every task is."""
        return bool(self.tasks) and all(t.label == "correct" for t in self.tasks)


class Metrics(BaseModel):
    """The metric JSON: the published keys, then ``extensions`` (ours, clearly apart)."""

    model_config = ConfigDict(extra="forbid")

    model_name: str
    total_info: dict[str, dict[str, float | int]]
    task_type_info: dict[str, dict[str, float | int]]
    layer_info: dict[str, dict[str, float | int]]
    turn_subtype_info: dict[str, dict[str, float | int]]
    optimal_info: dict[str, dict[str, float | int]]
    progress_info: dict[str, dict[str, float | int]]
    extensions: dict[str, Any] = Field(default_factory=dict)
