"""``toolwild synth envs`` as a library call: model-simulated environments generated top down, resumable after a
kill.

:func:`generate_environments` writes exactly what the command writes into OUT (the environment files,
``summary.json``, ``drops.json``, the unit log ``progress.jsonl`` and the model cache ``cache.sqlite``) and returns
a :class:`GeneratedEnvironments`; the command only parses its options, calls it, prints the table and picks the exit
code. The generation itself is :func:`toolwild.synth.envgen.synth_environments`, run under the executor and unit log
of :mod:`toolwild.run.job`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolwild.core.files import write_json
from toolwild.errors import ConfigError, MissingDependencyError
from toolwild.llm.client import LLM
from toolwild.run.job import JobLog, choose_executor, make_executor
from toolwild.run.lock import OutputLock
from toolwild.run.loop import run_async
from toolwild.synth.envgen import JOB, EnvSpec, EnvWorker, SynthConfig, SynthResult, run_identity, synth_environments

if TYPE_CHECKING:
    from toolwild.synth.embedding import Embedder

__all__ = ["PROGRESS", "RAY_USAGE", "GeneratedEnvironments", "generate_environments"]

PROGRESS = "progress.jsonl"
"""The run's unit log in OUT."""
EXECUTORS = ("local", "ray")
RAY_USAGE = {"note": "made and counted in the Ray workers (not collected)"}
"""summary.json's usage with executor ray: the calls are made in the workers, whose clients are not this one."""

StageProgress = Callable[[int, int, str], None]
"""``on_progress(done, total, stage)``: stage calls made of those planned, and the last one's stage."""


@dataclass(frozen=True)
class GeneratedEnvironments:
    """What :func:`generate_environments` made: its result (environments, drops, failures), the folder, and the
    model usage (None: the calls were made in Ray workers, not counted here)."""

    out: Path
    fields: list[str]
    result: SynthResult
    usage: dict[str, Any] | None

    @property
    def summary_path(self) -> Path:
        return self.out / "summary.json"

    @property
    def drops_path(self) -> Path:
        return self.out / "drops.json"


@dataclass(frozen=True)
class _SemanticPlan:
    """The semantic pass of a run, resolved before the run starts from ``semantic``, ``tau`` and ``encoder``: the
    threshold and encoder name that go into the run's identity (so a resume with other ones is refused), the
    encoder when it was loaded, and why the pass is off when it is."""

    tau: float | None
    """None: the pass is off."""
    encoder: str = "auto"
    """The encoder's name, resolved where that is cheap (``auto`` -> ``minilm`` when it loaded)."""
    embedder: Embedder | None = None
    note: str | None = None
    """Why the pass is off, in words (for the table and summary.json)."""


def generate_environments(
    fields: str | Sequence[str],
    out: str | Path,
    *,
    per_field: int = 2,
    families: int = 2,
    tools: int = 4,
    model: str = "local",
    base_url: str | None = None,
    seed: int = 0,
    semantic: bool = True,
    tau: float | None = None,
    encoder: str = "auto",
    audit: float | None = None,
    concurrency: int = 32,
    resume: bool = False,
    executor: str = "local",
    ray_address: str | None = None,
    on_progress: StageProgress | None = None,
) -> GeneratedEnvironments:
    """Generate environments for ``fields`` into the folder ``out`` (the options of ``toolwild synth envs``, same
    names and defaults; see its help). ``fields``: a list, or the command's comma-separated string.

    Each finished unit is appended to ``OUT/progress.jsonl`` at once; ``resume=True`` continues a killed run of the
    same options, and the files are those of an uninterrupted run. A unit whose provider kept failing is listed in
    the result (``result.failed_units``) and in summary.json; the log then stays resumable.

    Raises:
        ConfigError: a bad option (named as the command names it), nothing to resume, a resume of another run,
            another process writing OUT.
        MissingDependencyError: the encoder the semantic pass would use is not installed; Ray, for ``ray``.
    """
    out = Path(out)
    # OUT has one writer: a second run on it (a resume while this one is alive) is refused naming this one's pid
    with OutputLock(out):
        names = _field_names(fields)
        choose_executor(executor, choices=EXECUTORS)
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
        from toolwild.llm.registry import create_llm

        llm = create_llm(model, base_url=base_url, cache=out / "cache.sqlite", max_connections=concurrency)
        result = run_async(_synthesize(llm, names, config, out, resume, remote, plan, on_progress))
    return GeneratedEnvironments(out, names, result, llm.usage.as_dict() if remote is None else None)


