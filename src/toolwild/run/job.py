"""A resumable job's two set-up decisions, made once for every job (eval, synth, audit): where its units run and
which unit log keeps them.

Why one helper: every long job of toolwild runs the same way (units under an executor, each finished one appended
to an append-only log, a killed run resumed from that log, the log's end marked once the outputs are written), and
each command had wired that by hand: the executor names checked and ``auto`` decided in one place, Ray connected
in another, the log opened with :meth:`UnitLog.start <toolwild.run.log.UnitLog.start>` or
:meth:`~toolwild.run.log.UnitLog.resume` in a third. Here:

- :func:`choose_executor` checks an executor name against the ones a job accepts and decides ``auto``;
- :func:`make_executor` builds the executor of a name (``local``, ``process`` or ``ray``);
- :class:`JobLog` opens a job's unit log (new, or resumed) and marks its end.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from toolwild.errors import ConfigError
from toolwild.run.executor import Executor, LocalExecutor
from toolwild.run.log import UnitLog, UnitRecord
from toolwild.run.units import fingerprint

__all__ = ["AUTO_PROCESS_FROM", "EXECUTORS", "JobLog", "choose_executor", "make_executor"]

EXECUTORS = ("auto", "local", "process", "ray")
"""Every executor name; a job accepts these or fewer (``synth envs`` and ``audit``: ``local`` and ``ray``)."""

AUTO_PROCESS_FROM = 512
"""``auto`` runs a CPU-bound job of this many units or more in worker processes: two shards of 256 (the ledger's
balance blocks, which one process makes in order), so a second core has a shard of its own; below it the workers'
start (about a second each, importing toolwild) buys little."""


def choose_executor(name: str, *, units: int = 0, cpu_bound: bool = False, choices: tuple[str, ...] = EXECUTORS) -> str:
    """The executor a job runs on: ``name`` checked against ``choices``, ``auto`` decided.

    ``auto`` is ``process`` for a CPU-bound job (one that waits on no model) of :data:`AUTO_PROCESS_FROM` units or
    more on a machine of two cores or more, ``local`` otherwise. Why processes only for CPU-bound jobs: such a job
    is pure Python, so one event loop runs it on one core whatever the concurrency, and a second process doubles
    the rate; a job that waits on a model gains nothing from another core and would open the model's cache and
    connections once per process.

    Raises:
        ConfigError: a name not in ``choices`` (the choices named, as ``--executor`` takes them).
    """
    if name not in choices:
        listed = " or ".join(choices) if len(choices) < 3 else f"{', '.join(choices[:-1])} or {choices[-1]}"
        raise ConfigError(f"--executor {name!r}: choose {listed}")
    if name != "auto":
        return name
    from toolwild.run import process_executor  # read at call time: tests pretend to other machines

    return "process" if cpu_bound and units >= AUTO_PROCESS_FROM and process_executor.available_cpus() >= 2 else "local"


def make_executor(
    name: str, concurrency: int, *, ray_address: str | None = None, shard_size: int | None = None
) -> Executor:
    """The executor of a decided name (see :func:`choose_executor`), ``concurrency`` units at once (in each shard,
    for ``process`` and ``ray``); ``shard_size`` the units a shard holds at most (None: the executor's default).

    A missing Ray is named when the executor first connects (its :meth:`~toolwild.run.ray_executor.RayExecutor.cpus`
    or first ``map``), not here.
    """
    sizes: dict[str, Any] = {} if shard_size is None else {"shard_size": shard_size}
    if name == "local":
        return LocalExecutor(concurrency)
    if name == "process":
        from toolwild.run.process_executor import ProcessExecutor

        return ProcessExecutor(concurrency, **sizes)
    if name == "ray":
        from toolwild.run.ray_executor import RayExecutor

        return RayExecutor(concurrency, address=ray_address, **sizes)
    raise ConfigError(f"--executor {name!r}: not an executor (decide `auto` with choose_executor first)")


class JobLog:
    """A job's unit log, opened for a run: new (``resume=False``), or the killed run's to continue.

    What the run needs from it: :attr:`done` (the units a resumed run skips), :meth:`append` for each finished
    unit, and :meth:`end` once the outputs are written (the log's end marked, so a later run may replace it;
    a run that left units failed ends with ``complete=False`` and stays resumable). Closing without :meth:`end`
    (an exception, a kill) leaves the log resumable. The log holds its output lock until closed.

    Args:
        path: the log file.
        job: the job's name, recorded in the header (a log of another job is refused).
        identity: what the run is (configuration and inputs); a resume whose identity differs is refused naming
            what differs.
        resume: continue the run logged at ``path``.

    Raises:
        ConfigError: a new run on the log of an unfinished one; a resume with nothing to resume, or of another run.
        DataError: a damaged line of the log being resumed.
    """

    def __init__(self, path: str | Path, *, job: str, identity: dict[str, Any], resume: bool = False) -> None:
        opener = UnitLog.resume if resume else UnitLog.start
        self.log = opener(Path(path), job=job, fingerprint=fingerprint(identity), identity=identity)
        self.resumed = resume
        self.done: set[str] = self.log.done_keys()
        """Keys of the units finished before this run started (empty for a new run)."""
        self._open = True

    def append(self, record: UnitRecord) -> None:
        """Log one finished (or provider-failed) unit, at once."""
        self.log.append(record)

    def end(self, *, complete: bool = True) -> None:
        """Mark the log complete (the outputs are written) when ``complete``, and close it."""
        try:
            if complete:
                self.log.mark_complete()
        finally:
            self.close()

    def close(self) -> None:
        """Close the log without marking it complete (idempotent with :meth:`end`: a closed log closes no more)."""
        if self._open:
            self._open = False
            self.log.close()

    def __enter__(self) -> JobLog:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
