"""How well each encoder's semantic pass agrees with the SynthTools release's own semantic flags.

Run: ``.venv/bin/python bench/dedup_calibration.py [--encoders token,minilm,e5]`` (needs the shared fixtures; each
encoder that is not installed is skipped with a note). Figures only; nothing is asserted.

The release flags a tool ``dropped_0.85`` when its per-field semantic pass dropped it at cosine 0.85 under a 1536-d
OpenAI embedding; 108 tools are so flagged beyond the 443 exact drops. Its pass (``scripts/run_deduplication.py`` of
the SynthTools repository) builds the τ-graph of each field and, per connected component, drops a **coin-flip**
member of a pair (``random.Random(42)``, drawn in graph order) and by highest degree in larger components. So
*which* member of a near-duplicate pair the release dropped is chance: no encoder can reproduce it unless its graph
is the release's, edge for edge. Printed per encoder, all on the 5,457 tools the exact pass keeps:

- at τ = 0.85: our in-field drops (sorted-key greedy, as ``toolwild synth dedup`` does), their recall and precision
  against the release's 108, the drops across fields, and the share of tools with a neighbour at ≥ τ (the paper:
  ~9%);
- at the τ where our in-field drop count equals the release's 108: the recall of (a) our rule, (b) the release's
  rule (components, degree, coin flips with seed 42) re-implemented on our vectors, and (c) flagged recall: the share
  of the release's drops that have an in-field neighbour at ≥ τ, i.e. that our pass sees as near-duplicates, which
  does not depend on the coin;
- the coin-flip ceiling: the recall a perfect encoder would expect under the release's rule, 1 − ½ × (share of
  drops that come from pairs), from our own graph;
- time and CPU time to embed all 5,900 tools, and the peak memory of the process.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import resource
import sys
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from toolwild.core.formats.synthtools import load_synthtools_dir
from toolwild.core.tool import Tool
from toolwild.errors import MissingDependencyError
from toolwild.synth.dedup import DropReason, embed_tools, exact_dedup, neighbour_share, semantic_dedup, tool_key
from toolwild.synth.embedding import load_embedder

TARBALL = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "synthtools" / "tool_content.tar.gz"
TAU = 0.85
SEED = 42


@dataclass
class Release:
    """The exact pass's survivors (in key order), their fields, and the release's in-field drops at 0.85."""

    tools: list[Tool]
    keys: list[str]
    fields: list[str]
    flagged: set[str]


def load_release() -> tuple[list[Tool], Release]:
    tools = load_synthtools_dir(TARBALL).tools
    with tarfile.open(TARBALL) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith("tool_list.json"))
        data = tar.extractfile(member)
        assert data is not None
        rows = [json.loads(line) for line in data.read().decode().splitlines() if line.strip()]
    flagged = {r["id"] for r in rows if r["dropped_0.85"] and not r["dropped_exact"]}
    kept = exact_dedup(tools).kept
    release = Release(kept, [tool_key(t) for t in kept], [str(t.extra.get("field", "")) for t in kept], flagged)
    return tools, release


def greedy_in_field(release: Release, vectors: np.ndarray, tau: float) -> set[str]:
    """Our rule: the in-field drops of :func:`semantic_dedup`."""
    report = semantic_dedup(release.tools, vectors, tau=tau)
    return {d.key for d in report.dropped if d.reason is DropReason.SIMILAR_IN_FIELD}


def _components(adjacency: np.ndarray) -> list[list[int]]:
    seen = np.zeros(len(adjacency), dtype=bool)
    out = []
    for start in range(len(adjacency)):
        if seen[start]:
            continue
        seen[start] = True
        stack, component = [start], []
        while stack:
            node = stack.pop()
            component.append(node)
            for other in np.flatnonzero(adjacency[node] & ~seen):
                seen[other] = True
                stack.append(int(other))
        out.append(component)
    return out


def _tie_rank(key: str) -> int:
    return int.from_bytes(hashlib.sha256(f"{SEED}|{key}".encode()).digest(), "big")


def release_rule(release: Release, vectors: np.ndarray, tau: float) -> tuple[set[str], int]:
    """The release's rule on our vectors (re-derived from its description): per field in name order, per connected
    component of the τ-graph, a pair loses a coin-flip member; a larger component loses, one at a time, the member of
    highest degree (then highest summed similarity, then a seeded hash) until no edge is left. Returns the drops and
    how many came from pairs."""
    rng = random.Random(SEED)
    by_field: dict[str, list[int]] = {}
    for row, name in enumerate(release.fields):
        by_field.setdefault(name, []).append(row)
    dropped: set[str] = set()
    pairs = 0
    for name in sorted(by_field):
        rows = np.array(by_field[name])
        sims = vectors[rows] @ vectors[rows].T
        edges = sims >= tau
        np.fill_diagonal(edges, False)
        for component in _components(edges):
            if len(component) == 2:
                dropped.add(release.keys[rows[rng.choice(component)]])
                pairs += 1
                continue
            alive = list(component)
            while len(alive) > 1:
                sub = edges[np.ix_(alive, alive)]
                if not sub.any():
                    break
                degree = sub.sum(axis=1)
                weight = np.where(sub, sims[np.ix_(alive, alive)], 0.0).sum(axis=1)
                best = [p for p in range(len(alive)) if degree[p] == degree.max()]
                top = max(weight[p] for p in best)
                best = [p for p in best if weight[p] == top]
                loser = max(best, key=lambda p: _tie_rank(release.keys[rows[alive[p]]]))
                dropped.add(release.keys[rows[alive[loser]]])
                del alive[loser]
    return dropped, pairs


def flagged_share(release: Release, vectors: np.ndarray, tau: float) -> float:
    """Share of the release's drops with an in-field neighbour at >= tau (our pass sees them as near-duplicates)."""
    fields = np.array(release.fields)
    hits = 0
    for row, key in enumerate(release.keys):
        if key not in release.flagged:
            continue
        same = np.flatnonzero(fields == fields[row])
        sims = vectors[same] @ vectors[row]
        sims[same == row] = -1.0
        hits += bool((sims >= tau).any())
    return hits / len(release.flagged)


