"""Comparing runs of one suite: a leaderboard, paired bootstrap differences, per-category deltas and flipped tasks.

Two runs on the same sessions are *paired* data: a hard session is hard for both models. Resampling the sessions
once and scoring both runs on that same resample keeps the pairing, so the interval of the difference is much
narrower than two independent intervals suggest (and honest about what a 20-session suite can tell apart).
The resampling unit is the session, as for the run's own intervals (tasks of one session share a context).

Runs are compared only when they answer the same question: the same suite (its fingerprint), the same scoring
mode and the same history mode. Anything else is refused naming both values, never silently mixed. One exception is
the point of ``--perturb``: a run on a perturbed copy of a suite (its sessions record the base suite's fingerprint,
:mod:`toolwild.core.perturb`) asks the same questions with the tools changed, so it compares with runs of its base
suite; the *robustness* rows then give each perturbed run's accuracy minus its unperturbed run's, with the paired
interval (the sessions keep their ids, so the pairing is by session as for any two runs).
"""

from __future__ import annotations

import os
import random
import statistics
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Literal
from urllib.parse import quote

from pydantic import BaseModel, ConfigDict

from toolwild.core.jsonl import read_jsonl
from toolwild.core.session import Suite
from toolwild.core.task import TaskType
from toolwild.core.verdict import Metrics, SessionVerdict
from toolwild.errors import ConfigError
from toolwild.eval.metrics.accuracy import compute_metrics, scored_verdicts
from toolwild.eval.run_dir import TRAJECTORIES, Run, load_run, load_run_config

__all__ = [
    "CategoryRow",
    "Comparison",
    "Figure",
    "Flip",
    "PairedDifference",
    "RobustnessRow",
    "RunSummary",
    "compare_runs",
    "load_compared_run",
    "task_anchor",
]

LEVEL = 0.95
"""Confidence level of every interval here (the 2.5th and 97.5th percentiles of the resamples)."""
HEADLINE = ("task", "session", "optimal", "progress")
"""The leaderboard's metrics, in the order the scoreboard prints them."""
PAIRED = ("task", "session")
"""The metrics the paired bootstrap compares (accuracy: what a leaderboard ranks by)."""


class Figure(BaseModel):
    """One headline figure of a run: the point value over its scored sessions and its 95% bootstrap interval."""

    model_config = ConfigDict(extra="forbid")

    value: float | None
    """None when there is nothing to count (no task of the kinds the metric is about): shown as ``n/a``."""
    part: int
    whole: int
    unit: Literal["tasks", "sessions", "steps"]
    low: float | None = None
    high: float | None = None


class RunSummary(BaseModel):
    """A run as the leaderboard shows it."""

    model_config = ConfigDict(extra="forbid")

    label: str
    """The run folder's name (made unique when two folders share a name)."""
    path: str
    """Absolute path of the run folder (the flips link to its report.html)."""
    agent: str
    model: str | None
    sessions: int
    """Sessions scored (provider- and harness-error sessions left out, as in the run's metrics.json)."""
    verdicts_source: Literal["verdicts.jsonl", "re-scored"]
    figures: dict[str, Figure]
    perturbation: str | None = None
    """How the run's suite was perturbed (``rename,terse:8 (seed 0)``), or None for a run of the suite as it is."""


class PairedDifference(BaseModel):
    """B - A of one metric over the sessions scored in both runs, with its paired bootstrap interval."""

    model_config = ConfigDict(extra="forbid")

    a: int
    """Index of run A in ``Comparison.runs``."""
    b: int
    metric: Literal["task", "session"]
    point: float
    low: float
    high: float
    excludes_zero: bool
    """The interval lies wholly above or wholly below zero: the runs differ at the 95% level."""
    sessions: int


Group = Literal["task type", "subtype", "position", "transitions"]
Unit = Literal["tasks", "sessions"]


class CategoryCell(BaseModel):
    """One run's accuracy in one category."""

    model_config = ConfigDict(extra="forbid")

    correct: int
    total: int
    accuracy: float | None


