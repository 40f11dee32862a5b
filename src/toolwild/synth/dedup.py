"""Exact deduplication of tool sets, with a report of what was dropped and why.

The exact pass is SynthTools' published rule, re-derived from its release and checked against it (443 of 5,900
tools, the very ones its ``tool_list.json`` marks ``dropped_exact``). Tools are visited in sorted source-id order and
a tool is dropped when

1. **same name in its field**: its name, lower-cased with every run of non-alphanumerics turned into one space,
   repeats an earlier kept tool of the same field; or
2. **same text anywhere**: its normalised text (name, description, parameters with name/description/type/default,
   error messages, usage, outputs with name/description/type; lower-cased, whitespace collapsed) repeats an
   earlier kept tool of any field.

Every drop names the tool it duplicates, so a reviewer can check a decision without re-running anything.

The semantic pass (:func:`semantic_dedup`) then drops, in the same order, a tool whose embedding has cosine
similarity >= tau with an earlier kept tool: first within its field, then globally. Vectors come from an encoder
(:func:`embed_tools`; see :mod:`toolwild.synth.embedding` for the encoders); similarities are computed block by
block, so 100,000 tools fit in memory.

Which of two near-duplicates is kept differs from the release on purpose: SynthTools resolves each pair with a coin
(``random.Random(42)``, drawn in graph order) and larger groups by degree; here the earlier key is kept, so a
decision depends only on the two tools and their keys (``bench/dedup_calibration.py`` measures both rules).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from toolwild.core.tool import Tool

if TYPE_CHECKING:  # numpy comes with the local extra; the exact pass (and so the CLI's start-up) must not need it
    import numpy as np

    from toolwild.synth.embedding import Embedder, Progress

__all__ = [
    "DedupReport",
    "DropReason",
    "Dropped",
    "embed_tools",
    "embedding_text",
    "exact_dedup",
    "neighbour_share",
    "normalized_name",
    "normalized_text",
    "semantic_dedup",
]

_NON_ALNUM = re.compile(r"[^a-z0-9]+")


class DropReason(StrEnum):
    """Why a tool was dropped."""

    SAME_NAME_IN_FIELD = "same-name-in-field"
    SAME_TEXT = "same-text"
    SIMILAR_IN_FIELD = "similar-in-field"
    SIMILAR_GLOBALLY = "similar-globally"


@dataclass(frozen=True)
class Dropped:
    """One dropped tool, the reason, and the kept tool it duplicates (both by key)."""

    key: str
    reason: DropReason
    duplicate_of: str
    similarity: float | None = None


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


def embedding_text(tool: Tool) -> str:
    """What the semantic pass embeds: name, description, parameters (names and descriptions) and usage."""
    params = " ".join(
        f"{name} {spec.get('description', '') if isinstance(spec, dict) else ''}"
        for name, spec in tool.properties.items()
    )
    return f"{tool.name.replace('_', ' ')}. {tool.description} {params} {_text(tool.extra.get('usage'))}".strip()


def embed_tools(tools: Sequence[Tool], embedder: Embedder, progress: Progress | None = None) -> np.ndarray:
    """One unit vector per tool (its :func:`embedding_text`), by ``embedder``; rows in the order of ``tools``."""
    return embedder.embed_corpus([embedding_text(t) for t in tools], progress)


_BLOCK = 1024


def _greedy(
    order: np.ndarray, vectors: np.ndarray, groups: np.ndarray | None, tau: float
) -> dict[int, tuple[int, float]]:
    """Visit rows in ``order``; a row is dropped (-> the kept row it matches and the similarity) when it has
    similarity >= tau with an earlier kept row of the same group (any row when ``groups`` is None)."""
    import numpy as np

    kept = np.zeros(len(order), dtype=bool)  # by position in ``order``
    dropped: dict[int, tuple[int, float]] = {}
    ordered = vectors[order]
    ordered_groups = groups[order] if groups is not None else None
    for start in range(0, len(order), _BLOCK):
        end = min(start + _BLOCK, len(order))
        sims = ordered[start:end] @ ordered[:end].T  # this block against everything visited so far
        hits = sims >= tau
        if ordered_groups is not None:
            hits &= ordered_groups[start:end, None] == ordered_groups[None, :end]
        for r in range(end - start):
            position = start + r
            candidates = np.flatnonzero(hits[r, :position] & kept[:position])
            if len(candidates):
                best = candidates[np.argmax(sims[r, candidates])]
                dropped[int(order[position])] = (int(order[best]), float(sims[r, best]))
            else:
                kept[position] = True
    return dropped


def semantic_dedup(tools: Sequence[Tool], vectors: np.ndarray, *, tau: float = 0.85) -> DedupReport:
    """Drop near-duplicates: within each field first, then across fields (see the module docstring).

    Args:
        tools: the tools (typically what :func:`exact_dedup` kept).
        vectors: one unit vector per tool, in the same order.
        tau: the cosine threshold.
    """
    import numpy as np

    if len(tools) != len(vectors):
        raise ValueError(f"{len(tools)} tools but {len(vectors)} vectors")
    keys = [tool_key(t) for t in tools]
    order = np.array(sorted(range(len(tools)), key=keys.__getitem__), dtype=np.int64)
    field_names = [str(t.extra.get("field", "")) for t in tools]
    codes = {name: i for i, name in enumerate(sorted(set(field_names)))}
    fields = np.array([codes[name] for name in field_names], dtype=np.int64)
    report = DedupReport()
    in_field = _greedy(order, vectors, fields, tau)
    survivors = np.array([i for i in order if int(i) not in in_field], dtype=np.int64)
    across = _greedy(survivors, vectors, None, tau) if len(survivors) else {}
    for row, (match, sim) in in_field.items():
        report.dropped.append(Dropped(keys[row], DropReason.SIMILAR_IN_FIELD, keys[match], round(sim, 4)))
    for row, (match, sim) in across.items():
        report.dropped.append(Dropped(keys[row], DropReason.SIMILAR_GLOBALLY, keys[match], round(sim, 4)))
    report.dropped.sort(key=lambda d: d.key)
    report.kept = [tools[i] for i in survivors if int(i) not in across]
    return report


def neighbour_share(vectors: np.ndarray, tau: float) -> float:
    """Share of rows with at least one other row at similarity >= tau (the paper's "~9% exceed 0.85" figure)."""
    import numpy as np

    has = np.zeros(len(vectors), dtype=bool)
    for start in range(0, len(vectors), _BLOCK):
        sims = vectors[start : start + _BLOCK] @ vectors.T
        for r in range(len(sims)):
            sims[r, start + r] = -1.0
        has[start : start + _BLOCK] = (sims >= tau).any(axis=1)
    return float(has.mean()) if len(has) else 0.0
