"""Units in worker processes on this machine: CPU-bound units on every core, each outcome streamed back at once.

Why processes: template sessions (no model to wait for) are pure Python, and an event loop runs them on one core
whatever the concurrency. Worker processes use every core. Why not :mod:`concurrent.futures`: a task there returns
whole, so a shard of 256 sessions would come back at once, held in the worker until its end and logged by nobody
before. Here a worker sends each unit's outcome the moment it finishes: the caller logs it at once (a killed run
keeps it) and a worker holds no more than the units it has in flight.

How: up to ``processes`` workers, started on demand (spawned: a fresh interpreter, whatever threads the caller
runs), each with a pipe in and a pipe out, each read by a thread of its own at the other end (so handing a worker a
shard never waits on a worker busy sending, and a message is read whole whatever an event loop does to the file
descriptors it watches: uvloop makes them non-blocking). The units are cut into shards (``shard_of`` keeps units
together that must run in one process, as with Ray); a worker holds its current shard and the next one, queued,
so it never waits between shards. Inside a worker the shard's units run under a
:class:`~toolwild.run.executor.LocalExecutor`, exactly as in one process. The caller's callbacks run in the calling
process, in its event loop, as outcomes arrive.

``work`` must be picklable (it travels to the workers, which import toolwild). It may define async ``aopen()`` and
``aclose()`` hooks, run once per worker around all its shards (to build and release its clients there).

A worker that dies (killed, out of memory) ends the run with a :class:`~toolwild.errors.HarnessError`: every outcome
it sent before is already reported, and a resumed run does the rest. A bug in a worker ends the run with the
worker's own exception, its traceback in the worker kept as a note.
"""

from __future__ import annotations

import asyncio
import itertools
import multiprocessing
import os
import queue
import signal
import threading
import traceback
from collections import deque
from collections.abc import Awaitable, Callable, Hashable, Iterable, Iterator
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

from toolwild.errors import HarnessError
from toolwild.run.executor import LocalExecutor
from toolwild.run.units import Unit, UnitFailure

__all__ = ["ProcessExecutor", "available_cpus"]

_START = "spawn"
"""How workers start: a fresh interpreter (fork would copy a caller's threads' locks, its progress bar's among them)."""
_SHARD_SIZE = 64
"""Units per shard by default (when the caller does not group them)."""
_DEPTH = 2
"""Shards a worker holds at once: the one it runs and the next, waiting in its pipe, so it never waits for this
process to hand it one (which happens only once this process has taken in every outcome of the shard before)."""


def available_cpus() -> int:
    """The CPUs this process may run on (its affinity where the OS tells it, else every CPU of the machine)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - macOS, Windows
        return max(1, os.cpu_count() or 1)


# ------------------------------------------------------------------------------------------------ the worker side
def _work_in_process(
    inbox: Connection, conn: Connection, work: Any, concurrency: int, failures: tuple[type[BaseException], ...]
) -> None:
    """A worker's life: shards in (``inbox``), one message per finished unit out (``conn``; see the module
    docstring)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group: the caller decides, and stops us
    _blocking(inbox, conn)
    shards: queue.SimpleQueue[Any] = queue.SimpleQueue()
    threading.Thread(target=_take_in, args=(inbox, shards), daemon=True).start()
    try:
        asyncio.run(_serve(shards, conn, work, concurrency, failures))
    except (EOFError, BrokenPipeError):
        pass  # the caller is gone: nobody to report to
    except BaseException as exc:
        _send_bug(conn, exc)
    finally:
        conn.close()


def _take_in(inbox: Connection, shards: queue.SimpleQueue[Any]) -> None:
    """Move each message of the caller to ``shards`` as it arrives (the caller's end: None, as its last message).

    A pipe that ends without that None means the caller died (killed): the worker goes at once, as if killed with
    it, instead of making sessions nobody will record (it would notice only at its next send)."""
    try:
        while (message := inbox.recv()) is not None:
            shards.put(message)
    except (EOFError, OSError):
        os._exit(1)
    shards.put(None)


async def _serve(
    shards: queue.SimpleQueue[Any],
    conn: Connection,
    work: Any,
    concurrency: int,
    failures: tuple[type[BaseException], ...],
) -> None:
    opener = getattr(work, "aopen", None)
    if opener is not None:
        await opener()
    try:
        while (message := shards.get()) is not None:  # idle until then: blocking the loop holds nothing up
            number, units = message
            await LocalExecutor(concurrency).map(
                units,
                work,
                on_done=lambda unit, result: conn.send(("done", unit.key, result)),
                on_failed=lambda unit, exc: conn.send(("failed", unit.key, _one_line(exc))),
                failures=failures,
            )
            conn.send(("shard", number))
    finally:
        closer = getattr(work, "aclose", None)
        if closer is not None:
            await closer()


