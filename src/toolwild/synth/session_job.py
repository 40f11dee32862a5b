"""The session job: one unit per session, logged as it finishes, written in order.

Session ``i`` is made by the provider of environment ``i % len(envs)`` (round robin). Units run under an executor
(bounded concurrency); each finished unit is handed to ``record`` at once (the command appends it to its unit log,
so a killed run keeps it), with the session, what was dropped on the way and, when a ``verify`` is given, the
verification problems of that session (verified as it is made: nothing ever holds the whole suite).

:class:`Assembly` then takes the records in index order and writes the sessions one at a time, so the suite does not
depend on the concurrency or on the order units finished in: the command streams it (:class:`StreamedAssembly`, each
index written as soon as every index before it is, while later sessions are still being made), a library caller
assembles the records at the end (:meth:`SessionJob.assemble`). One rule needs the whole order: when a session
finds its environment unusable (its simulator cannot answer), the sessions after it on that environment are not
kept, whether or not they happened to run before the finding (under concurrency they may have): which sessions are
kept depends only on the indices.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from toolwild.core.quality import session_checks
from toolwild.core.session import Session
from toolwild.errors import HarnessError, TransientBackendError
from toolwild.run import Executor, Unit, UnitLog, UnitRecord, UnitStatus
from toolwild.synth.providers.base import SessionOutcome, SessionProvider

__all__ = [
    "SHARD",
    "Assembly",
    "SessionJob",
    "SessionsReport",
    "StreamedAssembly",
    "Verify",
    "fallback_rate",
    "run_sessions",
    "session_key",
    "session_units",
]

SHARD = 256
"""Sessions a distributed executor keeps in one process: the ledger provider's balance block (its sessions depend on
the earlier ones of their block, see :mod:`toolwild.synth.providers.ledger.provider`)."""

Verify = Callable[[Session, SessionProvider], Awaitable[list[dict[str, Any]]]]
"""Checks one session (made by the given provider); returns its problems as ``{"severity", "where", "message"}``."""


def fallback_rate(sources: Counter[str]) -> float | None:
    """The share of the utterances a model writer was asked for that kept the template's words because its wording
    broke the checks: ``template-fallback`` of ``model`` + ``template-fallback`` (None when no model was asked)."""
    asked = sources["model"] + sources["template-fallback"]
    return sources["template-fallback"] / asked if asked else None


def session_key(index: int) -> str:
    """The unit key of session ``index``."""
    return f"session:{index}"


@dataclass
class SessionsReport:
    """What a session job made, in aggregate (the sessions themselves went to the writer)."""

    sessions: int = 0
    failed_sessions: list[dict[str, Any]] = field(default_factory=list)
    """Sessions that could not be built: index, environment, reasons."""
    failed_units: list[dict[str, Any]] = field(default_factory=list)
    """Sessions lost to the provider (after retries): index, environment, error. A resumed run makes them again."""
    drops: Counter[str] = field(default_factory=Counter)
    drop_examples: dict[str, str] = field(default_factory=dict)
    utterances: Counter[str] = field(default_factory=Counter)
    """Who wrote the task utterances (``template`` / ``model`` / ``template-fallback``), every provider's that records
    it (``extra["utterance_sources"]``: the graph builder always, the ledger templates with a model writer)."""
    answers: Counter[str] = field(default_factory=Counter)
    """Who wrote the model-worded tool answers (``model`` / ``template-fallback``); empty with templates alone."""
    given_up: dict[str, str] = field(default_factory=dict)
    """Environments the job stopped using (their simulator cannot answer), with why."""
    problems: list[dict[str, Any]] = field(default_factory=list)
    """Verification problems of the kept sessions."""


def session_units(n_sessions: int, done: set[str] = frozenset()) -> Iterator[Unit[int]]:
    """The sessions still to make, in index order (lazily: a million-session job holds no list)."""
    for index in range(n_sessions):
        key = session_key(index)
        if key not in done:
            yield Unit(key=key, order=index, payload=index)


async def run_sessions(
    executor: Any,
    work: Callable[[Unit[int]], Awaitable[dict[str, Any]]],
    n_sessions: int,
    *,
    record: Callable[[UnitRecord], None],
    done: set[str] = frozenset(),
    **options: Any,
) -> None:
    """Make every session not in ``done`` with ``work`` (a job's :meth:`SessionJob.make`, or a picklable
    :class:`SessionWorker` for a distributed executor); each finished or provider-failed unit goes to ``record`` the
    moment the executor reports it. ``options`` go to the executor (``shard_of`` for Ray)."""

    def finished(unit: Unit[int], result: dict[str, Any]) -> None:
        record(UnitRecord(key=unit.key, order=unit.order, status=UnitStatus.DONE, result=result))

    def failed(unit: Unit[int], exc: BaseException) -> None:
        error = " ".join(str(exc).split())[:300] or type(exc).__name__
        record(UnitRecord(key=unit.key, order=unit.order, status=UnitStatus.FAILED, error=error))

    await executor.map(
        session_units(n_sessions, done),
        work,
        on_done=finished,
        on_failed=failed,
        failures=(TransientBackendError,),
        **options,
    )


class SessionJob:
    """Sessions ``0..n-1`` over environments in round robin, one provider per environment."""

    def __init__(
        self,
        providers: list[SessionProvider],
        env_refs: list[str],
        n_sessions: int,
        *,
        verify: Verify | None = None,
    ) -> None:
        if not providers or len(providers) != len(env_refs):
            raise ValueError("one provider per environment, and at least one environment")
        self.providers = providers
        self.env_refs = env_refs
        self.n_sessions = n_sessions
        self.verify = verify
        self._cut: dict[int, int] = {}
        """Environment slot -> lowest index found unusable so far (later ones on that slot are not made)."""

    def restore(self, records: Iterable[UnitRecord]) -> None:
        """Hand the sessions of a killed run (in index order) to their providers, before any new one is made."""
        for record in records:
            if record.status is UnitStatus.DONE:
                session = record.result.get("session")
                slot = record.order % len(self.providers)
                made = Session.model_validate(session) if session is not None else None
                self.providers[slot].restore(record.order, made)
                if record.result["outcome"].get("given_up") is not None:
                    self._cut[slot] = min(self._cut.get(slot, record.order), record.order)

    async def make(self, unit: Unit[int]) -> dict[str, Any]:
        """One session, as the JSON its unit record holds."""
        index = unit.payload
        slot = index % len(self.providers)
        cut = self._cut.get(slot)
        if cut is not None and index > cut:  # decided at assembly anyway; this only saves the work
            outcome = SessionOutcome(session=None, reasons=[f"environment given up at session {cut}"])
        else:
            outcome = await self.providers[slot].make(index)
            if outcome.given_up is not None:
                self._cut[slot] = min(self._cut.get(slot, index), index)
        problems = []
        if self.verify is not None and outcome.session is not None:
            problems = await self.verify(outcome.session, self.providers[slot])
        made = outcome.session.model_dump(mode="json") if outcome.session is not None else None
        result: dict[str, Any] = {"outcome": outcome.to_json(), "session": made, "problems": problems}
        if made is not None:
            # the suite's quality checks, worked out here (in a worker, where verifying has just asked the same
            # questions) on the session as the writer will read it back, so the writer only adds them up
            result["checks"] = session_checks(Session.model_validate(made))
        return result

    async def run(
        self, executor: Executor, *, record: Callable[[UnitRecord], None], done: set[str] = frozenset()
    ) -> None:
        """Make every session not in ``done``; each finished (or provider-failed) unit goes to ``record`` at once."""
        await run_sessions(executor, self.make, self.n_sessions, record=record, done=done)

    def assemble(self, records: Iterable[UnitRecord], *, write: Callable[[Session], None]) -> SessionsReport:
        """Go through the records in index order: kept sessions to ``write``, everything else into the report."""
        assembly = Assembly(self, write)
        for record in records:
            assembly.add(record)
        return assembly.report


class Assembly:
    """What :meth:`SessionJob.assemble` does, one record at a time: records given in index order, kept sessions to
    ``write``, everything else into :attr:`report` (see the module docstring for the one rule that needs the
    order)."""

    def __init__(self, job: SessionJob, write: Callable[[Session], None]) -> None:
        self.job = job
        self.write = write
        self.report = SessionsReport()
        self.checks: dict[str, Any] | None = None
        """The quality checks recorded with the session being written (``session_checks``), while ``write`` runs;
        None when its record holds none (a run logged before they were)."""
        self._cut: dict[int, int] = {}
        """Environment slot -> the index where its environment was given up (later ones are not kept)."""

    def add(self, record: UnitRecord) -> None:
        """The next record in index order."""
        report, index = self.report, record.order
        slot = index % len(self.job.providers)
        env = self.job.env_refs[slot]
        if record.status is UnitStatus.FAILED:
            report.failed_units.append({"index": index, "environment": env, "error": record.error})
            return
        outcome = record.result["outcome"]
        if slot in self._cut:
            report.failed_sessions.append({"index": index, "environment": env, "reasons": [report.given_up[env]]})
            return
        report.drops.update(outcome["drops"])
        for reason, example in outcome["drop_examples"].items():
            report.drop_examples.setdefault(reason, example)
        if outcome.get("given_up") is not None:
            self._cut[slot] = index
            report.given_up[env] = outcome["given_up"]
        session = record.result.get("session")
        if session is None:
            report.failed_sessions.append({"index": index, "environment": env, "reasons": outcome["reasons"]})
            return
        made = Session.model_validate(session)
        report.sessions += 1
        report.utterances.update(made.extra.get("utterance_sources") or [])
        report.answers.update(made.extra.get("answer_sources") or [])
        report.problems += record.result.get("problems") or []
        self.checks = record.result.get("checks")
        self.write(made)


class StreamedAssembly:
    """The assembly of a run as its units finish, in any order: each index is assembled as soon as every index
    before it is (a record that arrives in turn as it is; one that arrives early is read back from the log when its
    turn comes, so nothing early is held in memory).

    Why: the suite is then written while the sessions are being made (the writer's work overlaps the workers' on
    other cores) instead of in one pass over the whole log at the end, and no pass reads the log back a second time.

    Args:
        job: the run's job (its providers and environments name the slots).
        log: the run's unit log; every record handed to :meth:`add` is in it already.
        write: where kept sessions go, in index order.
        done: the keys logged by an earlier run (a resume): read back from the log in their turn.
    """

    def __init__(
        self, job: SessionJob, log: UnitLog, write: Callable[[Session], None], *, done: set[str] = frozenset()
    ) -> None:
        self._assembly = Assembly(job, write)
        self._log = log
        self._n = job.n_sessions
        self._next = 0
        self._ready = bytearray(self._n)
        """1 where an index's record is in the log and waits for its turn (a byte per session)."""
        for index in range(self._n):
            self._ready[index] = session_key(index) in done

    @property
    def checks(self) -> dict[str, Any] | None:
        """The quality checks recorded with the session being written (see :attr:`Assembly.checks`)."""
        return self._assembly.checks

    def add(self, record: UnitRecord) -> None:
        """A unit's record, just logged."""
        if record.order == self._next:
            self._assembly.add(record)
            self._next += 1
        else:
            self._ready[record.order] = 1
        self._catch_up()

    def _catch_up(self) -> None:
        while self._next < self._n and self._ready[self._next]:
            self._assembly.add(self._log.record(session_key(self._next)))
            self._ready[self._next] = 0
            self._next += 1

    def finish(self) -> SessionsReport:
        """The report, once every index is assembled.

        Raises:
            HarnessError: an index has no record (a unit the executor never reported: a bug).
        """
        self._catch_up()
        if self._next < self._n:
            raise HarnessError(f"session {self._next} was never made (no record in {self._log.path})")
        return self._assembly.report
