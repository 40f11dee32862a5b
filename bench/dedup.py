"""Dedup throughput: the 5,900 SynthTools tools, and 100,000 synthetic tool descriptions.

Run: ``.venv/bin/python bench/dedup.py [--encoder auto|minilm|e5|token] [--n 100000]`` (needs the shared fixtures;
with MiniLM the 100,000 descriptions take about 8 minutes of two cores). Figures only.

Synthetic descriptions are made from the release's own vocabulary: each takes a real tool's description and swaps
half of its words for random words of the corpus (seeded), spread over 100 fields, so lengths and vocabulary are
realistic and most texts are distinct; the semantic pass embeds the description alone (the "100,000 descriptions"
of the target). Prints, per corpus: the exact pass, embedding (wall and CPU time), the semantic pass (within fields,
then globally) and the total, plus the process's peak memory. Wall time depends on what else the machine runs; CPU
time does not (much).
"""

from __future__ import annotations

import argparse
import random
import resource
import sys
import time
from pathlib import Path

from toolwild.core.formats.synthtools import load_synthtools_dir
from toolwild.core.tool import Tool
from toolwild.synth.dedup import embed_tools, exact_dedup, semantic_dedup
from toolwild.synth.embedding import Embedder, load_embedder

TARBALL = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "synthtools" / "tool_content.tar.gz"


def synthetic(tools: list[Tool], n: int, seed: int = 0) -> list[Tool]:
    """``n`` tools whose only text is a perturbed release description (name and parameters left out)."""
    rng = random.Random(seed)
    words = [w for t in tools for w in t.description.split()]
    out = []
    for i in range(n):
        base = tools[rng.randrange(len(tools))]
        text = base.description.split()
        for k in rng.sample(range(len(text)), k=len(text) // 2) if text else []:
            text[k] = rng.choice(words)
        out.append(
            Tool(
                name=f"t{i}",
                description=" ".join(text),
                extra={"source_id": f"synthetic_{i:06d}", "field": f"field_{i % 100}"},
            )
        )
    return out


def run(label: str, tools: list[Tool], embedder: Embedder) -> None:
    start = time.perf_counter()
    exact = exact_dedup(tools)
    t_exact = time.perf_counter() - start
    cpu = time.process_time()
    vectors = embed_tools(exact.kept, embedder)
    cpu = time.process_time() - cpu
    t_embed = time.perf_counter() - start - t_exact
    semantic = semantic_dedup(exact.kept, vectors, tau=0.85)
    total = time.perf_counter() - start
    t_semantic = total - t_exact - t_embed
    print(
        f"{label:<24} {len(tools):>7,} tools: exact {t_exact:6.2f} s ({len(exact.dropped):,} dropped), "
        f"embed {t_embed:6.1f} s ({cpu:6.1f} s CPU), semantic {t_semantic:6.2f} s ({len(semantic.dropped):,} "
        f"dropped), total {total:6.1f} s",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--encoder", default="auto")
    parser.add_argument("--n", type=int, default=100_000, help="synthetic descriptions (0: the release only)")
    args = parser.parse_args()
    if not TARBALL.exists():
        sys.exit(f"fixtures not found: {TARBALL}")
    tools = load_synthtools_dir(TARBALL).tools
    started = time.perf_counter()
    embedder = load_embedder(args.encoder)
    print(f"encoder {embedder.info.label()}, loaded in {time.perf_counter() - started:.2f} s")
    run("SynthTools release", tools, embedder)
    if args.n:
        run("synthetic descriptions", synthetic(tools, args.n), embedder)
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak memory (max RSS): {peak_mib:,.0f} MiB")


if __name__ == "__main__":
    main()