class CategoryRow(BaseModel):
    """A category (task type, subtype, position or transition count) across the runs, with deltas to run 1."""

    model_config = ConfigDict(extra="forbid")

    group: Group
    category: str
    unit: Unit
    cells: list[CategoryCell]
    deltas: list[float | None]
    """Each run's accuracy minus the first run's (None where either has nothing to count); the first is 0."""


class Flip(BaseModel):
    """A task right in one run of a pair and wrong in the other."""

    model_config = ConfigDict(extra="forbid")

    a: int
    b: int
    session_id: str
    task_index: int
    task_type: str
    subtype: str
    correct_in: Literal["a", "b"]
    reason: str
    """Why the task failed in the run where it failed (the verdict's explanation, else the published reason)."""
    anchor: str
    """The task's fragment in a run's ``report.html`` (the same in both runs): see :func:`task_anchor`."""


class RobustnessRow(BaseModel):
    """A perturbed run against its unperturbed run: the accuracy deltas (perturbed - unperturbed), paired."""

    model_config = ConfigDict(extra="forbid")

    run: int
    """Index of the perturbed run in ``Comparison.runs``."""
    base: int
    """Index of the unperturbed run it is measured against (the same agent and model where one was given)."""
    kinds: list[str]
    seed: int
    deltas: list[PairedDifference]
    """Task and session accuracy, B = the perturbed run, A = the unperturbed one."""


class Comparison(BaseModel):
    """Everything ``toolwild compare`` shows (the HTML and the terminal table read only this)."""

    model_config = ConfigDict(extra="forbid")

    suite: str
    suite_digest: str
    mode: str
    history: str
    resamples: int
    seed: int
    level: float = LEVEL
    runs: list[RunSummary]
    pairs: list[PairedDifference]
    categories: list[CategoryRow]
    flips: list[Flip]
    base_digest: str | None = None
    """The unperturbed suite's fingerprint when some run is of a perturbed copy (else None: all share one suite)."""
    robustness: list[RobustnessRow] = []
    """Each perturbed run against an unperturbed run (empty when the runs hold no such pair)."""


def task_anchor(session_id: str, task_index: int) -> str:
    """The fragment that opens a task in a run's ``report.html``: ``task=<session id>/<n>``, where ``n`` is the
    task's number as every page and the terminal show it ("task n/N", counted from 1; ``task_index`` + 1), so a link
    and the label it opens name the same task.

    The session id is percent-encoded (a ``/`` or ``#`` in an id must not break the link); the report decodes it.
    """
    return f"task={quote(session_id, safe='')}/{task_index + 1}"


def load_compared_run(run_dir: Path) -> Run:
    """A run's verdicts: its ``verdicts.jsonl`` when present, else re-scored from its trajectories (no model call).

    Re-scoring is what ``toolwild show`` does, so runs made before ``verdicts.jsonl`` existed compare too.
    """
    config = load_run_config(run_dir)
    if config.trials > 1:  # its verdicts.jsonl is trial 0 alone: comparing it would hide the other trials
        raise ConfigError(
            f"{run_dir} is a run of {config.trials} trials: compare takes runs of one trial (the pooled figures "
            "and pass^k of a trial run are on its scoreboard: toolwild score RUN_DIR)"
        )
    run = load_run(run_dir, stored_verdicts=True)
    ran = _ran(run_dir) if run.verdicts_source == "verdicts.jsonl" else {t.session_id for t in run.trajectories}
    _check_finished(run_dir, run.verdicts, run.suite, ran)
    return run


