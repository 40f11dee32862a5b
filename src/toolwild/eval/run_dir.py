"""The run directory, as one format: its file names, the one :class:`Run` type, loading it back, and its metrics.

A run directory holds everything needed to re-score or resume a run::

    config.json          the RunConfig (never a secret)
    suite.jsonl          the sessions the run keeps (a selection, a perturbed copy, the built-in suite)
    trajectories.jsonl   one finished session per line, appended as each ends
    verdicts.jsonl       per-session verdicts, rewritten whole at the end
    metrics.json         the scoreboard's figures
    report.html          the viewer
    user_audit.json      the audit of a simulated user (``--user model:M``)
    trials/<t>/          trials 1..k-1 of a trial run (trajectories.jsonl, verdicts.jsonl)
    forks/<i>/           forks 1..n-1 of a forked run (trajectories.jsonl, verdicts.jsonl)

Trials (``RunConfig.trials`` = k): every session is run k times; the unit of work, of the checkpoint and of resuming
is one (session, trial) pair. Trial 0 keeps the run directory's own files, so a run of one trial is byte for byte a
run from before trials and every reader of one trial (``show``, ``report``'s viewer, ``compare``,
``--export-wtb-result``) reads trial 0 as it always did; trial t >= 1 keeps the same two files in ``trials/<t>/``.

Forked runs (``RunConfig.history`` = ``forked``): every session is run once per task boundary i (a *fork*: tasks
before i teacher-forced, tasks from i on free; see :mod:`toolwild.eval.session`). The layout is that of trials:
fork 0 (the plain free run) keeps the run directory's own files; fork i >= 1 keeps its two files in ``forks/<i>/``,
with a line for each session of more than i tasks. A fork's trajectory holds every task of its session: the
teacher-forced ones as their gold steps (what the agent was shown), so it scores and shows like any other.

Why one module: three readers (``show``/``report``, ``score``, ``compare``) and the writer (``eval``) used to each
spell the file names and decide "trial or forked metrics?" on their own.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import ValidationError

from toolwild.core.files import write_text_atomic
from toolwild.core.formats.results import task_digest, trajectory_mismatch
from toolwild.core.formats.wtb import load_wtb_suite
from toolwild.core.jsonl import read_jsonl, validation_to_data_error
from toolwild.core.perturb import PerturbationRecord, suite_perturbation
from toolwild.core.session import Suite
from toolwild.core.trajectory import Trajectory, TrajectoryStatus
from toolwild.core.verdict import Metrics, ScoringMode, SessionVerdict
from toolwild.errors import ConfigError, DataError, ScoringError
from toolwild.eval.interactive import score_interactive_suite
from toolwild.eval.metrics.forked import compute_forked_metrics
from toolwild.eval.metrics.passk import compute_trial_metrics
from toolwild.eval.run_config import RunConfig
from toolwild.eval.scoring.session import score_suite
from toolwild.eval.session import HistoryMode
from toolwild.eval.user_audit import UserAuditReport, load_user_audit, user_failures

__all__ = [
    "CONFIG",
    "FORKS",
    "METRICS",
    "REPORT",
    "SUITE",
    "TRAJECTORIES",
    "TRIALS",
    "USER_AUDIT",
    "VERDICTS",
    "EncodedVerdicts",
    "Run",
    "check_exists",
    "check_fork",
    "check_result_file",
    "check_run_suite",
    "check_trial",
    "fork_count",
    "fork_dir",
    "fork_sessions",
    "forked_task_runs",
    "load_metrics",
    "load_run",
    "load_run_config",
    "load_run_trajectories",
    "mark_user_failures",
    "missing_note",
    "part_dir",
    "read_verdicts",
    "result_missing_note",
    "run_metrics",
    "score_parts",
    "trial_dir",
    "verdict_line",
    "write_part_verdicts",
    "write_verdicts",
]

CONFIG = "config.json"
"""The run's :class:`~toolwild.eval.run_config.RunConfig`."""
SUITE = "suite.jsonl"
"""The sessions a run keeps as its own (a selection, a perturbed copy, the built-in suite): re-scoring, resuming and
``compare`` read it."""
METRICS = "metrics.json"
"""The run's figures (the scoreboard), rewritten whole at the end."""
REPORT = "report.html"
"""The run's viewer."""

