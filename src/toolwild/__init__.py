"""toolwild: synthesize wild tool-use sessions and evaluate tool-calling agents with WildToolBench-exact scoring.

The public surface is small: load a suite and trajectories, score them in ``wtb`` or ``strict`` mode, aggregate::

    suite, _ = toolwild.load_wtb_suite("sessions.jsonl")
    trajectories, _ = toolwild.load_trajectories("result.jsonl")
    verdicts = toolwild.score_suite(suite, trajectories, mode=toolwild.ScoringMode.STRICT)
    metrics = toolwild.compute_metrics(verdicts, model_name="my-model")
"""

from toolwild.core import (
    Metrics,
    ScoringMode,
    Session,
    SessionVerdict,
    Step,
    Suite,
    Task,
    TaskVerdict,
    Tool,
    ToolCall,
    Trajectory,
)
from toolwild.core.formats.results import load_trajectories
from toolwild.core.formats.wtb import load_wtb_suite, write_wtb_suite
from toolwild.errors import ConfigError, DataError, ScoringError, ToolwildError
from toolwild.eval.metrics.accuracy import compute_metrics
from toolwild.eval.scoring.session import score_session, score_suite

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "DataError",
    "Metrics",
    "ScoringError",
    "ScoringMode",
    "Session",
    "SessionVerdict",
    "Step",
    "Suite",
    "Task",
    "TaskVerdict",
    "Tool",
    "ToolCall",
    "ToolwildError",
    "Trajectory",
    "compute_metrics",
    "load_trajectories",
    "load_wtb_suite",
    "score_session",
    "score_suite",
    "write_wtb_suite",
]