def _check_distinct(run_dirs: Sequence[Path]) -> None:
    """Refuse a run given twice (the same folder, however spelled: a trailing slash, ``./``, a symbolic link): a run
    compared with itself differs by exactly zero, which reads as a finding and is none."""
    seen: dict[Path, Path] = {}
    for run_dir in run_dirs:
        if not run_dir.is_dir():
            continue  # load_compared_run says what is wrong with it
        key = run_dir.resolve()
        for earlier_key, earlier in seen.items():
            if key == earlier_key or os.path.samefile(key, earlier_key):
                same = "" if str(earlier) == str(run_dir) else f" ({earlier} and {run_dir} are one folder, {key})"
                raise ConfigError(
                    f"{run_dir} is given twice{same}: a run compared with itself differs by zero; give runs of "
                    "different agents, models or settings"
                )
        seen[key] = run_dir


def _check_finished(run_dir: Path, verdicts: list[SessionVerdict], suite: Suite | None, ran: set[str]) -> None:
    """Refuse an unfinished run: a session of its suite with no result in ``trajectories.jsonl`` (``ran``), unless
    the run stopped before it on a harness error (its verdict says so and leaves it out). Its figures would be those
    of the sessions it happened to finish (or count the rest as failed, after ``score``), and the pairing would
    compare what was never run."""
    if suite is None:
        return
    by_id = {v.session_id: v for v in verdicts}
    missing = [
        s.id for s in suite.sessions if s.id not in ran and (s.id not in by_id or by_id[s.id].harness_error is None)
    ]
    if missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise ConfigError(
            f"{run_dir} is unfinished: {len(missing)} of {len(suite.sessions)} session(s) have no result ({shown}); "
            f"compare takes finished runs. Finish it: toolwild eval --resume {run_dir}"
        )


def _ran(run_dir: Path) -> set[str]:
    """The sessions with a line in the run's ``trajectories.jsonl`` (ids only: the verdicts on file are what
    compare reads, so the lines are not validated again here; a torn or bad line names no session)."""
    path = run_dir / TRAJECTORIES
    if not path.exists():
        return set()
    return {
        obj["session_id"]
        for _number, obj in read_jsonl(path)
        if isinstance(obj, dict) and isinstance(obj.get("session_id"), str)
    }


def check_comparable(runs: Sequence[Run]) -> None:
    """Refuse runs that do not answer the same question, naming both values (the first run is the reference)."""
    if len(runs) < 2:
        raise ConfigError("compare needs at least two run directories")
    first = runs[0]
    for run in runs[1:]:
        if run.family != first.family:
            raise ConfigError(
                f"{first.path} and {run.path} are runs of different suites (fingerprint {_named(first)} in "
                f"{first.path.name}, {_named(run)} in {run.path.name}; suites {first.config.suite} and "
                f"{run.config.suite}): only runs of one suite, or of perturbed copies of it, compare"
            )
        for field, what in (("mode", "scoring modes"), ("history", "history modes")):
            mine, theirs = getattr(first.config, field), getattr(run.config, field)
            if mine != theirs:
                raise ConfigError(
                    f"{first.path} and {run.path} use different {what} (--{field} {mine.value} in "
                    f"{first.path.name}, {theirs.value} in {run.path.name}): their figures do not compare"
                )


def _named(run: Run) -> str:
    """A run's suite fingerprint for a message, with its base's when it is a perturbed copy."""
    if run.perturbation is None:
        return run.digest[:12]
    return f"{run.digest[:12]}, a perturbation of {run.perturbation.base[:12]}"


def _scored(run: Run) -> list[SessionVerdict]:
    """The sessions a run's metrics count: the rule of ``compute_metrics`` (harness errors never, provider errors
    only when the run asked for it)."""
    return scored_verdicts(run.verdicts, count_provider_errors=run.config.count_provider_errors)


def _sums(verdict: SessionVerdict) -> tuple[int, int, int, int, int, int, int]:
    """A session's contribution to the headline ratios: (correct, tasks, session correct, optimal, optimal tasks,
    progress steps done, progress steps), counted as ``compute_metrics`` counts them."""
    multi_opt = [t for t in verdict.tasks if t.task_type in (TaskType.PARALLEL, TaskType.MIXED)]
    multi_prog = [t for t in verdict.tasks if t.task_type in (TaskType.SEQUENTIAL, TaskType.MIXED)]
    return (
        sum(t.label == "correct" for t in verdict.tasks),
        len(verdict.tasks),
        int(verdict.correct),
        sum(t.is_optimal for t in multi_opt),
        len(multi_opt),
        sum(t.progress_complete for t in multi_prog),
        sum(t.progress_total for t in multi_prog),
    )


