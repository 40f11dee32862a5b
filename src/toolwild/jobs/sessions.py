"""``toolwild synth sessions`` as a library call: verified wild sessions over any environment, streamed to disk,
resumable after a kill.

:func:`generate_sessions` writes exactly what the command writes (the suite, ``OUT.progress.jsonl``,
``OUT.report.json``, the ``published`` copy, a ``perturb`` copy, an own ledger's snapshot) and returns a
:class:`GeneratedSessions`; the command only parses its options, calls it, prints the table and picks the exit code.
The sessions themselves are made by the session job (:mod:`toolwild.synth.session_job`), under the executor and
unit log of :mod:`toolwild.run.job`; a suite that fits in memory and needs no resume is
:func:`toolwild.synth.sessions.synth_sessions`, the same job without the files.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolwild.core.files import write_json
from toolwild.core.formats.wtb import WtbSuiteWriter
from toolwild.core.quality import QualityCounter, SuiteQuality
from toolwild.core.session import Session
from toolwild.errors import ConfigError
from toolwild.eval.validate import Severity, SuiteSummary
from toolwild.llm.client import LLM
from toolwild.run import LocalExecutor, UnitRecord
from toolwild.run.job import AUTO_PROCESS_FROM, JobLog, choose_executor, make_executor
from toolwild.run.lock import OutputLock
from toolwild.run.loop import run_async
from toolwild.synth import session_job
from toolwild.synth.encoder_choice import EmbedProgress, check_encoder, quality_encoder
from toolwild.synth.pipeline import SessionSpec, SessionWorker
from toolwild.synth.session_job import (
    SessionJob,
    SessionsReport,
    StreamedAssembly,
    fallback_rate,
    run_sessions,
    session_key,
)
from toolwild.synth.sessions import SessionsConfig

__all__ = ["AUTO_PROCESS_FROM", "JOB", "GeneratedSessions", "generate_sessions", "verify_session"]

JOB = "synth-sessions"
"""The job's name in its unit log (a log of another job is refused)."""
BUILDERS = ("auto", "graph")
_REMOTE_USAGE = "kept by the workers (not collected)"

Progress = Callable[[int, int], None]
"""``on_progress(done, total)``: sessions finished (a resumed run's earlier ones included) of the run's total."""


@dataclass(frozen=True)
class GeneratedSessions:
    """What :func:`generate_sessions` made: the files' paths, the counts, and the report it wrote."""

    suite: Path
    report_path: Path
    report: dict[str, Any]
    """``OUT.report.json``, as written."""
    requested: int
    summary: SuiteSummary
    """The kept sessions' counts (sessions, tasks, task types, subtypes, transitions)."""
    outcome: SessionsReport
    """What the job dropped, could not build, lost to the provider, and the verification problems."""
    quality: SuiteQuality
    perturbed: dict[str, Any] | None
    """The ``perturb`` copy's entry of the report (None without one)."""
    verified: bool

    @property
    def sessions(self) -> int:
        return self.summary.sessions

    @property
    def errors(self) -> int:
        """Verification errors: of the suite, and of the perturbed copy."""
        own = sum(p["severity"] == Severity.ERROR.value for p in self.outcome.problems)
        return own + (len(self.perturbed["problems"]) if self.perturbed is not None else 0)

    @property
    def lost(self) -> int:
        """Sessions lost to the provider (a resumed run makes them again)."""
        return len(self.outcome.failed_units)


