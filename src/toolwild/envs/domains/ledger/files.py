"""A ledger's files on disk: read as text, written atomically, locked while written.

A Beancount ledger is one main file plus the files it ``include``s. Whoever writes a user's books must never leave
a half-written file (a crash mid-write would lose their records), never change bytes it did not mean to change (line
endings included), and never let two writers interleave a read-validate-replace. Those three rules live here, so the
tools above them only decide *what* the new text is.

Which files a ledger may be made of is decided here too: the ledger's own folder, unless the user allows includes
outside it (:func:`outside_includes_allowed`). A ledger path can come from someone else (a suite's snapshot, an MCP
client's configuration), and an ``include`` is a read of any file the process can read: unconfined, one climbing to
``/etc/passwd`` had its lines quoted back as beancount's "Invalid token" errors.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

from toolwild.errors import ConfigError

__all__ = [
    "OUTSIDE_INCLUDES_ENV",
    "LedgerError",
    "Stamp",
    "atomic_write",
    "folder_lock",
    "is_inside",
    "newline_of",
    "outside_includes_allowed",
    "read_text",
    "split_lines",
    "stamp_of",
]

OUTSIDE_INCLUDES_ENV = "TOOLWILD_ALLOW_OUTSIDE_INCLUDES"
"""Set to ``1`` to let a ledger include files outside its own folder (what ``--allow-outside-includes`` does), for
every command that opens a ledger, the ones without the option included."""
_TRUE = frozenset({"1", "true", "yes", "on"})


class LedgerError(ConfigError, ValueError):
    """A ledger that cannot be used: a file that cannot be read or a ledger that does not load cleanly.

    It is a :class:`~toolwild.errors.ConfigError` (the user's own file, named with the line and the construct, is
    the input at fault) and a ``ValueError`` (what an episode started from bad ``ledger_text`` always raised).
    """


def outside_includes_allowed(allow: bool | None = None) -> bool:
    """Whether a ledger may include files outside its own folder: ``allow`` when given (an explicit option), else
    :data:`OUTSIDE_INCLUDES_ENV` set to ``1``/``true``/``yes``/``on``; by default no."""
    if allow is not None:
        return allow
    return os.environ.get(OUTSIDE_INCLUDES_ENV, "").strip().lower() in _TRUE


def is_inside(path: str | Path, folder: str | Path) -> bool:
    """Whether ``path`` is ``folder`` or below it once both are resolved (``..`` and symlinks followed: a link in
    the folder to a file elsewhere is elsewhere)."""
    real, root = os.path.realpath(path), os.path.realpath(folder)
    return real == root or real.startswith(root.rstrip(os.sep) + os.sep)


def read_text(path: Path) -> str:
    """The file's text, decoded as UTF-8 (Beancount's only encoding), line endings untouched.

    Raises:
        LedgerError: the file is missing, unreadable, or not UTF-8 (naming the file and line of the first bad byte).
    """
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise LedgerError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise LedgerError(
            f"{path} line {line}: not UTF-8 (byte {raw[exc.start]:#04x}); Beancount files are UTF-8"
        ) from None


Stamp = tuple[int, int, int, int]
"""What ``stat`` says of a file version: (device, inode, size, modification time in ns). A file a ledger was read
from is compared by its stamp, not its text, to tell whether it changed since: that costs one ``stat`` instead of
reading megabytes. Every replace (:func:`atomic_write`) makes a new inode, so a stamp changes with every write of
ours or of another toolwild process; an editor that rewrites a file in place, keeping its size, within the clock
tick of the last write is the one change a stamp can miss (writes still compare the text, see
:meth:`~toolwild.envs.domains.ledger.store.LedgerStore.commit`)."""


def stamp_of(path: str | Path) -> Stamp | None:
    """The file's stamp (links followed), or None when it cannot be stat'ed."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def split_lines(text: str) -> list[str]:
    """``text`` as lines, each with its line ending, split where beancount counts lines: at ``\\n`` only
    (``str.splitlines`` also splits at form feeds and Unicode separators a payee may hold, and line ``n`` of it would
    then not be beancount's line ``n``)."""
    if text.count("\r") == text.count("\r\n") and not _OTHER_BREAKS.search(text):
        return text.splitlines(keepends=True)  # the same lines, split in C (a megabyte ledger: 10 times faster)
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


_OTHER_BREAKS = re.compile("[\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
"""Where ``str.splitlines`` splits besides ``\\n``, ``\\r\\n`` and a lone ``\\r``."""


def newline_of(text: str) -> str:
    """The line ending most lines of ``text`` use (``\\r\\n`` or ``\\n``): what new lines in that file must use."""
    crlf = text.count("\r\n")
    return "\r\n" if crlf > text.count("\n") - crlf else "\n"


def atomic_write(path: Path, text: str, *, durable: bool = False) -> Stamp:
    """Replace ``path`` with ``text`` (UTF-8, line endings as given) so that readers see the old or the new file,
    never a partial one: a temp file in the same folder, then ``os.replace``.

    The new file keeps the old one's permission bits (a temp file is created 0600). ``durable`` also flushes the
    data to disk before the replace, for a user's own books; an episode's private copy does not need it. A symlink
    is followed: the file it points to is replaced, and the link stays a link.

    Returns the new file's stamp, taken from the temp file before the replace (a rename keeps it), so it is the
    stamp of what was written even if someone replaces the file right after.
    """
    path = Path(os.path.realpath(path))
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(text.encode("utf-8"))
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
        with contextlib.suppress(OSError):
            os.chmod(tmp, path.stat().st_mode & 0o7777)
        st = os.stat(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


_THREAD_LOCKS: dict[str, threading.Lock] = {}
_THREAD_LOCKS_GUARD = threading.Lock()


@contextlib.contextmanager
def folder_lock(folder: Path) -> Iterator[None]:
    """Exclusive access to a ledger's folder for one read-validate-replace, across threads and processes.

    The lock is ``flock`` on the folder itself (POSIX): the folder's inode survives every ``os.replace`` of a file
    in it (a lock on the file would not), and no lock file is written into the user's folder. Threads of one
    process also take a lock per folder, which is all there is where ``fcntl`` is missing (Windows).
    """
    key = str(folder.resolve())
    with _THREAD_LOCKS_GUARD:
        thread_lock = _THREAD_LOCKS.setdefault(key, threading.Lock())
    with thread_lock:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows
            yield
            return
        fd = os.open(key, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing the descriptor releases the flock
