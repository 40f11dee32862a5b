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
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

__all__ = ["bootstrap_accuracy", "bootstrap_ratios", "resample_draws"]


def _percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    pos = q * (len(sorted_values) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def resample_draws(n: int, resamples: int, seed: int) -> list[int]:
    """The unit indices of every resample, ``n`` per resample, one after the other: exactly what
    ``random.Random(seed).randrange(n)`` returns ``n * resamples`` times in a row.

    Why not ``randrange``: for ``n`` units it is ``getrandbits(n.bit_length())`` drawn again while the value is
    ``>= n`` (CPython's ``Random._randbelow_with_getrandbits``), behind two Python-level calls per draw; calling
    ``getrandbits`` directly draws the same numbers in half the time, and the draws were most of a bootstrap's
    cost (256,000 of them for 256 sessions). A test pins the equality with ``randrange``, so the intervals of every
    earlier run are reproduced to the last digit.
    """
    if n <= 0:
        return []
    getrandbits = random.Random(seed).getrandbits
    bits = n.bit_length()
    out: list[int] = []
    append = out.append
    for _ in range(n * resamples):
        r = getrandbits(bits)
        while r >= n:
            r = getrandbits(bits)
        append(r)
    return out


def _packed_sums(columns: Sequence[Sequence[int]], draws: list[int], n: int) -> Iterator[list[int]]:
    """Per resample, the sum of each column over the drawn units, all columns summed at once.

    Why: summing ten columns one draw at a time in Python was the rest of the bootstrap's cost. The columns hold
    non-negative integers, so each unit's values are packed side by side into one integer (each in a field wide
    enough for a whole resample's sum): one C-level ``sum`` of the drawn units' packed integers then adds every
    column, exactly, and the fields are read back.
    """
    if n <= 0:
        return
    width = max(max(column, default=0) for column in columns) * n
    width = width.bit_length() + 1
    mask = (1 << width) - 1
    packed = [sum(column[i] << (width * j) for j, column in enumerate(columns)) for i in range(n)]
    pick = packed.__getitem__
    shifts = [width * j for j in range(len(columns))]
    for start in range(0, len(draws), n):
        total = sum(map(pick, draws[start : start + n]))
        yield [(total >> shift) & mask for shift in shifts]


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

    Every count is a non-negative integer (counts of tasks, sessions, steps): the sums are exact whatever the
    order, which is what lets :func:`_packed_sums` add them all at once.
    """
    n = len(per_session)
    names = sorted({k for r in ratios or () for k, (_, whole) in r.items() if whole} if ratios else set())
    units = [_with_runs(item) for item in per_session]
    columns: list[list[int]] = [[int(u[j]) for u in units] for j in range(4)]
    for k in names:
        assert ratios is not None
        columns.append([int(r[k][0]) if k in r else 0 for r in ratios])
        columns.append([int(r[k][1]) if k in r else 0 for r in ratios])
    if any(x < 0 for column in columns for x in column):
        raise ValueError("bootstrap counts must be non-negative")
    task_acc: list[float] = []
    session_acc: list[float] = []
    drawn: dict[str, list[float]] = {k: [] for k in names}
    for sums in _packed_sums(columns, resample_draws(n, resamples, seed), n):
        correct, total, sessions_ok, sessions = sums[:4]
        task_acc.append(correct / total if total else 0.0)
        session_acc.append(sessions_ok / sessions if sessions else 0.0)
        for j, k in enumerate(names):
            part, whole = sums[4 + 2 * j], sums[5 + 2 * j]
            if whole:  # a resample without any such case says nothing about the ratio
                drawn[k].append(part / whole)
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
    n = len(units)
    names = sorted({k for u in units for k, (_, whole) in u.items() if whole})
    parts = {k: [float(u[k][0]) if k in u else 0.0 for u in units] for k in names}
    wholes = {k: [float(u[k][1]) if k in u else 0.0 for u in units] for k in names}
    drawn: dict[str, list[float]] = {k: [] for k in names}
    draws = resample_draws(n, resamples, seed) if names else []
    for start in range(0, len(draws), n):
        times = [0] * n  # how often each unit was drawn: the sums are then one pass per figure
        for i in draws[start : start + n]:
            times[i] += 1
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