def generate_sessions(
    envs: Sequence[str],
    out: str | Path,
    *,
    n: int = 256,
    seed: int = 0,
    like_published: bool = False,
    transitions: int | None = None,
    max_calls: int = 3,
    ambiguous: float = 0.25,
    vague: float = 0.35,
    distractors: int = 0,
    model: str = "template",
    env_model: str | None = None,
    base_url: str | None = None,
    cache: str | Path | None = None,
    published: str | Path | None = None,
    verify: bool = True,
    builder: str = "auto",
    ledger: str | Path | None = None,
    concurrency: int = 32,
    resume: bool = False,
    executor: str = "auto",
    ray_address: str | None = None,
    encoder: str = "auto",
    perturb: str | None = None,
    perturb_seed: int = 0,
    perturb_out: str | Path | None = None,
    on_progress: Progress | None = None,
    embed_progress: EmbedProgress | None = None,
) -> GeneratedSessions:
    """Generate ``n`` verified wild sessions over ``envs`` into ``out`` (the options of ``toolwild synth
    sessions``, same names and defaults; see its help).

    ``envs``: built-in ids, ``*.env.json`` files or directories of them (round robin). Each session is logged to
    ``OUT.progress.jsonl`` as it is made; ``resume=True`` continues a killed run of the same options, keeping every
    finished session. The suite is written in session order as the sessions are made, the same bytes whatever the
    concurrency, executor or resumes. ``on_progress(done, total)`` is called before the first session, after each,
    and is last called with ``done == total`` before the quality figures are measured (``embed_progress`` shows
    that embedding).

    Raises:
        ConfigError: a bad option (named as the command names it), an unfinished run without ``resume``, a resume
            of another run; another process writing OUT.
        ToolwildError: an environment or ledger that does not load.
    """
    out = Path(out)
    ledger_path = Path(ledger) if ledger is not None else None
    _check_ranges(n, transitions, max_calls, ambiguous, vague, distractors, concurrency)
    # OUT and the files beside it have one writer: a second run on them is refused naming this one's pid, before it
    # writes anything; set_up takes back what the call made before its run started (a new ledger snapshot)
    with OutputLock(out), contextlib.ExitStack() as set_up:
        if builder not in BUILDERS:
            raise ConfigError(f"--builder {builder!r}: choose auto or graph")
        if like_published and transitions is not None:
            raise ConfigError("--like-published fixes every session's pattern: leave out --transitions")
        perturb_to = _perturb_target(perturb, Path(perturb_out) if perturb_out else None, out, model)
        refs = environment_refs(envs)
        choose_executor(executor)  # the name is checked here; `auto` is decided below
        check_encoder(encoder)  # the encoder is loaded after generation: a bad name must not wait for it
        ledger_file, ledger_ref = _own_ledger(ledger_path, refs, builder, out, resume=resume, undo=set_up)
        cache_path = Path(cache) if cache is not None else out.with_name(out.name + ".cache.sqlite")
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
        where = _executor_for(executor, n, model, env_model)
        worker = SessionWorker(spec)
        job = run_async(worker.aopen())  # the environments load here: a bad one is named before anything starts
        identity = _identity(refs, config, builder, worker.llms.get("writer"), worker.llms.get("simulator"), verify)
        log = JobLog(out.with_name(out.name + ".progress.jsonl"), job=JOB, identity=identity, resume=resume)
        set_up.close()  # the run has started: its snapshot stays (the one it replaced goes)
        with log:  # a damaged record read back is a DataError: the log is closed (and its lock let go) all the same
            _restore(log, job, spec, where, resume, n)
            run = _Run(log, job, worker, where, concurrency, ray_address, on_progress)
            summary, quality, outcome = run.write(
                out, Path(published) if published is not None else None, encoder, embed_progress
            )
            log.end()
        figures = quality.result(drops=outcome.drops)
        perturbed = None
        if perturb_to is not None and perturb is not None and summary.sessions:
            perturbed = _write_perturbed(out, perturb_to, perturb, perturb_seed, model, base_url, cache_path, verify)
        report = _report(out, job, config, resume, summary, outcome, verify, run.usage, where, figures, perturbed)
        report_path = out.with_name(out.name + ".report.json")
        write_json(report_path, report)
    return GeneratedSessions(out, report_path, report, n, summary, outcome, figures, perturbed, verify)


