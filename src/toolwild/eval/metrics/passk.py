"""pass^k and pass@k over the trials of a run, the per-task success variance, and their bootstrap intervals.

A single run hides variance: a task passed once may fail the next time. With every session run k times (``eval
--trials k``), each task has n valid trials of which c succeeded, and the unbiased estimators over those n runs are,
for every k' <= n:

- pass@k' = 1 - C(n-c, k') / C(n, k'): the chance that at least one of k' runs drawn from the n succeeds;
- pass^k' = C(c, k') / C(n, k'): the chance that all k' of them succeed (τ-bench's reliability figure).

Both are computed per task (c = the trials where the task was correct) and per session (c = the trials where every
task was), then averaged over tasks and over sessions. pass^1 = pass@1 = c/n, so with every session at its k trials
pass^1 over tasks is the run's pooled task accuracy and pass^1 over sessions its pooled session accuracy, exactly
(the averages are computed in exact fractions, then rounded once).

A (session, trial) lost to the provider (unless ``--count-provider-errors``) or to the harness is no result: it is
left out and listed, and the session's n is its valid trials. A task or session counts towards pass^k' only when its
n >= k' (the estimator needs k' runs to draw); how many did is recorded per k'. A session without any valid trial is
left out entirely.

The per-task success variance is the mean, over tasks with n >= 2, of the unbiased sample variance of the task's
0/1 success indicator over its n trials: c(n-c) / (n(n-1)), an unbiased estimate of the task's p(1-p). It is 0 when
every task always passes or always fails, and at most about 0.25 (a task that passes half the time).

Intervals: a bootstrap over sessions (a session is drawn with all its trials), with the seed and the draws of the
headline intervals (:mod:`toolwild.eval.metrics.ci`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from math import comb
from typing import Any

from toolwild.core.verdict import Metrics, ScoringMode, SessionVerdict
from toolwild.eval.metrics.accuracy import compute_metrics, scored_verdicts
from toolwild.eval.metrics.ci import bootstrap_ratios

__all__ = ["SessionTrials", "compute_trial_metrics", "pass_at_k", "pass_hat_k", "tally_trials", "trial_extension"]

ESTIMATOR = (
    "unbiased over the n valid trials, c of them successes: pass@k = 1 - C(n-c,k)/C(n,k), pass^k = C(c,k)/C(n,k); "
    "per task (c = trials where the task was correct) and per session (c = trials where every task was), averaged "
    "over the tasks (sessions) with n >= k"
)
VARIANCE = (
    "mean over tasks with n >= 2 of the unbiased sample variance of the task's 0/1 success over its n trials, "
    "c(n-c)/(n(n-1))"
)


def pass_hat_k(n: int, c: int, k: int) -> Fraction:
    """pass^k of one task or session: the chance that k of its n runs, drawn without replacement, all succeed."""
    _check(n, c, k)
    return Fraction(comb(c, k), comb(n, k))


def pass_at_k(n: int, c: int, k: int) -> Fraction:
    """pass@k of one task or session: the chance that at least one of k of its n runs succeeds."""
    _check(n, c, k)
    return 1 - Fraction(comb(n - c, k), comb(n, k))


def _check(n: int, c: int, k: int) -> None:
    if not (0 <= c <= n and 1 <= k <= n):
        raise ValueError(f"pass^k/pass@k need 0 <= c <= n and 1 <= k <= n (n={n}, c={c}, k={k})")


@dataclass
class SessionTrials:
    """One session's outcomes over a run's trials."""

    session_id: str
    trials: int = 0
    """n: the trials that count (not lost to the provider or the harness)."""
    correct: int = 0
    """Trials where every task of the session was correct."""
    tasks_correct: list[int] = field(default_factory=list)
    """Per task (in session order), the trials where it was correct."""
    lost: list[int] = field(default_factory=list)
    """Trials that do not count (lost to the provider or the harness, or with no result)."""


def tally_trials(
    by_trial: Sequence[Sequence[SessionVerdict]], *, count_provider_errors: bool = False
) -> list[SessionTrials]:
    """Per session, its valid trials and successes; a trial counts by the rule of the headline figures
    (:func:`~toolwild.eval.metrics.accuracy.scored_verdicts`).

    Sessions come in the order the headline's bootstrap draws them (first counted appearance, trial by trial), so
    both bootstraps draw the same sessions; sessions without any counted trial come last.
    """
    found: list[dict[str, SessionVerdict]] = []
    counted: list[dict[str, SessionVerdict]] = []
    for verdicts in by_trial:
        found.append({v.session_id: v for v in verdicts})
        kept = scored_verdicts(verdicts, count_provider_errors=count_provider_errors)
        counted.append({v.session_id: v for v in kept})
    order = [sid for trial in counted for sid in trial] + [sid for trial in found for sid in trial]
    sessions = []
    for sid in dict.fromkeys(order):
        tally = SessionTrials(sid)
        for trial, verdicts in enumerate(counted):
            verdict = verdicts.get(sid)
            if verdict is None:
                tally.lost.append(trial)
                continue
            if not tally.trials:
                tally.tasks_correct = [0] * len(verdict.tasks)
            tally.trials += 1
            tally.correct += verdict.correct
            for task in verdict.tasks:
                if task.label == "correct" and task.task_index < len(tally.tasks_correct):
                    tally.tasks_correct[task.task_index] += 1
        sessions.append(tally)
    return sessions


def _mean(values: list[Fraction]) -> float | None:
    """The exact mean, rounded once (None when there is nothing to average)."""
    return float(sum(values, Fraction(0)) / len(values)) if values else None


def _figures(sessions: list[SessionTrials], k: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """pass^k' and pass@k' for every k' <= k, over tasks and over sessions, and how many of each counted."""
    values: dict[str, Any] = {"pass^k": {"task": {}, "session": {}}, "pass@k": {"task": {}, "session": {}}}
    counted: dict[str, Any] = {"task": {}, "session": {}}
    for kk in range(1, k + 1):
        ready = [s for s in sessions if s.trials >= kk]
        for name, estimator in (("pass^k", pass_hat_k), ("pass@k", pass_at_k)):
            tasks = [estimator(s.trials, c, kk) for s in ready for c in s.tasks_correct]
            values[name]["task"][str(kk)] = _mean(tasks)
            values[name]["session"][str(kk)] = _mean([estimator(s.trials, s.correct, kk) for s in ready])
        counted["task"][str(kk)] = sum(len(s.tasks_correct) for s in ready)
        counted["session"][str(kk)] = len(ready)
    return values, counted