TRAJECTORIES = "trajectories.jsonl"

VERDICTS = "verdicts.jsonl"
"""Per-session verdicts of a run, rewritten whole at the end (like metrics.json), so a resumed run's file is whole."""

TRIALS = "trials"
"""Folder of a trial run that holds trials 1..k-1 (``trials/<t>/trajectories.jsonl``, ``trials/<t>/verdicts.jsonl``)."""

FORKS = "forks"
"""Folder of a forked run that holds forks 1..n-1 (``forks/<i>/trajectories.jsonl``, ``forks/<i>/verdicts.jsonl``)."""

USER_AUDIT = "user_audit.json"
"""The audit of a run's simulated user (``--user model:M``), made before the agent runs: what
``--exclude-user-failures`` reads."""


def trial_dir(run_dir: Path, trial: int) -> Path:
    """Where trial ``trial`` keeps its trajectories and verdicts: the run directory itself for trial 0 (a run of one
    trial is exactly a run from before trials), ``trials/<t>/`` for the others."""
    return run_dir if trial == 0 else run_dir / TRIALS / str(trial)


def fork_dir(run_dir: Path, fork: int) -> Path:
    """Where fork ``fork`` of a forked run keeps its trajectories and verdicts: the run directory itself for fork 0
    (the free run), ``forks/<i>/`` for the others."""
    return run_dir if fork == 0 else run_dir / FORKS / str(fork)


def part_dir(run_dir: Path, trial: int, fork: int) -> Path:
    """The folder of one trial or one fork (a run has several of one kind at most)."""
    return fork_dir(run_dir, fork) if fork else trial_dir(run_dir, trial)


def fork_count(suite: Suite) -> int:
    """Forks of a forked run: one per task boundary of its longest session (fork i runs the sessions of more than
    i tasks)."""
    return max((len(s.tasks) for s in suite.sessions), default=0)


def fork_sessions(suite: Suite, fork: int) -> Suite:
    """The sessions fork ``fork`` runs: those with more than ``fork`` tasks (in the suite's order)."""
    return suite.model_copy(update={"sessions": [s for s in suite.sessions if len(s.tasks) > fork]})


