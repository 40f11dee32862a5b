"""Dedup throughput: the 5,900 SynthTools tools and 100,000 synthetic tool descriptions.

Run: ``.venv/bin/python bench/dedup.py`` (about a minute). Needs the shared fixtures and the local extra.

Synthetic tools are made from the release's own vocabulary: each takes a real tool's name and description and
swaps half of the words for random words of the corpus (seeded), spread over 100 fields, so lengths and
vocabulary are realistic and most texts are distinct. Prints, per corpus: the exact pass, embedding (tokenise +
pool), the semantic pass (within fields, then globally) and the total, plus the process's peak memory.
"""

from __future__ import annotations

import random
import resource
import sys
import time
from pathlib import Path

from toolwild.core.formats.synthtools import load_synthtools_dir
from toolwild.core.tool import Tool
from toolwild.synth.dedup import embedding_text, exact_dedup, semantic_dedup
from toolwild.synth.embedding import TokenEmbedder

TARBALL = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "synthtools" / "tool_content.tar.gz"
N_SYNTHETIC = 100_000


def synthetic(tools: list[Tool], n: int, seed: int = 0) -> list[Tool]:
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
                name=f"{base.name}_{i}",
                description=" ".join(text),
                parameters=base.parameters,
                extra={"source_id": f"synthetic_{i:06d}", "field": f"field_{i % 100}"},
            )
        )
    return out


def run(label: str, tools: list[Tool], embedder: TokenEmbedder) -> None:
    start = time.perf_counter()
    exact = exact_dedup(tools)
    t_exact = time.perf_counter() - start
    vectors = embedder.fit_embed_texts([embedding_text(t) for t in exact.kept])
    t_embed = time.perf_counter() - start - t_exact
    semantic = semantic_dedup(exact.kept, vectors, tau=0.85)
    total = time.perf_counter() - start
    t_semantic = total - t_exact - t_embed
    print(
        f"{label:<22} {len(tools):>7,} tools: exact {t_exact:6.2f} s ({len(exact.dropped):,} dropped), "
        f"embed {t_embed:6.2f} s, semantic {t_semantic:6.2f} s ({len(semantic.dropped):,} dropped), "
        f"total {total:6.2f} s"
    )


def main() -> None:
    if not TARBALL.exists():
        sys.exit(f"fixtures not found: {TARBALL}")
    tools = load_synthtools_dir(TARBALL).tools
    started = time.perf_counter()
    embedder = TokenEmbedder()
    print(f"embedder loaded in {time.perf_counter() - started:.2f} s (GGUF token embeddings, PCA to 128 dims)")
    run("SynthTools release", tools, embedder)
    run("synthetic", synthetic(tools, N_SYNTHETIC), embedder)
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak memory (max RSS): {peak_mib:,.0f} MiB")


if __name__ == "__main__":
    main()
