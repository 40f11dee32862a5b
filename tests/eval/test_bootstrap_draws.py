"""The bootstrap draws and sums faster but gives the very intervals it gave before (every earlier run's
``confidence_intervals`` must be reproduced to the last digit).

The reference below is the bootstrap as it was written before (one ``randrange`` per drawn session, the sums
accumulated draw by draw); the fast one must agree with it exactly, not approximately.
"""

from __future__ import annotations

import operator
import random

import pytest

from toolwild.eval.metrics.ci import bootstrap_accuracy, bootstrap_ratios, resample_draws


def _reference(per_session, *, resamples=1000, seed=0, level=0.95, ratios=None):
    """The former implementation, verbatim in what it computes."""
    rng = random.Random(seed)
    n = len(per_session)
    names = sorted({k for r in ratios or () for k, (_, whole) in r.items() if whole} if ratios else set())
    task_acc, session_acc = [], []
    drawn = {k: [] for k in names}
    for _ in range(resamples):
        correct = total = sessions_ok = sessions = 0
        parts = dict.fromkeys(names, 0)
        wholes = dict.fromkeys(names, 0)
        for _ in range(n):
            i = rng.randrange(n)
            item = per_session[i]
            c, t, ok, runs = item if len(item) == 4 else (item[0], item[1], int(item[0] == item[1] and item[1] > 0), 1)
            correct += c
            total += t
            sessions_ok += ok
            sessions += runs
            if names:
                for k, (part, whole) in ratios[i].items():
                    if k in parts:
                        parts[k] += part
                        wholes[k] += whole
        task_acc.append(correct / total if total else 0.0)
        session_acc.append(sessions_ok / sessions if sessions else 0.0)
        for k in names:
            if wholes[k]:
                drawn[k].append(parts[k] / wholes[k])

    def percentile(values, q):
        if not values:
            return 0.0
        pos = q * (len(values) - 1)
        lo = int(pos)
        hi = min(lo + 1, len(values) - 1)
        return values[lo] + (values[hi] - values[lo]) * (pos - lo)

    alpha = (1 - level) / 2
    out = {}
    for key, values in [("task", task_acc), ("session", session_acc), *drawn.items()]:
        values = sorted(values)
        out[key] = (percentile(values, alpha), percentile(values, 1 - alpha))
    return out


def _bounds(result):
    return {k: (v["low"], v["high"]) for k, v in result.items()}


@pytest.mark.parametrize("n", [1, 2, 3, 7, 64, 255, 256, 257, 1000])
def test_draws_are_those_of_randrange(n):
    rng = random.Random(11)
    assert resample_draws(n, 30, 11) == [rng.randrange(n) for _ in range(n * 30)]


def test_no_units_no_draws():
    assert resample_draws(0, 1000, 0) == []


@pytest.mark.parametrize("seed", [0, 1, 7])
@pytest.mark.parametrize("n", [1, 5, 97, 256])
def test_intervals_equal_the_former_implementation(n, seed):
    rng = random.Random(n * 100 + seed)
    per_session = []
    ratios = []
    for _ in range(n):
        tasks = rng.randint(0, 6)
        per_session.append((rng.randint(0, tasks), tasks))
        whole = rng.choice([0, 0, 1, 3, 40])
        ratios.append(
            {
                "optimal": (rng.randint(0, whole), whole),
                "progress": (rng.randint(0, 2 * whole), 2 * whole),
                **({"task_state": (1, 1)} if rng.random() < 0.3 else {}),
            }
        )
    fast = bootstrap_accuracy(per_session, resamples=200, seed=seed, ratios=ratios)
    assert _bounds(fast) == _reference(per_session, resamples=200, seed=seed, ratios=ratios)
    assert fast["task"]["resamples"] == 200 and fast["task"]["seed"] == seed


def test_trial_sums_equal_the_former_implementation():
    rng = random.Random(3)
    units = []
    for _ in range(40):
        runs = rng.randint(1, 4)
        tasks = 4 * runs
        units.append((rng.randint(0, tasks), tasks, rng.randint(0, runs), runs))
    assert _bounds(bootstrap_accuracy(units, resamples=300, seed=5)) == _reference(units, resamples=300, seed=5)


def test_an_empty_run_has_zero_intervals_as_before():
    assert _bounds(bootstrap_accuracy([], resamples=50)) == _reference([], resamples=50)


def test_negative_counts_are_refused():
    with pytest.raises(ValueError, match="non-negative"):
        bootstrap_accuracy([(-1, 2)], resamples=5)


def test_ratio_intervals_use_the_same_draws_as_before():
    """bootstrap_ratios (pass^k) counts how often each unit was drawn from the shared draws; its figures are those
    of the former loop (one ``randrange`` per drawn unit, each ratio summed in unit order)."""
    rng = random.Random(9)
    units = [{"a": (rng.random(), 1.0), "b": (float(rng.randint(0, 3)), 3.0)} for _ in range(50)]
    fast = bootstrap_ratios(units, resamples=100, seed=2)
    reference_rng = random.Random(2)
    drawn: dict[str, list[float]] = {"a": [], "b": []}
    for _ in range(100):
        times = [0] * 50
        for _ in range(50):
            times[reference_rng.randrange(50)] += 1
        for k, values in drawn.items():
            whole = sum(map(operator.mul, times, [u[k][1] for u in units]))
            values.append(sum(map(operator.mul, times, [u[k][0] for u in units])) / whole)
    for k, values in drawn.items():
        values.sort()
        pos = (1 - 0.95) / 2 * (len(values) - 1)
        assert fast[k]["low"] == values[int(pos)] + (values[int(pos) + 1] - values[int(pos)]) * (pos - int(pos))