_RATIOS = {"task": (0, 1), "session": (2, None), "optimal": (3, 4), "progress": (5, 6)}
"""Metric -> (numerator column, denominator column) of :func:`_sums`; None: the number of sessions."""
_UNITS: dict[str, Literal["tasks", "sessions", "steps"]] = {
    "task": "tasks",
    "session": "sessions",
    "optimal": "tasks",
    "progress": "steps",
}


def _resamples(n: int, resamples: int, seed: int) -> Iterator[list[int]]:
    """Session indices of each bootstrap resample (drawn with replacement), the same sequence for a given seed."""
    rng = random.Random(seed)
    population = range(n)
    for _ in range(resamples):
        yield rng.choices(population, k=n)


def _interval(values: list[float]) -> tuple[float, float]:
    """The 95% percentile interval (linear interpolation between order statistics, as the run's own intervals)."""
    if len(values) < 2:
        return (values[0], values[0]) if values else (0.0, 0.0)
    cuts = statistics.quantiles(values, n=40, method="inclusive")
    return cuts[0], cuts[-1]


class _Packed:
    """A run's per-session counts (the seven columns of :func:`_sums`) packed into one integer per session.

    Why: a bootstrap sums every column over every resample (sessions x resamples x 7 additions in Python). Packing
    the columns side by side in fields wide enough never to carry into each other makes that one addition per
    session, about 7 times faster (1,024 sessions x 10,000 resamples in about a second per run).
    """

    def __init__(self, verdicts: Sequence[SessionVerdict]) -> None:
        rows = [_sums(v) for v in verdicts]
        self.n = len(rows)
        self.columns = [list(col) for col in zip(*rows, strict=True)] if rows else [[] for _ in range(7)]
        widest = max((max(col, default=0) for col in self.columns), default=0)
        self.bits = max(1, (widest * max(self.n, 1)).bit_length() + 1)
        self.packed = [sum(value << (k * self.bits) for k, value in enumerate(row)) for row in rows]

    def totals(self, idx: list[int] | range) -> list[int]:
        """The seven column sums over the sessions at ``idx`` (repeats counted)."""
        total = sum(map(self.packed.__getitem__, idx))
        mask = (1 << self.bits) - 1
        return [(total >> (k * self.bits)) & mask for k in range(7)]


def _ratio(totals: list[int], n: int, metric: str) -> float | None:
    num, den = _RATIOS[metric]
    bottom = totals[den] if den is not None else n
    return totals[num] / bottom if bottom else None


def _leaderboard_figures(verdicts: Sequence[SessionVerdict], resamples: int, seed: int) -> dict[str, Figure]:
    run = _Packed(verdicts)
    n = run.n
    drawn: dict[str, list[float]] = {m: [] for m in HEADLINE}
    for idx in _resamples(n, resamples, seed) if n else ():
        totals = run.totals(idx)
        for metric in HEADLINE:
            value = _ratio(totals, n, metric)
            if value is not None:
                drawn[metric].append(value)
    out = {}
    all_totals = run.totals(range(n))
    for metric in HEADLINE:
        num, den = _RATIOS[metric]
        part, whole = all_totals[num], (all_totals[den] if den is not None else n)
        value = part / whole if whole else None
        low, high = _interval(sorted(drawn[metric])) if value is not None and resamples else (None, None)
        out[metric] = Figure(value=value, part=part, whole=whole, unit=_UNITS[metric], low=low, high=high)
    return out


