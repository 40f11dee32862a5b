"""Bootstrap confidence intervals for task and session accuracy, and for the other headline ratios.

Tasks of one session are not independent (they share a context), so the resampling unit is the session: each
resample draws sessions with replacement and recomputes every figure (task and session accuracy; optionally optimal
path rate, progress and the state checks, each a ratio of sums over the drawn sessions).

In a trial run a session is drawn with all its trials (they share the session, so they are not independent either);
the pass^k figures (``passk.py``) are drawn by :func:`bootstrap_ratios` with the same seed and the same draws.
"""

from __future__ import annotations

import operator
import random
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["bootstrap_accuracy", "bootstrap_ratios"]


def _percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    pos = q * (len(sorted_values) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def bootstrap_accuracy(
    per_session: Sequence[tuple[int, int]] | Sequence[tuple[int, int, int, int]],
    *,
    resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
    ratios: Sequence[Mapping[str, tuple[int, int]]] | None = None,
) -> dict[str, Any]:
    """Percentile intervals for task and session accuracy (and for each ratio in ``ratios``).

    Args:
        per_session: ``(correct tasks, tasks)`` for each session; in a trial run ``(correct tasks, tasks, correct
            runs, runs)`` summed over the session's trials (session accuracy is then correct runs over runs).
        resamples: number of bootstrap resamples.
        seed: seed of the resampling (recorded in the output).
        level: confidence level.
        ratios: per session, ``name -> (part, whole)`` of further figures (optimal paths of the tasks that have
            one, completed steps, matched states); each gets an interval when its whole is not zero overall. The
            draws are the same with or without them, so task and session intervals do not change.
    """
    rng = random.Random(seed)
    n = len(per_session)
    names = sorted({k for r in ratios or () for k, (_, whole) in r.items() if whole} if ratios else set())
    task_acc: list[float] = []
    session_acc: list[float] = []
    drawn: dict[str, list[float]] = {k: [] for k in names}
    for _ in range(resamples):
        correct = total = sessions_ok = sessions = 0
        parts = dict.fromkeys(names, 0)
        wholes = dict.fromkeys(names, 0)
        for _ in range(n):
            i = rng.randrange(n)
            c, t, ok, runs = _with_runs(per_session[i])
            correct += c
            total += t
            sessions_ok += ok
            sessions += runs
            if names and ratios is not None:
                for k, (part, whole) in ratios[i].items():
                    if k in parts:
                        parts[k] += part
                        wholes[k] += whole
        task_acc.append(correct / total if total else 0.0)
        session_acc.append(sessions_ok / sessions if sessions else 0.0)
        for k in names:
            if wholes[k]:  # a resample without any such case says nothing about the ratio
                drawn[k].append(parts[k] / wholes[k])
    task_acc.sort()
    session_acc.sort()
    alpha = (1 - level) / 2
    meta = {"level": level, "resamples": resamples, "seed": seed, "unit": "session"}
    out = {
        "task": {"low": _percentile(task_acc, alpha), "high": _percentile(task_acc, 1 - alpha), **meta},
        "session": {"low": _percentile(session_acc, alpha), "high": _percentile(session_acc, 1 - alpha), **meta},
    }
    for k in names:
        values = sorted(drawn[k])
        out[k] = {"low": _percentile(values, alpha), "high": _percentile(values, 1 - alpha), **meta}
    return out


def _with_runs(item: tuple[int, ...]) -> tuple[int, int, int, int]:
    """A session's ``(correct, tasks)`` with its session outcome as ``(correct runs, runs)`` (one run, correct when
    every task is), or a trial run's four sums as they are."""
    if len(item) == 4:
        return item  # type: ignore[return-value]
    c, t = item
    return c, t, int(c == t and t > 0), 1


def bootstrap_ratios(
    units: Sequence[Mapping[str, tuple[float, float]]],
    *,
    resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> dict[str, dict[str, Any]]:
    """Percentile intervals of ratios of sums: per unit (a session), ``name -> (part, whole)``; each resample draws
    the units with replacement and every ratio is the drawn parts' sum over the drawn wholes' sum.

    The draws are those of :func:`bootstrap_accuracy` for the same number of units and seed (one ``randrange(n)``
    per drawn unit), so figures of one run drawn by either function rest on the same resamples. A resample whose
    wholes sum to zero says nothing about that ratio and is skipped for it; a ratio whose whole is zero over every
    unit gets no interval.
    """
    rng = random.Random(seed)
    n = len(units)
    names = sorted({k for u in units for k, (_, whole) in u.items() if whole})
    parts = {k: [float(u[k][0]) if k in u else 0.0 for u in units] for k in names}
    wholes = {k: [float(u[k][1]) if k in u else 0.0 for u in units] for k in names}
    drawn: dict[str, list[float]] = {k: [] for k in names}
    for _ in range(resamples):
        times = [0] * n  # how often each unit was drawn: the sums are then one pass per figure
        for _ in range(n):
            times[rng.randrange(n)] += 1
        for k in names:
            whole = sum(map(operator.mul, times, wholes[k]))
            if whole:
                drawn[k].append(sum(map(operator.mul, times, parts[k])) / whole)
    alpha = (1 - level) / 2
    meta = {"level": level, "resamples": resamples, "seed": seed, "unit": "session"}
    out = {}
    for k in names:
        values = sorted(drawn[k])
        out[k] = {"low": _percentile(values, alpha), "high": _percentile(values, 1 - alpha), **meta}
    return out