def _blocking(*connections: Connection) -> None:
    """Make sure every read and write of these pipes waits for its whole message: a message is read in pieces, and
    a piece not there yet must not read as a broken pipe (a pipe made while a library had set a default socket
    timeout, or one inherited non-blocking, would)."""
    for connection in connections:
        os.set_blocking(connection.fileno(), True)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or repr(exc)


def _send_bug(conn: Connection, exc: BaseException) -> None:
    """Report a bug: the exception itself when it survives pickling, its text otherwise; the traceback as text."""
    trace = "".join(traceback.format_exception(exc))
    try:
        conn.send(("bug", exc, trace))
    except (EOFError, BrokenPipeError):
        return
    except Exception:  # the exception does not pickle: its words travel instead
        try:
            conn.send(("bug", HarnessError(f"{type(exc).__name__} in a worker process: {_one_line(exc)}"), trace))
        except (EOFError, BrokenPipeError):
            return


# ------------------------------------------------------------------------------------------------ the caller side
@dataclass
class _Worker:
    process: Any
    conn: Connection
    """What the worker sends (read by :attr:`reader`)."""
    outbox: Connection
    """What it is sent."""
    reader: threading.Thread | None = None
    shards: deque[int] = field(default_factory=deque)
    """The shards handed to it and not yet finished, oldest first."""
    closing: bool = False


