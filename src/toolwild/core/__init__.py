"""The nouns of toolwild: pure data models, no I/O beyond (de)serialisation."""

from toolwild.core.environment import BackendKind, Environment
from toolwild.core.session import Session, Suite, count_transitions
from toolwild.core.task import (
    ANSWER_ACTION,
    ASK_ACTION,
    PSEUDO_ACTIONS,
    Action,
    CoarseType,
    GoldNode,
    NodeKind,
    Task,
    TaskType,
    TurnSubtype,
)
from toolwild.core.tool import Contract, Effect, Tool
from toolwild.core.trajectory import Step, TaskTrajectory, ToolCall, Trajectory, TrajectoryStatus
from toolwild.core.verdict import (
    ArgumentCheck,
    ErrorClass,
    Metrics,
    ScoringMode,
    SessionVerdict,
    StepVerdict,
    TaskVerdict,
)

__all__ = [
    "ANSWER_ACTION",
    "ASK_ACTION",
    "PSEUDO_ACTIONS",
    "Action",
    "ArgumentCheck",
    "BackendKind",
    "CoarseType",
    "Contract",
    "Effect",
    "Environment",
    "ErrorClass",
    "GoldNode",
    "Metrics",
    "NodeKind",
    "ScoringMode",
    "Session",
    "SessionVerdict",
    "Step",
    "StepVerdict",
    "Suite",
    "Task",
    "TaskTrajectory",
    "TaskType",
    "TaskVerdict",
    "Tool",
    "ToolCall",
    "Trajectory",
    "TrajectoryStatus",
    "TurnSubtype",
    "count_transitions",
]