def _paired(
    a: int, b: int, runs: Sequence[Run], resamples: int, seed: int
) -> tuple[list[PairedDifference], list[Flip]]:
    """Paired bootstrap of B - A over the sessions scored in both runs, and the tasks that flip between them."""
    mine = {v.session_id: v for v in _scored(runs[a])}
    theirs = {v.session_id: v for v in _scored(runs[b])}
    common = [sid for sid in mine if sid in theirs]
    run_a, run_b = _Packed([mine[s] for s in common]), _Packed([theirs[s] for s in common])
    n = len(common)
    drawn: dict[str, list[float]] = {m: [] for m in PAIRED}
    for idx in _resamples(n, resamples, seed) if n else ():  # one resample of sessions, applied to both runs
        totals_a, totals_b = run_a.totals(idx), run_b.totals(idx)
        for metric in PAIRED:
            va, vb = _ratio(totals_a, n, metric), _ratio(totals_b, n, metric)
            if va is not None and vb is not None:
                drawn[metric].append(vb - va)
    pairs = []
    all_a, all_b = run_a.totals(range(n)), run_b.totals(range(n))
    for metric in PAIRED:
        va, vb = _ratio(all_a, n, metric), _ratio(all_b, n, metric)
        if va is None or vb is None:
            continue
        point = vb - va
        low, high = _interval(sorted(drawn[metric])) if resamples else (point, point)
        excludes = low > 0 or high < 0
        pairs.append(
            PairedDifference(
                a=a, b=b, metric=metric, point=point, low=low, high=high, excludes_zero=excludes, sessions=n
            )
        )
    return pairs, _flips(a, b, [(mine[s], theirs[s]) for s in common])


def _flips(a: int, b: int, sessions: list[tuple[SessionVerdict, SessionVerdict]]) -> list[Flip]:
    out = []
    for va, vb in sessions:
        for ta, tb in zip(va.tasks, vb.tasks, strict=False):
            if (ta.label == "correct") == (tb.label == "correct"):
                continue
            failed = tb if ta.label == "correct" else ta
            out.append(
                Flip(
                    a=a,
                    b=b,
                    session_id=va.session_id,
                    task_index=ta.task_index,
                    task_type=ta.task_type.value,
                    subtype=ta.subtype.value,
                    correct_in="a" if ta.label == "correct" else "b",
                    reason=failed.explanation or failed.error_reason or "",
                    anchor=task_anchor(va.session_id, ta.task_index),
                )
            )
    return out


def _category_rows(metrics: Sequence[Metrics]) -> list[CategoryRow]:
    """Per-category accuracy of every run (from its metrics, so it equals metrics.json), deltas to the first."""
    groups: list[tuple[Group, Unit, list[dict]]] = [
        ("task type", "tasks", [m.task_type_info for m in metrics]),
        ("subtype", "tasks", [m.turn_subtype_info for m in metrics]),
        ("position", "tasks", [{f"task {int(k) + 1}": v for k, v in m.layer_info.items()} for m in metrics]),
        (
            "transitions",
            "sessions",
            [
                {f"{k} transition(s)": v["session"] for k, v in m.extensions.get("transition_info", {}).items()}
                for m in metrics
            ],
        ),
    ]
    rows = []
    for group, unit, infos in groups:
        keys = list(dict.fromkeys(k for info in infos for k in info))
        for key in keys:
            cells = [_cell(info.get(key)) for info in infos]
            if not any(c.total for c in cells):
                continue
            base = cells[0].accuracy
            deltas = [None if c.accuracy is None or base is None else c.accuracy - base for c in cells]
            rows.append(CategoryRow(group=group, category=key, unit=unit, cells=cells, deltas=deltas))
    return rows


def _cell(leaf: dict | None) -> CategoryCell:
    if not leaf or not leaf.get("total_count"):
        return CategoryCell(correct=0, total=0, accuracy=None)
    return CategoryCell(correct=int(leaf["correct_count"]), total=int(leaf["total_count"]), accuracy=leaf["accuracy"])


def _labels(runs: Sequence[Run]) -> list[str]:
    """Run folder names, or their paths where two folders share a name (``a/r`` and ``b/r``)."""
    names = [r.path.name for r in runs]
    return [r.path.name if names.count(r.path.name) == 1 else str(r.path) for r in runs]


