"""The unit log: an append-only JSONL file of finished units, readable back in output order.

Layout: a header line naming the job and the fingerprint of what the run is (its configuration and inputs), then
one line per finished unit, appended and flushed the moment the unit finishes (in completion order), then an
``end`` line once the job's outputs are written. A unit that failed (a provider that kept failing) is logged as
``failed`` and run again by a resumed run; a later line for the same key replaces an earlier one.

Why offsets and not a copy in memory: a job of 100,000 sessions must not hold them. Opening the log records, per
key, where its line starts; :meth:`UnitLog.records` reads the results back one at a time, sorted by their place in
the output, so the final file is the same whatever order the units finished in.

One writer: an open log holds its :class:`~toolwild.run.lock.OutputLock` (``X.lock`` beside it) until closed, so a
second process that opens it to write (a ``--resume`` while the first run is alive) is refused naming the holder,
instead of interleaving its lines with the first one's. A line that is still damaged (a file edited by hand, a log
written before the lock) is a :class:`DataError` naming the file and line, when opened and when read back.
"""

from __future__ import annotations

import json
import os
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import IO, Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from toolwild.core.files import decode_text
from toolwild.core.jsonl import parse_json, validation_to_data_error
from toolwild.errors import ConfigError, DataError
from toolwild.run.lock import OutputLock

__all__ = ["UnitLog", "UnitRecord", "UnitStatus"]

_KIND = "toolwild-unit-log"
_VERSION = 1


class UnitStatus(StrEnum):
    """``done``: the unit's result is final. ``failed``: it could not run (redone by a resumed run)."""

    DONE = "done"
    FAILED = "failed"


class UnitRecord(BaseModel):
    """One finished unit, as logged."""

    model_config = ConfigDict(extra="forbid")

    key: str
    order: int
    status: UnitStatus
    result: Any = None
    error: str | None = None
    """Why a failed unit failed (a provider error after retries, say)."""


