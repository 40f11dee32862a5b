"""Scheduling shared by evaluation and generation: units of work, a bounded executor, an append-only unit log.

Evaluation (sessions of a suite), environment synthesis (subdomains, audits) and session synthesis (sessions) all
need the same thing: run many independent units with bounded concurrency, keep every finished one at once, resume a
killed run without redoing or duplicating any, and keep provider failures apart from results. This layer holds that
once. It knows nothing of sessions or environments: a unit is a key, a position in the output and a payload.

Executors: :class:`LocalExecutor` (asyncio tasks in this process: units that wait on models),
:class:`~toolwild.run.process_executor.ProcessExecutor` (worker processes on every core of this machine: CPU-bound
units) and :class:`~toolwild.run.ray_executor.RayExecutor` (a cluster); all take the same units and callbacks.
"""

from toolwild.run.executor import Executor, LocalExecutor
from toolwild.run.log import UnitLog, UnitRecord, UnitStatus
from toolwild.run.units import Unit, fingerprint

__all__ = ["Executor", "LocalExecutor", "Unit", "UnitLog", "UnitRecord", "UnitStatus", "fingerprint"]
