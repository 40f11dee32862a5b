"""Reading and writing files safely: every input decoded and bounded, every output contained.

Reading: input files are bytes from anywhere. :func:`read_text_file` and :func:`iter_text_lines` are the only
places toolwild turns them into text, so a file that is not UTF-8, or too large to be a real input, becomes a
:class:`~toolwild.errors.DataError` naming the file and line, never a traceback (and a JSONL reader can skip the one
bad line and go on).

Writing: a kill never leaves half a file (write a temporary file beside it, then rename), and a file whose name comes
from input (a session id, an environment id, a model's answer) goes through :func:`safe_filename` and
:func:`contained_path`, so ``../x`` or ``/etc/x`` can never write outside the output folder.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from toolwild.errors import DataError

__all__ = [
    "MAX_FILE_BYTES",
    "MAX_LINE_BYTES",
    "contained_path",
    "decode_text",
    "iter_text_lines",
    "output_file",
    "read_text_file",
    "safe_filename",
    "write_json",
    "write_text_atomic",
]

MAX_LINE_BYTES = 64 * 1024 * 1024
"""Longest JSONL line read (64 MiB): a published session is about 10 KiB, so a longer line is not a record but a
broken or hostile file, and reading it whole could exhaust memory."""
MAX_FILE_BYTES = 512 * 1024 * 1024
"""Largest single-document file read whole (environment, behaviour, config files)."""
_BOM = "\ufeff"
_READ_CHUNK = 1024 * 1024


def decode_text(raw: bytes, *, file: str | Path | None = None, line: int | None = None) -> str:
    """UTF-8 text of ``raw``, or a DataError naming the line (and column) of the first bad byte (``line`` is the
    line ``raw`` starts at in ``file``)."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        start = exc.start
        line_offset = raw.count(b"\n", 0, start)
        column = start - (raw.rfind(b"\n", 0, start) + 1) + 1
        at_line = (line if line is not None else 1) + line_offset
        bad = raw[start : start + 1].hex()
        raise DataError(f"not UTF-8: byte 0x{bad} at column {column} ({exc.reason})", file=file, line=at_line) from None


def read_text_file(path: str | Path, *, max_bytes: int = MAX_FILE_BYTES) -> str:
    """The whole file as text (UTF-8, a leading byte-order mark dropped).

    Raises:
        DataError: the file cannot be read, is larger than ``max_bytes``, or is not UTF-8 (line and column of the
            first bad byte named).
    """
    p = Path(path)
    try:
        with p.open("rb") as handle:
            raw = handle.read(max_bytes + 1)
    except OSError as exc:
        raise DataError(f"cannot read file: {exc.strerror or exc}", file=p) from None
    if len(raw) > max_bytes:
        raise DataError(f"file larger than {max_bytes:,} bytes", file=p)
    text = decode_text(raw, file=p, line=None)
    return text.removeprefix(_BOM)


def _skip_rest_of_line(handle: BinaryIO, limit: int) -> bool:
    """Consume the remainder of an overlong line; True when a newline ended it (False at end of file)."""
    while True:
        chunk = handle.readline(limit)
        if not chunk:
            return False
        if chunk.endswith(b"\n"):
            return True


def iter_text_lines(path: str | Path, *, max_line_bytes: int = MAX_LINE_BYTES) -> Iterator[tuple[int, str | DataError]]:
    """Yield ``(1-based line number, text)`` for every line of a file, decoded one line at a time.

    A line that is not UTF-8 or longer than ``max_line_bytes`` is yielded as a :class:`DataError` in place of its
    text (file and line named), so a caller that skips bad records loses that line only. Lines end at ``\\n``; the
    newline is not part of the text.

    Raises:
        DataError: the file cannot be opened or read at all.
    """
    p = Path(path)
    try:
        handle = p.open("rb")
    except OSError as exc:
        raise DataError(f"cannot read file: {exc.strerror or exc}", file=p) from None
    with handle:
        number = 0
        while True:
            try:
                raw = handle.readline(max_line_bytes + 1)
            except OSError as exc:
                raise DataError(f"cannot read file: {exc.strerror or exc}", file=p, line=number + 1) from None
            if not raw:
                return
            number += 1
            if len(raw) > max_line_bytes and not raw.endswith(b"\n"):
                yield number, DataError(f"line longer than {max_line_bytes:,} bytes", file=p, line=number)
                if not _skip_rest_of_line(handle, _READ_CHUNK):
                    return
                continue
            try:
                text = decode_text(raw.rstrip(b"\n"), file=p, line=number)
            except DataError as exc:
                yield number, exc
                continue
            yield number, text.removeprefix(_BOM) if number == 1 else text


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_MAX_NAME = 120


def safe_filename(name: str, *, max_length: int = _MAX_NAME) -> str:
    """A file name made from ``name`` that is one harmless path component.

    Letters, digits, ``.``, ``_`` and ``-`` are kept, runs of anything else become ``_``, leading dots are removed
    (no ``..``, no hidden files) and the result is at most ``max_length`` characters. Why a digest suffix when the
    name had to change: two different ids (``a/b`` and ``a_b``) must never map to one file, while ids that are
    already safe (the usual case) keep their exact name.
    """
    cleaned = _UNSAFE.sub("_", name).lstrip(".")
    if cleaned == name and 0 < len(name) <= max_length:
        return name
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    stem = cleaned[: max(0, max_length - len(digest) - 1)].rstrip(".")
    return f"{stem}-{digest}" if stem else digest


def contained_path(directory: str | Path, name: str) -> Path:
    """``directory / name``, refused unless it lies inside ``directory`` (checked after resolving ``..`` and links).

    Raises:
        DataError: the path would escape the directory (an absolute name, ``..``, a link pointing out).
    """
    base = Path(directory)
    target = base / name
    root = base.resolve()
    if "\x00" in name or not target.resolve().is_relative_to(root) or target.resolve() == root:
        raise DataError(f"refusing to write {name!r}: it is not a file inside {base}", file=base)
    return target


def output_file(directory: str | Path, stem: str, suffix: str = "") -> Path:
    """The path where an input-named file goes: ``directory / (safe_filename(stem) + suffix)``, contained."""
    return contained_path(directory, safe_filename(stem) + suffix)


def write_text_atomic(path: str | Path, text: str) -> Path:
    """Replace ``path`` with ``text`` in one rename (the temporary file is removed if the write fails)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def write_json(path: str | Path, value: object) -> Path:
    """Indented JSON, written atomically."""
    return write_text_atomic(path, json.dumps(value, ensure_ascii=False, indent=2) + "\n")
