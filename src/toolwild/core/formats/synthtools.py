"""SynthTools ``tool_json/*.json`` specs -> `Tool`, plus a lint over their parameter schemas.

SynthTools publishes one JSON file per generated tool::

    {"tool_name": "Bibliography Validator", "tool_description": "...",
     "parameters": {"bibliography_entries": {"type": "array", "required": true, "items": {...}, ...}, ...},
     "error_messages": ["Empty bibliography: ...", ...], "usage": "...",
     "output_details": {"validation_passed": {"type": "boolean", "description": "..."}, ...}}

Its parameter map is *almost* JSON Schema: each parameter carries its own ``required`` flag instead of the
object listing required names. The import moves that flag into a ``required`` list and keeps every other key
as a JSON Schema keyword, exactly as published. Nothing is repaired on import (a ``"default": "None"`` stays a
string): the data is what it is, and :func:`lint_tool` reports what is wrong with it, so a caller can decide
what to fix and can count the defects against the figures the fixture README states.

Names repeat across SynthTools fields (one spec name can occur over a dozen times), so every imported tool
also carries the file stem (``extra["source_id"]``, the ``id`` of ``tool_list.json``) as its unique key.
"""

from __future__ import annotations

import json
import os
import re
import tarfile
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path, PurePosixPath
from typing import Any, NamedTuple

from pydantic import ValidationError

from toolwild.core.files import MAX_FILE_BYTES
from toolwild.core.jsonl import parse_json
from toolwild.core.tool import Contract, Tool
from toolwild.errors import DataError

__all__ = [
    "LintCode",
    "LintFinding",
    "SkippedFile",
    "SynthToolsLoad",
    "lint_tool",
    "lint_tools",
    "load_synthtools_dir",
    "load_synthtools_tool",
    "synthtools_identifier",
    "tool_from_synthtools",
    "write_tools_jsonl",
]

SOURCE = "synthtools"
"""Value of ``Tool.extra["source"]`` for tools imported here."""

_KNOWN_KEYS = frozenset({"tool_name", "tool_description", "parameters", "error_messages", "usage", "output_details"})
_STEM_RE = re.compile(r"(?P<field>.+)_tool_spec_(?P<spec>\d+)__(?P<name>.+)")
_JSON_SCHEMA_TYPES = frozenset({"string", "number", "integer", "boolean", "array", "object", "null"})
_TOOL_JSON_DIR = "tool_json"

ProgressCallback = Callable[[int, int], None]
"""Called as ``progress(done, total)`` after each file, so a CLI can draw a progress bar."""


# --------------------------------------------------------------------------------------------------- import


def synthtools_identifier(name: str) -> str:
    """Return the identifier SynthTools derives from a published tool name.

    Why: published names contain spaces and punctuation (``"A/B Test Manager"``), which function-calling APIs
    reject. SynthTools itself names files and ``tool_list.json`` rows with spaces turned into ``_`` and any
    other character outside ``[A-Za-z0-9_-]`` dropped; using the same rule keeps our identifiers joinable with
    theirs.

    Args:
        name: The published ``tool_name``.

    Returns:
        The identifier, e.g. ``"AB_Test_Manager"``.
    """
    return re.sub(r"[^A-Za-z0-9_-]", "", name.replace(" ", "_"))


