"""The Ray executor on a local instance (2 CPUs): the same results as the local executor, a killed worker's shard
run again and counted once, failures and bugs told apart, and clear errors without Ray or without a cluster."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from toolwild.errors import ConfigError, MissingDependencyError
from toolwild.run import LocalExecutor, Unit
from toolwild.run.ray_executor import RayExecutor

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'toolwild[ray]')")
from ray import cloudpickle  # noqa: E402  (vendored by Ray)

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import a test module


pytestmark = pytest.mark.usefixtures("local_ray")


class Doubler:
    """Doubles a unit's payload; fails units whose payload is a multiple of 7 like a provider would."""

    async def __call__(self, unit: Unit[int]) -> dict:
        await asyncio.sleep(0.001)
        if unit.payload % 7 == 0:
            raise TimeoutError(f"provider timed out on {unit.key}")
        return {"value": unit.payload * 2, "pid": os.getpid()}


def _collect(executor, work, n: int = 60, **options) -> tuple[dict, dict]:
    done, failed = {}, {}
    units = (Unit(key=f"u{i}", order=i, payload=i) for i in range(n))
    asyncio.run(
        executor.map(
            units,
            work,
            on_done=lambda u, r: done.setdefault(u.key, []).append(r["value"]),
            on_failed=lambda u, e: failed.setdefault(u.key, []).append(str(e)),
            failures=(TimeoutError,),
            **options,
        )
    )
    return done, failed


def test_the_same_outcomes_as_the_local_executor_shard_by_shard():
    local = _collect(LocalExecutor(8), Doubler())
    remote = _collect(RayExecutor(8, shard_size=9), Doubler())
    assert remote == local
    done, failed = remote
    assert len(done) == 51 and failed["u14"] == ["provider timed out on u14"]


def test_units_kept_together_by_shard_of_run_in_one_process():
    pids: dict[str, int] = {}

    class Where:
        async def __call__(self, unit: Unit[int]) -> dict:
            return {"value": os.getpid()}

    done, _ = _collect(RayExecutor(4, shard_size=1), Where(), n=40, shard_of=lambda u: u.order // 20)
    pids = {k: v[0] for k, v in done.items()}
    assert len({pids[f"u{i}"] for i in range(20)}) == 1 and len({pids[f"u{i}"] for i in range(20, 40)}) == 1


class DiesOnce:
    """The first attempt of the shard holding unit 0 writes its pid and waits to be killed; the retry runs."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    async def __call__(self, unit: Unit[int]) -> dict:
        if unit.payload == 0 and not self.marker.exists():
            self.marker.write_text(str(os.getpid()))
            await asyncio.sleep(60)
        return {"value": unit.payload}


def test_a_killed_workers_shard_is_run_again_and_counted_once(tmp_path):
    marker = tmp_path / "pid"

    async def killer() -> None:
        while not marker.exists() or not marker.read_text():
            await asyncio.sleep(0.05)
        os.kill(int(marker.read_text()), signal.SIGKILL)

    done: dict[str, list] = {}

    async def run() -> None:
        task = asyncio.create_task(killer())
        units = (Unit(key=f"u{i}", order=i, payload=i) for i in range(30))
        await RayExecutor(4, shard_size=10).map(
            units, DiesOnce(marker), on_done=lambda u, r: done.setdefault(u.key, []).append(r["value"])
        )
        await task

    start = time.perf_counter()
    asyncio.run(run())
    assert time.perf_counter() - start < 50  # the retry did not wait out the sleep
    assert sorted(done) == sorted(f"u{i}" for i in range(30))
    assert all(len(values) == 1 for values in done.values())


class Buggy:
    async def __call__(self, unit: Unit[int]) -> dict:
        if unit.payload == 5:
            raise KeyError("a bug")
        return {"value": unit.payload}


def test_a_bug_in_a_worker_ends_the_run_as_itself():
    with pytest.raises(KeyError, match="a bug"):
        _collect(RayExecutor(4, shard_size=4), Buggy(), n=12)


def test_an_unreachable_cluster_is_a_clear_error_at_once():
    ray.shutdown()
    try:
        start = time.perf_counter()
        with pytest.raises(ConfigError, match=r"cannot reach the Ray cluster at '127\.0\.0\.1:1'"):
            RayExecutor(address="127.0.0.1:1", connect_timeout_s=2).connect()
        assert time.perf_counter() - start < 10
    finally:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)


def test_without_ray_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(MissingDependencyError, match=r"pip install 'toolwild\[ray\]'"):
        RayExecutor().connect()
