"""Loading a Beancount ledger: its files, the parsed entries, every error, and each transaction's address.

Every write is validated by loading the *new* ledger in full (syntax, booking, plugins, account references, balance
assertions): a ledger that does not load cleanly is never written. Loading is the single place that knows how
beancount reports problems, so error messages look the same whichever tool caused them.

The loader is beancount's own sequence (parse every file, book, run the plugins, validate) with three differences
a tool that writes a person's books needs:

- a file's text can be *given* instead of read (``overrides``): a write to an included file is validated with the
  whole ledger before anything touches the disk;
- it never writes beancount's pickle cache (``loader.load_file`` drops a ``.picklecache`` beside a slow ledger);
- problems name the file, the line and the construct: an unimportable plugin is ``plugin "foo.bar" could not be
  imported (ModuleNotFoundError: ...)`` at the line of its directive, a missing include is ``include "x.beancount":
  no such file`` at its line, never beancount's traceback text.

Includes resolve against the folder of the file that includes them (a text without a file resolves them against
the working directory, as beancount does), and globs are expanded in sorted order, so a copy of a ledger loads
exactly like the original. They must stay in the ledger's folder (the main file's; paths resolved, symlinks
followed) unless the user allows others (``allow_outside_includes``, or ``TOOLWILD_ALLOW_OUTSIDE_INCLUDES=1``): an
include that leaves it is a problem at its line, and the file is never read. Even when allowed, a problem beancount
finds in a file outside the folder is reported by its kind, file and line only, never with its message: beancount
quotes the offending text ("Invalid token: 'root:x:0:0:...'"), and a file that is not the ledger's may be anything.
"""

from __future__ import annotations

import contextlib
import copy
import gc
import glob
import os
import re
import sys
import threading
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from beancount import loader
from beancount.core import data
from beancount.ops import validation
from beancount.parser import booking, parser
from beancount.utils import encryption

from toolwild.envs.domains.ledger.address import ID_KEY, Addresses, Where, assign_addresses, id_number
from toolwild.envs.domains.ledger.files import (
    OUTSIDE_INCLUDES_ENV,
    LedgerError,
    Stamp,
    is_inside,
    outside_includes_allowed,
    read_text,
    split_lines,
    stamp_of,
)

__all__ = [
    "ID_KEY",
    "ID_NUMBERS_MEMO",
    "STRING_SOURCE",
    "FileParse",
    "LedgerError",
    "LoadedLedger",
    "ParsedTree",
    "Problem",
    "gc_paused",
    "load_ledger",
    "load_ledger_file",
    "load_tree",
    "loaded_from",
    "parse_tree",
]

ID_NUMBERS_MEMO = "id_numbers"
"""The key in a ledger's memo of the numbers of its ``txn-NNNN`` ids, ascending (a write keeps them up to date, so
the next id never costs a pass over the ledger, even after the highest one is deleted)."""

STRING_SOURCE = "<string>"
"""The file name beancount gives a ledger loaded from text."""

