"""Bootstrap confidence intervals for task and session accuracy, and for the other headline ratios.

Tasks of one session are not independent (they share a context), so the resampling unit is the session: each
resample draws sessions with replacement and recomputes every figure (task and session accuracy; optionally optimal
path rate, progress and the state checks, each a ratio of sums over the drawn sessions).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["bootstrap_accuracy"]


def _percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    pos = q * (len(sorted_values) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def bootstrap_accuracy(
    per_session: Sequence[tuple[int, int]],
    *,
    resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
    ratios: Sequence[Mapping[str, tuple[int, int]]] | None = None,
) -> dict[str, Any]:
    """Percentile intervals for task and session accuracy (and for each ratio in ``ratios``).

    Args:
        per_session: ``(correct tasks, tasks)`` for each session.
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
        correct = total = sessions_ok = 0
        parts = dict.fromkeys(names, 0)
        wholes = dict.fromkeys(names, 0)
        for _ in range(n):
            i = rng.randrange(n)
            c, t = per_session[i]
            correct += c
            total += t
            sessions_ok += c == t and t > 0
            if names and ratios is not None:
                for k, (part, whole) in ratios[i].items():
                    if k in parts:
                        parts[k] += part
                        wholes[k] += whole
        task_acc.append(correct / total if total else 0.0)
        session_acc.append(sessions_ok / n)
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
