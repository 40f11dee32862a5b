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
import copy
import os
import re
import shutil
import tempfile
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from pathlib import Path
from typing import Any

from beancount.core import data

from toolwild.envs.base import ToolErrorKind
from toolwild.envs.domains.ledger.address import Addresses
from toolwild.envs.domains.ledger.book import FileParse, LoadedLedger, ParsedTree, load_tree, parse_tree
from toolwild.envs.domains.ledger.canonical import STATE_MEMO, canonical_state
from toolwild.envs.domains.ledger.edit import Splice
from toolwild.envs.domains.ledger.files import (
    LedgerError,
    Stamp,
    atomic_write,
    folder_lock,
    outside_includes_allowed,
    read_text,
    stamp_of,
)
from toolwild.envs.domains.ledger.revise import revise
from toolwild.envs.toolkit import ToolFailure

__all__ = ["KEPT_LOADS", "LedgerStore", "copy_ledger_tree", "forget_kept_loads", "kept_loads"]

KEPT_LOADS = 8
"""How many loads a process keeps to start later episodes of the same ledger from (least recently used dropped).

Why: an episode of a generated ledger loads its text (parse, book, validate: tens of milliseconds), and a suite
opens the same text again and again: every build attempt of a session, then its verification's replay. A kept load
is handed to a new episode as a copy under the episode's own file name (:func:`_relocated`, about a tenth of a
load); the kept one is never handed out, so nothing an episode does reaches it. Bounded in number and in size
(:data:`KEPT_CHARS`), so memory stays flat however many sessions a process makes (a load holds about 20 bytes per
character of its text: half a megabyte for a generated ledger)."""
KEPT_CHARS = 2_000_000
"""The most text (characters, all files of all kept loads) the kept loads may hold, about 40 MB of loads; a ledger
with more than half of it is never kept (a big ledger is the user's own: an episode of it is started from the
start-up check's load instead, see :meth:`LedgerStore.copy_of`)."""
_kept: OrderedDict[Hashable, LoadedLedger] = OrderedDict()
_kept_lock = threading.Lock()


def _chars(loaded: LoadedLedger) -> int:
    return sum(len(text) for text in loaded.files.values())


def kept_loads() -> int:
    """How many loads are kept now (at most :data:`KEPT_LOADS`)."""
    return len(_kept)


def forget_kept_loads() -> None:
    """Drop every kept load (the next episode of any ledger loads it afresh)."""
    with _kept_lock:
        _kept.clear()


def _kept_load(key: Hashable) -> LoadedLedger | None:
    with _kept_lock:
        found = _kept.get(key)
        if found is not None:
            _kept.move_to_end(key)
        return found


def _keep(key: Hashable, loaded: LoadedLedger) -> bool:
    """Keep ``loaded`` under ``key`` (the least recently used dropped past the bounds); False: too big to keep."""
    if _chars(loaded) * 2 > KEPT_CHARS:
        return False
    with _kept_lock:
        _kept[key] = loaded
        _kept.move_to_end(key)
        while len(_kept) > KEPT_LOADS or sum(_chars(k) for k in _kept.values()) > KEPT_CHARS:
            _kept.popitem(last=False)
    return True