def _field_names(fields: str | Sequence[str]) -> list[str]:
    """The fields, in order; none or one twice is refused."""
    given = fields.split(",") if isinstance(fields, str) else list(fields)
    names = [f.strip() for f in given if f.strip()]
    if not names:
        raise ConfigError(f"--fields names no field (got {fields!r}): give a comma-separated list")
    if len(set(names)) != len(names):
        raise ConfigError(f"--fields names a field twice: {', '.join(names)}")
    return names


def _semantic_plan(semantic: bool, tau: float | None, encoder: str) -> _SemanticPlan:
    """Resolve the semantic pass (see :class:`_SemanticPlan`).

    The default (no ``tau``) is 0.85 when the sentence encoder is installed, else off with a note saying why and
    how to run it anyway: the token fallback is lexical and needs 200+ tools, so it is not worth running by default.
    An explicit ``tau`` always runs (on the fallback if that is all there is). A sentence encoder is loaded here
    (about a second), so that a missing one is named before any model call; the token encoder is loaded by the pass
    only if the run has enough tools for it (it takes 15-30 s to load).

    Raises:
        ConfigError: ``tau`` with the pass off; an unknown encoder.
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


def _remote(
    model: str, base_url: str | None, out: Path, config: SynthConfig, fields: int, address: str | None
) -> tuple[Any, EnvWorker]:
    """The Ray executor and the worker it runs, from the run's plain values (the base URL stays in memory).

    Shards: the planned subdomains over the cluster's CPUs, so the subdomain and audit phases give every CPU one
    shard, each running its units with CONCURRENCY calls in flight (a shard per unit would leave a latency-bound
    run with one unit per CPU at a time)."""
    executor: Any = make_executor("ray", config.concurrency, ray_address=address)
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
    remote: tuple[Any, EnvWorker] | None,
    plan: _SemanticPlan,
    on_progress: StageProgress | None,
) -> SynthResult:
    """Open the unit log (new or resumed), run the synthesis (here, or on ``remote``: an executor and its worker;
    the semantic pass of ``plan`` runs here), write the files, and mark the log complete when no unit is left
    failed (a run with failed units stays resumable)."""
    try:
        log = JobLog(out / PROGRESS, job=JOB, identity=run_identity(llm, names, config), resume=resume)
    except BaseException:
        await llm.aclose()
        raise
    total, done = config.planned_steps(len(names)), 0
    if on_progress is not None:
        on_progress(0, total, "")

    def advance(stage: str) -> None:
        nonlocal done
        done += 1
        if on_progress is not None:
            on_progress(done, total, stage)

    try:
        executor, worker = remote if remote is not None else (None, None)
        result = await synth_environments(
            llm, names, config, progress=advance, log=log.log, executor=executor, worker=worker, embedder=plan.embedder
        )
        if plan.note:
            result.notes.insert(0, plan.note)
        _write_outputs(out, names, result, llm.usage.as_dict() if remote is None else RAY_USAGE)
        log.end(complete=not result.failed_units)
        return result
    finally:
        log.close()
        await llm.aclose()


def _write_outputs(out: Path, names: list[str], result: SynthResult, usage: dict[str, Any]) -> None:
    """Environment files, summary.json and drops.json, in the run's fixed order; files a previous (partial) write
    of this run left and this one does not write are removed (a resumed run's dedup may change what is kept)."""
    from toolwild.core.formats.environment import write_environment_in

    written = [write_environment_in(out, env).name for env in result.environments]  # safe names, inside OUT
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