def forked_task_runs(suite: Suite) -> int:
    """Task-runs of a forked run: per session of n tasks, fork i runs its n - i last tasks, so n(n+1)/2 in all (a
    free or ``wtb`` run makes n)."""
    return sum(len(s.tasks) * (len(s.tasks) + 1) // 2 for s in suite.sessions)


def check_fork(config: RunConfig, suite: Suite, fork: int) -> None:
    """Refuse a fork the run does not have, naming the ones it has."""
    if fork == 0:
        return
    if config.history is not HistoryMode.FORKED:
        raise ConfigError(f"the run has no fork {fork}: it is not a forked run (--history {config.history.value})")
    if not 0 < fork < fork_count(suite):
        raise ConfigError(f"the run has no fork {fork}: it has forks 0..{fork_count(suite) - 1}")


def check_trial(config: RunConfig, trial: int) -> None:
    """Refuse a trial the run does not have, naming the ones it has."""
    if not 0 <= trial < config.trials:
        have = "only trial 0" if config.trials == 1 else f"trials 0..{config.trials - 1}"
        raise ConfigError(f"the run has no trial {trial}: it has {have}")


def check_exists(path: Path) -> None:
    """Refuse a path that names nothing, before anything else is asked of it: a mistyped run folder or result file
    would otherwise be taken for a result file and get a message about a missing ``--suite``."""
    if not path.exists():
        raise ConfigError(f"no such file or folder: {path}")


def load_run_config(run_dir: Path) -> RunConfig:
    """The config of a run directory, or a ConfigError that says what is wrong with it and what to do."""
    path = run_dir / CONFIG
    if not run_dir.is_dir():
        raise ConfigError(f"{run_dir} is not a run directory (no such folder)")
    if not path.exists():
        raise ConfigError(
            f"{run_dir} is not a run directory (no config.json): if a run was killed before it started, start it "
            "again with --name"
        )
    try:
        text = path.read_bytes().decode("utf-8")
        return RunConfig.model_validate_json(text)
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except ValidationError as exc:
        raise ConfigError(f"{path}: not a run config: {validation_to_data_error(exc)}") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None


def load_run_trajectories(
    run_dir: Path,
    *,
    repair: bool = False,
    suite: Suite | None = None,
    trial: int = 0,
    fork: int = 0,
    torn: list[DataError] | None = None,
) -> list[Trajectory]:
    """Finished trajectories of a run directory (last line per session wins), of one trial (default trial 0) or one
    fork of a forked run.

    Args:
        run_dir: the run directory.
        repair: rewrite the file without a torn last line and without provider- or harness-error sessions (used
            when resuming, so that the resumed run appends the redone sessions without duplicating them).
        suite: when given, a trajectory must belong to one of its sessions and hold every task of it (a line that
            does not is not a result of this run: a DataError names it).
        trial: which trial's file (see :func:`trial_dir`).
        fork: which fork's file (see :func:`fork_dir`); with ``suite``, a session of that file must have more than
            ``fork`` tasks.
        torn: when given, a torn last line (left out: its session did not finish) is added to it as a DataError
            naming file and line, so a reader that shows the run can say so instead of leaving it out in silence.

    Raises:
        DataError: a line that is not a trajectory (bad bytes, bad JSON, bad fields), other than a torn last line.
    """
    path = part_dir(run_dir, trial, fork) / TRAJECTORIES
    if not path.exists():
        return []
    records = list(read_jsonl(path))
    kept: dict[str, Trajectory] = {}
    for position, (number, obj) in enumerate(records, start=1):
        last = position == len(records)
        try:
            if isinstance(obj, DataError):
                raise obj
            traj = Trajectory.model_validate(obj)
        except (DataError, ValidationError) as exc:
            if last:  # a write cut short by a kill: the session simply was not finished
                if torn is not None:
                    error = exc if isinstance(exc, DataError) else validation_to_data_error(exc)
                    torn.append(
                        DataError(
                            f"the last line is cut short (a write stopped by a kill; {error.message}): its session "
                            "did not finish",
                            file=path,
                            line=number,
                        )
                    )
                continue
            error = exc if isinstance(exc, DataError) else validation_to_data_error(exc)
            raise DataError(f"not a trajectory: {error}", file=path, line=number) from None
        if suite is not None:
            session = suite.session(traj.session_id)
            if session is None:
                raise DataError(f"session {traj.session_id!r} is not in the run's suite", file=path, line=number)
            mismatch = trajectory_mismatch(traj, session)
            if mismatch is not None:
                raise mismatch.located(file=path, line=number)
            if fork >= len(session.tasks):
                raise DataError(
                    f"session {traj.session_id!r} has {len(session.tasks)} task(s): it has no fork {fork}",
                    file=path,
                    line=number,
                )
            if traj.status is TrajectoryStatus.OK and len(traj.tasks) != len(session.tasks):
                raise DataError(
                    f"session {traj.session_id!r} has {len(traj.tasks)} task(s) here and {len(session.tasks)} in "
                    "the suite: not a finished session of this run",
                    file=path,
                    line=number,
                    field="tasks",
                )
        kept[traj.session_id] = traj
    if repair:
        final = {sid: t for sid, t in kept.items() if t.final}
        lines = (json.dumps(t.model_dump(mode="json"), ensure_ascii=False) + "\n" for t in final.values())
        write_text_atomic(path, "".join(lines))
        return list(final.values())
    return list(kept.values())


EncodedVerdicts = dict[str, tuple[SessionVerdict, str]]
"""Verdict lines already encoded (:func:`verdict_line`), per session id, with the verdict each was made from."""


def verdict_line(verdict: SessionVerdict) -> str:
    """A verdict as its ``verdicts.jsonl`` line."""
    return json.dumps(verdict.model_dump(mode="json"), ensure_ascii=False) + "\n"


def write_verdicts(path: Path, verdicts: list[SessionVerdict], encoded: EncodedVerdicts | None = None) -> None:
    """One ``SessionVerdict`` per line, written atomically: the one writer of ``eval``'s ``verdicts.jsonl`` and of
    ``score --verdicts``, so both files hold the same content for the same run.

    ``encoded``: lines made as the sessions ended (``eval`` makes them while the run waits on the model), used for
    the very verdict objects they were made from; any other verdict is encoded here.
    """
    lines = []
    for v in verdicts:
        done = encoded.get(v.session_id) if encoded else None
        lines.append(done[1] if done is not None and done[0] is v else verdict_line(v))
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, "".join(lines))


