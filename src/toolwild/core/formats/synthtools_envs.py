"""SynthTools specs -> :class:`~toolwild.core.environment.Environment` files (one per spec, ``llm`` backend).

A SynthTools "spec" (``<field>_tool_spec_<n>``) is one service: the tools generated together for one task family.
Each becomes a model-simulated environment holding:

- its tools, renamed to SynthTools' own identifiers (``"Refund Calculator"`` -> ``Refund_Calculator``), because
  function-calling APIs reject spaces; the published name stays in ``extra["published_name"]``;
- a description from ``tool_list.json`` (subfield and task family), when the release has it;
- seed data from ``task_meta/<spec>.environment.yml`` when the release has one (2 of its specs do). Those files
  come in two shapes, both handled: a YAML document with ``metadata``/``data`` sections, or a JSON object mixing
  metadata keys with entity lists, followed by free text.
"""

from __future__ import annotations

import itertools
import json
import re
import tarfile
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from toolwild.core.environment import BackendKind, Environment
from toolwild.core.files import decode_text
from toolwild.core.jsonl import MAX_JSON_DEPTH, parse_json
from toolwild.core.tool import Tool
from toolwild.errors import DataError

__all__ = ["SynthToolsMeta", "environments_from_synthtools", "load_synthtools_meta", "parse_environment_yml"]

_META_KEYS = frozenset({"field_name", "subfield", "task", "tool_budget", "tool_sequences"})


class SynthToolsMeta:
    """What a release says about its specs besides the tools: descriptions and seed data, by spec id."""

    def __init__(self) -> None:
        self.descriptions: dict[str, dict[str, str]] = {}
        """Spec id -> ``{"subfield": ..., "task": ...}`` (from ``tool_list.json``)."""
        self.seed_data: dict[str, dict[str, Any]] = {}
        """Spec id -> initial state (from ``task_meta/*.environment.yml``)."""


def _jsonable(value: Any, file: str) -> Any:
    """YAML turns dates into ``datetime``; the state is JSON, so they become ISO strings (and the result is held to
    the bounds of any JSON toolwild reads: YAML aliases can build deep or self-referencing values)."""
    try:
        text = json.dumps(value, default=str)
    except (ValueError, RecursionError, TypeError) as exc:
        raise DataError(f"seed data cannot be held as JSON: {exc}", file=file, field="tool_set_yml") from None
    return parse_json(text, file=file)


_NOT_FLOW_BRACKET = re.compile(r"[^\[\]{}]+")


def _flow_depth(text: str) -> int:
    """The deepest nesting of YAML flow brackets (``[``/``{``), counted on the bare brackets: an upper bound when a
    quoted string holds one, which is harmless. Why: PyYAML takes seconds on a few thousand nested brackets before it
    fails, and a release's file should not stall an import."""
    skeleton = _NOT_FLOW_BRACKET.sub("", text)
    if len(skeleton) <= MAX_JSON_DEPTH:
        return len(skeleton)
    return max(itertools.accumulate(1 if c in "[{" else -1 for c in skeleton))


def parse_environment_yml(text: str, *, file: str = "") -> tuple[dict[str, Any], dict[str, Any]]:
    """``(metadata, seed data)`` of one ``*.environment.yml``.

    Raises:
        DataError: the file is not YAML, or its ``tool_set_yml`` holds neither shape.
    """
    if _flow_depth(text) > MAX_JSON_DEPTH:
        raise DataError(f"YAML nested deeper than {MAX_JSON_DEPTH} levels", file=file)
    try:
        outer = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise DataError(f"not YAML: {exc}", file=file) from None
    except RecursionError:
        raise DataError("YAML nested too deeply", file=file) from None
    body = outer.get("tool_set_yml") if isinstance(outer, dict) else None
    if not isinstance(body, str):
        raise DataError("expected a 'tool_set_yml' text block", file=file, field="tool_set_yml")
    try:
        inner = yaml.safe_load(body)
    except (yaml.YAMLError, RecursionError):
        inner = None
    if isinstance(inner, dict) and isinstance(inner.get("data"), dict):
        metadata = inner.get("metadata") or {}
        return _jsonable(metadata if isinstance(metadata, dict) else {}, file), _jsonable(inner["data"], file)
    start = body.find("{")
    if start < 0:
        raise DataError("no seed data found (neither a 'data' section nor a JSON object)", file=file)
    try:
        value, end = json.JSONDecoder().raw_decode(body[start:])
    except json.JSONDecodeError as exc:
        raise DataError(f"seed data is not JSON: {exc.msg}", file=file, field="tool_set_yml") from None
    except (RecursionError, ValueError) as exc:
        raise DataError(f"seed data is not usable JSON: {exc}", file=file, field="tool_set_yml") from None
    value = parse_json(body[start : start + end], file=file)  # the same bounds as every other JSON read
    if not isinstance(value, dict):
        raise DataError("seed data must be a JSON object", file=file, field="tool_set_yml")
    meta = {k: v for k, v in value.items() if k in _META_KEYS}
    return meta, {k: v for k, v in value.items() if k not in _META_KEYS}