_CONTENT_ADDRESS = re.compile(r"^\d{4}-\d{2}-\d{2}-[0-9a-f]{6}\Z", re.ASCII)
"""What :func:`~toolwild.envs.domains.ledger.address.content_address` makes: ``DATE-HASH``."""
_PLUGIN_IMPORT = re.compile(r'^Error importing "([^"]+)":(.*)$', re.DOTALL)
_PLUGIN_FAILED = re.compile(r'^Error applying plugin "([^"]+)":(.*)$', re.DOTALL)
_DUPLICATE_FILE = re.compile(r'^Duplicate filename parsed: "([^"]+)"$')


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a ledger, located where beancount (or we) could locate it."""

    message: str
    file: str | None = None
    line: int | None = None
    kind: str = "error"
    """What kind of problem it is (beancount's error class, ``include``, ...): what is said of it when its message
    must not be shown (see :func:`_withheld`)."""

    def describe(self, *, main: str | None = None, root: str | None = None) -> str:
        """``line 12: ...`` in the main file, ``FILE line 12: ...`` elsewhere (FILE relative to ``root``)."""
        if self.file is None or self.file == STRING_SOURCE or (self.file == main and self.line):
            return f"line {self.line}: {self.message}" if self.line else self.message
        name = self.file
        if root is not None and (name == root or name.startswith(root.rstrip(os.sep) + os.sep)):
            name = os.path.relpath(name, root)
        return f"{name} line {self.line}: {self.message}" if self.line else f"{name}: {self.message}"


@dataclass(frozen=True)
class LoadedLedger:
    """A ledger and what beancount made of it: entries, errors, options, its files and the written transactions."""

    text: str
    """The main file's text."""
    entries: list[Any]
    errors: list[str]
    options: dict[str, Any]
    main: str = STRING_SOURCE
    """The main file's absolute path (``<string>`` for a ledger loaded from text)."""
    files: dict[str, str] = field(default_factory=dict)
    """Every file the ledger is made of (absolute path -> text), the main file first."""
    problems: list[Problem] = field(default_factory=list)
    written: dict[Where, data.Transaction] = field(default_factory=dict, repr=False)
    """Each transaction as written (amounts may be elided), by (file, line)."""
    addresses: Addresses = field(default_factory=Addresses, repr=False)
    auto_opened: frozenset[str] = frozenset()
    """Accounts open in the ledger without an ``open`` directive in its files (a plugin such as ``auto_accounts``
    opened them)."""
    _by_id: dict[str, data.Transaction] = field(default_factory=dict, repr=False)
    tree: ParsedTree | None = field(default=None, repr=False, compare=False)
    """What parsing gave, file by file, before booking: a write parses again only what it changed (see
    :mod:`~toolwild.envs.domains.ledger.revise`)."""
    stamps: dict[str, Stamp | None] = field(default_factory=dict, repr=False, compare=False)
    """Each file's stamp as it was read (or written): whether a file changed since costs a ``stat``."""
    memo: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    """What is worked out from this ledger when first asked for (its transactions, its open accounts, its canonical
    form, a file's lines ...) and kept: the ledger never changes, so neither does any of it. A write makes a new
    ledger and may hand it what stays true (:mod:`~toolwild.envs.domains.ledger.revise`)."""

    @property
    def ok(self) -> bool:
        """True when the ledger loads with no errors at all."""
        return not self.errors

    @property
    def transactions(self) -> list[data.Transaction]:
        """The booked transactions, in the loader's (date) order; each one's ``id`` metadata is its address.

        The list is worked out once per ledger and shared: read it, never change it."""
        found = self.memo.get("transactions")
        if found is None:
            found = self.memo["transactions"] = [e for e in self.entries if isinstance(e, data.Transaction)]
        return found

    def lines(self, file: str) -> list[str]:
        """One of the ledger's files as lines (line endings kept), split once per ledger and shared: read only."""
        key = "lines:" + file
        found = self.memo.get(key)
        if found is None:
            found = self.memo[key] = split_lines(self.files[file])
        return found

    def newline(self, file: str) -> str:
        """The line ending most lines of one of the ledger's files use: what new lines in it must use (as
        :func:`~toolwild.envs.domains.ledger.files.newline_of` says; from counts a write keeps up to date)."""
        crlf, lf = self.line_endings(file)
        return "\r\n" if crlf > lf - crlf else "\n"

    def line_endings(self, file: str) -> tuple[int, int]:
        """How many of the file's lines end in ``\\r\\n``, and in ``\\n`` (either way)."""
        key = "newlines:" + file
        found = self.memo.get(key)
        if found is None:
            text = self.files[file]
            found = self.memo[key] = (text.count("\r\n"), text.count("\n"))
        return found

    def resolve(self, key: str) -> str | None:
        """The address a tool argument names (an address, or a content address of a transaction with an id)."""
        key = key.strip()
        if key in self._by_id:
            return key
        if not _CONTENT_ADDRESS.match(key):
            return None  # only a content address can be an alias: no need to hash every transaction to say so
        alias = self.addresses.aliases().get(key)
        return alias if alias in self._by_id else None

    def transaction(self, key: str) -> data.Transaction | None:
        """The booked transaction with this address (or content address), or None."""
        address = self.resolve(key)
        return self._by_id[address] if address is not None else None

    def transaction_ids(self) -> list[str]:
        """The address of every written transaction."""
        return list(self._by_id)

    def written_ids(self) -> list[str]:
        """Every ``id`` metadata value written in the ledger's files (ours and the user's)."""
        return [t.meta[ID_KEY] for t in self.written.values() if isinstance(t.meta.get(ID_KEY), str)]

    def highest_id_number(self) -> int:
        """The highest number of an id of the form ``txn-NNNN`` written in the ledger's files (0: none)."""
        numbers = self.memo.get(ID_NUMBERS_MEMO)
        if numbers is None:
            found = (id_number(t.meta.get(ID_KEY)) for t in self.written.values())
            numbers = self.memo[ID_NUMBERS_MEMO] = sorted(n for n in found if n is not None)
        return numbers[-1] if numbers else 0

    def where(self, address: str) -> Where | None:
        """The file and line where the transaction with this address is written."""
        txn = self._by_id.get(address)
        if txn is None:
            return None
        return (str(txn.meta["filename"]), int(txn.meta["lineno"]))

    def address_at(self, file: str, line: int) -> str | None:
        """The address of the transaction written at this file and line, if one is."""
        return self.addresses.primary.get((file, line))

    def open_accounts(self) -> dict[str, data.Open]:
        """Account name -> its ``open`` directive, for accounts not closed (a new dict each call, worked out once)."""
        found = self.memo.get("open_accounts")
        if found is None:
            found = {e.account: e for e in self.entries if isinstance(e, data.Open)}
            for e in self.entries:
                if isinstance(e, data.Close):
                    found.pop(e.account, None)
            self.memo["open_accounts"] = found
        return dict(found)

    @property
    def operating_currency(self) -> str:
        """The first ``operating_currency`` option, USD if none is set."""
        currencies = self.options.get("operating_currency") or ["USD"]
        return str(currencies[0])

    @property
    def root(self) -> str | None:
        """The main file's folder (None for a ledger loaded from text)."""
        return os.path.dirname(self.main) if self.main != STRING_SOURCE else None


# ---------------------------------------------------------------------------------------------------- parsing
@dataclass(frozen=True)
class FileParse:
    """What parsing one file gives: beancount's entries for it (sorted as its parser sorts them), errors and
    options, and what its ``include``s lead to."""

    text: str
    entries: list[Any]
    errors: list[Any]
    options: dict[str, Any]
    """The file's own options, as its parser left them (the ledger's options aggregate them)."""
    includes: tuple[str, ...] = ()
    """The files its ``include``s name, resolved and allowed, in the order they are read."""
    problems: tuple[Problem, ...] = ()
    """Its includes that could not be followed (a missing file, one outside the folder), before withholding."""


@dataclass
class ParsedTree:
    """What parsing a ledger's files gives, before booking."""

    problems: list[Problem]
    options: dict[str, Any]
    files: dict[str, str]
    root: str = ""
    """The ledger's folder, resolved: the main file's (the working directory for a text)."""
    parses: dict[str, FileParse] = field(default_factory=dict)
    """Each file's parse, in the order the files are read (the main file first)."""
    stamps: dict[str, Stamp | None] = field(default_factory=dict)
    """The stamp of each file read from disk, taken before it was read."""

    @property
    def entries(self) -> list[Any]:
        """Every file's entries, file after file (beancount's order before its loader sorts them)."""
        return [entry for parse in self.parses.values() for entry in parse.entries]

    @property
    def errors(self) -> list[Any]:
        """beancount's own parse errors (booking and plugins take them as they come)."""
        return [error for parse in self.parses.values() for error in parse.errors]


def _line_of(text: str, directive: str, value: str) -> int | None:
    """The 1-based line of ``directive "value"`` in ``text`` (e.g. ``plugin "foo.bar"``), if written there."""
    pattern = re.compile(rf'^{directive}[ \t]+"{re.escape(value)}"', re.MULTILINE)
    match = pattern.search(text)
    return text.count("\n", 0, match.start()) + 1 if match else None


def _locate(files: Mapping[str, str], directive: str, value: str) -> tuple[str | None, int | None]:
    for name, text in files.items():
        line = _line_of(text, directive, value)
        if line is not None:
            return name, line
    return None, None


def _outside_problem(pattern: str, outside: list[str], root: str, *, file: str, line: int | None) -> Problem:
    """An include that leaves the ledger's folder, named with where it leads (a link is named with its target)."""
    first = outside[0]
    real = os.path.realpath(first)
    where = first if real == first else f"{first} (a link to {real})"
    more = f" and {len(outside) - 1} more file(s)" if len(outside) > 1 else ""
    return Problem(
        f'include "{pattern}": {where}{more} is outside the ledger\'s folder {root}, so it was not read (a ledger '
        f"may include only files in its folder; --allow-outside-includes or {OUTSIDE_INCLUDES_ENV}=1 allows others)",
        file=file,
        line=line,
        kind="include",
    )


def _withheld(problem: Problem, root: str, main: str) -> Problem:
    """The problem, or, when it is about a file outside the ledger's folder, its kind, file and line without its
    message: beancount's messages quote the offending text, and a file outside the folder may be anything (a
    password file reached by an allowed include, a link). The main file is the user's own wherever it lives."""
    if problem.file in (None, STRING_SOURCE, main) or root == "" or is_inside(str(problem.file), root):
        return problem
    return Problem(
        f"a problem of kind {problem.kind}; its message is not shown because this file is outside the ledger's "
        f"folder {root}",
        file=problem.file,
        line=problem.line,
        kind=problem.kind,
    )


def _parse_file(name: str, text: str, *, cwd: str, root: str, confined: bool) -> FileParse:
    """Parse one file and resolve its includes (against its folder; a text's against ``cwd``)."""
    parsed, parse_errors, file_options = parser.parse_string(text, report_filename=name)
    here = cwd if name == STRING_SOURCE else os.path.dirname(name)
    problems: list[Problem] = []
    queued: list[str] = []
    for pattern in file_options["include"]:
        search = pattern if os.path.isabs(pattern) else os.path.join(here, pattern)
        matched = sorted(glob.glob(search, recursive=True))
        if not matched:
            line = _line_of(text, "include", pattern)
            problems.append(
                Problem(f'include "{pattern}": no such file ({search})', file=name, line=line, kind="include")
            )
        found = [os.path.normpath(m if os.path.isabs(m) else os.path.join(here, m)) for m in matched]
        outside = [f for f in found if confined and not is_inside(f, root)]
        if outside:
            line = _line_of(text, "include", pattern)
            problems.append(_outside_problem(pattern, outside, root, file=name, line=line))
        queued.extend(f for f in found if f not in outside)
    return FileParse(text, parsed, parse_errors, file_options, tuple(queued), tuple(problems))


def parse_tree(
    main: str,
    main_text: str | None,
    *,
    cwd: str,
    overrides: Mapping[str, str] | None = None,
    allow_outside_includes: bool | None = None,
    reuse: Mapping[str, FileParse] | None = None,
) -> ParsedTree:
    """Parse a ledger's main file and everything it includes, recursively (no booking, no plugins).

    Args:
        main: the main file's absolute path, or ``<string>`` for a text.
        main_text: the main file's text (None: read it).
        cwd: where the main file's relative includes resolve (its folder; the working directory for a text).
        overrides: texts to use instead of reading these files (absolute paths).
        allow_outside_includes: follow includes that leave the ledger's folder (None: as
            :func:`~toolwild.envs.domains.ledger.files.outside_includes_allowed` says); otherwise each is a problem
            at its line and is not read.
        reuse: parses already made of some files: one whose text is the file's text now is used as it is (a write
            parses again only the file it changed).

    Raises:
        LedgerError: a file that cannot be read or is not UTF-8.
    """
    overrides = overrides or {}
    reuse = reuse or {}
    root = os.path.realpath(cwd if main == STRING_SOURCE else os.path.dirname(main))
    confined = not outside_includes_allowed(allow_outside_includes)
    stack: list[tuple[str, str | None]] = [(main, main_text)]
    seen: set[str] = set()
    files: dict[str, str] = {}
    parses: dict[str, FileParse] = {}
    stamps: dict[str, Stamp | None] = {}
    problems: list[Problem] = []
    while stack:
        name, text = stack.pop(0)
        if name != STRING_SOURCE:
            if name in seen:
                problems.append(Problem(f'file "{name}" is included more than once', kind="include"))
                continue
            seen.add(name)
            if encryption.is_encrypted_file(name):
                problems.append(Problem("encrypted ledgers (.gpg, .asc) are not supported", file=name, kind="file"))
                continue
            if text is None:
                if name in overrides:
                    text = overrides[name]
                else:
                    stamps[name] = stamp_of(name)  # before reading: a change after it makes the stamp stale
                    text = read_text(Path(name))
        assert text is not None
        files[name] = text
        known = reuse.get(name)
        parse = known if known is not None and known.text == text else None
        if parse is None:
            parse = _parse_file(name, text, cwd=cwd, root=root, confined=confined)
        parses[name] = parse
        problems.extend(parse.problems)
        stack.extend((f, None) for f in parse.includes)
    if not parses:  # pragma: no cover - the main source is always parsed
        raise LedgerError(f"{main}: nothing to parse")
    first, *others = parses.values()
    options = dict(first.options)
    options["include"] = sorted(seen)
    if others:  # beancount's aggregation updates the display context in place: the file's own stays as parsed
        options["dcontext"] = copy.deepcopy(first.options["dcontext"])
    options = loader.aggregate_options_map(options, [p.options for p in others])
    problems = [_withheld(p, root, main) for p in problems]
    return ParsedTree(problems=problems, options=options, files=files, root=root, parses=parses, stamps=stamps)


# ---------------------------------------------------------------------------------------------------- errors
def _last_line(traceback_text: str) -> str:
    lines = [line.strip() for line in traceback_text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "no detail"


def _problem(error: Any, files: Mapping[str, str]) -> Problem:
    """A beancount error as a one-line problem at a file and line; a plugin's traceback becomes its last line."""
    source = getattr(error, "source", None) or {}
    file = source.get("filename") if isinstance(source, dict) else None
    line = source.get("lineno") if isinstance(source, dict) else None
    message = str(getattr(error, "message", error)).strip()
    kind = type(error).__name__
    for pattern, what in ((_PLUGIN_IMPORT, "could not be imported"), (_PLUGIN_FAILED, "failed")):
        match = pattern.match(message)
        if match:
            file, line = _locate(files, "plugin", match.group(1))
            text = f'plugin "{match.group(1)}" {what} ({_last_line(match.group(2))})'
            return Problem(text, file=file, line=line, kind="plugin")
    match = _DUPLICATE_FILE.match(message)
    if match:
        return Problem(f'file "{match.group(1)}" is included more than once', kind="include")
    if file == "<load>" or not isinstance(file, str):
        file, line = None, None
    line = line if isinstance(line, int) and line else None
    return Problem(re.sub(r"\s*\n\s*", " ", message), file=file, line=line, kind=kind)


# ---------------------------------------------------------------------------------------------------- loading
def _book_and_check(tree: ParsedTree) -> tuple[list[Any], list[Any]]:
    """beancount's loader after parsing: sort, book, run the plugins, validate."""
    entries = sorted(tree.entries, key=data.entry_sortkey)
    entries, booking_errors = booking.book(entries, tree.options)
    errors = [*tree.errors, *booking_errors]
    pythonpath = tree.options.get("pythonpath") or []
    saved = list(sys.path)
    try:
        if pythonpath:
            sys.path[0:0] = pythonpath
        entries, errors = loader.run_transformations(entries, errors, tree.options, None)
    finally:
        if pythonpath:
            sys.path[:] = saved
    errors.extend(validation.validate(entries, tree.options, None, None))
    return entries, errors


def _with_addresses(entries: list[Any], addresses: Addresses) -> tuple[list[Any], dict[str, data.Transaction]]:
    """Stamp each booked transaction with its address as ``id`` metadata (what the tools and BQL's
    ``entry_meta('id')`` show). A transaction a plugin made from another one (same file and line) is not addressed:
    only what is written can be edited."""
    keys = Counter((e.meta.get("filename"), e.meta.get("lineno")) for e in entries if isinstance(e, data.Transaction))
    by_id: dict[str, data.Transaction] = {}
    out = list(entries)
    for i, entry in enumerate(out):
        if not isinstance(entry, data.Transaction):
            continue
        key = (entry.meta.get("filename"), entry.meta.get("lineno"))
        address = addresses.primary.get(key)  # type: ignore[arg-type]
        if address is None or keys[key] != 1:
            continue
        if entry.meta.get(ID_KEY) != address:
            entry = entry._replace(meta={**entry.meta, ID_KEY: address})
            out[i] = entry
        by_id[address] = entry
    return out, by_id


_GC_LOCK = threading.Lock()
_gc_holders = 0
_gc_restore = False
_GC_COLLECT_AFTER = 100_000
"""Containers made during a pause above which the pause ends with a full collection (a big ledger); below it the
collector catches up on its own, at a cost in proportion."""


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cycle collector off while a ledger is parsed and booked (and, after a big one, one full collection).

    Why: a load makes hundreds of thousands of containers that all live on (50,000 transactions: about 400,000),
    and with the collector on, every few thousand of them it walks the older ones again; that walking is about a
    seventh of a load. Paused, they are walked once: after a big load at once, so they land in the oldest
    generation and the calls that follow do not pay for the walk; after a small one (a suite's 150 transactions)
    by the collector in its own time, since a full collection would walk the whole process for little. Loads in
    several threads share the pause: the collector comes back (if it was on) when the last of them ends.
    """
    global _gc_holders, _gc_restore
    with _GC_LOCK:
        if _gc_holders == 0:
            _gc_restore = gc.isenabled()
            gc.disable()
        _gc_holders += 1
    try:
        yield
    finally:
        with _GC_LOCK:
            _gc_holders -= 1
            restore = _gc_holders == 0 and _gc_restore
            if restore:
                gc.enable()
        if restore and gc.get_count()[0] > _GC_COLLECT_AFTER:
            gc.collect()


def loaded_from(tree: ParsedTree, main: str) -> LoadedLedger:
    """The ledger a parsed tree makes: booked, run through the plugins, validated, its transactions addressed."""
    with gc_paused():
        written_list = [e for e in tree.entries if isinstance(e, data.Transaction)]
        written_open = {e.account for e in tree.entries if isinstance(e, data.Open)}
        addresses = assign_addresses(written_list)
        entries, errors = _book_and_check(tree)
        entries, by_id = _with_addresses(entries, addresses)
    problems = [*tree.problems, *(_withheld(_problem(e, tree.files), tree.root, main) for e in errors)]
    opened = {e.account for e in entries if isinstance(e, data.Open)}
    root = os.path.dirname(main) if main != STRING_SOURCE else None
    return LoadedLedger(
        text=tree.files[main],
        entries=entries,
        errors=[p.describe(main=main, root=root) for p in problems],
        options=dict(tree.options),
        main=main,
        files=tree.files,
        problems=problems,
        written={(str(t.meta["filename"]), int(t.meta["lineno"])): t for t in written_list},
        addresses=addresses,
        auto_opened=frozenset(opened - written_open),
        _by_id=by_id,
        tree=tree,
        stamps=dict(tree.stamps),
    )


def _load(
    main: str,
    main_text: str | None,
    *,
    cwd: str,
    overrides: Mapping[str, str] | None,
    allow_outside_includes: bool | None,
) -> LoadedLedger:
    with gc_paused():
        tree = parse_tree(main, main_text, cwd=cwd, overrides=overrides, allow_outside_includes=allow_outside_includes)
        return loaded_from(tree, main)


def load_ledger(text: str, *, allow_outside_includes: bool | None = None) -> LoadedLedger:
    """Load a ledger given as text (``include``s resolve against the working directory, as in beancount, and must
    stay in it unless ``allow_outside_includes``; see :func:`parse_tree`).

    Args:
        text: the whole ledger file.
        allow_outside_includes: follow includes that leave the working directory (None: the environment decides).
    """
    return _load(STRING_SOURCE, text, cwd=os.getcwd(), overrides=None, allow_outside_includes=allow_outside_includes)


def load_tree(
    main: Path, overrides: Mapping[str, str] | None = None, *, allow_outside_includes: bool | None = None
) -> LoadedLedger:
    """Load the ledger whose main file is ``main``, reading its files (or the given ``overrides``) as they are now.

    Problems with the ledger are in the result's ``errors``; only an unreadable file raises. An include that leaves
    the main file's folder is such a problem unless ``allow_outside_includes`` (see :func:`parse_tree`).

    Raises:
        LedgerError: a file that cannot be read or is not UTF-8.
    """
    name = os.path.normpath(os.path.abspath(main))
    return _load(
        name,
        overrides.get(name) if overrides else None,
        cwd=os.path.dirname(name),
        overrides=overrides,
        allow_outside_includes=allow_outside_includes,
    )


def load_ledger_file(path: Path, *, allow_outside_includes: bool | None = None) -> LoadedLedger:
    """Load a user's ledger file and the files it includes; it must load cleanly. Its includes must stay in its
    folder unless ``allow_outside_includes`` (None: ``TOOLWILD_ALLOW_OUTSIDE_INCLUDES`` decides).

    Raises:
        LedgerError: (a ``ConfigError``) naming the file, the line and the construct of every problem (at most 5
            shown), e.g. ``books.beancount line 3: plugin "foo.bar" could not be imported (ModuleNotFoundError:
            No module named 'foo')``.
    """
    path = Path(path).expanduser()
    if not path.is_file():
        raise LedgerError(f"ledger {path}: no such file")
    loaded = load_tree(path, allow_outside_includes=allow_outside_includes)
    if not loaded.ok:
        shown = [p.describe(root=loaded.root) for p in loaded.problems[:5]]
        more = f"; and {len(loaded.problems) - 5} more" if len(loaded.problems) > 5 else ""
        raise LedgerError(
            f"ledger {path} does not load cleanly ({len(loaded.problems)} error(s)): " + "; ".join(shown) + more
        )
    return loaded