class _Run:
    """One run of the session job under its unit log: sessions made, logged, assembled and written in order."""

    def __init__(
        self,
        log: JobLog,
        job: SessionJob,
        worker: SessionWorker,
        where: str,
        concurrency: int,
        ray_address: str | None,
        on_progress: Progress | None,
    ) -> None:
        self.log, self.job, self.worker, self.where = log, job, worker, where
        self.concurrency, self.ray_address, self.on_progress = concurrency, ray_address, on_progress
        self.usage: dict[str, Any] = {}

    def write(
        self, out: Path, published: Path | None, encoder: str, embed_progress: EmbedProgress | None
    ) -> tuple[SuiteSummary, QualityCounter, SessionsReport]:
        """Make the sessions, writing the suite (and its published copy) as they come; counts and figures."""
        summary = SuiteSummary()
        text_encoder, encoder_missing = quality_encoder(encoder, progress=embed_progress)
        quality = QualityCounter(text_encoder, encoder_missing=encoder_missing)
        with contextlib.ExitStack() as files:
            writers = [files.enter_context(WtbSuiteWriter(out))]
            if published is not None:
                writers.append(files.enter_context(WtbSuiteWriter(published, published=True)))

            def write(session: Session) -> None:
                summary.add(session)
                quality.add(session, checks=assembly.checks)  # worked out where the session was made
                for writer in writers:
                    writer.write(session)

            assembly = StreamedAssembly(self.job, self.log.log, write, done=self.log.done)
            run_async(self._go(assembly))
            return summary, quality, assembly.finish()

    async def _go(self, assembly: StreamedAssembly) -> None:
        n, done = self.job.n_sessions, len(self.log.done)
        tell = self.on_progress or (lambda _done, _total: None)
        tell(done, n)

        def record(unit_record: UnitRecord) -> None:
            nonlocal done
            self.log.append(unit_record)
            assembly.add(unit_record)  # the suite is written as the sessions are made, in index order
            done += 1
            tell(done, n)

        try:
            if self.where == "local":
                await self.job.run(LocalExecutor(self.concurrency), record=record, done=self.log.done)
            else:
                shards = make_executor(
                    self.where, self.concurrency, ray_address=self.ray_address, shard_size=session_job.SHARD
                )
                shard_of = lambda unit: unit.order // session_job.SHARD  # noqa: E731
                await run_sessions(shards, self.worker, n, record=record, done=self.log.done, shard_of=shard_of)
        finally:
            local = self.where == "local" or not self.worker.llms
            self.usage.update(self.worker.usage() if local else {"note": _REMOTE_USAGE})
            await self.worker.aclose()