def _variance(sessions: list[SessionTrials]) -> tuple[float | None, int]:
    """The per-task success variance (see the module docstring) and the number of tasks it averages."""
    parts = [
        Fraction(c * (s.trials - c), s.trials * (s.trials - 1))
        for s in sessions
        if s.trials >= 2
        for c in s.tasks_correct
    ]
    return _mean(parts), len(parts)


def _units(sessions: list[SessionTrials], k: int) -> list[dict[str, tuple[float, float]]]:
    """Per session, each figure as (sum over its tasks, tasks counted), for the bootstrap's ratios of sums."""
    units = []
    for s in sessions:
        unit: dict[str, tuple[float, float]] = {}
        for kk in range(1, k + 1):
            ok = s.trials >= kk
            for name, estimator in (("pass^k", pass_hat_k), ("pass@k", pass_at_k)):
                tasks = sum(float(estimator(s.trials, c, kk)) for c in s.tasks_correct) if ok else 0.0
                unit[f"{name}/task/{kk}"] = (tasks, len(s.tasks_correct) if ok else 0)
                unit[f"{name}/session/{kk}"] = (float(estimator(s.trials, s.correct, kk)) if ok else 0.0, int(ok))
        if s.trials >= 2:
            spread = sum(c * (s.trials - c) / (s.trials * (s.trials - 1)) for c in s.tasks_correct)
            unit["variance"] = (spread, len(s.tasks_correct))
        units.append(unit)
    return units


