"""Bounded execution of units: at most N at once, units pulled lazily, failures kept apart from bugs.

Why a pool of workers pulling from one iterator instead of one task per unit: a job of 100,000 units would
otherwise hold 100,000 coroutines (and their frames) from the start; with a pool, memory is bounded by the
concurrency, whatever the number of units.

The :class:`Executor` protocol is the seam for other executors (processes, a cluster): they take the same units,
the same work function and the same callbacks; the caller never learns where a unit ran.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol, TypeVar

from toolwild.run.units import Unit

__all__ = ["Executor", "LocalExecutor"]

P = TypeVar("P")
R = TypeVar("R")


class Executor(Protocol):
    """Runs units and reports each outcome as it happens (see :meth:`LocalExecutor.map`)."""

    concurrency: int

    async def map(
        self,
        units: Iterable[Unit[Any]],
        work: Callable[[Unit[Any]], Awaitable[Any]],
        *,
        on_done: Callable[[Unit[Any], Any], None],
        on_failed: Callable[[Unit[Any], BaseException], None] | None = None,
        failures: tuple[type[BaseException], ...] = (),
        stop: Callable[[], bool] | None = None,
    ) -> None: ...


class LocalExecutor:
    """Units as asyncio tasks on the running event loop, at most ``concurrency`` at once."""

    def __init__(self, concurrency: int = 32) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {concurrency}")
        self.concurrency = concurrency

    async def map(
        self,
        units: Iterable[Unit[P]],
        work: Callable[[Unit[P]], Awaitable[R]],
        *,
        on_done: Callable[[Unit[P], R], None],
        on_failed: Callable[[Unit[P], BaseException], None] | None = None,
        failures: tuple[type[BaseException], ...] = (),
        stop: Callable[[], bool] | None = None,
    ) -> None:
        """Run ``work`` on every unit and report each outcome as soon as it is known.

        Args:
            units: consumed lazily, in order (a unit starts when a worker is free).
            work: the unit's job.
            on_done: called with the unit and its result, as soon as it finishes (callers append it to their log
                here, so a killed run keeps it).
            on_failed: called when ``work`` raises one of ``failures`` (a provider that kept failing, say): the
                unit is recorded as failed and the run goes on.
            failures: the exception types that fail a unit without ending the run.
            stop: checked before each unit starts; once true, no new unit starts (those running finish).

        Raises:
            Any other exception raised by ``work`` or a callback: a bug. The other running units are cancelled
            and the exception propagates (what finished before is already reported).
        """
        source = iter(units)

        async def worker() -> None:
            for unit in source:  # one shared iterator: each unit is taken by exactly one worker
                if stop is not None and stop():
                    return
                try:
                    result = await work(unit)
                except failures as exc:
                    if on_failed is None:
                        raise
                    on_failed(unit, exc)
                    continue
                on_done(unit, result)

        try:
            async with asyncio.TaskGroup() as group:
                for _ in range(self.concurrency):
                    group.create_task(worker())
        except BaseExceptionGroup as raised:  # the first bug, as itself (its traceback kept), not wrapped
            raise raised.exceptions[0] from None
