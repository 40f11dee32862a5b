"""toolwild: synthesize wild tool-use sessions and evaluate tool-calling agents with WildToolBench-exact scoring.

The public surface is what this module exports (``__all__``); everything else is internal and may move. A job is
one call, and its results are plain objects::

    run = toolwild.evaluate("sessions.jsonl", agent="oracle", run_dir="runs/oracle")
    print(run.metrics.total_info)
    again = toolwild.load_run("runs/oracle")                  # the run read back, scored again
    toolwild.generate_sessions(["ledger"], "ledger.jsonl", n=64)

    suite, _ = toolwild.load_wtb_suite("sessions.jsonl")     # or score results you already have
    trajectories, _ = toolwild.load_trajectories("result.jsonl")
    verdicts = toolwild.score_suite(suite, trajectories, mode=toolwild.ScoringMode.STRICT)
    metrics = toolwild.compute_metrics(verdicts, model_name="my-model")

Names are imported on first use (PEP 562), so ``import toolwild`` stays cheap for the CLI and for callers that
need only a part.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolwild._exports import lazy_exports
from toolwild._version import __version__ as __version__

_EXPORTS = {
    "ConfigError": "toolwild.errors",
    "DataError": "toolwild.errors",
    "EvalOptions": "toolwild.jobs.evaluate",
    "HarnessError": "toolwild.errors",
    "Metrics": "toolwild.core",
    "Run": "toolwild.eval.run_dir",
    "RunConfig": "toolwild.eval.run_config",
    "ScoringError": "toolwild.errors",
    "ScoringMode": "toolwild.core",
    "Session": "toolwild.core",
    "SessionVerdict": "toolwild.core",
    "Step": "toolwild.core",
    "Suite": "toolwild.core",
    "Task": "toolwild.core",
    "TaskVerdict": "toolwild.core",
    "Tool": "toolwild.core",
    "ToolCall": "toolwild.core",
    "ToolwildError": "toolwild.errors",
    "Trajectory": "toolwild.core",
    "compute_metrics": "toolwild.eval.metrics.accuracy",
    "describe_environment": "toolwild.envs.registry",
    "evaluate": "toolwild.jobs.evaluate",
    "evaluate_async": "toolwild.jobs.evaluate",
    "generate_environments": "toolwild.jobs.environments",
    "generate_sessions": "toolwild.jobs.sessions",
    "get_environment": "toolwild.envs.registry",
    "load_metrics": "toolwild.eval.run_dir",
    "load_run": "toolwild.eval.run_dir",
    "load_trajectories": "toolwild.core.formats.results",
    "load_wtb_suite": "toolwild.core.formats.wtb",
    "open_environment": "toolwild.envs.registry",
    "score_results": "toolwild.jobs.score",
    "score_session": "toolwild.eval.scoring.session",
    "score_suite": "toolwild.eval.scoring.session",
    "write_wtb_suite": "toolwild.core.formats.wtb",
}
"""Each public name and the module that defines it."""

__all__ = [
    "ConfigError",
    "DataError",
    "EvalOptions",
    "HarnessError",
    "Metrics",
    "Run",
    "RunConfig",
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
    "describe_environment",
    "evaluate",
    "evaluate_async",
    "generate_environments",
    "generate_sessions",
    "get_environment",
    "load_metrics",
    "load_run",
    "load_trajectories",
    "load_wtb_suite",
    "open_environment",
    "score_results",
    "score_session",
    "score_suite",
    "write_wtb_suite",
]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())

if TYPE_CHECKING:  # what type checkers and editors see
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
    from toolwild.envs.registry import describe_environment, get_environment, open_environment
    from toolwild.errors import ConfigError, DataError, HarnessError, ScoringError, ToolwildError
    from toolwild.eval.metrics.accuracy import compute_metrics
    from toolwild.eval.run_config import RunConfig
    from toolwild.eval.run_dir import Run, load_metrics, load_run
    from toolwild.eval.scoring.session import score_session, score_suite
    from toolwild.jobs.environments import generate_environments
    from toolwild.jobs.evaluate import EvalOptions, evaluate, evaluate_async
    from toolwild.jobs.score import score_results
    from toolwild.jobs.sessions import generate_sessions
