"""Units on a Ray cluster: shards of units run as Ray tasks, each with the same async code and its own concurrency.

Why shards and not one task per unit: a Ray task costs milliseconds to schedule and its worker must build its
clients (model, cache, environments) before the first unit; a shard of units pays that once. Inside a shard the
units run under a :class:`~toolwild.run.executor.LocalExecutor`, exactly as on one machine.

The driver alone records results: a shard's results come back whole when it finishes and are handed to
``on_done``/``on_failed`` then, so the caller's log, resume and accounting behave as with the local executor. A
shard whose worker dies is run again by Ray (``max_retries``); its results are only ever taken from the attempt
that finished, so nothing is counted twice.

The unit worker (``work``) must be picklable: it travels to the workers, which import toolwild. It may define async
``aopen()``/``aclose()`` hooks, run around each shard (to build and release its clients there).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable, Hashable, Iterable, Iterator
from typing import Any

from toolwild.errors import ConfigError, MissingDependencyError
from toolwild.run.executor import LocalExecutor
from toolwild.run.units import Unit, UnitFailure

__all__ = ["RayExecutor", "UnitFailure", "ray_available"]

_RETRIES = 3
"""Times Ray runs a shard again when its worker process dies."""


def ray_available() -> bool:
    """Whether Ray is installed (``pip install 'toolwild[ray]'``)."""
    try:
        import ray  # noqa: F401
    except ImportError:
        return False
    return True


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise MissingDependencyError(
            "--executor ray needs Ray: pip install 'toolwild[ray]' (on the driver and on every worker host)"
        ) from None
    return ray


def _run_shard(work: Any, units: list[Unit[Any]], concurrency: int, failures: tuple[type[BaseException], ...]) -> list:
    """One shard, inside a Ray worker: ``(key, ok, result or error message)`` per unit, in completion order."""

    async def go() -> list:
        records: list[tuple[str, bool, Any]] = []
        opener = getattr(work, "aopen", None)
        if opener is not None:
            await opener()
        try:
            await LocalExecutor(concurrency).map(
                units,
                work,
                on_done=lambda unit, result: records.append((unit.key, True, result)),
                on_failed=lambda unit, exc: records.append((unit.key, False, " ".join(str(exc).split()) or repr(exc))),
                failures=failures,
            )
        finally:
            closer = getattr(work, "aclose", None)
            if closer is not None:
                await closer()
        return records

    return asyncio.run(go())


class RayExecutor:
    """Shards of units as Ray tasks (see the module docstring).

    Args:
        concurrency: units at once inside each shard.
        address: the cluster (``auto``, ``ray://host:10001``, ``host:6379``); None starts a local Ray instance.
        shard_size: units per shard, at most.
        shards_in_flight: shards submitted at once (default: twice the cluster's CPUs).
        num_cpus: CPUs of a local instance (None: Ray's default, all of them).
        connect_timeout_s: how long to wait for the cluster's port to answer before saying it cannot be reached.
    """

    def __init__(
        self,
        concurrency: int = 32,
        *,
        address: str | None = None,
        shard_size: int = 64,
        shards_in_flight: int | None = None,
        num_cpus: int | None = None,
        connect_timeout_s: float = 10.0,
    ) -> None:
        if concurrency < 1 or shard_size < 1:
            raise ValueError("concurrency and shard_size must be at least 1")
        self.concurrency = concurrency
        self.address = address
        self.shard_size = shard_size
        self.shards_in_flight = shards_in_flight
        self.num_cpus = num_cpus
        self.connect_timeout_s = connect_timeout_s

    def connect(self) -> Any:
        """Join the cluster (or start a local instance) once; an unreachable cluster is a ConfigError, not a hang."""
        ray = _ray()
        if self.address is not None:
            _reachable(self.address, self.connect_timeout_s)
        if ray.is_initialized():
            return ray
        options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "logging_level": "ERROR"}
        if self.address is None:
            options["num_cpus"] = self.num_cpus
        else:
            options["address"] = self.address
        try:
            ray.init(**options)  # in the main thread: Ray's core worker must live where the driver calls it from
        except (ConnectionError, TimeoutError, RuntimeError, ValueError) as exc:
            raise ConfigError(
                f"cannot reach the Ray cluster at {self.address!r}: {' '.join(str(exc).split())[:300]} (start one "
                "with `ray start --head`, or leave out --ray-address for a local instance)"
            ) from None
        return ray

    def cpus(self) -> int:
        """The cluster's CPUs (connecting first): callers size their shards so that every CPU gets work."""
        return max(1, int(self.connect().cluster_resources().get("CPU", 1)))

    def shard_per_cpu(self, units: int) -> None:
        """Cut ``units`` into about one shard per CPU of the cluster (a latency-bound phase of few units would
        otherwise leave CPUs idle, or one unit per CPU at a time)."""
        self.shard_size = max(1, -(-units // self.cpus()))

    async def map(
        self,
        units: Iterable[Unit[Any]],
        work: Callable[[Unit[Any]], Awaitable[Any]],
        *,
        on_done: Callable[[Unit[Any], Any], None],
        on_failed: Callable[[Unit[Any], BaseException], None] | None = None,
        failures: tuple[type[BaseException], ...] = (),
        stop: Callable[[], bool] | None = None,
        shard_of: Callable[[Unit[Any]], Hashable] | None = None,
    ) -> None:
        """Like :meth:`LocalExecutor.map <toolwild.run.executor.LocalExecutor.map>`, shard by shard.

        ``shard_of`` keeps units together that must run in one process (a provider whose sessions depend on the
        earlier ones of their block): consecutive units with the same value form one shard (cut at ``shard_size``
        only when ``shard_of`` is not given).
        """
        ray = self.connect()
        remote = ray.remote(max_retries=_RETRIES, retry_exceptions=False)(_run_shard)
        work_ref = ray.put(work)
        limit = self.shards_in_flight or max(2, 2 * int(ray.cluster_resources().get("CPU", 1)))
        shards = self._shards(units, shard_of)
        pending: dict[asyncio.Future[Any], list[Unit[Any]]] = {}
        try:
            while True:
                while len(pending) < limit and not (stop is not None and stop()):
                    shard = next(shards, None)
                    if shard is None:
                        break
                    ref = remote.remote(work_ref, shard, self.concurrency, failures)
                    pending[asyncio.wrap_future(ref.future())] = shard
                if not pending:
                    return
                finished, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for future in finished:
                    shard = pending.pop(future)
                    self._deliver(shard, _result(future), on_done, on_failed)
        finally:
            for future in pending:
                future.cancel()

    def _shards(self, units: Iterable[Unit[Any]], shard_of: Callable[[Unit[Any]], Hashable] | None) -> Iterator[list]:
        if shard_of is None:
            source = iter(units)
            while shard := list(itertools.islice(source, self.shard_size)):
                yield shard
            return
        for _key, group in itertools.groupby(units, key=shard_of):
            yield list(group)

    @staticmethod
    def _deliver(
        shard: list[Unit[Any]],
        records: list,
        on_done: Callable[[Unit[Any], Any], None],
        on_failed: Callable[[Unit[Any], BaseException], None] | None,
    ) -> None:
        by_key = {u.key: u for u in shard}
        for key, ok, value in records:
            unit = by_key[key]
            if ok:
                on_done(unit, value)
            elif on_failed is not None:
                on_failed(unit, UnitFailure(value))


def _result(future: asyncio.Future[Any]) -> list:
    """A finished shard's records; a bug in a worker is raised as itself (Ray wraps it)."""
    try:
        return future.result()
    except Exception as exc:
        cause = getattr(exc, "cause", None)
        if isinstance(cause, BaseException):
            raise cause from None
        raise


def _reachable(address: str, timeout_s: float) -> None:
    """Fail fast when nothing listens at a ``host:port`` address: ``ray.init`` keeps retrying such an address for
    minutes (its own waits are logged, not raised), which a user sees as a hang. ``auto`` is left to Ray, which
    says at once when no cluster runs here."""
    import socket

    target = address.removeprefix("ray://")
    host, _, port = target.rpartition(":")
    if address == "auto" or not host or not port.isdigit():
        return
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            return
    except OSError as exc:
        raise ConfigError(
            f"cannot reach the Ray cluster at {address!r}: {exc.strerror or exc} (start one with `ray start --head`, "
            "or leave out --ray-address for a local instance)"
        ) from None
