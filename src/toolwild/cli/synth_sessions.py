"""``toolwild synth sessions``: verified wild sessions over any environment, streamed to disk and resumable."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from toolwild.cli._common import (
    EXIT_PROVIDER_ERRORS,
    PERTURB_KINDS,
    EncoderOption,
    PerturbSeedOption,
    RayAddressOption,
    console,
    handled_errors,
    progress_bar,
)
from toolwild.errors import ConfigError
from toolwild.llm.registry import describe_backends


def _environment_refs(envs: list[str]) -> list[str]:
    """Expand ``--env`` values: a directory stands for its environment files (sorted)."""
    from toolwild.core.formats.environment import ENV_SUFFIX

    refs: list[str] = []
    for value in envs:
        path = Path(value)
        if path.is_dir():
            found = sorted(str(p) for p in path.glob(f"*{ENV_SUFFIX}"))
            if not found:
                raise ConfigError(f"--env {value}: the directory holds no *{ENV_SUFFIX} file")
            refs += found
        else:
            refs.append(value)
    return refs


def _suite_ref(ref: str, suite_dir: Path) -> str:
    """How the suite names an environment: a built-in by id, a file relative to the suite's folder."""
    import os

    path = Path(ref)
    if not path.is_file():
        return ref
    return os.path.relpath(path.resolve(), suite_dir.resolve())