def matched_tau(count, target: int) -> float:
    """The smallest τ (to 1e-4) at which ``count(τ)`` drops at most ``target`` tools (drops fall as τ rises)."""
    low, high = 0.3, 1.0
    while high - low > 1e-4:
        middle = (low + high) / 2
        if count(middle) > target:
            low = middle
        else:
            high = middle
    return high


def agreement(release: Release, vectors: np.ndarray) -> list[str]:
    n = len(release.flagged)
    ours = greedy_in_field(release, vectors, TAU)
    across = semantic_dedup(release.tools, vectors, tau=TAU).counts()[DropReason.SIMILAR_GLOBALLY.value]
    lines = [
        f"  at τ = {TAU}: {len(ours)} in-field drops (the release: {n}), recall {len(ours & release.flagged) / n:.2f}, "
        f"precision {len(ours & release.flagged) / max(1, len(ours)):.2f}; {across} more across fields; "
        f"{neighbour_share(vectors, TAU):.1%} of tools have a neighbour at >= τ (the paper: ~9%)"
    ]
    tau_ours = matched_tau(lambda t: len(greedy_in_field(release, vectors, t)), n)
    mine = greedy_in_field(release, vectors, tau_ours)
    tau_theirs = matched_tau(lambda t: len(release_rule(release, vectors, t)[0]), n)
    theirs, pairs = release_rule(release, vectors, tau_theirs)
    lines += [
        f"  matched count, our rule: τ = {tau_ours:.3f}, {len(mine)} drops, recall "
        f"{len(mine & release.flagged) / n:.2f}; flagged recall {flagged_share(release, vectors, tau_ours):.2f}",
        f"  matched count, the release's rule (seed {SEED}): τ = {tau_theirs:.3f}, recall "
        f"{len(theirs & release.flagged) / n:.2f}; coin-flip ceiling {1 - pairs / max(1, len(theirs)) / 2:.2f} "
        f"({pairs} of {len(theirs)} drops from pairs)",
    ]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--encoders", default="token,minilm,e5", help="comma-separated encoder names")
    args = parser.parse_args()
    if not TARBALL.exists():
        sys.exit(f"fixtures not found: {TARBALL}")
    tools, release = load_release()
    rows = {tool_key(t): i for i, t in enumerate(tools)}
    kept_rows = np.array([rows[k] for k in release.keys])
    print(
        f"SynthTools release: {len(tools):,} tools, {len(release.tools):,} after the exact pass; "
        f"{len(release.flagged)} flagged by its semantic pass at τ = {TAU} within fields"
    )
    for name in args.encoders.split(","):
        started = time.perf_counter()
        try:
            embedder = load_embedder(name)
        except MissingDependencyError as exc:
            print(f"\n{name}: not installed ({exc})")
            continue
        loaded = time.perf_counter() - started
        wall, cpu = time.perf_counter(), time.process_time()
        vectors = embed_tools(tools, embedder)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        print(
            f"\n{embedder.info.label()}\n  embedded {len(tools):,} tools in {wall:.1f} s ({cpu:.1f} s CPU; "
            f"loading {loaded:.1f} s)"
        )
        for line in agreement(release, vectors[kept_rows]):
            print(line, flush=True)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\npeak memory (max RSS of the process): {peak:,.0f} MiB")


if __name__ == "__main__":
    main()