def _keepable(loaded: LoadedLedger) -> bool:
    """Whether a load of these texts under other file names is this load renamed: it loaded cleanly, reads no
    folder of its own (no ``pythonpath`` option, no ``document`` directives) and its files are the texts it holds."""
    tree = loaded.tree
    return (
        loaded.ok
        and tree is not None
        and not tree.problems
        and not loaded.options.get("pythonpath")
        and not any("document" in text for text in loaded.files.values())
    )


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

    if "include" in text:  # a plain search first: a big ledger holds none of these, and the patterns are slower
        text = _ABSOLUTE_INCLUDE.sub(relative, text)
    if "document" in text:
        text = _DOCUMENTS_OPTION.sub(absolute, text)
        text = _DOCUMENT.sub(absolute, text)
    return text


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
        """A private folder holding ``ledger.beancount`` with ``text``, already loaded: from a kept load of the same
        text when there is one (:data:`KEPT_LOADS`), else afresh (and then kept)."""
        folder = Path(tempfile.mkdtemp(prefix="toolwild-ledger-"))
        main = folder / "ledger.beancount"
        main.write_bytes(text.encode("utf-8"))
        store = cls(main, private_dir=folder, allow_outside_includes=allow_outside_includes)
        if "include" in text:  # its includes resolve in the new folder: load it there
            return store
        key = ("text", text, store.allow_outside_includes)
        name = str(store.main)
        kept = _kept_load(key)
        if kept is None:
            try:
                loaded = store.load_fresh()
            except BaseException:
                store.close()
                raise
            if not _keepable(loaded) or _chars(loaded) * 2 > KEPT_CHARS:  # a big text: no state worked out early
                store.prime(loaded)
                return store
            canonical_state(loaded)  # every episode asks for its starting state: worked out once, handed on
            _keep(key, loaded)
            kept = loaded
        store.prime(_relocated(kept, {kept.main: name}, {name: stamp_of(name)}))
        return store

    @classmethod
    def copy_of(
        cls, ledger: Path, *, allow_outside_includes: bool | None = None, loaded: LoadedLedger | None = None
    ) -> LedgerStore:
        """A private folder holding a copy of the user's ledger and its includes (outside its folder only with
        ``allow_outside_includes``), with the copy already loaded (:meth:`start` hands it out).

        The user's ledger is loaded once, and the copy is written from the texts that load read and made the
        copy's load by renaming its files (nothing is parsed again). ``loaded``, a load of the same ledger under
        the same include rule (the environment's start-up check), is used instead of loading when none of its files
        changed since; the store takes it over (its entries are renamed in place), so it must not be used after.
        Without ``loaded``, a kept load of the same one-file ledger (:data:`KEPT_LOADS`) is used when the file still
        holds its text (read and compared), and a fresh load is kept for the next copy.
        """
        allowed = outside_includes_allowed(allow_outside_includes)
        main = os.path.normpath(os.path.abspath(os.path.expanduser(ledger)))
        if not os.path.isfile(main):
            raise LedgerError(f"ledger {ledger}: no such file")
        original = loaded if loaded is not None and loaded.main == main and _fresh(loaded) else None
        key = ("file", main, allowed)
        kept = _kept_load(key) if original is None else None
        if kept is not None and not _same_texts(kept):
            kept = None
        if kept is not None:
            original = kept
        elif original is None:
            original = load_tree(Path(main), allow_outside_includes=allowed)
            if _keepable(original) and list(original.files) == [main] and _keep(key, original):
                kept = original
        tree = original.tree
        if tree is None or tree.problems:
            root = os.path.dirname(main)
            problems = tree.problems if tree is not None else original.problems
            raise LedgerError(
                f"ledger {ledger} cannot be copied: " + "; ".join(p.describe(root=root) for p in problems[:5])
            )
        folder = Path(tempfile.mkdtemp(prefix="toolwild-ledger-"))
        try:
            names, stamps, same = _write_copy(original.files, main, folder)
            store = cls(Path(names[main]), private_dir=folder, allow_outside_includes=allowed)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        if same and original.ok and not original.options.get("pythonpath"):
            store.prime(_renamed(original, names, stamps) if kept is None else _relocated(kept, names, stamps))
        return store

    def load_fresh(self) -> LoadedLedger:
        """The ledger as its files are now, loaded afresh under this store's include rule (an unreadable file
        raises :class:`LedgerError`; problems are in the result's ``errors``)."""
        return load_tree(self.main, allow_outside_includes=self.allow_outside_includes)

    def start(self, loaded: LoadedLedger | None = None) -> LoadedLedger:
        """The ledger an episode starts from: the copy's load made with it, else ``loaded`` (a load of these very
        files, e.g. the start-up check's) if no file changed since, else a fresh load."""
        if self._cache is not None:
            return self._cache
        if loaded is not None and loaded.main == str(self.main) and _fresh(loaded):
            self._cache = loaded
            return loaded
        return self.load_fresh()

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
        """The ledger as its files are now: the last load while no file's stamp has changed (one ``stat`` per file,
        never a read), else a fresh load."""
        self._check_open()
        cached = self._cache
        if cached is not None and _fresh(cached):
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

    def commit(self, ledger: LoadedLedger, splice: Splice) -> LoadedLedger:
        """Make ``splice`` (a change to one of the files of ``ledger``, the ledger :meth:`writing` yielded) if the
        whole ledger then loads cleanly; call inside :meth:`writing`.

        The new ledger is checked as a full load would check it, most often without loading it again (see
        :mod:`~toolwild.envs.domains.ledger.revise`). Before the file is replaced, it must still be what the
        change was made on: for the user's own files (write-through) its text is read and compared; for the
        episode's private copy its stamp is compared (and its text only if the stamp changed).

        Raises:
            ToolFailure: ``rejected`` with beancount's messages (nothing written), or ``precondition_failed`` when
                the file changed on disk while the write was prepared (nothing written).
        """
        candidate = revise(ledger, splice, allow_outside_includes=self.allow_outside_includes)
        if not candidate.ok:
            problems = "; ".join(candidate.errors)
            raise ToolFailure(ToolErrorKind.REJECTED, f"beancount rejected the change; nothing was written: {problems}")
        file = splice.file
        if not self._unchanged(ledger, file):
            raise ToolFailure(
                ToolErrorKind.PRECONDITION_FAILED,
                f"{os.path.basename(file)} changed on disk while this write was prepared; nothing was written, "
                "try again",
            )
        try:
            stamp = atomic_write(Path(file), candidate.files[file], durable=self.write_through)
        except OSError as exc:
            raise ToolFailure(
                ToolErrorKind.REJECTED, f"could not write {file}: {exc.strerror or exc}; nothing was written"
            ) from None
        candidate.stamps[file] = stamp
        self._cache = candidate
        return candidate

    def _unchanged(self, ledger: LoadedLedger, file: str) -> bool:
        """Whether ``file`` is still the text ``ledger`` holds for it."""
        if not self.write_through:
            stamp = ledger.stamps.get(file)
            if stamp is not None and stamp_of(file) == stamp:
                return True
        return self._read(file) == ledger.files[file]


