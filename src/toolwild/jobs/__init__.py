"""Whole jobs as library calls: what ``toolwild eval`` and ``toolwild synth`` do, callable from Python.

Why a layer of its own: a job joins every layer below it (it evaluates, scores, writes the report, exports), so it
can live neither in ``eval`` nor in ``report``; the CLI above it only parses options, calls a job and prints."""

from toolwild._exports import lazy_exports

_EXPORTS = {
    "CheckOptions": "toolwild.jobs.validate",
    "EvalOptions": "toolwild.jobs.evaluate",
    "GeneratedEnvironments": "toolwild.jobs.environments",
    "GeneratedSessions": "toolwild.jobs.sessions",
    "Scored": "toolwild.jobs.score",
    "SuiteCheck": "toolwild.jobs.validate",
    "check_suite": "toolwild.jobs.validate",
    "evaluate": "toolwild.jobs.evaluate",
    "evaluate_async": "toolwild.jobs.evaluate",
    "generate_environments": "toolwild.jobs.environments",
    "generate_sessions": "toolwild.jobs.sessions",
    "run_folder": "toolwild.jobs.evaluate",
    "score_results": "toolwild.jobs.score",
}
"""Each public name and the module that defines it (see :mod:`toolwild._exports`)."""

__all__ = [
    "CheckOptions",
    "EvalOptions",
    "GeneratedEnvironments",
    "GeneratedSessions",
    "Scored",
    "SuiteCheck",
    "check_suite",
    "evaluate",
    "evaluate_async",
    "generate_environments",
    "generate_sessions",
    "run_folder",
    "score_results",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