def _restore(log: JobLog, job: SessionJob, spec: SessionSpec, where: str, resume: bool, n: int) -> None:
    """Hand a resumed run's earlier sessions to whoever makes the next ones: the job here, or the workers (the
    earlier sessions of the blocks they continue, :attr:`SessionSpec.restored`)."""
    if not resume:
        return
    done = log.done
    if where == "local":
        job.restore(r for r in log.log.records() if r.key in done)
        return
    open_blocks = {i // session_job.SHARD for i in range(n) if session_key(i) not in done}
    spec.restored = [
        r.model_dump(mode="json")
        for r in log.log.records()
        if r.key in done and r.order // session_job.SHARD in open_blocks
    ]


def _report(
    out: Path,
    job: SessionJob,
    config: SessionsConfig,
    resume: bool,
    summary: SuiteSummary,
    result: SessionsReport,
    verify: bool,
    usage: dict[str, Any],
    executor: str,
    figures: SuiteQuality,
    perturbed: dict[str, Any] | None,
) -> dict[str, Any]:
    """``OUT.report.json``: counts, drops by reason, sessions not built, quality figures (keys in a fixed order)."""
    report = {
        "suite": str(out),
        "environments": job.env_refs,
        "builders": {ref: p.name for ref, p in zip(job.env_refs, job.providers, strict=True)},
        "config": dataclasses.asdict(config),
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
    return report


def _check_ranges(
    n: int, transitions: int | None, max_calls: int, ambiguous: float, vague: float, distractors: int, concurrency: int
) -> None:
    """The ranges the command's options enforce, for a caller from Python."""
    bad = [
        f"{name} {value!r}: {rule}"
        for name, value, ok, rule in (
            ("--n", n, n >= 1, "at least 1"),
            ("--transitions", transitions, transitions is None or 0 <= transitions <= 3, "0 to 3"),
            ("--max-calls", max_calls, 2 <= max_calls <= 4, "2 to 4"),
            ("--ambiguous", ambiguous, 0.0 <= ambiguous <= 1.0, "a share from 0 to 1"),
            ("--vague", vague, 0.0 <= vague <= 1.0, "a share from 0 to 1"),
            ("--distractors", distractors, distractors >= 0, "at least 0"),
            ("--concurrency", concurrency, concurrency >= 1, "at least 1"),
        )
        if not ok
    ]
    if bad:
        raise ConfigError("; ".join(bad))


def environment_refs(envs: Sequence[str]) -> list[str]:
    """Expand ``--env`` values: a directory stands for its environment files (sorted)."""
    from toolwild.core.formats.environment import ENV_SUFFIX

    if isinstance(envs, str):
        raise ConfigError(f"envs {envs!r}: give a list of environments, not one string")
    refs: list[str] = []
    for value in envs:
        path = Path(value)
        if path.is_dir():
            found = sorted(str(p) for p in path.glob(f"*{ENV_SUFFIX}"))
            if not found:
                raise ConfigError(f"--env {value}: the directory holds no *{ENV_SUFFIX} file")
            refs += found
        else:
            refs.append(str(value))
    return refs


def _suite_ref(ref: str, suite_dir: Path) -> str:
    """How the suite names an environment: a built-in by id, a file relative to the suite's folder."""
    path = Path(ref)
    if not path.is_file():
        return ref
    return os.path.relpath(path.resolve(), suite_dir.resolve())


def _executor_for(executor: str, n: int, model: str, env_model: str | None) -> str:
    """The executor ``--executor`` names, ``auto`` decided (:func:`toolwild.run.job.choose_executor`): a template
    run with no simulated environment calls no model, so it is CPU-bound."""
    return choose_executor(executor, units=n, cpu_bound=model == "template" and env_model is None)


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
    out: Path, target: Path, kinds: str, seed: int, model: str, base_url: str | None, cache: Path, verify: bool
) -> dict[str, Any]:
    """Write the perturbed copy of the suite just written (read back, so its recorded base is the file's
    fingerprint, the one ``eval`` records) and check it (oracle in both modes, gold calls replayed through a renamed
    session's name maps); what to put in the report."""
    from toolwild.core.perturb import parse_kinds
    from toolwild.eval.validate import validate_suite
    from toolwild.llm.registry import create_llm
    from toolwild.synth.paraphrase import write_perturbed_suite

    paraphrase = any(k.name == "paraphrase" for k in parse_kinds(kinds))
    llm: LLM | None = None
    if paraphrase and model != "template":
        llm = create_llm(model, base_url=base_url, cache=cache, max_connections=None)

    async def go() -> Any:
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
    """Snapshot the user's ledger beside the suite (OUT's name + ``.ledger/``) for ``ledger``: the sessions are
    made and later evaluated on that copy, so editing your books afterwards never invalidates the suite, and the
    suite travels with what it needs. Returns (the snapshot's main file, how the sessions name it).

    The snapshot is made before the run's log is opened (the run's identity pins its bytes), so a call refused
    there (an unfinished run without ``resume``, nothing to resume) must not keep it: leaving ``undo`` on an
    exception takes it back and puts back the snapshot it replaced (a killed run's, which its resume needs); the
    caller closes ``undo`` once the run has started, which keeps the new snapshot and deletes the replaced one.
    """
    if ledger is None:
        return None, None
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
        _swap_in(fresh, folder, replaced, undo)
    return str(main.resolve()), os.path.relpath(main.resolve(), out.parent.resolve())


def _swap_in(fresh: Path, folder: Path, replaced: Path, undo: contextlib.ExitStack) -> None:
    """Put the new snapshot in place, keeping the one it replaces until ``undo`` says whether the run started."""
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


def _identity(
    refs: list[str], config: SessionsConfig, builder: str, writer: LLM | None, simulator: LLM | None, verify: bool
) -> dict[str, Any]:
    """What this run is (its unit log refuses another run's): environments (files by content), knobs, models."""
    envs = []
    for ref in refs:
        path = Path(ref)
        digest = hashlib.sha256(path.read_bytes()).hexdigest()[:16] if path.is_file() else None
        envs.append({"ref": ref, "sha256": digest} if digest else {"ref": ref})
    knobs = {k: v for k, v in dataclasses.asdict(config).items() if k != "concurrency"}
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


async def verify_session(session: Session, provider: Any, *, simulator: LLM | None, base_dir: str) -> list[dict]:
    """The checks of one session as it is made (module-level: a worker process or Ray task runs it too).

    Every provider's gold is checked alike (``provider`` is kept for the workers' call): grounded identifiers and
    hidden-intent labels the values bear out. The builders check both as they build, so a finding here is a bug.
    """
    from toolwild.eval.validate import avalidate_session

    problems = await avalidate_session(session, base_dir=Path(base_dir), simulator=simulator)
    return [{"severity": p.severity.value, "where": p.where, "message": p.message} for p in problems]