def _intervals(sessions: list[SessionTrials], k: int, resamples: int, seed: int) -> dict[str, Any]:
    """The bootstrap intervals, nested as the figures are (``pass^k.task.2``, ``success_variance``)."""
    flat = bootstrap_ratios(_units(sessions, k), resamples=resamples, seed=seed)
    out: dict[str, Any] = {"pass^k": {"task": {}, "session": {}}, "pass@k": {"task": {}, "session": {}}}
    for key, bounds in flat.items():
        if key == "variance":
            out["success_variance"] = bounds
            continue
        name, unit, kk = key.split("/")
        out[name][unit][kk] = bounds
    return out


def trial_extension(
    by_trial: Sequence[Sequence[SessionVerdict]],
    *,
    count_provider_errors: bool = False,
    resamples: int = 1000,
    seed: int = 0,
) -> dict[str, Any]:
    """``extensions.trials`` of a trial run's metrics: the figures, their intervals, and what was left out."""
    k = len(by_trial)
    everything = tally_trials(by_trial, count_provider_errors=count_provider_errors)
    sessions = [s for s in everything if s.trials]
    values, counted = _figures(sessions, k)
    variance, variance_tasks = _variance(sessions)
    out: dict[str, Any] = {
        "k": k,
        "estimator": ESTIMATOR,
        "sessions": len(sessions),
        "tasks": sum(len(s.tasks_correct) for s in sessions),
        "valid_runs": sum(s.trials for s in sessions),
        **values,
        "counted": counted,
        "success_variance": {"value": variance, "tasks": variance_tasks, "definition": VARIANCE},
        "incomplete_sessions": [
            {"session_id": s.session_id, "valid_trials": s.trials, "lost_trials": s.lost} for s in everything if s.lost
        ],
        "per_session": [
            {"session_id": s.session_id, "trials": s.trials, "correct": s.correct, "tasks_correct": s.tasks_correct}
            for s in sessions
        ],
    }
    if resamples > 0 and sessions:
        out["confidence_intervals"] = _intervals(sessions, k, resamples, seed)
    return out


def compute_trial_metrics(
    by_trial: Sequence[Sequence[SessionVerdict]],
    *,
    model_name: str,
    mode: ScoringMode = ScoringMode.WTB,
    count_provider_errors: bool = False,
    resamples: int = 1000,
    seed: int = 0,
) -> Metrics:
    """The metrics of a run of ``len(by_trial)`` trials (one list of session verdicts per trial).

    One trial: exactly :func:`~toolwild.eval.metrics.accuracy.compute_metrics` (no ``trials`` block), so a run of
    one trial writes the metrics of a run from before trials. Several: every published figure pools the trials (a
    task run k times counts k times, intervals drawn per session), and ``extensions.trials`` holds pass^k', pass@k'
    (k' = 1..k), the success variance and their intervals.
    """
    if len(by_trial) == 1:
        return compute_metrics(
            by_trial[0],
            model_name=model_name,
            mode=mode,
            count_provider_errors=count_provider_errors,
            resamples=resamples,
            seed=seed,
        )
    flat = [v for verdicts in by_trial for v in verdicts]
    metrics = compute_metrics(
        flat,
        model_name=model_name,
        mode=mode,
        count_provider_errors=count_provider_errors,
        resamples=resamples,
        seed=seed,
        trial_of=[t for t, verdicts in enumerate(by_trial) for _ in verdicts],
    )
    metrics.extensions["trials"] = trial_extension(
        by_trial, count_provider_errors=count_provider_errors, resamples=resamples, seed=seed
    )
    return metrics
