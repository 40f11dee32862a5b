"""Bootstrap confidence intervals for task and session accuracy.

Tasks of one session are not independent (they share a context), so the resampling unit is the session: each
resample draws sessions with replacement and recomputes both accuracies.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
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
    per_session: Sequence[tuple[int, int]], *, resamples: int = 1000, seed: int = 0, level: float = 0.95
) -> dict[str, Any]:
    """Percentile intervals for task and session accuracy.

    Args:
        per_session: ``(correct tasks, tasks)`` for each session.
        resamples: number of bootstrap resamples.
        seed: seed of the resampling (recorded in the output).
        level: confidence level.
    """
    rng = random.Random(seed)
    n = len(per_session)
    task_acc: list[float] = []
    session_acc: list[float] = []
    for _ in range(resamples):
        correct = total = sessions_ok = 0
        for _ in range(n):
            c, t = per_session[rng.randrange(n)]
            correct += c
            total += t
            sessions_ok += c == t and t > 0
        task_acc.append(correct / total if total else 0.0)
        session_acc.append(sessions_ok / n)
    task_acc.sort()
    session_acc.sort()
    alpha = (1 - level) / 2
    meta = {"level": level, "resamples": resamples, "seed": seed, "unit": "session"}
    return {
        "task": {"low": _percentile(task_acc, alpha), "high": _percentile(task_acc, 1 - alpha), **meta},
        "session": {"low": _percentile(session_acc, alpha), "high": _percentile(session_acc, 1 - alpha), **meta},
    }
