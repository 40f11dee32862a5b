"""One writer per output: an exclusive lock a second writer meets as a clear refusal that names the holder.

Why: every output of a job (a synth progress log, a ``synth envs`` folder, an eval run folder) is appended to
and rewritten by the one process that runs the job. A second process started on the same output (a ``--resume``
while the first run is still alive) interleaves its writes with the first one's: torn lines, a log the next resume
cannot read, files that are neither run's. So a writer takes the output's lock first and a second one is refused at
once, before it writes anything.

How: ``flock`` on a lock file beside the output (``X.lock`` for ``X``), holding the holder's pid and host, so the
refusal can say who holds it. The kernel releases a ``flock`` when its holder exits, even by SIGKILL, so a killed
run never leaves a lock behind (its file stays, with a dead pid in it, and the next writer simply takes it). A clean
release deletes the file; a writer that locked a file just deleted that way sees that the path no longer names
the file it locked and tries again.

Within one process the lock is re-entrant: the CLI holds an output for the whole command while the library call it
makes (:func:`toolwild.eval.runner.run_trials`, :class:`toolwild.run.UnitLog`) takes it again for its own callers;
they share one lock, released when the last holder lets go. It guards against other processes, not against two
writers of one process.

Where ``fcntl`` is missing (Windows) only the re-entrant in-process count is kept: there is no cross-process lock.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import threading
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from toolwild.errors import ConfigError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["LOCK_SUFFIX", "OutputLock", "lock_path"]

LOCK_SUFFIX = ".lock"
"""The lock file of output ``X`` is ``X.lock``, beside it (a folder's too: nothing is written into it)."""


def lock_path(output: str | Path) -> Path:
    """The lock file of ``output``."""
    p = Path(output)
    return p.with_name(p.name + LOCK_SUFFIX)


@dataclass(slots=True)
class _Held:
    fd: int | None
    """The locked file's descriptor (None without ``fcntl``)."""
    depth: int


_HELD: dict[str, _Held] = {}
"""Locks this process holds, by the lock file's real path."""
_GUARD = threading.Lock()


class OutputLock:
    """The exclusive lock of one output; use as a context manager, or :meth:`acquire` and :meth:`release`.

    Raises (on acquiring):
        ConfigError: another process holds it (its pid named), or the lock file cannot be made or locked.
    """

    def __init__(self, output: str | Path) -> None:
        self.output = Path(output)
        self.path = lock_path(self.output)
        self._key: str | None = None

    @property
    def held(self) -> bool:
        """Whether this object holds the lock."""
        return self._key is not None

    def acquire(self) -> OutputLock:
        """Take the lock (again, when this process already holds it); refused at once when another process does."""
        if self._key is not None:
            return self
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"cannot lock {self.output}: {self.path.parent}: {exc.strerror}") from None
        key = os.path.join(os.path.realpath(self.path.parent), self.path.name)
        with _GUARD:
            held = _HELD.get(key)
            if held is not None:
                held.depth += 1
            else:
                _HELD[key] = _Held(self._lock_file() if fcntl is not None else None, 1)
        self._key = key
        return self

    def release(self) -> None:
        """Let go; the last holder of this process deletes the lock file and unlocks it. Safe to call twice."""
        key, self._key = self._key, None
        if key is None:
            return
        with _GUARD:
            held = _HELD[key]
            held.depth -= 1
            if held.depth:
                return
            del _HELD[key]
        if held.fd is not None:
            with contextlib.suppress(OSError):  # deleted while still locked: a writer that opened it first retries
                os.unlink(key)  # absolute: the working directory may have changed since
            os.close(held.fd)  # closing the descriptor releases the flock

    def __enter__(self) -> OutputLock:
        return self.acquire()

    def __exit__(
        self, _type: type[BaseException] | None, _exc: BaseException | None, _tb: TracebackType | None
    ) -> None:
        self.release()

    # ------------------------------------------------------------------------------------------------ the OS
    def _lock_file(self) -> int:
        """Open, lock and sign the lock file; the locked descriptor."""
        assert fcntl is not None
        while True:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as exc:
                raise ConfigError(f"cannot lock {self.output}: {self.path}: {exc.strerror}") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                holder = _read_holder(fd)
                os.close(fd)
                if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise ConfigError(
                        f"{self.output} is being written by another run ({holder}; lock file {self.path}): two "
                        "writers would corrupt it. Wait for that run to end, or stop it and continue with --resume"
                    ) from None
                raise ConfigError(f"cannot lock {self.output}: {self.path}: {exc.strerror}") from None
            if _same_file(fd, self.path):
                break
            os.close(fd)  # the holder deleted the file as it let go: lock the one the path names now
        try:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()} {socket.gethostname()}\n".encode())
        except OSError as exc:
            os.close(fd)
            raise ConfigError(f"cannot lock {self.output}: {self.path}: {exc.strerror}") from None
        return fd


def _same_file(fd: int, path: Path) -> bool:
    """Whether ``path`` still names the file open on ``fd``."""
    try:
        named = os.stat(path)
    except FileNotFoundError:
        return False
    opened = os.fstat(fd)
    return (named.st_dev, named.st_ino) == (opened.st_dev, opened.st_ino)


def _read_holder(fd: int) -> str:
    """The holder as its lock file names it: ``pid N`` (and its host when not this one)."""
    try:
        text = os.pread(fd, 256, 0).decode("utf-8", "replace").split()
    except OSError:
        text = []
    if not text or not text[0].isdigit():
        return "pid unknown"  # it has not written its pid yet
    host = text[1] if len(text) > 1 else None
    return f"pid {text[0]}" + (f" on {host}" if host and host != socket.gethostname() else "")