def write_part_verdicts(
    run_dir: Path,
    config: RunConfig,
    by_part: list[list[SessionVerdict]],
    encoded: list[EncodedVerdicts] | None = None,
) -> None:
    """Every part's ``verdicts.jsonl`` in its own folder (:func:`part_dir`: trials, or forks of a forked run; part
    0's is the run's own ``verdicts.jsonl``); ``encoded``: each part's lines made as its sessions ended (see
    :func:`write_verdicts`)."""
    forked = config.history is HistoryMode.FORKED
    for k, verdicts in enumerate(by_part):
        folder = fork_dir(run_dir, k) if forked else trial_dir(run_dir, k)
        write_verdicts(folder / VERDICTS, verdicts, encoded[k] if encoded else None)


def check_run_suite(config: RunConfig, suite: Suite, suite_path: Path) -> None:
    """Refuse a suite other than the run's: results of a suite whose session ids overlap would score silently."""
    if config.suite_digest is None:  # a run from before fingerprints were recorded: nothing to compare
        return
    digest = suite.fingerprint()
    if digest != config.suite_digest:
        raise ScoringError(
            f"{suite_path} is not the suite this run used (fingerprint {digest[:12]}, the run's "
            f"{config.suite_digest[:12]})"
        )


def check_result_file(results: Path, suite: Suite, suite_path: Path, unchecked: list[str]) -> str | None:
    """Check, against ``suite``, the toolwild trajectories of a result file that carry no task digest (written
    before :func:`~toolwild.core.formats.results.task_digest` was recorded; ``unchecked`` holds their session ids).

    Why: two suites can share session ids, and such results would score against the wrong tasks without a word. A
    ``trajectories.jsonl`` still in its run folder (the run's own, or a trial's or a fork's) names the suite it ran
    in ``config.json``: each unchecked session's tasks are compared with that suite's, so scoring a subset of the
    run's sessions against a bigger suite still works.

    Returns:
        None when every line is checked; else a warning to print (the sessions were matched by id alone).

    Raises:
        ScoringError: a session whose tasks differ from the run's suite's, naming the session, the task and both
            requests.
    """
    if not unchecked:
        return None
    found = _run_of_file(results)
    run_suite: Suite | None = None
    if found is not None and Path(found.suite).is_file():
        run_suite = load_wtb_suite(Path(found.suite))[0]
    if run_suite is None:
        return (
            f"{results}: {len(unchecked)} session(s) ({', '.join(unchecked[:3])}{', …' if len(unchecked) > 3 else ''}) "
            "carry no task digest (written by an older toolwild) and no run folder names their suite: they were "
            f"matched to {suite_path} by session id alone"
        )
    for sid in unchecked:
        mine, theirs = run_suite.session(sid), suite.session(sid)
        if mine is None or theirs is None:
            continue  # an id the run's suite lacks: the scorer refuses it
        for k, (ran, asked) in enumerate(zip(mine.tasks, theirs.tasks, strict=False)):
            if task_digest(ran) != task_digest(asked):
                raise ScoringError(
                    f"{results}: session {sid!r}, task {k + 1}: the run ran {ran.utterance[:80]!r} (its suite "
                    f"{found.suite if found else '?'}), but {suite_path} asks {asked.utterance[:80]!r}: the results "
                    "belong to another suite"
                )
        if len(mine.tasks) != len(theirs.tasks):
            raise ScoringError(
                f"{results}: session {sid!r} has {len(mine.tasks)} task(s) in the run's suite and "
                f"{len(theirs.tasks)} in {suite_path}: the results belong to another suite"
            )
    return None