def sessions(
    env: Annotated[
        list[str],
        typer.Option(
            "--env",
            "-e",
            help="An environment: a built-in id (inventory, ledger), an *.env.json file, or a directory of them. "
            "Repeatable; sessions go round robin over them.",
        ),
    ],
    out: Annotated[Path, typer.Option("--out", "-o", dir_okay=False, help="The suite to write (JSONL).")],
    n: Annotated[int, typer.Option("--n", min=1, help="Sessions to generate.")] = 256,
    like_published: Annotated[
        bool,
        typer.Option(
            "--like-published", help="Each of the 4^4 orderings of single/multi/clarify/chat once per 256 sessions."
        ),
    ] = False,
    transitions: Annotated[
        int | None, typer.Option(min=0, max=3, help="Every session with this many instruction transitions.")
    ] = None,
    max_calls: Annotated[int, typer.Option(min=2, max=4, help="Calls (mini-tasks) of a multi-tool task, at most.")] = 3,
    ambiguous: Annotated[
        float, typer.Option(min=0.0, max=1.0, help="Share of tool tasks worded by what the tool does, not its name.")
    ] = 0.25,
    vague: Annotated[
        float, typer.Option(min=0.0, max=1.0, help="Share of clarify tasks whose first reply is vague (two asks).")
    ] = 0.35,
    distractors: Annotated[
        int, typer.Option(min=0, help="Tools of the other environments added to each session's tool list.")
    ] = 0,
    seed: Annotated[int, typer.Option(help="Generation seed (session i is seeded from it and i).")] = 0,
    model: Annotated[
        str,
        typer.Option(
            help="Who words the utterances: `template` (offline, no model) or a model "
            f"({'; '.join(describe_backends())}); model wording is checked and falls back to the template."
        ),
    ] = "template",
    env_model: Annotated[
        str | None, typer.Option(help="The model that simulates `llm` environments (e.g. local).")
    ] = None,
    base_url: Annotated[str | None, typer.Option(help="Base URL of an OpenAI-compatible server.")] = None,
    cache: Annotated[
        Path | None, typer.Option(help="Response cache of the model calls (default: OUT with .cache.sqlite).")
    ] = None,
    published: Annotated[
        Path | None,
        typer.Option(help="Also write the suite with the published keys only (for the original harness)."),
    ] = None,
    verify: Annotated[
        bool,
        typer.Option(
            "--verify/--no-verify",
            help="Check the written suite: oracle scores 100% in both modes, gold calls replay to the recorded "
            "observations and states, subtype labels hold on the values.",
        ),
    ] = True,
    builder: Annotated[
        str,
        typer.Option(
            help="Who makes the tasks: `auto` (an environment's own scenario templates where it has them, the built-in "
            "ledger does; the tool graph otherwise) or `graph` (the tool graph everywhere)."
        ),
    ] = "auto",
    ledger: Annotated[
        Path | None,
        typer.Option(
            "--ledger",
            dir_okay=False,
            help="With --env ledger: make the ledger's sessions on your own Beancount file (its accounts, payees, "
            "amounts, dates). A snapshot is kept beside OUT (OUT's name + .ledger/); your file is never written.",
        ),
    ] = None,
    concurrency: Annotated[int, typer.Option(min=1, help="Sessions made at once.")] = 32,
    resume: Annotated[
        bool,
        typer.Option(
            "--resume",
            help="Continue a killed run of the same command (its OUT.progress.jsonl): finished sessions are kept, "
            "none is made twice; sessions lost to the provider are made again.",
        ),
    ] = False,
    executor: Annotated[
        str,
        typer.Option(
            help="Where sessions are made: `local` (this process), `process` (worker processes on every core, shards "
            "of 256 sessions, CONCURRENCY at once inside each), `ray` (the same shards as Ray tasks; pip install "
            "'toolwild\\[ray]') or `auto`: `process` for a run that calls no model (template wording, no --env-model) "
            f"of {AUTO_PROCESS_FROM} sessions or more on a machine of two cores or more, `local` otherwise."
        ),
    ] = "auto",
    ray_address: RayAddressOption = None,
    encoder: EncoderOption = "auto",
    perturb: Annotated[
        str | None,
        typer.Option(
            help=f"Also write a perturbed copy of the suite: {PERTURB_KINDS} (reworded by --model).",
            rich_help_panel="Perturbation",
        ),
    ] = None,
    perturb_seed: PerturbSeedOption = 0,
    perturb_out: Annotated[
        Path | None,
        typer.Option(
            dir_okay=False,
            help="Where the perturbed copy goes (default: OUT's name + .perturbed.jsonl).",
            rich_help_panel="Perturbation",
        ),
    ] = None,
) -> None:
    """Generate wild sessions over any environment: verified tasks built bottom-up from its dependency graph.

    Each task's gold calls are executed on the session's episode as it is built (state evolves; observations are
    real); a task whose calls fail, whose dependency values are not in the parent's result, or whose hidden-intent
    label the values do not bear out is dropped with its reason and another is tried. The built-in ledger uses its
    own scenario templates (`--builder graph` builds its tasks from the tool graph instead).

    Sessions are made CONCURRENCY at once; each is logged to OUT.progress.jsonl the moment it is finished and
    verified (oracle at 100% in both modes, gold calls replayed, subtype labels checked), so a killed run continued
    with --resume keeps every finished session and makes none twice. OUT is written in session order as the
    sessions are made (the same file whatever the concurrency or executor; put in place when the run ends, never
    half-written), with OUT.report.json (counts, drops by reason, sessions that could not
    be built, and the quality figures of `toolwild validate --quality`, semantic diversity measured with --encoder).
    Model calls are cached: a second run makes none and writes the same suite. With --perturb a perturbed copy is
    written beside it (its oracle checked in both modes, gold calls replayed) for `toolwild compare` against the
    suite's own runs. Exit 1 when no session
    could be built or verification failed, 4 when sessions were lost to the provider (resume to retry them).
    """
    from toolwild.cli._common import run_async
    from toolwild.cli.validate import check_encoder, quality_encoder, quality_headline
    from toolwild.core.files import write_json
    from toolwild.core.formats.wtb import WtbSuiteWriter
    from toolwild.core.quality import QualityCounter
    from toolwild.eval.validate import Severity, SuiteSummary
    from toolwild.run import LocalExecutor, UnitLog, fingerprint
    from toolwild.run.lock import OutputLock
    from toolwild.synth.pipeline import (
        SHARD,
        SessionSpec,
        SessionWorker,
        StreamedAssembly,
        fallback_rate,
        run_sessions,
        session_key,
    )
    from toolwild.synth.sessions import SessionsConfig

    # OUT and the files beside it (progress log, report, ledger snapshot, perturbed copy) have one writer: a second
    # run on them (a --resume while this one is alive) is refused naming this one's pid, before it writes anything
    # set_up takes back what the command made before its run started (a new ledger snapshot) when it is refused
    with handled_errors(), OutputLock(out), contextlib.ExitStack() as set_up:
        if builder not in ("auto", "graph"):
            raise ConfigError(f"--builder {builder!r}: choose auto or graph")
        if like_published and transitions is not None:
            raise ConfigError("--like-published fixes every session's pattern: leave out --transitions")
        perturb_to = _perturb_target(perturb, perturb_out, out, model)
        refs = _environment_refs(env)
        if executor not in EXECUTORS:
            raise ConfigError(f"--executor {executor!r}: choose {', '.join(EXECUTORS[:-1])} or {EXECUTORS[-1]}")
        check_encoder(encoder)  # the encoder is loaded after generation: a bad name must not wait for it
        ledger_file, ledger_ref = _own_ledger(ledger, refs, builder, out, resume=resume, undo=set_up)
        cache_path = cache or out.with_name(out.name + ".cache.sqlite")
        log_path = out.with_name(out.name + ".progress.jsonl")
        out.parent.mkdir(parents=True, exist_ok=True)
        config = SessionsConfig(
            n_sessions=n,
            seed=seed,
            like_published=like_published,
            transitions=transitions,
            max_calls=max_calls,
            ambiguous=ambiguous,
            vague=vague,
            distractors=distractors,
            concurrency=concurrency,
            id_prefix=out.stem,  # the suite's name when loaded (core.formats.wtb.load_wtb_suite)
            ledger=ledger_file,
            ledger_ref=ledger_ref,
        )
        spec = SessionSpec(
            refs=refs,
            suite_refs=[_suite_ref(r, out.parent) for r in refs],
            config=config,
            builder=builder,
            writer=model if model != "template" else None,
            env_model=env_model,
            base_url=base_url,
            cache=str(cache_path),
            max_connections=concurrency,
            verify=verify_session if verify else None,
            base_dir=str(out.parent),
        )
        executor = _executor_for(executor, n, model, env_model)
        worker = SessionWorker(spec)
        job = run_async(worker.aopen())  # the environments load here: a bad one is named before anything starts
        identity = _identity(refs, config, builder, worker.llms.get("writer"), worker.llms.get("simulator"), verify)
        opener = UnitLog.resume if resume else UnitLog.start
        log = opener(log_path, job="synth-sessions", fingerprint=fingerprint(identity), identity=identity)
        set_up.close()  # the run has started: its snapshot stays (the one it replaced goes)
        done = log.done_keys()
        try:  # a damaged record read back is a DataError: the log is closed (and its lock let go) all the same
            if resume and executor == "local":
                job.restore(r for r in log.records() if r.key in done)
            elif resume:  # the workers need the earlier sessions of the blocks they continue (SessionSpec.restored)
                open_blocks = {i // SHARD for i in range(n) if session_key(i) not in done}
                spec.restored = [
                    r.model_dump(mode="json")
                    for r in log.records()
                    if r.key in done and r.order // SHARD in open_blocks
                ]
        except BaseException:
            log.close()
            raise

        async def go(assembly: StreamedAssembly) -> None:
            bar = progress_bar("[bold]sessions")
            task = bar.add_task("sessions", total=n, completed=len(done))

            def record(unit_record):
                log.append(unit_record)
                assembly.add(unit_record)  # the suite is written as the sessions are made, in index order
                bar.advance(task)

            try:
                with bar:
                    if executor == "local":
                        await job.run(LocalExecutor(concurrency), record=record, done=done)
                    else:
                        shards = _pool(executor, concurrency, ray_address)
                        shard_of = lambda unit: unit.order // SHARD  # noqa: E731
                        await run_sessions(shards, worker, n, record=record, done=done, shard_of=shard_of)
            finally:
                usage.update(worker.usage() if executor == "local" or not worker.llms else {"note": _REMOTE_USAGE})
                await worker.aclose()

        usage: dict = {}
        with log:
            summary = SuiteSummary()
            text_encoder, encoder_missing = quality_encoder(encoder)
            quality = QualityCounter(text_encoder, encoder_missing=encoder_missing)
            with contextlib.ExitStack() as files:
                writers = [files.enter_context(WtbSuiteWriter(out))]
                if published is not None:
                    writers.append(files.enter_context(WtbSuiteWriter(published, published=True)))

                def write(session):
                    summary.add(session)
                    quality.add(session)
                    for writer in writers:
                        writer.write(session)

                assembly = StreamedAssembly(job, log, write, done=done)
                run_async(go(assembly))
                result = assembly.finish()
            log.mark_complete()
        figures = quality.result(drops=result.drops)
        perturbed = None
        if perturb_to is not None and summary.sessions:
            perturbed = _write_perturbed(out, perturb_to, perturb, perturb_seed, model, base_url, cache_path, verify)
        report = {
            "suite": str(out),
            "environments": job.env_refs,
            "builders": {ref: p.name for ref, p in zip(job.env_refs, job.providers, strict=True)},
            "config": vars(config),
            "resumed": resume,
            "sessions": summary.sessions,
            "tasks": summary.tasks,
            "task_types": dict(sorted(summary.task_types.items())),
            "subtypes": dict(sorted(summary.subtypes.items())),
            "transitions": {str(k): v for k, v in sorted(summary.transitions.items())},
            "failed_sessions": result.failed_sessions,
            "failed_units": result.failed_units,
            "environments_given_up": result.given_up,
            "drops": dict(result.drops.most_common()),
            "drop_examples": result.drop_examples,
            "utterances": dict(result.utterances),
            "utterance_fallback_rate": fallback_rate(result.utterances),
            "answers": dict(result.answers),
            "verified": verify,
            "problems": result.problems,
            "usage": usage,
            "executor": executor,
            "quality": figures.model_dump(mode="json"),
        }
        if perturbed is not None:
            report["perturbed"] = perturbed
        write_json(out.with_name(out.name + ".report.json"), report)

    table = Table(title=f"Sessions -> {out}", title_justify="left", show_header=False)
    table.add_row("sessions", f"{summary.sessions:,} of {n:,}")
    table.add_row("tasks", f"{summary.tasks:,}")
    for name, count in sorted(summary.task_types.items()):
        table.add_row(f"  {name}", f"{count:,}")
    for name, count in sorted(summary.subtypes.items()):
        table.add_row(f"  {name}", f"{count:,}")
    buckets = " / ".join(str(summary.transitions.get(k, 0)) for k in range(4))
    table.add_row("sessions with 0/1/2/3 transitions", buckets)
    table.add_row("task attempts dropped", f"{sum(result.drops.values()):,}")
    for reason, count in result.drops.most_common(5):
        table.add_row(f"  {reason}", f"{count:,}")
    if result.utterances:
        sources = ", ".join(f"{k} {v}" for k, v in sorted(result.utterances.items()))
        rate = fallback_rate(result.utterances)
        table.add_row("utterances", sources + (f" (fallback rate {rate:.1%})" if rate is not None else ""))
    if result.answers:
        table.add_row("answers (model-written)", ", ".join(f"{k} {v}" for k, v in sorted(result.answers.items())))
    for name, value in quality_headline(figures):
        table.add_row(name, value)
    if result.failed_sessions:
        table.add_row("[red]sessions not built[/]", f"{len(result.failed_sessions)} (reasons in the report)")
    for ref, why in result.given_up.items():
        table.add_row(f"[red]given up: {ref}[/]", why)
    if result.failed_units:
        table.add_row(
            "[red]sessions lost to the provider[/]", f"{len(result.failed_units)} (--resume makes them again)"
        )
    errors = sum(p["severity"] == Severity.ERROR.value for p in result.problems)
    if verify:
        table.add_row("verification", "[green]passed[/]" if not errors else f"[red]{errors} error(s)[/] (see report)")
    if perturbed is not None:
        kinds = ",".join(perturbed["kinds"])
        table.add_row("perturbed copy", f"{perturbed['suite']} ({kinds}, seed {perturbed['seed']})")
        if perturbed["paraphrase"] is not None:
            p = perturbed["paraphrase"]
            table.add_row("  reworded / kept (fallback)", f"{p['reworded']:,} / {p['fallbacks']:,}")
        if perturbed["problems"]:
            table.add_row("[red]perturbed copy[/]", f"[red]{len(perturbed['problems'])} error(s)[/] (see report)")
            errors += len(perturbed["problems"])
    console.print(table)
    if not summary.sessions and not result.failed_units:
        console.print("[red]no session could be built[/] (the report says why)")
        raise typer.Exit(1)
    if errors:
        raise typer.Exit(1)
    if result.failed_units:
        console.print(f"[yellow]{len(result.failed_units)} session(s) lost to the provider[/]: resume to retry them")
        raise typer.Exit(EXIT_PROVIDER_ERRORS)


EXECUTORS = ("auto", "local", "process", "ray")
AUTO_PROCESS_FROM = 512
"""``--executor auto`` runs a model-free job of this many sessions or more in worker processes: two shards of 256
(the ledger's balance blocks, which one process makes in order), so a second core has a shard of its own; below it
the workers' start (about a second each, importing toolwild) buys little."""
_REMOTE_USAGE = "kept by the workers (not collected)"


def _executor_for(executor: str, n: int, model: str, env_model: str | None) -> str:
    """The executor ``--executor`` names (``auto`` decided: see :data:`AUTO_PROCESS_FROM`).

    Why processes only for model-free runs by default: a template session is pure Python, so one event loop runs
    on one core whatever the concurrency, and a second process doubles the rate; a run that waits on a model gains
    nothing from another core and would open the model's cache and connections once per process.
    """
    if executor != "auto":
        return executor
    from toolwild.run.process_executor import available_cpus

    cpu_bound = model == "template" and env_model is None
    return "process" if cpu_bound and n >= AUTO_PROCESS_FROM and available_cpus() >= 2 else "local"


def _pool(executor: str, concurrency: int, ray_address: str | None):
    """The executor of the shards (``process`` or ``ray``)."""
    if executor == "process":
        from toolwild.run.process_executor import ProcessExecutor

        return ProcessExecutor(concurrency)
    from toolwild.run.ray_executor import RayExecutor
    from toolwild.synth.pipeline import SHARD

    return RayExecutor(concurrency, address=ray_address, shard_size=SHARD)


def _perturb_target(perturb: str | None, perturb_out: Path | None, out: Path, model: str) -> Path | None:
    """Where ``--perturb`` writes its copy (None without it); a bad value is refused before anything is made."""
    if perturb is None:
        if perturb_out is not None:
            raise ConfigError("--perturb-out needs --perturb")
        return None
    from toolwild.core.perturb import parse_kinds

    if any(k.name == "paraphrase" for k in parse_kinds(perturb)) and model == "template":
        raise ConfigError("--perturb paraphrase needs a model to reword the utterances: give --model M")
    target = perturb_out or out.with_name(out.stem + ".perturbed.jsonl")
    if target.resolve() == out.resolve():
        raise ConfigError("--perturb-out must not be OUT: the unperturbed suite is what the copy is measured against")
    return target


def _write_perturbed(
    out: Path,
    target: Path,
    kinds: str,
    seed: int,
    model: str,
    base_url: str | None,
    cache: Path,
    verify: bool,
) -> dict:
    """Write the perturbed copy of the suite just written (read back, so its recorded base is the file's
    fingerprint, the one ``eval`` records) and check it (oracle in both modes, gold calls replayed through a renamed
    session's name maps); what to put in the report."""
    from toolwild.cli._common import make_llm, run_async
    from toolwild.core.perturb import parse_kinds
    from toolwild.eval.validate import Severity, validate_suite
    from toolwild.synth.paraphrase import write_perturbed_suite

    paraphrase = any(k.name == "paraphrase" for k in parse_kinds(kinds))
    llm = make_llm(model, base_url=base_url, cache=cache) if paraphrase and model != "template" else None

    async def go():
        try:
            return await write_perturbed_suite(out, target, kinds, seed=seed, llm=llm)
        finally:
            if llm is not None:
                await llm.aclose()

    outcome = run_async(go())
    problems = []
    if verify:  # the gold followed the perturbation: the oracle scores 100% and the gold calls replay as recorded
        found = validate_suite(outcome.suite, oracle_check=True, replay=True, base_dir=target.parent)
        problems = [
            {"severity": p.severity.value, "where": p.where, "message": p.message}
            for p in found
            if p.severity is Severity.ERROR
        ]
    return {
        "suite": str(target),
        "kinds": outcome.record.kinds,
        "seed": outcome.record.seed,
        "base": outcome.record.base,
        "summary": outcome.summary(),
        "paraphrase": outcome.paraphrase.model_dump(mode="json") if outcome.paraphrase is not None else None,
        "problems": problems,
    }


def _own_ledger(
    ledger: Path | None, refs: list[str], builder: str, out: Path, *, resume: bool, undo: contextlib.ExitStack
) -> tuple[str | None, str | None]:
    """Snapshot the user's ledger beside the suite (OUT's name + ``.ledger/``) for ``--ledger``: the sessions are
    made and later evaluated on that copy, so editing your books afterwards never invalidates the suite, and the
    suite travels with what it needs. Returns (the snapshot's main file, how the sessions name it).

    The snapshot is made before the run's log is opened (the run's identity pins its bytes), so a command refused
    there (an unfinished run without ``--resume``, nothing to resume) must not keep it: leaving ``undo`` on an
    exception takes it back and puts back the snapshot it replaced (a killed run's, which its ``--resume`` needs);
    the caller closes ``undo`` once the run has started, which keeps the new snapshot and deletes the replaced one.
    """
    if ledger is None:
        return None, None
    import os
    import shutil

    from toolwild.envs.domains.ledger import copy_ledger_tree
    from toolwild.envs.registry import file_sha256, ledger_backend

    if "ledger" not in refs:
        raise ConfigError("--ledger needs --env ledger")
    if builder == "graph":
        raise ConfigError("--ledger works with the ledger's scenario templates: leave out --builder graph")
    ledger_backend(ledger)  # a ledger that does not load is named before anything is written
    folder = out.with_name(out.stem + ".ledger")
    fresh = out.with_name(out.stem + ".ledger.new")
    replaced = out.with_name(out.stem + ".ledger.old")
    shutil.rmtree(fresh, ignore_errors=True)
    main = folder / copy_ledger_tree(ledger, fresh).relative_to(fresh)
    if resume and folder.is_dir():
        if not main.is_file() or file_sha256(main) != file_sha256(fresh / main.relative_to(folder)):
            shutil.rmtree(fresh, ignore_errors=True)
            raise ConfigError(
                f"--resume: {ledger} changed since the killed run (its snapshot is {folder}); start again without "
                "--resume"
            )
        shutil.rmtree(fresh)
    else:
        shutil.rmtree(replaced, ignore_errors=True)
        had = folder.is_dir()
        if had:
            folder.rename(replaced)
        fresh.rename(folder)

        def settle(refused: type[BaseException] | None, *_: object) -> bool:
            if refused is not None:  # take the new snapshot back, and put back the one it replaced
                shutil.rmtree(folder, ignore_errors=True)
                if had:
                    replaced.rename(folder)
            else:
                shutil.rmtree(replaced, ignore_errors=True)
            return False

        undo.push(settle)
    return str(main.resolve()), os.path.relpath(main.resolve(), out.parent.resolve())


def _identity(refs, config, builder, writer, simulator, verify) -> dict:
    """What this run is (its unit log refuses another run's): environments (files by content), knobs, models."""
    import hashlib

    envs = []
    for ref in refs:
        path = Path(ref)
        digest = hashlib.sha256(path.read_bytes()).hexdigest()[:16] if path.is_file() else None
        envs.append({"ref": ref, "sha256": digest} if digest else {"ref": ref})
    knobs = {k: v for k, v in vars(config).items() if k != "concurrency"}
    if config.ledger:
        knobs["ledger_sha256"] = hashlib.sha256(Path(config.ledger).read_bytes()).hexdigest()
    return {
        "environments": envs,
        **knobs,
        "builder": builder,
        "writer": writer.backend.identity() if writer is not None else "template",
        "env_model": simulator.backend.identity() if simulator is not None else None,
        "verify": verify,
    }


async def verify_session(session, provider, *, simulator, base_dir) -> list[dict]:
    """The checks of one session as it is made (module-level: a Ray worker runs it too).

    Every provider's gold is checked alike (``provider`` is kept for the workers' call): grounded identifiers and
    hidden-intent labels the values bear out. The builders check both as they build, so a finding here is a bug.
    """
    from toolwild.eval.validate import avalidate_session

    problems = await avalidate_session(session, base_dir=Path(base_dir), simulator=simulator)
    return [{"severity": p.severity.value, "where": p.where, "message": p.message} for p in problems]
