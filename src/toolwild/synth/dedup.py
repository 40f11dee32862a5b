"""Exact deduplication of tool sets, with a report of what was dropped and why.

The exact pass is SynthTools' published rule, re-derived from its release and checked against it (443 of 5,900
tools, the very ones its ``tool_list.json`` marks ``dropped_exact``). Tools are visited in sorted source-id order and
a tool is dropped when

1. **same name in its field**: its name, lower-cased with every run of non-alphanumerics turned into one space,
   repeats an earlier kept tool of the same field; or
2. **same text anywhere**: its normalised text (name, description, parameters with name/description/type/default,
   error messages, usage, outputs with name/description/type; lower-cased, whitespace collapsed) repeats an
   earlier kept tool of any field.

Every drop names the tool it duplicates, so a reviewer can check a decision without re-running anything. The
semantic pass (embeddings at a threshold) is not here yet.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from toolwild.core.tool import Tool

__all__ = ["DedupReport", "DropReason", "Dropped", "exact_dedup", "normalized_name", "normalized_text"]

_NON_ALNUM = re.compile(r"[^a-z0-9]+")


class DropReason(StrEnum):
    """Why a tool was dropped."""

    SAME_NAME_IN_FIELD = "same-name-in-field"
    SAME_TEXT = "same-text"


@dataclass(frozen=True)
class Dropped:
    """One dropped tool, the reason, and the kept tool it duplicates (both by key)."""

    key: str
    reason: DropReason
    duplicate_of: str


@dataclass
class DedupReport:
    """The kept tools (in visiting order) and every drop."""

    kept: list[Tool] = field(default_factory=list)
    dropped: list[Dropped] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        """Drops per reason (every reason listed, zeros too)."""
        return {r.value: sum(1 for d in self.dropped if d.reason is r) for r in DropReason}


def tool_key(tool: Tool) -> str:
    """A tool's unique key: its source id when imported (names repeat across fields), else its name."""
    return str(tool.extra.get("source_id") or tool.name)


def normalized_name(name: str) -> str:
    """Lower-cased, each run of non-alphanumerics one space: ``"Order-Tracker v2"`` -> ``"order tracker v2"``."""
    return _NON_ALNUM.sub(" ", name.lower()).strip()


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def normalized_text(tool: Tool) -> str:
    """The text the exact pass compares (see the module docstring), lower-cased with whitespace collapsed."""
    parts = [tool.name, tool.description]
    for name, spec in tool.properties.items():
        spec = spec if isinstance(spec, dict) else {}
        parts += [name, _text(spec.get("description")), _text(spec.get("type")), _text(spec.get("default"))]
    if tool.contract is not None:
        parts += tool.contract.error_modes
    parts.append(_text(tool.extra.get("usage")))
    outputs = (tool.returns or {}).get("properties", {}) if tool.returns else {}
    for name, spec in outputs.items():
        spec = spec if isinstance(spec, dict) else {}
        parts += [name, _text(spec.get("description")), _text(spec.get("type"))]
    return " ".join(" ".join(parts).lower().split())


def exact_dedup(tools: list[Tool]) -> DedupReport:
    """Drop exact duplicates (see the module docstring); tools are visited in sorted key order."""
    report = DedupReport()
    by_name: dict[tuple[str, str], str] = {}
    by_text: dict[str, str] = {}
    for tool in sorted(tools, key=tool_key):
        key = tool_key(tool)
        name_key = (str(tool.extra.get("field", "")), normalized_name(tool.name))
        if name_key in by_name:
            report.dropped.append(Dropped(key, DropReason.SAME_NAME_IN_FIELD, by_name[name_key]))
            continue
        text = normalized_text(tool)
        if text in by_text:
            report.dropped.append(Dropped(key, DropReason.SAME_TEXT, by_text[text]))
            continue
        by_name[name_key] = key
        by_text[text] = key
        report.kept.append(tool)
    return report