def _run_of_file(results: Path) -> RunConfig | None:
    """The config of the run a ``trajectories.jsonl`` belongs to, if it still sits in its run folder (directly, or
    in a trial's or fork's folder); None for any other file."""
    if results.name != TRAJECTORIES:
        return None
    folder = results.resolve().parent
    candidates = [folder]
    if folder.parent.name in (TRIALS, FORKS):
        candidates.append(folder.parent.parent)
    for run_dir in candidates:
        if (run_dir / CONFIG).is_file():
            try:
                return load_run_config(run_dir)
            except ConfigError:
                return None
    return None


@dataclass
class Run:
    """A run directory read back: its config, suite, trajectories, and verdicts scored again in its own mode (of
    one trial: ``trial``, or one fork of a forked run: ``fork``, whose ``suite`` is then the sessions it ran).

    The one type a run is read back as (``show``, ``report``, ``compare``, ``score``) and the one
    :func:`toolwild.evaluate` returns; what only the run that just ended holds in hand (every part's verdicts, the
    metrics it wrote, its user audit) is filled by it and empty when read back.
    """

    path: Path
    """The run directory."""
    config: RunConfig
    suite: Suite
    trajectories: list[Trajectory]
    verdicts: list[SessionVerdict]
    trial: int = 0
    fork: int = 0
    missing: list[str] = field(default_factory=list)
    """Sessions of ``suite`` with no result in the run (an unfinished run: killed, or still going), in suite order;
    with ``missing_as_failed`` their verdicts are failed ones, as ``toolwild score`` counts them."""
    torn: list[DataError] = field(default_factory=list)
    """The run's torn last line (file and line), if it has one: a write a kill cut short."""
    parts: list[list[SessionVerdict]] = field(default_factory=list)
    """Every part's verdicts (trials, or forks of a forked run; part 0's are :attr:`verdicts`): filled by the run
    that made them, empty when read back (:func:`score_parts` scores them all again)."""
    metrics: Metrics | None = None
    """The figures the run wrote to ``metrics.json`` (filled by :func:`toolwild.evaluate`; see :func:`load_metrics`)."""
    user_audit: UserAuditReport | None = None
    """The audit of the run's simulated user, when it has one (filled by :func:`toolwild.evaluate`)."""
    warnings: list[str] = field(default_factory=list)
    """What the run that just ended could not do without losing finished work (a report not written)."""
    verdicts_source: Literal["verdicts.jsonl", "re-scored"] = "re-scored"
    """Where :attr:`verdicts` come from: scored again from the trajectories, or read as the run wrote them."""

    @property
    def digest(self) -> str:
        """The fingerprint of the run's suite (recorded in its config; computed for a run from before)."""
        return self.config.suite_digest or self.suite.fingerprint()

    @property
    def perturbation(self) -> PerturbationRecord | None:
        """What the run's suite is a perturbation of (None: the suite as it is)."""
        return suite_perturbation(self.suite)

    @property
    def family(self) -> str:
        """The fingerprint of the suite the run asks about: its base suite's for a perturbed copy, else its own."""
        perturbation = self.perturbation
        return perturbation.base if perturbation is not None else self.digest

    @property
    def every_verdict(self) -> list[SessionVerdict]:
        """Every part's verdicts in one list (what decides a command's exit code)."""
        return [v for part in (self.parts or [self.verdicts]) for v in part]

    @property
    def excluded_sessions(self) -> int:
        """Sessions the user audit left out (``--exclude-user-failures``), of part 0."""
        return sum(v.user_error is not None and v.user_error.startswith("excluded:") for v in self.verdicts)


def read_verdicts(path: Path, config: RunConfig) -> list[SessionVerdict]:
    """A run's ``verdicts.jsonl`` as written, each checked against the run's mode (no re-scoring)."""
    out: list[SessionVerdict] = []
    for number, obj in read_jsonl(path):
        if isinstance(obj, DataError):
            raise obj
        try:
            verdict = SessionVerdict.model_validate(obj)
        except ValidationError as exc:
            error = validation_to_data_error(exc)
            raise DataError(
                f"not a session verdict: {error.message}", file=path, line=number, field=error.field
            ) from None
        if verdict.mode is not config.mode:
            raise DataError(
                f"verdict scored in mode {verdict.mode.value}, the run's config says {config.mode.value}",
                file=path,
                line=number,
                field="mode",
            )
        out.append(verdict)
    if not out:
        raise DataError("no session verdict in the file", file=path)
    return out