class ProcessExecutor:
    """Shards of units in worker processes, each outcome reported as it arrives (see the module docstring).

    Args:
        concurrency: units at once inside each worker (its event loop's; CPU-bound units gain nothing above 1, a
            model-bound worker waits on many calls at once).
        processes: workers at most (default: the CPUs this process may use); a job of fewer shards starts fewer.
        shard_size: units per shard, at most (when ``shard_of`` is not given).
    """

    def __init__(self, concurrency: int = 32, *, processes: int | None = None, shard_size: int = _SHARD_SIZE) -> None:
        if concurrency < 1 or shard_size < 1 or (processes is not None and processes < 1):
            raise ValueError("concurrency, processes and shard_size must be at least 1")
        self.concurrency = concurrency
        self.processes = processes or available_cpus()
        self.shard_size = shard_size

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

        ``stop`` is checked before each shard is handed out (the units of a shard already handed out run).
        ``shard_of`` keeps units together that must run in one process, in order (a provider whose sessions depend
        on the earlier ones of their block): consecutive units with the same value form one shard. A unit failed by
        one of ``failures`` reaches ``on_failed`` as a :class:`~toolwild.run.units.UnitFailure` with its message
        (the exception object stays in the worker).

        Raises:
            HarnessError: a worker process died (killed, out of memory).
            Any other exception raised by ``work`` in a worker, or by a callback: a bug. The workers are stopped and
            the exception propagates (what finished before is already reported).
        """
        run = _Run(self, work, failures)
        try:
            await run.go(self._shards(units, shard_of), on_done, on_failed, stop)
        finally:
            run.close()

    def _shards(self, units: Iterable[Unit[Any]], shard_of: Callable[[Unit[Any]], Hashable] | None) -> Iterator[list]:
        if shard_of is None:
            source = iter(units)
            while shard := list(itertools.islice(source, self.shard_size)):
                yield shard
            return
        for _key, group in itertools.groupby(units, key=shard_of):
            yield list(group)


class _Run:
    """One :meth:`ProcessExecutor.map`: its workers, the shards they hold and the outcomes on their way."""

    def __init__(self, executor: ProcessExecutor, work: Any, failures: tuple) -> None:
        self.executor = executor
        self.work = work
        self.failures = failures
        self.context = multiprocessing.get_context(_START)
        self.workers: list[_Worker] = []
        self.waiting: dict[str, Unit[Any]] = {}
        """Units handed out whose outcome has not arrived, by key."""
        self.shards: dict[int, list[str]] = {}
        self.inbox: asyncio.Queue[tuple[_Worker, Any]] = asyncio.Queue()
        self.loop = asyncio.get_running_loop()

    async def go(
        self,
        shards: Iterator[list[Unit[Any]]],
        on_done: Callable[[Unit[Any], Any], None],
        on_failed: Callable[[Unit[Any], BaseException], None] | None,
        stop: Callable[[], bool] | None,
    ) -> None:
        numbers = itertools.count()
        source: Iterator[list[Unit[Any]]] | None = shards
        pending: list[Unit[Any]] | None = None  # taken from source before a worker was free (one starts for a shard)
        while True:
            while source is not None:
                if stop is not None and stop():
                    source = pending = None
                    break
                if pending is None and (pending := next(source, None)) is None:
                    source = None
                    break
                worker = self._next_worker()
                if worker is None:
                    break
                self._hand(worker, next(numbers), pending)
                pending = None
            if source is None:  # nothing more to hand out: idle workers may go
                for worker in self.workers:
                    if not worker.shards and not worker.closing:
                        self._release(worker)
            if not any(w.shards for w in self.workers):
                return
            worker, message = await self.inbox.get()
            self._receive(worker, message, on_done, on_failed)

    def _next_worker(self) -> _Worker | None:
        """Who takes the next shard: an idle worker, else a new one while fewer than the limit run, else the least
        loaded with room (None: every worker holds as many shards as it may)."""
        live = [w for w in self.workers if not w.closing]
        idle = [w for w in live if not w.shards]
        if idle:
            return idle[0]
        if len(live) < self.executor.processes:
            return self._start()
        room = [w for w in live if len(w.shards) < _DEPTH]
        return min(room, key=lambda w: len(w.shards)) if room else None

    def _start(self) -> _Worker:
        their_inbox, outbox = self.context.Pipe(duplex=False)
        conn, their_conn = self.context.Pipe(duplex=False)
        _blocking(conn, outbox)
        args = (their_inbox, their_conn, self.work, self.executor.concurrency, self.failures)
        process = self.context.Process(target=_work_in_process, args=args, daemon=True, name="toolwild-worker")
        process.start()
        their_inbox.close()
        their_conn.close()
        worker = _Worker(process, conn, outbox)
        worker.reader = threading.Thread(target=self._take_in, args=(worker,), daemon=True, name="toolwild-worker-in")
        worker.reader.start()
        self.workers.append(worker)
        return worker

    def _hand(self, worker: _Worker, number: int, shard: list[Unit[Any]]) -> None:
        for unit in shard:
            self.waiting[unit.key] = unit
        self.shards[number] = [u.key for u in shard]
        worker.shards.append(number)
        worker.outbox.send((number, shard))

    def _release(self, worker: _Worker) -> None:
        worker.closing = True
        try:
            worker.outbox.send(None)
        except (BrokenPipeError, OSError):
            pass  # already gone: its end of file says so

    def _take_in(self, worker: _Worker) -> None:
        """A worker's messages to the inbox, as each arrives whole (in a thread; an end of file: the worker is
        gone, told as None)."""
        while True:
            try:
                message = worker.conn.recv()
            except (EOFError, OSError):
                message = None
            try:
                self.loop.call_soon_threadsafe(self.inbox.put_nowait, (worker, message))
            except RuntimeError:  # the loop is closed: the run is over
                return
            if message is None:
                return

    def _receive(
        self,
        worker: _Worker,
        message: Any,
        on_done: Callable[[Unit[Any], Any], None],
        on_failed: Callable[[Unit[Any], BaseException], None] | None,
    ) -> None:
        if message is None:
            if worker.shards:
                worker.process.join(1)
                held = sum(k in self.waiting for n in worker.shards for k in self.shards[n])
                raise HarnessError(
                    f"a worker process died (exit code {worker.process.exitcode}) with {held} unit(s) unfinished: "
                    "what finished is reported, a resumed run does the rest"
                )
            return
        kind = message[0]
        if kind == "done":
            on_done(self.waiting.pop(message[1]), message[2])
        elif kind == "failed":
            unit, failure = self.waiting.pop(message[1]), UnitFailure(message[2])
            if on_failed is None:
                raise failure
            on_failed(unit, failure)
        elif kind == "shard":
            worker.shards.remove(message[1])
            del self.shards[message[1]]
        else:  # a bug: the worker's own exception, its traceback there kept as a note
            exc, trace = message[1], message[2]
            exc.add_note(f"in worker process {worker.process.pid}:\n{trace.rstrip()}")
            raise exc

    def close(self) -> None:
        """Stop every worker: those released end on their own, the others (a run that ends on an error) are
        terminated; none outlives the run."""
        for worker in self.workers:
            if not worker.closing:
                worker.process.terminate()
        for worker in self.workers:
            worker.process.join(5)
            if worker.process.is_alive():  # pragma: no cover - a worker stuck in C code
                worker.process.kill()
                worker.process.join()
            if worker.reader is not None:
                worker.reader.join(5)  # the worker's end is closed: its reader has read the end of file
            worker.conn.close()
            worker.outbox.close()