def _fresh(loaded: LoadedLedger) -> bool:
    """Whether every file of ``loaded`` still has the stamp it had when read (or written)."""
    stamps = loaded.stamps
    return all((stamp := stamps.get(name)) is not None and stamp_of(name) == stamp for name in loaded.files)


def _write_copy(files: dict[str, str], main: str, folder: Path) -> tuple[dict[str, str], dict[str, Stamp], bool]:
    """Write a ledger's files (the texts it was loaded from) into ``folder`` in their relative layout, with the
    paths that must keep pointing where they pointed rewritten (:func:`_retarget`); the copy's path and stamp of
    each file, and whether every copy is byte for byte the original."""
    root = os.path.commonpath([os.path.dirname(name) for name in files])
    names: dict[str, str] = {}
    stamps: dict[str, Stamp] = {}
    same = True
    for name, text in files.items():
        target = folder / os.path.relpath(name, root)
        target.parent.mkdir(parents=True, exist_ok=True)
        copied = _retarget(text, name)
        same = same and copied == text
        with open(target, "wb") as fh:
            fh.write(copied.encode("utf-8"))
            fh.flush()  # the stamp is the file's with every byte in it
            st = os.fstat(fh.fileno())
        names[name] = os.path.normpath(str(target))
        stamps[names[name]] = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    return names, stamps, same


def _same_texts(loaded: LoadedLedger) -> bool:
    """Whether each of the ledger's files holds, now, the text it was loaded from (read and compared: exact)."""
    try:
        return all(read_text(Path(name)) == text for name, text in loaded.files.items())
    except LedgerError:
        return False


_new_tuple = tuple.__new__