class _Header(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["toolwild-unit-log"]
    format_version: int
    job: str
    fingerprint: str
    identity: dict[str, Any]


class _End(BaseModel):
    model_config = ConfigDict(extra="forbid")

    end: Literal[True]


@dataclass(slots=True)
class _Entry:
    order: int
    offset: int
    status: UnitStatus
    line: int
    """1-based, to name the line when it cannot be read back."""


_STATUSES = tuple(UnitStatus)


class _Index:
    """Where each unit's latest record is: a slot per key, the slots' fields in flat arrays.

    Why not an object per unit: the index is what a log holds for every unit of a job (a million-session job holds
    nothing else per session); flat arrays take about 150 bytes a unit where an :class:`_Entry` per key took 260.
    """

    def __init__(self) -> None:
        self._slots: dict[str, int] = {}
        self._order = array("q")
        self._offset = array("q")
        self._line = array("q")
        self._status = bytearray()

    def __len__(self) -> int:
        return len(self._slots)

    def __getitem__(self, key: str) -> _Entry:
        slot = self._slots[key]
        status = _STATUSES[self._status[slot]]
        return _Entry(self._order[slot], self._offset[slot], status, self._line[slot])

    def set(self, key: str, entry: _Entry) -> None:
        """Record ``key``'s latest line (a later record replaces an earlier one)."""
        status = _STATUSES.index(entry.status)
        slot = self._slots.get(key)
        if slot is None:
            self._slots[key] = len(self._order)
            self._order.append(entry.order)
            self._offset.append(entry.offset)
            self._line.append(entry.line)
            self._status.append(status)
            return
        self._order[slot], self._offset[slot], self._line[slot] = entry.order, entry.offset, entry.line
        self._status[slot] = status

    def keys_with(self, status: UnitStatus) -> set[str]:
        wanted = _STATUSES.index(status)
        return {key for key, slot in self._slots.items() if self._status[slot] == wanted}

    def in_order(self) -> list[str]:
        """The keys in output order (``order``, then key)."""
        return sorted(self._slots, key=lambda key: (self._order[self._slots[key]], key))


_DAMAGED = "delete that line to redo its unit, or the file to start over"
"""How to go on past a damaged line of a log (its unit is simply run again)."""


class UnitLog:
    """An open unit log (see the module docstring). Use :meth:`start` or :meth:`resume`, then :meth:`append`."""

    def __init__(
        self,
        path: Path,
        handle: IO[bytes],
        entries: _Index,
        *,
        complete: bool,
        lines: int,
        lock: OutputLock,
    ) -> None:
        self.path = path
        self._handle = handle
        self._entries = entries
        self._lines = lines
        self._lock = lock
        self._reader: IO[bytes] | None = None
        """Reads single records back (:meth:`record`), opened on first use."""
        self.complete = complete
        """Whether the job that wrote the log finished (its outputs were written)."""

    # -------------------------------------------------------------------------------------------- opening
    @classmethod
    def start(cls, path: str | Path, *, job: str, fingerprint: str, identity: dict[str, Any]) -> UnitLog:
        """A new, empty log for a run (an existing log of a finished run is replaced).

        Raises:
            ConfigError: the path holds the log of an unfinished run: it is never thrown away silently; another
                process has the log open (its pid named).
        """
        p = Path(path)
        lock = OutputLock(p).acquire()  # before looking: what another writer is writing is not looked at, nor replaced
        try:
            if p.exists() and p.stat().st_size:
                cls._check_replaceable(p, job, identity)
            p.parent.mkdir(parents=True, exist_ok=True)
            handle = p.open("wb")
        except BaseException:
            lock.release()
            raise
        header = _Header(kind=_KIND, format_version=_VERSION, job=job, fingerprint=fingerprint, identity=identity)
        handle.write(_line(header.model_dump(mode="json")))
        handle.flush()
        return cls(p, handle, _Index(), complete=False, lines=1, lock=lock)

    @classmethod
    def _check_replaceable(cls, path: Path, job: str, identity: dict[str, Any]) -> None:
        """A log may be replaced only when it is a finished run's."""
        try:
            previous = cls.resume(path, job=job, fingerprint=None, identity=identity)
        except (ConfigError, DataError) as exc:
            raise ConfigError(
                f"{path} exists and is not a finished {job} log ({exc}): remove it or write elsewhere"
            ) from None
        with previous:
            if not previous.complete:
                raise ConfigError(
                    f"{path} holds an unfinished run ({len(previous.done_keys())} unit(s) finished): continue it "
                    "with --resume, or remove the file to start over"
                )

    @classmethod
    def resume(
        cls, path: str | Path, *, job: str, fingerprint: str | None, identity: dict[str, Any] | None = None
    ) -> UnitLog:
        """Open a run's log to continue it: a torn last line (a kill mid-write) is cut off, everything else kept.

        Args:
            path: the log.
            job: the job that must have written it.
            fingerprint: the run's fingerprint; another one means the log is another run's (None: not checked).
            identity: the run's identity, to name what differs when the fingerprints disagree.

        Raises:
            ConfigError: no log there, or the log of another job or run (naming what differs).
            DataError: a line that is not a unit record (file, line and field named), other than a torn last one.
        """
        p = Path(path)
        if not p.exists():
            raise ConfigError(f"nothing to resume: {p} does not exist (start the run without --resume)")
        entries = _Index()
        complete = False
        header: _Header | None = None
        lock = OutputLock(p).acquire()  # before reading: a live writer's half-written last line is not cut off
        try:
            handle = p.open("r+b")
        except BaseException:
            lock.release()
            raise
        try:
            offset = 0
            number = 0
            cut: int | None = None
            while True:
                raw = handle.readline()
                if not raw:
                    break
                number += 1
                start, offset = offset, offset + len(raw)
                torn = not raw.endswith(b"\n")
                try:
                    obj = parse_json(decode_text(raw.rstrip(b"\n"), file=p, line=number), file=p, line=number)
                    if header is None:
                        header = _header(obj, p)
                        continue
                    if isinstance(obj, dict) and "end" in obj:
                        _End.model_validate(obj)
                        complete = True
                        continue
                    record = UnitRecord.model_validate(obj)
                except (DataError, ValidationError) as exc:
                    if torn and header is not None:  # a write cut short by a kill: that unit did not finish
                        cut = start
                        break
                    error = exc if isinstance(exc, DataError) else validation_to_data_error(exc)
                    hint = f" ({_DAMAGED})" if header is not None else ""  # a header line has no unit to redo
                    raise DataError(
                        f"not a unit log record{hint}: {error.message}", file=p, line=number, field=error.field
                    ) from None
                if torn:
                    cut = start  # a whole record but no newline: dropped (the unit is redone) so appends start cleanly
                    break
                entries.set(record.key, _Entry(record.order, start, record.status, number))
                complete = False
            if header is None:
                raise DataError("empty unit log (no header line)", file=p, line=1)
            if header.job != job:
                raise ConfigError(f"{p} is the log of a {header.job!r} run, not of {job!r}")
            if fingerprint is not None and header.fingerprint != fingerprint:
                raise ConfigError(f"{p} belongs to another run: {_difference(header.identity, identity)}")
            lines = number
            if cut is not None:
                handle.truncate(cut)
                complete = False
                lines -= 1  # the cut line was the last one read
            handle.seek(0, os.SEEK_END)
        except BaseException:
            handle.close()
            lock.release()
            raise
        return cls(p, handle, entries, complete=complete, lines=lines, lock=lock)

    # -------------------------------------------------------------------------------------------- writing
    def append(self, record: UnitRecord) -> None:
        """Log one finished unit, flushed at once (a killed run keeps it)."""
        self._handle.seek(0, os.SEEK_END)
        offset = self._handle.tell()
        self._handle.write(_line(record.model_dump(mode="json")))
        self._handle.flush()
        self._lines += 1
        self._entries.set(record.key, _Entry(record.order, offset, record.status, self._lines))
        self.complete = False

    def mark_complete(self) -> None:
        """Record that the job's outputs were written: a new run may then replace this log."""
        self._handle.seek(0, os.SEEK_END)
        self._handle.write(_line({"end": True}))
        self._handle.flush()
        self._lines += 1
        self.complete = True

    def close(self) -> None:
        """Close the file and let go of its lock (another process may then open it)."""
        try:
            self._handle.close()
            if self._reader is not None:
                self._reader.close()
        finally:
            self._lock.release()

    def __enter__(self) -> UnitLog:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # -------------------------------------------------------------------------------------------- reading
    def done_keys(self) -> set[str]:
        """Keys of units whose result is final (a resumed run skips them)."""
        return self._entries.keys_with(UnitStatus.DONE)

    def failed_keys(self) -> set[str]:
        """Keys of units that failed (a resumed run does them again)."""
        return self._entries.keys_with(UnitStatus.FAILED)

    def __len__(self) -> int:
        return len(self._entries)

    def records(self) -> Iterator[UnitRecord]:
        """Every unit's latest record, in output order (``order``, then key), read one at a time.

        Raises:
            DataError: a line that no longer holds the record read when the log was opened (the file was changed
                since, by hand or by a process that ignored the lock), naming the file and line.
        """
        with self.path.open("rb") as reader:
            for key in self._entries.in_order():
                entry = self._entries[key]
                reader.seek(entry.offset)
                yield self._read_back(reader.readline(), key, entry)

    def record(self, key: str) -> UnitRecord:
        """The latest record of ``key``, read back from its line (a run that writes its output as units finish reads
        back those that finished before their turn, instead of holding them).

        Raises:
            KeyError: no record of ``key``.
            DataError: its line no longer holds that record (see :meth:`records`).
        """
        entry = self._entries[key]
        if self._reader is None:
            self._reader = self.path.open("rb")
        self._reader.seek(entry.offset)
        return self._read_back(self._reader.readline(), key, entry)

    def _read_back(self, raw: bytes, key: str, entry: _Entry) -> UnitRecord:
        """The record of ``key`` from its line, or a DataError naming the line (never a traceback)."""
        path, line = self.path, entry.line
        try:
            obj = parse_json(decode_text(raw.rstrip(b"\n"), file=path, line=line), file=path, line=line)
            record = UnitRecord.model_validate(obj)
        except (DataError, ValidationError) as exc:
            error = exc if isinstance(exc, DataError) else validation_to_data_error(exc)
            raise DataError(
                f"the unit log changed while open, its record of {key!r} is damaged ({_DAMAGED}): {error.message}",
                file=path,
                line=line,
                field=error.field,
            ) from None
        if record.key != key:
            raise DataError(
                f"the unit log changed while open: the line of {key!r} now holds {record.key!r} (was another process "
                "writing it?)",
                file=path,
                line=line,
            )
        return record


def _line(obj: Any) -> bytes:
    return (json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


def _header(obj: Any, path: Path) -> _Header:
    if not isinstance(obj, dict) or obj.get("kind") != _KIND:
        raise ConfigError(f"{path} is not a toolwild unit log (its first line is not a unit-log header)")
    try:
        header = _Header.model_validate(obj)
    except ValidationError as exc:
        error = validation_to_data_error(exc)
        raise DataError(f"bad unit-log header: {error.message}", file=path, line=1, field=error.field) from None
    if header.format_version != _VERSION:
        raise ConfigError(f"{path}: unit-log format {header.format_version} (this toolwild reads {_VERSION})")
    return header


def _difference(recorded: dict[str, Any], current: dict[str, Any] | None) -> str:
    """What differs between the run that wrote a log and this one, in words."""
    if current is None:
        return "its fingerprint differs"
    keys = sorted(k for k in {*recorded, *current} if recorded.get(k) != current.get(k))
    if not keys:
        return "its fingerprint differs"
    shown = "; ".join(f"{k}: {recorded.get(k)!r} in the log, {current.get(k)!r} now" for k in keys[:4])
    return shown + (f" (and {len(keys) - 4} more)" if len(keys) > 4 else "")
