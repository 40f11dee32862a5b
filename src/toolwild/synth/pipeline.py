"""The session job of ``toolwild synth sessions``: one unit per session, logged as it finishes, written in order.

Session ``i`` is made by the provider of environment ``i % len(envs)`` (round robin). Units run under an executor
(bounded concurrency); each finished unit is handed to ``record`` at once (the command appends it to its unit log,
so a killed run keeps it), with the session, what was dropped on the way and, when a ``verify`` is given, the
verification problems of that session (verified as it is made: nothing ever holds the whole suite).

:meth:`SessionJob.assemble` then reads the records in index order and writes the sessions one at a time, so the
suite does not depend on the concurrency or on the order units finished in. One rule needs the whole order: when a
session finds its environment unusable (its simulator cannot answer), the sessions after it on that environment are
not kept, whether or not they happened to run before the finding (under concurrency they may have): which sessions
are kept depends only on the indices.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from toolwild.core.session import Session
from toolwild.errors import TransientBackendError
from toolwild.run import Executor, Unit, UnitRecord, UnitStatus
from toolwild.synth.providers.base import SessionOutcome, SessionProvider

__all__ = ["SessionJob", "SessionsReport", "session_key"]

Verify = Callable[[Session, SessionProvider], Awaitable[list[dict[str, Any]]]]
"""Checks one session (made by the given provider); returns its problems as ``{"severity", "where", "message"}``."""


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
    given_up: dict[str, str] = field(default_factory=dict)
    """Environments the job stopped using (their simulator cannot answer), with why."""
    problems: list[dict[str, Any]] = field(default_factory=list)
    """Verification problems of the kept sessions."""


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

    def units(self, done: set[str] = frozenset()) -> Iterator[Unit[int]]:
        """The sessions still to make, in index order (lazily: a million-session job holds no list)."""
        for index in range(self.n_sessions):
            key = session_key(index)
            if key not in done:
                yield Unit(key=key, order=index, payload=index)

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
        return {
            "outcome": outcome.to_json(),
            "session": outcome.session.model_dump(mode="json") if outcome.session is not None else None,
            "problems": problems,
        }

    async def run(
        self, executor: Executor, *, record: Callable[[UnitRecord], None], done: set[str] = frozenset()
    ) -> None:
        """Make every session not in ``done``; each finished (or provider-failed) unit goes to ``record`` at once."""

        def finished(unit: Unit[int], result: dict[str, Any]) -> None:
            record(UnitRecord(key=unit.key, order=unit.order, status=UnitStatus.DONE, result=result))

        def failed(unit: Unit[int], exc: BaseException) -> None:
            error = " ".join(str(exc).split())[:300] or type(exc).__name__
            record(UnitRecord(key=unit.key, order=unit.order, status=UnitStatus.FAILED, error=error))

        await executor.map(
            self.units(done), self.make, on_done=finished, on_failed=failed, failures=(TransientBackendError,)
        )

    def assemble(self, records: Iterable[UnitRecord], *, write: Callable[[Session], None]) -> SessionsReport:
        """Go through the records in index order: kept sessions to ``write``, everything else into the report."""
        report = SessionsReport()
        cut: dict[int, int] = {}
        for record in records:
            index = record.order
            slot = index % len(self.providers)
            env = self.env_refs[slot]
            if record.status is UnitStatus.FAILED:
                report.failed_units.append({"index": index, "environment": env, "error": record.error})
                continue
            outcome = record.result["outcome"]
            if slot in cut:
                reason = report.given_up[env]
                report.failed_sessions.append({"index": index, "environment": env, "reasons": [reason]})
                continue
            report.drops.update(outcome["drops"])
            for reason, example in outcome["drop_examples"].items():
                report.drop_examples.setdefault(reason, example)
            if outcome.get("given_up") is not None:
                cut[slot] = index
                report.given_up[env] = outcome["given_up"]
            session = record.result.get("session")
            if session is None:
                report.failed_sessions.append({"index": index, "environment": env, "reasons": outcome["reasons"]})
                continue
            made = Session.model_validate(session)
            report.sessions += 1
            report.utterances.update(made.extra.get("utterance_sources") or [])
            report.problems += record.result.get("problems") or []
            write(made)
        return report