def load_run(
    run_dir: str | Path,
    *,
    missing_as_failed: bool = False,
    trial: int = 0,
    fork: int = 0,
    stored_verdicts: bool = False,
) -> Run:
    """Score a run again from its trajectories (no model call): what ``show``, ``report`` and ``compare`` read, so a
    run made before ``verdicts.jsonl`` existed is read the same way as a new one. ``trial``: which trial of a trial
    run, ``fork``: which fork of a forked run (default 0, the run's own files). The sessions without a result and a
    torn last line are returned (``missing``, ``torn``), so that no reader shows a part of a run as the whole.

    ``stored_verdicts``: read the part's ``verdicts.jsonl`` as written when it has one (what ``compare`` reads: no
    re-scoring, and no trajectory loaded: ``trajectories`` is then empty and ``verdicts_source`` says so).
    """
    run_dir = Path(run_dir)
    config = load_run_config(run_dir)
    check_trial(config, trial)
    stored = part_dir(run_dir, trial, fork) / VERDICTS
    if stored_verdicts and stored.exists():
        return Run(
            run_dir, config, _stored_suite(config), [], read_verdicts(stored, config), trial, fork,
            verdicts_source="verdicts.jsonl",
        )  # fmt: skip
    suite_path = Path(config.suite)
    suite, _report = load_wtb_suite(suite_path)
    check_run_suite(config, suite, suite_path)
    check_fork(config, suite, fork)
    torn: list[DataError] = []
    trajectories = load_run_trajectories(run_dir, suite=suite, trial=trial, fork=fork, torn=torn)
    if not trajectories:
        which = f" in trial {trial}" if config.trials > 1 else (f" in fork {fork}" if fork else "")
        cut = f" ({torn[0]})" if torn else ""
        raise ConfigError(f"{run_dir}: the run has no finished session{which} yet{cut}")
    part = fork_sessions(suite, fork) if fork else suite
    verdicts = _score_suite(run_dir, config, part, trajectories, mode=config.mode, missing_as_failed=missing_as_failed)
    found = {t.session_id for t in trajectories}
    missing = [s.id for s in part.sessions if s.id not in found]
    return Run(run_dir, config, part, trajectories, verdicts, trial, fork, missing, torn)


def _stored_suite(config: RunConfig) -> Suite:
    """The suite of a run read from its stored verdicts; when its file is gone, an empty stand-in (the config's
    fingerprint still names it), unless the config recorded no fingerprint (then the missing file is the error)."""
    path = Path(config.suite)
    if path.is_file() or config.suite_digest is None:
        return load_wtb_suite(path)[0]
    return Suite(name=path.stem, source=str(path))


def missing_note(
    run_dir: Path,
    missing: list[str],
    total: int,
    *,
    unit: str = "session(s)",
    counted: str = "they count as failed",
    limit: int = 5,
) -> str:
    """One line saying that a run is unfinished: how many sessions (or ``unit``: a trial run's (session, trial)
    pairs) have no result, the first few, how they count (``counted``: failed, as ``toolwild score`` counts them)
    and how to finish it."""
    shown = ", ".join(missing[:limit]) + (f" and {len(missing) - limit} more" if len(missing) > limit else "")
    return (
        f"{run_dir} is unfinished: {len(missing)} of {total} {unit} have no result ({shown}); {counted}, so the "
        f"figures are incomplete. Finish the run: toolwild eval --resume {run_dir}"
    )


def result_missing_note(results: Path, missing: list[str], total: int, *, limit: int = 5) -> str:
    """One line saying that a result file lacks sessions of its suite: how many, the first few ids, and how they
    count (failed, as ``toolwild score`` counts them)."""
    shown = ", ".join(missing[:limit]) + (f" and {len(missing) - limit} more" if len(missing) > limit else "")
    return (
        f"{results} has no result for {len(missing)} of {total} session(s) of the suite ({shown}): they count as failed"
    )


