"""The process executor: the outcomes of the local executor from worker processes, each streamed back before its
shard ends, units of a shard kept in one process and shards spread over processes, failures and bugs told apart, a
dead worker a clear error, and no worker outliving the run.

The unit workers are module-level classes: they travel to the spawned workers by reference (this module is on
``sys.path``, which the workers inherit)."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import pytest

from toolwild.errors import HarnessError
from toolwild.run import LocalExecutor, Unit
from toolwild.run.process_executor import ProcessExecutor
from toolwild.run.units import UnitFailure


class Doubler:
    """Doubles a unit's payload; fails units whose payload is a multiple of 7 like a provider would."""

    async def __call__(self, unit: Unit[int]) -> dict:
        await asyncio.sleep(0.001)
        if unit.payload % 7 == 0:
            raise TimeoutError(f"provider timed out on {unit.key}")
        return {"value": unit.payload * 2, "pid": os.getpid()}


def _units(n: int):
    return (Unit(key=f"u{i}", order=i, payload=i) for i in range(n))


def _collect(executor, work, n: int = 60, **options) -> tuple[dict, dict, dict]:
    """(values by key, failure messages by key, pid by key)."""
    done, failed, pids = {}, {}, {}

    def finished(unit, result):
        done.setdefault(unit.key, []).append(result["value"])
        pids[unit.key] = result.get("pid")

    asyncio.run(
        executor.map(
            _units(n),
            work,
            on_done=finished,
            on_failed=lambda u, e: failed.setdefault(u.key, []).append((type(e).__name__, str(e))),
            failures=(TimeoutError,),
            **options,
        )
    )
    return done, failed, pids


def test_the_same_outcomes_as_the_local_executor_over_several_processes():
    local_done, local_failed, _ = _collect(LocalExecutor(8), Doubler())
    done, failed, pids = _collect(ProcessExecutor(8, processes=2, shard_size=9), Doubler())
    assert done == local_done and len(done) == 51
    assert {k: [m for _, m in v] for k, v in failed.items()} == {k: [m for _, m in v] for k, v in local_failed.items()}
    assert failed["u14"] == [("UnitFailure", "provider timed out on u14")]  # the message travels, not the object
    assert os.getpid() not in pids.values() and len(set(pids.values())) == 2  # both workers took shards


def test_units_kept_together_by_shard_of_run_in_one_process():
    done, _, pids = _collect(ProcessExecutor(4, processes=2), Doubler(), n=40, shard_of=lambda u: u.order // 20)
    assert len(done) == 40 - 6
    first, second = ({pids[k] for k in done if int(k[1:]) // 20 == block} for block in (0, 1))
    assert len(first) == 1 and len(second) == 1 and first != second


class WaitsForTheCaller:
    """Unit 1 waits until the caller has recorded unit 0 (a file its on_done writes): it finishes only when unit 0's
    outcome reached the caller while their shard was still running."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    async def __call__(self, unit: Unit[int]) -> dict:
        if unit.payload == 1:
            for _ in range(400):
                if (self.folder / "u0").exists():
                    return {"value": "streamed"}
                await asyncio.sleep(0.025)
            return {"value": "held back"}
        return {"value": unit.payload}


def test_each_outcome_reaches_the_caller_before_its_shard_ends(tmp_path):
    got: dict[str, object] = {}

    def finished(unit, result):
        got[unit.key] = result["value"]
        (tmp_path / unit.key).touch()

    executor = ProcessExecutor(1, processes=1, shard_size=2)  # units 0 and 1 in one shard, one at a time
    asyncio.run(executor.map(_units(2), WaitsForTheCaller(tmp_path), on_done=finished))
    assert got == {"u0": 0, "u1": "streamed"}


class Buggy:
    async def __call__(self, unit: Unit[int]) -> dict:
        if unit.payload == 5:
            raise KeyError("a bug")
        return {"value": unit.payload}


def test_a_bug_in_a_worker_ends_the_run_as_itself_with_its_traceback():
    with pytest.raises(KeyError, match="a bug") as raised:
        _collect(ProcessExecutor(4, processes=2, shard_size=4), Buggy(), n=12)
    assert any("in worker process" in n and 'raise KeyError("a bug")' in n for n in raised.value.__notes__)


def test_a_failure_with_no_one_to_take_it_ends_the_run():
    with pytest.raises(UnitFailure, match="provider timed out on u0"):
        asyncio.run(
            ProcessExecutor(2, processes=1).map(
                _units(3), Doubler(), on_done=lambda u, r: None, failures=(TimeoutError,)
            )
        )


class DiesAtThree:
    """Writes its pid for unit 3 and waits there to be killed."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    async def __call__(self, unit: Unit[int]) -> dict:
        if unit.payload == 3:
            self.marker.write_text(str(os.getpid()))
            await asyncio.sleep(60)
        return {"value": unit.payload}


def test_a_dead_worker_is_a_harness_error_and_what_finished_before_is_kept(tmp_path):
    marker = tmp_path / "pid"
    done: list[str] = []

    async def killer() -> None:
        while not marker.exists() or not marker.read_text():
            await asyncio.sleep(0.02)
        os.kill(int(marker.read_text()), signal.SIGKILL)

    async def run() -> None:
        kill = asyncio.create_task(killer())
        try:
            await ProcessExecutor(1, processes=1, shard_size=10).map(
                _units(10), DiesAtThree(marker), on_done=lambda u, r: done.append(u.key)
            )
        finally:
            await kill

    start = time.perf_counter()
    with pytest.raises(HarnessError, match=r"worker process died .* 7 unit\(s\) unfinished"):
        asyncio.run(run())
    assert time.perf_counter() - start < 30  # not the worker's 60 s wait
    assert done == ["u0", "u1", "u2"]


class Pid:
    async def __call__(self, unit: Unit[int]) -> dict:
        return {"value": unit.payload, "pid": os.getpid()}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").exists() and Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def test_no_worker_outlives_the_run_and_stop_hands_out_no_more_shards():
    seen: list[int] = []
    executor = ProcessExecutor(2, processes=2, shard_size=5)
    asyncio.run(
        executor.map(_units(100), Pid(), on_done=lambda u, r: seen.append(r["pid"]), stop=lambda: len(seen) >= 5)
    )
    assert 5 <= len(seen) < 100  # the shards handed out before the stop ran to their end, no other started
    assert not any(_alive(pid) for pid in set(seen))


class Large:
    """Outcomes larger than a pipe holds at once (a session with its states can be): read in several pieces."""

    async def __call__(self, unit: Unit[int]) -> dict:
        return {"value": str(unit.payload) * 400_000}


def test_large_outcomes_arrive_whole_on_uvloop_whose_watched_descriptors_are_non_blocking():
    uvloop = pytest.importorskip("uvloop")
    got: dict[str, int] = {}
    executor = ProcessExecutor(4, processes=2, shard_size=3)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(executor.map(_units(12), Large(), on_done=lambda u, r: got.setdefault(u.key, len(r["value"]))))
    assert got == {f"u{i}": 400_000 * len(str(i)) for i in range(12)}


def test_a_job_of_one_shard_starts_one_worker():
    _, _, pids = _collect(ProcessExecutor(4, processes=4, shard_size=64), Pid(), n=10)
    assert len(set(pids.values())) == 1
