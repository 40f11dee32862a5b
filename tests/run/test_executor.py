"""The bounded executor: never more than N units at once, failures kept apart from bugs, a stop honoured."""

from __future__ import annotations

import asyncio

import pytest

from toolwild.run import LocalExecutor, Unit


def _units(n: int):
    return (Unit(key=f"u{i}", order=i, payload=i) for i in range(n))


def test_at_most_n_units_run_at_once_and_every_unit_runs_once():
    running, peak, seen = 0, 0, []

    async def work(unit):
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.001 * (unit.payload % 3))
        running -= 1
        return unit.payload * 2

    done = {}
    asyncio.run(LocalExecutor(4).map(_units(50), work, on_done=lambda u, r: done.__setitem__(u.key, r)))
    seen = sorted(done)
    assert peak == 4
    assert seen == sorted(f"u{i}" for i in range(50)) and done["u7"] == 14


def test_units_are_pulled_lazily_so_a_huge_job_holds_no_list():
    pulled = 0

    def units():
        nonlocal pulled
        for i in range(10**9):
            pulled += 1
            yield Unit(key=str(i), order=i, payload=i)

    finished = []

    async def work(unit):
        return unit.payload

    asyncio.run(
        LocalExecutor(3).map(units(), work, on_done=lambda u, r: finished.append(r), stop=lambda: len(finished) >= 10)
    )
    assert 10 <= len(finished) <= 12 and pulled <= 13


def test_a_failing_unit_is_reported_and_the_others_finish():
    class Flaky(Exception):
        pass

    async def work(unit):
        if unit.payload == 3:
            raise Flaky("provider down")
        return unit.payload

    done, failed = [], []
    asyncio.run(
        LocalExecutor(2).map(
            _units(8),
            work,
            on_done=lambda u, r: done.append(r),
            on_failed=lambda u, e: failed.append((u.key, str(e))),
            failures=(Flaky,),
        )
    )
    assert sorted(done) == [0, 1, 2, 4, 5, 6, 7] and failed == [("u3", "provider down")]


def test_a_bug_ends_the_run_with_its_own_exception_and_starts_nothing_more():
    started = []

    async def work(unit):
        started.append(unit.payload)
        if unit.payload == 2:
            raise KeyError("bug")
        await asyncio.sleep(0.01)
        return unit.payload

    with pytest.raises(KeyError, match="bug"):
        asyncio.run(LocalExecutor(2).map(_units(100), work, on_done=lambda u, r: None))
    assert len(started) < 10


def test_concurrency_below_one_is_refused():
    with pytest.raises(ValueError, match="at least 1"):
        LocalExecutor(0)
