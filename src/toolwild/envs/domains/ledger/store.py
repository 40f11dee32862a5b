"""Where an episode's ledger lives and how it is written: a private copy, or the user's own files in place.

- **A copy** (the default): the ledger and every file it includes are copied into the episode's temporary folder
  with the same relative layout, so relative ``include``s resolve exactly as in the user's folder. The user's files
  are never written; ``close()`` removes the copy.
- **Write-through**: the episode reads and writes the user's files. A write takes the folder's lock, re-reads the
  files, validates the whole ledger with the one changed file, checks that file did not change meanwhile, and
  replaces it atomically (flushed to disk, permissions kept). ``close()`` deletes nothing.

Either way a write touches exactly one file, the one that holds the transaction (new transactions go to the main
file), and nothing is written unless the whole ledger loads cleanly afterwards. Either way the ledger's includes
stay in its folder unless the store was made with ``allow_outside_includes`` (see
:func:`~toolwild.envs.domains.ledger.book.parse_tree`); a copy made with it keeps allowing them, since the copy has
the original's layout.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
import weakref
from collections.abc import Iterator
from pathlib import Path

from toolwild.envs.base import ToolErrorKind
from toolwild.envs.domains.ledger.book import LoadedLedger, load_tree, parse_tree
from toolwild.envs.domains.ledger.files import (
    LedgerError,
    atomic_write,
    folder_lock,
    outside_includes_allowed,
    read_text,
)
from toolwild.envs.toolkit import ToolFailure

__all__ = ["LedgerStore", "copy_ledger_tree"]

_ABSOLUTE_INCLUDE = re.compile(r'^(include[ \t]+")([^"\r\n]+)(")', re.MULTILINE)
_DOCUMENTS_OPTION = re.compile(r'^(option[ \t]+"documents"[ \t]+")([^"\r\n]+)(")', re.MULTILINE)
_DOCUMENT = re.compile(r'^(\d{4}[-/]\d{2}[-/]\d{2}[ \t]+document[ \t]+\S+[ \t]+")([^"\r\n]+)(")', re.MULTILINE)


def _retarget(text: str, original: str) -> str:
    """A copied file's text with the paths that must keep pointing where they pointed made to do so: an absolute
    ``include`` becomes relative (so the copy reads the copy of that file), and a relative ``documents`` folder or
    ``document`` file becomes absolute (the user's documents are read where they are, not copied)."""
    here = os.path.dirname(original)

    def relative(match: re.Match[str]) -> str:
        path = match.group(2)
        return match.group(1) + (os.path.relpath(path, here) if os.path.isabs(path) else path) + match.group(3)

    def absolute(match: re.Match[str]) -> str:
        path = match.group(2)
        return match.group(1) + (path if os.path.isabs(path) else os.path.join(here, path)) + match.group(3)

    text = _ABSOLUTE_INCLUDE.sub(relative, text)
    text = _DOCUMENTS_OPTION.sub(absolute, text)
    return _DOCUMENT.sub(absolute, text)


def copy_ledger_tree(path: Path, dest_dir: Path, *, allow_outside_includes: bool | None = None) -> Path:
    """Copy a ledger and every file it includes into ``dest_dir``, keeping their relative layout; the new main file.

    Files are laid out by their path relative to the folder that contains them all (the ledger's own folder unless
    an include reaches outside it, e.g. ``../common/accounts.beancount``: then their common ancestor), so every
    relative ``include`` resolves in the copy as in the original. An absolute ``include`` is rewritten to point at
    its copy, and relative ``documents``/``document`` paths are made absolute (they keep naming the user's files,
    which are only read). Every other byte is copied as it is. An include outside the ledger's folder is refused
    unless ``allow_outside_includes`` (None: ``TOOLWILD_ALLOW_OUTSIDE_INCLUDES`` decides).

    Raises:
        LedgerError: the ledger is missing, unreadable, or includes a file that does not exist or lies outside its
            folder (named with its line).
    """
    main = os.path.normpath(os.path.abspath(os.path.expanduser(path)))
    if not os.path.isfile(main):
        raise LedgerError(f"ledger {path}: no such file")
    tree = parse_tree(main, None, cwd=os.path.dirname(main), allow_outside_includes=allow_outside_includes)
    if tree.problems:
        root = os.path.dirname(main)
        raise LedgerError(
            f"ledger {path} cannot be copied: " + "; ".join(p.describe(root=root) for p in tree.problems[:5])
        )
    root = os.path.commonpath([os.path.dirname(name) for name in tree.files])
    for name, text in tree.files.items():
        target = Path(dest_dir) / os.path.relpath(name, root)
        target.parent.mkdir(parents=True, exist_ok=True)
        copied = _retarget(text, name)
        if copied == text:
            shutil.copyfile(name, target)
        else:
            target.write_bytes(copied.encode("utf-8"))
    return Path(dest_dir) / os.path.relpath(main, root)


class LedgerStore:
    """An episode's ledger files and the one way to change them.

    Args:
        main: the main file.
        private_dir: the episode's own folder, removed by :meth:`close` (None: the files are the user's).
        allow_outside_includes: the ledger may include files outside the main file's folder (None:
            ``TOOLWILD_ALLOW_OUTSIDE_INCLUDES`` decides, once, here).
    """

    def __init__(self, main: Path, *, private_dir: Path | None, allow_outside_includes: bool | None = None) -> None:
        self.main = Path(os.path.normpath(os.path.abspath(main)))
        self.write_through = private_dir is None
        self.allow_outside_includes = outside_includes_allowed(allow_outside_includes)
        """Whether every load of these files follows includes out of the main file's folder."""
        self._closed = False
        self._finalizer = (
            weakref.finalize(self, shutil.rmtree, private_dir, ignore_errors=True) if private_dir is not None else None
        )
        self._cache: LoadedLedger | None = None

    @classmethod
    def from_text(cls, text: str, *, allow_outside_includes: bool | None = None) -> LedgerStore:
        """A private folder holding ``ledger.beancount`` with ``text``."""
        folder = Path(tempfile.mkdtemp(prefix="toolwild-ledger-"))
        main = folder / "ledger.beancount"
        main.write_bytes(text.encode("utf-8"))
        return cls(main, private_dir=folder, allow_outside_includes=allow_outside_includes)

    @classmethod
    def copy_of(cls, ledger: Path, *, allow_outside_includes: bool | None = None) -> LedgerStore:
        """A private folder holding a copy of the user's ledger and its includes (outside its folder only with
        ``allow_outside_includes``)."""
        allowed = outside_includes_allowed(allow_outside_includes)
        folder = Path(tempfile.mkdtemp(prefix="toolwild-ledger-"))
        try:
            main = copy_ledger_tree(ledger, folder, allow_outside_includes=allowed)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        return cls(main, private_dir=folder, allow_outside_includes=allowed)

    def load_fresh(self) -> LoadedLedger:
        """The ledger as its files are now, loaded afresh under this store's include rule (an unreadable file
        raises :class:`LedgerError`; problems are in the result's ``errors``)."""
        return load_tree(self.main, allow_outside_includes=self.allow_outside_includes)

    # ------------------------------------------------------------------ life cycle
    def close(self) -> None:
        """Remove the private copy; the user's files (write-through) are never deleted."""
        self._closed = True
        if self._finalizer is not None:
            self._finalizer()

    @property
    def closed(self) -> bool:
        """True once :meth:`close` has run."""
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise ToolFailure(ToolErrorKind.PRECONDITION_FAILED, "this episode is closed")

    # ------------------------------------------------------------------ reading
    def text(self) -> str:
        """The main file's current text."""
        self._check_open()
        return self._read(str(self.main))

    @staticmethod
    def _read(name: str) -> str:
        try:
            return read_text(Path(name))
        except LedgerError as exc:  # a user's file removed or garbled under a write-through episode
            raise ToolFailure(ToolErrorKind.PRECONDITION_FAILED, str(exc)) from None

    def load(self) -> LoadedLedger:
        """The ledger as its files are now (the last load is reused while no file's text has changed)."""
        self._check_open()
        cached = self._cache
        if cached is not None and all(os.path.exists(n) and self._read(n) == t for n, t in cached.files.items()):
            return cached
        try:
            self._cache = self.load_fresh()
        except LedgerError as exc:
            raise ToolFailure(ToolErrorKind.PRECONDITION_FAILED, str(exc)) from None
        return self._cache

    def prime(self, loaded: LoadedLedger) -> None:
        """Use an already loaded ledger of these files as the cache (an episode has just loaded it)."""
        self._cache = loaded

    # ------------------------------------------------------------------ writing
    @contextlib.contextmanager
    def writing(self) -> Iterator[LoadedLedger]:
        """Hold the ledger's lock for one read-validate-replace; yields the ledger as its files are now."""
        self._check_open()
        with folder_lock(self.main.parent):
            yield self.load()

    def commit(self, file: str, old_text: str, new_text: str) -> LoadedLedger:
        """Replace ``file`` (one of the ledger's files, whose text was ``old_text``) by ``new_text`` if the whole
        ledger then loads cleanly; call inside :meth:`writing`.

        Raises:
            ToolFailure: ``rejected`` with beancount's messages (nothing written), or ``precondition_failed`` when
                the file changed on disk while the write was prepared (nothing written).
        """
        candidate = load_tree(self.main, overrides={file: new_text}, allow_outside_includes=self.allow_outside_includes)
        if not candidate.ok:
            problems = "; ".join(candidate.errors)
            raise ToolFailure(ToolErrorKind.REJECTED, f"beancount rejected the change; nothing was written: {problems}")
        if self._read(file) != old_text:
            raise ToolFailure(
                ToolErrorKind.PRECONDITION_FAILED,
                f"{os.path.basename(file)} changed on disk while this write was prepared; nothing was written, "
                "try again",
            )
        try:
            atomic_write(Path(file), new_text, durable=self.write_through)
        except OSError as exc:
            raise ToolFailure(
                ToolErrorKind.REJECTED, f"could not write {file}: {exc.strerror or exc}; nothing was written"
            ) from None
        self._cache = candidate
        return candidate