def _relocated(loaded: LoadedLedger, names: dict[str, str], stamps: dict[str, Stamp | None]) -> LoadedLedger:
    """A load of ``loaded``'s texts under other file names (``names``: old -> new), made from it without changing
    it: what :func:`_renamed` makes, with every object that holds a file name (an entry's or a posting's metadata,
    the entry itself, the options, the addresses) new, and the rest (amounts, dates, strings) shared, since
    nothing changes them. Objects shared in ``loaded`` (a transaction as written and as booked share their
    metadata) are shared in the copy. Of what was worked out from it (``memo``), only the canonical state is carried
    (it names no file, and it is shared read-only by contract); the copy works out the rest again.

    Why: a kept load (:data:`KEPT_LOADS`) starts many episodes, and each must own what it may be handed on to."""
    tree = loaded.tree
    assert tree is not None
    moved: dict[int, Any] = {}
    keep_alive: list[Any] = []  # ids are only unique while the objects live

    def once(obj: Any, make: Callable[[Any], Any]) -> Any:
        """``make(obj)`` the first time ``obj`` is met, the same copy after (shared objects stay shared)."""
        found = moved.get(id(obj))
        if found is None:
            found = moved[id(obj)] = make(obj)
            keep_alive.append(obj)
        return found

    def renamed_meta(meta: Any) -> Any:
        found = dict(meta)
        name = found.get("filename")
        if isinstance(name, str) and name in names:
            found["filename"] = names[name]
        return found

    def meta_of(meta: Any) -> Any:
        return None if meta is None else once(meta, renamed_meta)

    # namedtuples made by position (``_replace`` costs several times more): a posting's metadata is its last field,
    # every directive's its first, a transaction's postings its last
    def new_posting(posting: Any) -> Any:
        if type(posting) is data.Posting:
            return _new_tuple(data.Posting, (*posting[:-1], meta_of(posting[-1])))
        return posting._replace(meta=meta_of(posting.meta))

    def new_entry(entry: Any) -> Any:
        kind = type(entry)
        if kind is data.Transaction and isinstance(entry[-1], list):
            postings = [once(p, new_posting) for p in entry[-1]]
            return _new_tuple(kind, (meta_of(entry[0]), *entry[1:-1], postings))
        if getattr(kind, "_fields", ("",))[0] == "meta":
            return _new_tuple(kind, (meta_of(entry[0]), *entry[1:]))
        return entry._replace(meta=meta_of(entry.meta))  # pragma: no cover - every directive starts with its meta

    def entry_of(entry: Any) -> Any:
        return once(entry, new_entry)

    def options_of(options: dict[str, Any]) -> dict[str, Any]:
        out = dict(options)
        if isinstance(out.get("filename"), str):
            out["filename"] = names.get(str(out["filename"]), out["filename"])
        if "dcontext" in out:  # beancount's display context is updated in place by whoever formats with it
            out["dcontext"] = once(out["dcontext"], copy.deepcopy)
        return out

    main = names.get(loaded.main, loaded.main)
    parses = {
        names.get(name, name): FileParse(
            parse.text,
            [entry_of(e) for e in parse.entries],
            list(parse.errors),
            options_of(parse.options),
            tuple(names.get(n, n) for n in parse.includes),
            parse.problems,
        )
        for name, parse in tree.parses.items()
    }
    files = {names.get(name, name): text for name, text in loaded.files.items()}
    options = options_of(tree.options)
    options["include"] = sorted(names.get(n, n) for n in tree.options.get("include") or [])
    new_tree = ParsedTree(
        list(tree.problems), options, files, os.path.realpath(os.path.dirname(main)), parses, dict(stamps)
    )
    old = loaded.addresses
    addresses = Addresses(
        {(names.get(f, f), line): a for (f, line), a in old.primary.items()},
        {k: list(v) for k, v in old.repeated_ids.items()},
        [(entry_of(t), a) for t, a in old.by_id],
        {k: list(v) for k, v in old._contents.items()},
    )
    state = loaded.memo.get(STATE_MEMO)
    return LoadedLedger(
        text=loaded.text,
        entries=[entry_of(e) for e in loaded.entries],
        errors=list(loaded.errors),
        options=dict(options),
        main=main,
        files=files,
        problems=list(loaded.problems),
        written={(names.get(f, f), line): entry_of(t) for (f, line), t in loaded.written.items()},
        addresses=addresses,
        auto_opened=loaded.auto_opened,
        _by_id={a: entry_of(t) for a, t in loaded._by_id.items()},
        tree=new_tree,
        stamps=dict(stamps),
        memo={} if state is None else {STATE_MEMO: state},
    )


def _renamed(loaded: LoadedLedger, names: dict[str, str], stamps: dict[str, Stamp]) -> LoadedLedger:
    """``loaded`` as the load of its copy: every file name in it (entries' and postings' metadata, keys, options)
    replaced by the copy's, which is all a load of the copy would do differently when the copied texts are the
    originals. The metadata is renamed in place: ``loaded`` is taken over and must not be used after.

    Why: loading the copy again would cost as much as the first load (seconds for a big ledger)."""
    tree = loaded.tree
    assert tree is not None

    for entries in (tree.entries, loaded.entries):
        for entry in entries:
            meta = entry.meta
            if meta and (name := meta.get("filename")) in names:
                meta["filename"] = names[name]
            for posting in getattr(entry, "postings", None) or ():
                meta = posting.meta
                if meta and (name := meta.get("filename")) in names:
                    meta["filename"] = names[name]

    def options_of(options: dict[str, object]) -> dict[str, object]:
        out = dict(options)
        if isinstance(out.get("filename"), str):
            out["filename"] = names.get(str(out["filename"]), out["filename"])
        return out

    main = names[loaded.main]
    options = options_of(tree.options)
    options["include"] = sorted(names.get(n, n) for n in tree.options.get("include") or [])
    parses = {
        names[name]: FileParse(
            parse.text,
            parse.entries,
            parse.errors,
            options_of(parse.options),
            tuple(names.get(n, n) for n in parse.includes),
            parse.problems,
        )
        for name, parse in tree.parses.items()
    }
    files = {names[name]: text for name, text in loaded.files.items()}
    renamed_tree = ParsedTree([], options, files, os.path.realpath(os.path.dirname(main)), parses, dict(stamps))
    old = loaded.addresses
    primary = {(names.get(f, f), line): a for (f, line), a in old.primary.items()}
    addresses = Addresses(primary, old.repeated_ids, old.by_id, old._contents)
    return LoadedLedger(
        text=loaded.text,
        entries=loaded.entries,
        errors=[],
        options=dict(options),
        main=main,
        files=files,
        problems=[],
        written={(names.get(f, f), line): t for (f, line), t in loaded.written.items()},
        addresses=addresses,
        auto_opened=loaded.auto_opened,
        _by_id=loaded._by_id,
        tree=renamed_tree,
        stamps=dict(stamps),
    )