def _members(source: Path) -> Iterator[tuple[str, PurePosixPath, bytes]]:
    """``(label, relative path, bytes)`` of the release's ``tool_list.json`` and ``task_meta/*.yml``."""

    def wanted(rel: PurePosixPath) -> bool:
        return rel.name == "tool_list.json" or (rel.parent.name == "task_meta" and rel.suffix == ".yml")

    if source.is_dir():
        base = source if (source / "tool_json").is_dir() else source.parent
        for path in sorted(base.rglob("*")):
            rel = PurePosixPath(path.relative_to(base).as_posix())
            if path.is_file() and wanted(rel):
                try:
                    raw = path.read_bytes()
                except OSError as exc:
                    raise DataError(f"cannot read: {exc.strerror or exc}", file=path) from None
                yield str(path), rel, raw
        return
    try:
        with tarfile.open(source, "r:*") as tar:
            for member in sorted(tar.getmembers(), key=lambda m: m.name):
                rel = PurePosixPath(member.name)
                if member.isfile() and wanted(rel):
                    handle = tar.extractfile(member)
                    yield f"{source}:{member.name}", rel, handle.read() if handle else b""
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise DataError(f"cannot read archive: {exc}", file=source) from None


def load_synthtools_meta(source: str | Path) -> SynthToolsMeta:
    """Read descriptions and seed data from a release (directory or tarball); missing parts are simply absent.

    Raises:
        DataError: a file that is present is malformed (file and line named).
    """
    meta = SynthToolsMeta()
    for label, rel, raw in _members(Path(source)):
        text = decode_text(raw, file=label)
        if rel.name == "tool_list.json":
            for number, line in enumerate(text.splitlines(), start=1):
                if not line.strip():
                    continue
                row = parse_json(line, file=label, line=number)
                if not isinstance(row, dict):
                    raise DataError("a tool_list.json row must be a JSON object", file=label, line=number)
                spec_id = str(row.get("id", "")).split("__", 1)[0]
                if spec_id and spec_id not in meta.descriptions:
                    meta.descriptions[spec_id] = {
                        "subfield": str(row.get("subfield", "")),
                        "task": str(row.get("task", "")),
                    }
        else:
            spec_id = rel.name.removesuffix(".environment.yml")
            if spec_id != rel.name:
                meta.seed_data[spec_id] = parse_environment_yml(text, file=label)[1]
    return meta


def _spec_id(tool: Tool) -> str | None:
    field, spec = tool.extra.get("field"), tool.extra.get("spec")
    return f"{field}_tool_spec_{spec}" if field is not None and spec is not None else None


def environments_from_synthtools(tools: list[Tool], meta: SynthToolsMeta | None = None) -> list[Environment]:
    """One ``llm`` environment per spec, tools in the given order; tools without a spec id are left out."""
    meta = meta or SynthToolsMeta()
    by_spec: dict[str, list[Tool]] = defaultdict(list)
    for tool in tools:
        spec_id = _spec_id(tool)
        if spec_id is not None:
            by_spec[spec_id].append(tool)
    environments = []
    for spec_id in sorted(by_spec):
        renamed: list[Tool] = []
        taken: set[str] = set()
        for tool in by_spec[spec_id]:
            name = base = str(tool.extra.get("identifier") or tool.name)
            suffix = 2
            while name in taken:  # two published names can map to one identifier
                name, suffix = f"{base}_{suffix}", suffix + 1
            taken.add(name)
            renamed.append(tool.model_copy(update={"name": name, "extra": {**tool.extra, "published_name": tool.name}}))
        first = by_spec[spec_id][0]
        about = meta.descriptions.get(spec_id, {})
        description = " - ".join(part for part in (about.get("subfield"), about.get("task")) if part)
        environments.append(
            Environment(
                id=spec_id,
                description=description,
                field=str(first.extra.get("field", "")),
                subdomain=about.get("subfield", ""),
                tools=renamed,
                initial_state=meta.seed_data.get(spec_id, {}),
                backend=BackendKind.LLM,
                source={"format": "synthtools", "spec": first.extra.get("spec")},
            )
        )
    return environments