def _type_name(value: Any) -> str:
    """JSON-ish name of a Python value's type, for error messages that read like the input format."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _convert_parameters(params: Any) -> dict[str, Any]:
    """Turn SynthTools' per-parameter ``required`` flags into a JSON Schema object.

    Raises:
        DataError: ``parameters`` is not a map, a parameter is not an object, or ``required`` not a boolean.
    """
    if not isinstance(params, dict):
        raise DataError(f"expected an object (name -> parameter), got {_type_name(params)}", field="parameters")
    properties: dict[str, Any] = {}
    required: list[str] = []
    for pname, spec in params.items():
        field = f"parameters.{pname}"
        if not isinstance(spec, dict):
            raise DataError(f"parameter must be an object, got {_type_name(spec)}", field=field)
        flag = spec.get("required", False)
        if not isinstance(flag, bool):
            raise DataError(f"'required' must be true or false, got {flag!r}", field=f"{field}.required")
        if flag:
            required.append(pname)
        properties[pname] = {k: v for k, v in spec.items() if k != "required"}
    return {"type": "object", "properties": properties, "required": required}


def _returns_schema(outputs: dict[str, Any]) -> dict[str, Any] | None:
    """Map ``output_details`` to a JSON Schema of the result object, or ``None`` if it is not schema-like.

    Why the caution: ``output_details`` is a name -> {type, description, items?} map in every published file,
    which is a property map; but nothing in SynthTools validates it, so anything else is left to ``extra``
    rather than guessed at. No ``required`` list is emitted: the source never says which outputs are always
    present.
    """
    if not outputs:
        return None
    for spec in outputs.values():
        if not isinstance(spec, dict) or not isinstance(spec.get("type"), str):
            return None
    return {"type": "object", "properties": {name: dict(spec) for name, spec in outputs.items()}}


def tool_from_synthtools(data: Any, *, source_id: str | None = None) -> Tool:
    """Convert one parsed SynthTools tool spec into a `Tool`.

    Args:
        data: The decoded JSON of one ``tool_json/*.json`` file.
        source_id: The file stem (``<field>_tool_spec_<n>__<Name>``), stored in ``extra`` as the tool's unique
            key; its field and spec number are parsed out of it when it has that shape.

    Returns:
        The tool. ``extra`` holds ``source``, ``identifier``, ``usage``, the raw ``output_details`` and, when
        known, ``source_id``/``field``/``spec``; unknown top-level keys go to ``extra["unmodelled"]``.

    Raises:
        DataError: A required key is missing or a key has the wrong type; ``field`` names it. ``file`` is not
            set (the caller knows it; see :func:`load_synthtools_tool`).
    """
    if not isinstance(data, dict):
        raise DataError(f"a tool spec must be a JSON object, got {_type_name(data)}")
    if "tool_name" not in data:
        raise DataError("missing field", field="tool_name")
    name = data["tool_name"]
    if not isinstance(name, str) or not name.strip():
        raise DataError(f"expected a non-empty string, got {name!r}", field="tool_name")
    description = data.get("tool_description", "")
    if not isinstance(description, str):
        raise DataError(f"expected a string, got {_type_name(description)}", field="tool_description")
    if "parameters" not in data:
        raise DataError("missing field", field="parameters")
    parameters = _convert_parameters(data["parameters"])

    errors = data.get("error_messages", [])
    if not isinstance(errors, list):
        raise DataError(f"expected an array of strings, got {_type_name(errors)}", field="error_messages")
    for i, message in enumerate(errors):
        if not isinstance(message, str):
            raise DataError(f"expected a string, got {_type_name(message)}", field=f"error_messages[{i}]")
    usage = data.get("usage")
    if usage is not None and not isinstance(usage, str):
        raise DataError(f"expected a string, got {_type_name(usage)}", field="usage")
    outputs = data.get("output_details")
    if outputs is not None and not isinstance(outputs, dict):
        raise DataError(f"expected an object (name -> output), got {_type_name(outputs)}", field="output_details")

    extra: dict[str, Any] = {"source": SOURCE, "identifier": synthtools_identifier(name)}
    if source_id is not None:
        extra["source_id"] = source_id
        match = _STEM_RE.fullmatch(source_id)
        if match:
            extra["field"] = match["field"]
            extra["spec"] = int(match["spec"])
    if "usage" in data:
        extra["usage"] = usage
    if "output_details" in data:
        extra["output_details"] = outputs
    unmodelled = {k: v for k, v in data.items() if k not in _KNOWN_KEYS}
    if unmodelled:
        extra["unmodelled"] = unmodelled

    try:
        return Tool(
            name=name,
            description=description,
            parameters=parameters,
            returns=_returns_schema(outputs) if outputs else None,
            contract=Contract(error_modes=list(errors)) if errors else None,
            extra=extra,
        )
    except ValidationError as exc:  # defensive: the checks above should make this unreachable
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"]) or None
        raise DataError(first["msg"], field=loc) from None


def _parse_bytes(raw: bytes, *, file: str, source_id: str) -> Tool:
    """Decode and convert one file's bytes; any `DataError` gets ``file`` (and the JSON error line)."""
    if len(raw) > MAX_FILE_BYTES:
        raise DataError(f"file larger than {MAX_FILE_BYTES:,} bytes", file=file)
    data = parse_json(raw.removeprefix(b"\xef\xbb\xbf"), file=file)
    try:
        return tool_from_synthtools(data, source_id=source_id)
    except DataError as exc:
        raise exc.located(file=file) from None


def load_synthtools_tool(path: str | Path) -> Tool:
    """Load one SynthTools ``tool_json/*.json`` file.

    Args:
        path: The file; its stem becomes ``extra["source_id"]``.

    Returns:
        The converted tool.

    Raises:
        DataError: The file cannot be read, is not JSON, or is not a valid tool spec; names file and field.
    """
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise DataError(f"cannot read: {exc.strerror or exc}", file=p) from None
    return _parse_bytes(raw, file=str(p), source_id=p.stem)


# ---------------------------------------------------------------------------------------------- directory


@dataclass(frozen=True, slots=True)
class SkippedFile:
    """A file left out by ``load_synthtools_dir(..., skip_invalid=True)``, and why."""

    file: str
    error: DataError

    @property
    def reason(self) -> str:
        """The error without the file name (which is already in ``file``), for a compact report."""
        return DataError(self.error.message, line=self.error.line, field=self.error.field).__str__()


class SynthToolsLoad(NamedTuple):
    """What :func:`load_synthtools_dir` returns; unpacks as ``tools, findings, skipped``."""

    tools: list[Tool]
    findings: list[LintFinding]
    skipped: list[SkippedFile]


def _is_tool_json(path: PurePosixPath) -> bool:
    """Whether an archive member is a tool spec: only ``tool_json/`` holds them (``tool_meta/`` is JSON too)."""
    return path.suffix == ".json" and path.parent.name == _TOOL_JSON_DIR


def _iter_archive(archive: Path) -> tuple[int, Iterator[tuple[str, str, bytes]]]:
    """Index a tarball's ``tool_json/*.json`` members; return their count and a reader in sorted order."""
    try:
        tar = tarfile.open(archive, "r:*")
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise DataError(f"cannot read archive: {exc}", file=archive) from None
    try:
        members = sorted(
            (m for m in tar.getmembers() if m.isfile() and _is_tool_json(PurePosixPath(m.name))),
            key=lambda m: m.name,
        )
    except (tarfile.TarError, EOFError, OSError) as exc:
        tar.close()
        raise DataError(f"cannot read archive: {exc}", file=archive) from None
    if not members:
        tar.close()
        raise DataError(f"no {_TOOL_JSON_DIR}/*.json members in archive", file=archive)

    def read() -> Iterator[tuple[str, str, bytes]]:
        with tar:
            for member in members:
                label = f"{archive}:{member.name}"
                try:
                    handle = tar.extractfile(member)
                    raw = handle.read() if handle is not None else b""
                except (tarfile.TarError, EOFError, OSError) as exc:
                    raise DataError(f"cannot read archive member: {exc}", file=label) from None
                yield label, PurePosixPath(member.name).stem, raw

    return len(members), read()


def _iter_directory(directory: Path) -> tuple[int, Iterator[tuple[str, str, bytes]]]:
    """List ``tool_json/*.json`` under ``tool_content/`` (or in ``tool_json/`` itself), sorted by name."""
    inner = directory / _TOOL_JSON_DIR
    base = inner if inner.is_dir() else directory
    files = sorted(p for p in base.glob("*.json") if p.is_file())
    if not files:
        raise DataError(f"no *.json files in {base} (expected tool_content/ or tool_content/tool_json/)", file=base)

    def read() -> Iterator[tuple[str, str, bytes]]:
        for path in files:
            try:
                raw = path.read_bytes()
            except OSError as exc:
                raise DataError(f"cannot read: {exc.strerror or exc}", file=path) from None
            yield str(path), path.stem, raw

    return len(files), read()


def load_synthtools_dir(
    source: str | Path,
    *,
    skip_invalid: bool = False,
    progress: ProgressCallback | None = None,
) -> SynthToolsLoad:
    """Load every SynthTools tool spec of a release, lint them, and report what was skipped.

    Args:
        source: The unpacked ``tool_content/`` directory, its ``tool_json/`` directory, or the ``.tar.gz``
            (members are read straight from the archive, nothing is extracted).
        skip_invalid: If true, a bad file is recorded in ``skipped`` and loading goes on; if false, the first
            bad file raises. Problems with ``source`` itself (missing, unreadable archive, no specs) always
            raise.
        progress: Optional ``progress(done, total)`` callback, called before the first file and after each.

    Returns:
        ``(tools, findings, skipped)``: tools in sorted file order, the lint findings over all of them
        (see :func:`lint_tool`), and the skipped files.

    Raises:
        DataError: ``source`` is unusable, or (unless ``skip_invalid``) a file is malformed.
    """
    path = Path(source)
    if path.is_dir():
        total, entries = _iter_directory(path)
    elif path.is_file():
        total, entries = _iter_archive(path)
    else:
        raise DataError("no such file or directory", file=path)

    tools: list[Tool] = []
    skipped: list[SkippedFile] = []
    if progress is not None:
        progress(0, total)
    for done, (label, stem, raw) in enumerate(entries, start=1):
        try:
            tools.append(_parse_bytes(raw, file=label, source_id=stem))
        except DataError as exc:
            if not skip_invalid:
                raise
            skipped.append(SkippedFile(file=label, error=exc))
        if progress is not None:
            progress(done, total)
    return SynthToolsLoad(tools=tools, findings=lint_tools(tools), skipped=skipped)


def write_tools_jsonl(tools: Iterable[Tool], path: str | Path) -> int:
    """Write tools as JSONL, one ``Tool.model_dump_json()`` per line.

    Why atomic: the file is written next to its destination and renamed into place, so an interrupted run
    never leaves a truncated tool list that a later stage would load without noticing.

    Args:
        tools: The tools, written in the given order.
        path: Destination file; its parent directory must exist.

    Returns:
        The number of lines written.
    """
    dest = Path(path)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
    count = 0
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            for tool in tools:
                handle.write(tool.model_dump_json())
                handle.write("\n")
                count += 1
        os.replace(tmp_name, dest)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    return count


# ------------------------------------------------------------------------------------------------------ lint


class LintCode(StrEnum):
    """Kinds of defect :func:`lint_tool` reports in a parameter schema."""

    DEFAULT_NONE_STRING = "default-none-string"
    """``"default": "None"``: a Python ``None`` printed into the schema; an agent copying it sends "None"."""
    DEFAULT_NULL = "default-null"
    """``"default": null`` on a non-nullable type: the common "no default" idiom, but not a valid value."""
    DEFAULT_TYPE_MISMATCH = "default-type-mismatch"
    """A default of another type than declared (``"true"`` for a boolean, ``"[3, 7]"`` for an array)."""
    NESTED_ARRAY = "nested-array"
    """An array whose items are arrays: legal, but generators and simulators handle 2-D data poorly."""
    ARRAY_WITHOUT_ITEMS = "array-without-items"
    """An array with no ``items`` schema, so its elements cannot be validated."""
    REQUIRED_NOT_IN_PROPERTIES = "required-not-in-properties"
    """A name in ``required`` that no property declares: no call can ever satisfy the schema."""
    UNKNOWN_TYPE = "unknown-type"
    """A ``type`` that is missing or not a JSON Schema type name (e.g. ``"float"``)."""
    FORMAT_ON_NON_STRING = "format-on-non-string"
    """A ``format`` on a non-string type, where JSON Schema ignores it (it belonged on ``items``)."""


@dataclass(frozen=True, slots=True)
class LintFinding:
    """One defect in one tool's parameter schema.

    Attributes:
        tool: The tool's name (not unique in SynthTools; see ``source``).
        parameter: Path of the schema inside the parameters object: ``name``, ``name[]`` for array items,
            ``name.sub`` for object properties; empty for the arguments object itself.
        code: What is wrong.
        message: A human-readable explanation with the offending value.
        source: The tool's unique source id (``extra["source_id"]``) when it has one.
    """

    tool: str
    parameter: str
    code: LintCode
    message: str
    source: str | None = None


_PY_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "boolean": (bool,),
    "integer": (int, float),
    "number": (int, float),
    "array": (list,),
    "object": (dict,),
}


def _declared_types(schema: Mapping[str, Any]) -> list[str] | None:
    """The type names a schema declares (``type`` may be a name or a list), or ``None`` if unusable."""
    declared = schema.get("type")
    if isinstance(declared, str):
        return [declared]
    if isinstance(declared, list) and declared and all(isinstance(t, str) for t in declared):
        return list(declared)
    return None


def _value_has_type(value: Any, type_name: str) -> bool:
    """JSON Schema type test: booleans are not numbers, and ``3.0`` is an integer (draft 6 and later)."""
    if type_name == "null":
        return value is None
    kinds = _PY_TYPES.get(type_name)
    if kinds is None or (isinstance(value, bool) and bool not in kinds):
        return False
    if not isinstance(value, kinds):
        return False
    return type_name != "integer" or isinstance(value, int) or float(value).is_integer()


def _lint_schema(
    schema: Any,
    path: str,
    emit: Callable[[str, LintCode, str], None],
    *,
    covered: frozenset[LintCode] = frozenset(),
) -> None:
    """Check one (sub)schema and recurse into ``items`` and ``properties``.

    Args:
        schema: The schema to check.
        path: Its path, for findings.
        emit: Receives each finding.
        covered: Codes not to report at this node because its parent's finding already covers them.
    """
    if covered:
        outer = emit

        def emit(where: str, code: LintCode, message: str) -> None:
            if where != path or code not in covered:
                outer(where, code, message)

    if not isinstance(schema, Mapping):
        emit(path, LintCode.UNKNOWN_TYPE, f"schema is not an object: {schema!r}")
        return
    types = _declared_types(schema)
    if types is None:
        if "type" in schema:
            emit(path, LintCode.UNKNOWN_TYPE, f"type is not a name or list of names: {schema['type']!r}")
        elif not any(k in schema for k in ("anyOf", "oneOf", "allOf", "$ref", "enum", "const")):
            emit(path, LintCode.UNKNOWN_TYPE, "declares no type")
        known: list[str] = []
    else:
        unknown = [t for t in types if t not in _JSON_SCHEMA_TYPES]
        for t in unknown:
            emit(path, LintCode.UNKNOWN_TYPE, f"{t!r} is not a JSON Schema type")
        known = [t for t in types if t in _JSON_SCHEMA_TYPES]

    if "default" in schema and known and len(known) == len(types or []):
        default = schema["default"]
        if default == "None":
            emit(
                path,
                LintCode.DEFAULT_NONE_STRING,
                f"default is the string 'None' (declared {'/'.join(known)})",
            )
        elif not any(_value_has_type(default, t) for t in known):
            code = LintCode.DEFAULT_NULL if default is None else LintCode.DEFAULT_TYPE_MISMATCH
            emit(path, code, f"default {json.dumps(default)} is not of type {'/'.join(known)}")

    if "format" in schema and known and "string" not in known:
        emit(path, LintCode.FORMAT_ON_NON_STRING, f"format {schema['format']!r} on type {'/'.join(known)}")

    if "array" in known:
        items = schema.get("items")
        if items is None:
            emit(path, LintCode.ARRAY_WITHOUT_ITEMS, "array has no 'items' schema")
        elif isinstance(items, Mapping) and "array" in (_declared_types(items) or []):
            inner = "" if "items" in items else "; the inner arrays declare no items either"
            emit(path, LintCode.NESTED_ARRAY, f"items are arrays (a 2-D array){inner}")
            # A missing inner ``items`` is part of this finding, not a second one for the same parameter.
            _lint_schema(items, f"{path}[]", emit, covered=frozenset({LintCode.ARRAY_WITHOUT_ITEMS}))
        elif isinstance(items, list):  # tuple validation (JSON Schema drafts before 2020-12)
            for i, sub in enumerate(items):
                _lint_schema(sub, f"{path}[{i}]", emit)
        else:
            _lint_schema(items, f"{path}[]", emit)

    if "object" in known or "properties" in schema:
        _lint_object(schema, path, emit)


def _lint_object(schema: Mapping[str, Any], path: str, emit: Callable[[str, LintCode, str], None]) -> None:
    """Check an object schema's ``required`` against its ``properties`` and lint each property."""
    props = schema.get("properties", {})
    props = props if isinstance(props, Mapping) else {}
    required = schema.get("required", [])
    for name in required if isinstance(required, list) else []:
        if name not in props:
            where = f"{path}.{name}" if path else str(name)
            emit(where, LintCode.REQUIRED_NOT_IN_PROPERTIES, f"{name!r} is required but not a property")
    for name, sub in props.items():
        _lint_schema(sub, f"{path}.{name}" if path else str(name), emit)


def lint_tool(tool: Tool) -> list[LintFinding]:
    """Lint a tool's parameter schema.

    Why a lint and not a fix on import: the defects are facts about the published data that we want to count
    and report; rewriting them silently would make our copy disagree with the source without a trace.

    Each schema node yields at most one finding per code. An array of arrays is reported once, as
    ``nested-array``, even when its inner arrays lack ``items`` (the message says so): the inner level is part
    of the same defect. This is how the SynthTools README counts (20 nested arrays, 8 arrays without items).

    Args:
        tool: Any tool; ``parameters`` is treated as a JSON Schema object.

    Returns:
        Findings in schema order.
    """
    source = tool.extra.get("source_id")
    source = source if isinstance(source, str) else None
    findings: list[LintFinding] = []

    def emit(path: str, code: LintCode, message: str) -> None:
        findings.append(LintFinding(tool=tool.name, parameter=path, code=code, message=message, source=source))

    _lint_object(tool.parameters, "", emit)
    return findings


def lint_tools(tools: Iterable[Tool]) -> list[LintFinding]:
    """Lint many tools; the findings of each tool in turn (see :func:`lint_tool`)."""
    return [finding for tool in tools for finding in lint_tool(tool)]