def score_parts(
    run_dir: Path, config: RunConfig, suite: Suite, *, mode: ScoringMode, torn: list[DataError] | None = None
) -> tuple[list[list[Trajectory]], list[list[SessionVerdict]]]:
    """Every part of a run scored again (``toolwild score RUN_DIR``): each trial's (or, of a forked run, each
    fork's) trajectories and verdicts, a session without a result in a part counting as failed there (as ``score``
    counts a missing session). Fork i holds the sessions of more than i tasks. ``torn`` collects torn last lines
    (see :func:`load_run_trajectories`)."""
    if config.history is HistoryMode.FORKED:
        trajectories = [
            load_run_trajectories(run_dir, suite=suite, fork=i, torn=torn) for i in range(fork_count(suite))
        ]
        parts = [fork_sessions(suite, i) for i in range(len(trajectories))]
    else:
        trajectories = [load_run_trajectories(run_dir, suite=suite, trial=t, torn=torn) for t in range(config.trials)]
        parts = [suite] * len(trajectories)
    verdicts = [
        _score_suite(run_dir, config, part, found, mode=mode) for part, found in zip(parts, trajectories, strict=True)
    ]
    return trajectories, verdicts


def run_metrics(
    config: RunConfig | None,
    by_part: list[list[SessionVerdict]],
    *,
    model_name: str,
    mode: ScoringMode,
    count_provider_errors: bool,
    seed: int = 0,
) -> Metrics:
    """The figures of a run's parts (``config``: None for a result file, one part): a forked run's with its
    per-fork block, any other's with pass^k and pass@k when it has several trials. The one place that decides
    which: ``eval``, ``score`` and ``report`` all ask it."""
    forked = config is not None and config.history is HistoryMode.FORKED
    compute = compute_forked_metrics if forked else compute_trial_metrics
    return compute(by_part, model_name=model_name, mode=mode, count_provider_errors=count_provider_errors, seed=seed)


def load_metrics(run_dir: Path, config: RunConfig, verdicts: list[SessionVerdict], *, model_name: str) -> Metrics:
    """The run's ``metrics.json`` (the scoreboard's figures); computed when the run has none yet, from ``verdicts``
    (part 0's, in hand) and every other part's scored again, as ``eval`` and ``score`` compute them."""
    path = run_dir / METRICS
    if path.is_file():
        try:
            return Metrics.model_validate_json(path.read_bytes())
        except ValueError as exc:
            raise DataError(f"not readable metrics JSON: {exc}", file=str(path)) from None
    by_part = [verdicts]
    if config.trials > 1 or config.history is HistoryMode.FORKED:
        suite, _report = load_wtb_suite(Path(config.suite))
        _trajectories, by_part = score_parts(run_dir, config, suite, mode=config.mode)
    return run_metrics(
        config, by_part, model_name=model_name, mode=config.mode, count_provider_errors=config.count_provider_errors
    )


def _score_suite(
    run_dir: Path,
    config: RunConfig,
    suite: Suite,
    trajectories: list[Trajectory],
    *,
    mode: ScoringMode,
    missing_as_failed: bool = True,
) -> list[SessionVerdict]:
    """A trial's verdicts as the run scores them: interactively with a simulated user (the sessions its audit
    found broken left out when the run asked for it), else by the live loop's judge in ``mode``."""
    if config.user == "recorded":
        return score_suite(suite, trajectories, mode=mode, missing_as_failed=missing_as_failed)
    verdicts = score_interactive_suite(suite, trajectories, missing_as_failed=missing_as_failed)
    if config.exclude_user_failures and (run_dir / USER_AUDIT).exists():
        mark_user_failures(verdicts, load_user_audit(run_dir / USER_AUDIT))
    return verdicts


def mark_user_failures(verdicts: list[SessionVerdict], report: UserAuditReport) -> int:
    """Leave out (``user_error``) the sessions the user audit found the simulator breaking; returns how many."""
    broken = {b.session_id: b for b in report.broken if b.session_id in user_failures(report)}
    marked = 0
    for verdict in verdicts:
        found = broken.get(verdict.session_id)
        if found is not None and verdict.user_error is None:
            verdict.user_error = f"excluded: the user audit found the simulator breaking it ({found.why[0]})"
            marked += 1
    return marked