def compare_runs(run_dirs: Sequence[Path], *, resamples: int = 10_000, seed: int = 0) -> Comparison:
    """Load and compare runs: the leaderboard, B - A for every pair (A listed before B), categories and flips.

    Raises:
        ConfigError: fewer than two runs, a folder that is not a run, or runs of different suites (a perturbed copy
            counts as its base suite), scoring modes or history modes.
        DataError: a malformed ``verdicts.jsonl`` line (file, line, field).
    """
    if resamples < 0:
        raise ConfigError(f"--resamples must be 0 or more, not {resamples}")
    if len(run_dirs) < 2:
        raise ConfigError("compare needs at least two run directories")
    runs = [load_compared_run(Path(d)) for d in run_dirs]  # a folder that is no run (or a trial run) is refused first
    _check_distinct([Path(d) for d in run_dirs])
    check_comparable(runs)
    metrics = [
        compute_metrics(
            _scored(r),
            model_name=r.config.model or r.config.agent,
            mode=r.config.mode,
            count_provider_errors=True,  # _scored already applied the run's own rule
            resamples=0,
        )
        for r in runs
    ]
    summaries = [
        RunSummary(
            label=label,
            path=str(run.path.resolve()),
            agent=run.config.agent,
            model=run.config.model,
            sessions=len(_scored(run)),
            verdicts_source=run.verdicts_source,
            figures=_leaderboard_figures(_scored(run), resamples, seed),
            perturbation=run.perturbation.label() if run.perturbation is not None else None,
        )
        for label, run in zip(_labels(runs), runs, strict=True)
    ]
    pairs: list[PairedDifference] = []
    flips: list[Flip] = []
    for a in range(len(runs)):
        for b in range(a + 1, len(runs)):
            more_pairs, more_flips = _paired(a, b, runs, resamples, seed)
            pairs += more_pairs
            flips += more_flips
    first = runs[0].config
    perturbed = any(r.perturbation is not None for r in runs)
    return Comparison(
        suite=first.suite,
        suite_digest=runs[0].digest,
        mode=first.mode.value,
        history=first.history.value,
        resamples=resamples,
        seed=seed,
        runs=summaries,
        pairs=pairs,
        categories=_category_rows(metrics),
        flips=flips,
        base_digest=runs[0].family if perturbed else None,
        robustness=_robustness(runs, pairs),
    )


def _unperturbed_for(run: Run, runs: Sequence[Run]) -> int | None:
    """The unperturbed run a perturbed one is measured against: the first with the same agent and model, else the
    first unperturbed run (None when every run is perturbed)."""
    plain = [i for i, r in enumerate(runs) if r.perturbation is None]
    same = [i for i in plain if (runs[i].config.agent, runs[i].config.model) == (run.config.agent, run.config.model)]
    return (same or plain or [None])[0]


def _oriented(pair: PairedDifference, a: int, b: int) -> PairedDifference:
    """The difference B - A of a pair computed either way round (a percentile interval negates exactly)."""
    if (pair.a, pair.b) == (a, b):
        return pair
    return pair.model_copy(update={"a": a, "b": b, "point": -pair.point, "low": -pair.high, "high": -pair.low})


def _robustness(runs: Sequence[Run], pairs: Sequence[PairedDifference]) -> list[RobustnessRow]:
    """Each perturbed run's paired deltas against its unperturbed run (reusing the pairs already drawn)."""
    rows = []
    for k, run in enumerate(runs):
        base = _unperturbed_for(run, runs) if run.perturbation is not None else None
        if base is None or run.perturbation is None:
            continue
        deltas = [_oriented(p, base, k) for p in pairs if {p.a, p.b} == {base, k}]
        rows.append(
            RobustnessRow(run=k, base=base, kinds=run.perturbation.kinds, seed=run.perturbation.seed, deltas=deltas)
        )
    return rows
