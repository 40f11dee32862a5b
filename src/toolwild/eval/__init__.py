"""Evaluation: an agent played through sessions (:mod:`.session`), a suite run with resume and outcome classes
(:mod:`.runner`), the run directory read back (:mod:`.run_dir`), scoring (:mod:`.scoring`), metrics (:mod:`.metrics`),
agents (:mod:`.agents`) and simulated users (:mod:`.user`). A package because these share one run config and one
run format; the whole job, with its report, is :func:`toolwild.evaluate`."""

from toolwild._exports import lazy_exports

_EXPORTS = {
    "HistoryMode": "toolwild.eval.session",
    "Run": "toolwild.eval.run_dir",
    "RunConfig": "toolwild.eval.run_config",
    "RunProgress": "toolwild.eval.runner",
    "build_agent": "toolwild.eval.build",
    "build_run_clients": "toolwild.eval.build",
    "load_metrics": "toolwild.eval.run_dir",
    "load_run": "toolwild.eval.run_dir",
    "load_run_config": "toolwild.eval.run_dir",
    "run_metrics": "toolwild.eval.run_dir",
    "run_session": "toolwild.eval.session",
    "run_suite": "toolwild.eval.runner",
    "run_trials": "toolwild.eval.runner",
}
"""Each public name and the module that defines it (see :mod:`toolwild._exports`)."""

__all__ = [
    "HistoryMode",
    "Run",
    "RunConfig",
    "RunProgress",
    "build_agent",
    "build_run_clients",
    "load_metrics",
    "load_run",
    "load_run_config",
    "run_metrics",
    "run_session",
    "run_suite",
    "run_trials",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
