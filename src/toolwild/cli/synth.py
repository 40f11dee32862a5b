"""``toolwild synth``: generation steps (so far: deduplication of a tool corpus)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from toolwild.cli._common import console, handled_errors
from toolwild.core.formats.synthtools import load_synthtools_dir, write_tools_jsonl
from toolwild.synth.dedup import exact_dedup

synth_app = typer.Typer(help="Generation steps.", no_args_is_help=True)


@synth_app.command("dedup")
def dedup(
    source: Annotated[
        Path,
        typer.Argument(
            metavar="SOURCE", exists=True, help="A SynthTools release: tool_content/ or tool_content.tar.gz."
        ),
    ],
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Write the kept tools here (JSONL).")] = None,
    report: Annotated[
        Path | None, typer.Option(help="Write one JSON line per dropped tool (key, reason, duplicate_of, similarity).")
    ] = None,
    semantic: Annotated[
        bool, typer.Option("--semantic/--exact-only", help="Also drop near-duplicates by embedding similarity.")
    ] = True,
    tau: Annotated[float, typer.Option(min=0.0, max=1.0, help="Cosine threshold of the semantic pass.")] = 0.85,
) -> None:
    """Deduplicate a tool corpus: exact pass, then a semantic pass within each field and globally.

    Exact: same normalised name within a field, or same normalised text anywhere (SynthTools' rule). Semantic:
    cosine similarity >= TAU between local embeddings (the embedded model's token embeddings, IDF-weighted; no
    download). Tools are visited in sorted source-id order; each drop names the kept tool it duplicates.
    """
    with handled_errors():
        tools = load_synthtools_dir(source).tools
        result = exact_dedup(tools)
        share = None
        if semantic:
            from toolwild.synth.dedup import embedding_text, neighbour_share, semantic_dedup
            from toolwild.synth.embedding import TokenEmbedder

            with console.status("embedding..."):
                embedder = TokenEmbedder()
                vectors = embedder.fit_embed(embedder.tokenize_many([embedding_text(t) for t in result.kept]))
                share = neighbour_share(vectors, tau)
                second = semantic_dedup(result.kept, vectors, tau=tau)
            result.kept = second.kept
            result.dropped += second.dropped
        if out is not None:
            write_tools_jsonl(result.kept, out)
        if report is not None:
            tmp = report.with_name(report.name + ".tmp")
            tmp.write_text(
                "".join(
                    json.dumps(
                        {
                            "key": d.key,
                            "reason": d.reason.value,
                            "duplicate_of": d.duplicate_of,
                            "similarity": d.similarity,
                        }
                    )
                    + "\n"
                    for d in result.dropped
                ),
                encoding="utf-8",
            )
            os.replace(tmp, report)
    table = Table(title="Dedup", title_justify="left", show_header=False)
    table.add_row("tools read", f"{len(tools):,}")
    for reason, count in result.counts().items():
        table.add_row(f"dropped: {reason}", f"{count:,}")
    table.add_row("kept", f"{len(result.kept):,}", style="bold")
    if share is not None:
        table.add_row(
            f"tools with a neighbour at cosine >= {tau}", f"{share:.1%} (published, their embedding: ~9% at 0.85)"
        )
    console.print(table)
