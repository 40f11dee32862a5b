"""Where a session goes wrong and whether it recovers: the figures of a forked run (``eval --history forked``).

A forked run plays every session of n tasks once per task boundary i = 0..n-1: fork i teacher-forces tasks 0..i-1
(the gold conversation; on a live environment their gold calls replayed) and runs tasks i..n-1 free. Write
O(i, j) for "task j was correct in fork i" (j >= i). Two runs of every task follow:

- **free** F_j = O(0, j): fork 0, the agent's own history all along (a ``--history free`` run);
- **forced** T_j = O(j, j): task j with the gold history before it (what ``--history wtb`` asks of task j).

T_0 = F_0 is one run (fork 0's first task has no history to differ in). From them:

- **first divergence** of a session: the smallest j with T_j correct and F_j failed, the first task the agent
  fails only because its history is its own; none when there is no such task. ``after_own_failure`` counts the
  diverging sessions whose free run had already failed a task before j (the paper's self-conditioning: an own
  mistake in the history); the others diverged after correct but different turns of their own.
- **recovery**: over consecutive tasks (j, j+1) where task j failed, the share where task j+1 still succeeded.
  ``free``: F_j failed, F_{j+1} counted (every earlier turn the agent's own). ``forced``: T_j failed, T_{j+1}
  counted (the failure is hidden from the next task by the gold history: how often consecutive tasks fail
  together anyway). ``after_own_mistake``: T_j failed, O(j, j+1) counted: fork j, whose history is the gold plus
  the agent's own failed task j; the same pairs as ``forced``, so the two differ only in whether the agent sees its
  mistake.
- **self-conditioning gap**: forced accuracy minus free accuracy (over the T_j and the F_j of the same tasks),
  overall, per instruction-transition count of the session (the buckets of ``transition_info``: task and session
  accuracy), and per transitions before the task (the coarse-type changes among tasks 0..j, what the agent has
  been through when it reaches task j).

A session counts only when every one of its forks counts by the rule of the headline figures and has a result (a
fork lost to the harness, to the provider unless ``--count-provider-errors``, or without a result in a run re-scored
before it finished, leaves the session out; it is listed): a missing fork scored as failed would invent a gap. Intervals
are percentile bootstraps over sessions (:func:`~toolwild.eval.metrics.ci.bootstrap_ratios`, the headline's seed
and draws): a session is drawn with all its forks, so forced and free (and their difference) are paired.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from toolwild.core.verdict import Metrics, ScoringMode, SessionVerdict
from toolwild.eval.metrics.accuracy import compute_metrics, scored_verdicts
from toolwild.eval.metrics.ci import bootstrap_ratios

__all__ = ["ForkedSession", "compute_forked_metrics", "forked_extension", "tally_forks"]

DEFINITIONS = {
    "forced": "task j with the gold history of tasks 0..j-1 (fork j's task j)",
    "free": "task j with the agent's own history (fork 0's task j)",
    "first_divergence": "the first task j whose forced run is correct and whose free run failed",
    "recovery": (
        "over consecutive tasks (j, j+1) where task j failed, the share where task j+1 succeeded: free = fork 0's "
        "tasks; forced = the forced runs; after_own_mistake = forced run of j failed, fork j's task j+1 counted"
    ),
    "gap": "forced accuracy minus free accuracy over the same tasks",
}


@dataclass
class ForkedSession:
    """One session's outcomes over its forks: ``outcomes[i][j - i]`` is task j of fork i (j >= i)."""

    session_id: str
    transitions: int
    before: list[int]
    """Per task j, the instruction transitions among tasks 0..j."""
    outcomes: list[list[bool]]

    @property
    def n(self) -> int:
        """Tasks of the session."""
        return len(self.outcomes)

    def free(self, j: int) -> bool:
        """Task j of fork 0."""
        return self.outcomes[0][j]

    def forced(self, j: int) -> bool:
        """Task j of fork j."""
        return self.outcomes[j][0]

    def after(self, j: int) -> bool:
        """Task j+1 of fork j (the gold history, then the agent's own task j)."""
        return self.outcomes[j][1]

    @property
    def first_divergence(self) -> int | None:
        """The first task whose forced run is correct and free run failed (None: no such task)."""
        return next((j for j in range(self.n) if self.forced(j) and not self.free(j)), None)

    def recovery(self) -> dict[str, tuple[int, int]]:
        """Per kind, (tasks recovered, failed tasks followed by another) of this session."""
        pairs = range(self.n - 1)
        free = [j for j in pairs if not self.free(j)]
        forced = [j for j in pairs if not self.forced(j)]
        return {
            "free": (sum(self.free(j + 1) for j in free), len(free)),
            "forced": (sum(self.forced(j + 1) for j in forced), len(forced)),
            "after_own_mistake": (sum(self.after(j) for j in forced), len(forced)),
        }


def _before(verdict: SessionVerdict) -> list[int]:
    """Per task, the coarse-type changes among the tasks up to it (the session's transitions, counted so far)."""
    coarse = [t.task_type.coarse for t in verdict.tasks]
    changes = [0, *(int(a != b) for a, b in itertools.pairwise(coarse))]
    return list(itertools.accumulate(changes))


def tally_forks(
    by_fork: Sequence[Sequence[SessionVerdict]], *, count_provider_errors: bool = False
) -> tuple[list[ForkedSession], list[dict[str, Any]]]:
    """The sessions whose every fork counts (in fork 0's order), and the others with the forks they lack."""
    counted = [
        {
            v.session_id: v
            for v in scored_verdicts(verdicts, count_provider_errors=count_provider_errors)
            if not v.inference_error or v.provider_error  # no result at all (a fork not run yet): not a failure
        }
        for verdicts in by_fork
    ]
    sessions: list[ForkedSession] = []
    incomplete: list[dict[str, Any]] = []
    for first in by_fork[0] if by_fork else []:
        n = len(first.tasks)
        forks = [counted[i].get(first.session_id) if i < len(counted) else None for i in range(n)]
        missing = [i for i, v in enumerate(forks) if v is None]
        if missing or not n:
            incomplete.append({"session_id": first.session_id, "forks_left_out": missing})
            continue
        outcomes = [
            [t.label == "correct" for t in sorted(v.tasks, key=lambda t: t.task_index)][i:]
            for i, v in enumerate(forks)
            if v is not None
        ]
        sessions.append(ForkedSession(first.session_id, first.transitions, _before(first), outcomes))
    return sessions, incomplete


def _leaf(correct: int, total: int) -> dict[str, Any]:
    return {"accuracy": correct / total if total else None, "correct_count": correct, "total_count": total}


def _rate(part: int, whole: int) -> dict[str, Any]:
    return {"rate": part / whole if whole else None, "recovered": part, "failures": whole}


def _gap(forced: tuple[int, int], free: tuple[int, int]) -> dict[str, Any]:
    """Forced and free accuracy of the same tasks and their difference (None when there is no task)."""
    total = forced[1]
    return {
        "forced": _leaf(*forced),
        "free": _leaf(*free),
        "gap": (forced[0] - free[0]) / total if total else None,
    }


def _units(sessions: list[ForkedSession]) -> list[dict[str, tuple[float, float]]]:
    """Per session, the figures that get an interval as (part, whole), for the bootstrap's ratios of sums: every gap,
    recovery rate and the divergence rate, and forced and free accuracy overall (a bucket's forced and free
    accuracy get none: each draw costs a pass over the sessions per figure)."""
    units = []
    for s in sessions:
        unit: dict[str, tuple[float, float]] = {}

        def add(key: str, part: float, whole: float, unit: dict[str, tuple[float, float]] = unit) -> None:
            old = unit.get(key, (0.0, 0.0))
            unit[key] = (old[0] + part, old[1] + whole)

        for j in range(s.n):
            forced, free = int(s.forced(j)), int(s.free(j))
            add("forced/all", forced, 1)
            add("free/all", free, 1)
            for scope in ("all", f"t{s.transitions}", f"b{s.before[j]}"):
                add(f"gap/{scope}", forced - free, 1)
        forced_all = int(all(s.forced(j) for j in range(s.n)))
        free_all = int(all(s.free(j) for j in range(s.n)))
        add("session_forced/all", forced_all, 1)
        add("session_free/all", free_all, 1)
        for scope in ("all", f"t{s.transitions}"):
            add(f"session_gap/{scope}", forced_all - free_all, 1)
        for kind, (part, whole) in s.recovery().items():
            add(f"recovery/{kind}", part, whole)
        add("diverged", int(s.first_divergence is not None), 1)
        units.append(unit)
    return units


def _with_interval(figure: dict[str, Any], key: str, bounds: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The figure with its interval's ``low`` and ``high`` (left out when it has none)."""
    found = bounds.get(key)
    return {**figure, "low": found["low"], "high": found["high"]} if found else figure


def _gap_block(
    forced: tuple[int, int], free: tuple[int, int], scope: str, bounds: dict[str, dict[str, Any]], prefix: str = ""
) -> dict[str, Any]:
    block = _gap(forced, free)
    return {
        "forced": _with_interval(block["forced"], f"{prefix}forced/{scope}", bounds),
        "free": _with_interval(block["free"], f"{prefix}free/{scope}", bounds),
        **_with_interval({"gap": block["gap"]}, f"{prefix}gap/{scope}", bounds),
    }


def _sum(sessions: list[ForkedSession], pick: Any) -> tuple[int, int]:
    """(correct, total) of ``pick(session, j)`` over the tasks of the sessions (``pick`` None skips the task)."""
    values = [v for s in sessions for j in range(s.n) if (v := pick(s, j)) is not None]
    return sum(values), len(values)


def forked_extension(
    by_fork: Sequence[Sequence[SessionVerdict]],
    *,
    count_provider_errors: bool = False,
    resamples: int = 1000,
    seed: int = 0,
) -> dict[str, Any]:
    """``extensions.forked`` of a forked run's metrics: first divergence, recovery, the self-conditioning gap (see
    the module docstring), their intervals, and the sessions left out."""
    sessions, incomplete = tally_forks(by_fork, count_provider_errors=count_provider_errors)
    bounds = bootstrap_ratios(_units(sessions), resamples=resamples, seed=seed) if resamples > 0 and sessions else {}

    def forced(s: ForkedSession, j: int) -> int:
        return int(s.forced(j))

    def free(s: ForkedSession, j: int) -> int:
        return int(s.free(j))

    by_transitions: dict[str, Any] = {}
    for k in sorted({s.transitions for s in sessions}):
        group = [s for s in sessions if s.transitions == k]
        block = _gap_block(_sum(group, forced), _sum(group, free), f"t{k}", bounds)
        session_forced = sum(all(s.forced(j) for j in range(s.n)) for s in group)
        session_free = sum(all(s.free(j) for j in range(s.n)) for s in group)
        block["session"] = _gap_block(
            (session_forced, len(group)), (session_free, len(group)), f"t{k}", bounds, "session_"
        )
        by_transitions[str(k)] = block
    by_before: dict[str, Any] = {}
    for b in sorted({x for s in sessions for x in s.before}):
        in_bucket = [(s, j) for s in sessions for j in range(s.n) if s.before[j] == b]
        tally_forced = (sum(s.forced(j) for s, j in in_bucket), len(in_bucket))
        tally_free = (sum(s.free(j) for s, j in in_bucket), len(in_bucket))
        by_before[str(b)] = _gap_block(tally_forced, tally_free, f"b{b}", bounds)
    recovery: dict[str, Any] = {}
    tallies = [s.recovery() for s in sessions]
    for kind in ("free", "forced", "after_own_mistake"):
        part, whole = sum(t[kind][0] for t in tallies), sum(t[kind][1] for t in tallies)
        recovery[kind] = _with_interval(_rate(part, whole), f"recovery/{kind}", bounds)
    firsts = [s.first_divergence for s in sessions]
    diverged = [(s, j) for s, j in zip(sessions, firsts, strict=True) if j is not None]
    all_forced = sum(all(s.forced(j) for j in range(s.n)) for s in sessions)
    all_free = sum(all(s.free(j) for j in range(s.n)) for s in sessions)
    overall = _gap_block(_sum(sessions, forced), _sum(sessions, free), "all", bounds)
    overall["session"] = _gap_block((all_forced, len(sessions)), (all_free, len(sessions)), "all", bounds, "session_")
    out: dict[str, Any] = {
        "sessions": len(sessions),
        "tasks": sum(s.n for s in sessions),
        "task_runs": sum(len(v.tasks) - i for i, verdicts in enumerate(by_fork) for v in verdicts),
        "definitions": DEFINITIONS,
        "overall": overall,
        "gap_by_transitions": by_transitions,
        "gap_by_transitions_before": by_before,
        "first_divergence": _with_interval(
            {
                "diverged": len(diverged),
                "sessions": len(sessions),
                "rate": len(diverged) / len(sessions) if sessions else None,
                "by_task": {str(j): sum(1 for _, x in diverged if x == j) for j in sorted({x for _, x in diverged})},
                "after_own_failure": sum(1 for s, j in diverged if not all(s.free(k) for k in range(j))),
            },
            "diverged",
            bounds,
        ),
        "recovery": recovery,
        "incomplete_sessions": incomplete,
        "per_session": [
            {
                "session_id": s.session_id,
                "transitions": s.transitions,
                "first_divergence": j,
                "free": [s.free(x) for x in range(s.n)],
                "forced": [s.forced(x) for x in range(s.n)],
                "forks": s.outcomes,
            }
            for s, j in zip(sessions, firsts, strict=True)
        ],
    }
    if bounds:
        meta = next(iter(bounds.values()))
        out["intervals"] = {k: meta[k] for k in ("level", "resamples", "seed", "unit")}
    return out


def compute_forked_metrics(
    by_fork: Sequence[Sequence[SessionVerdict]],
    *,
    model_name: str,
    mode: ScoringMode = ScoringMode.WTB,
    count_provider_errors: bool = False,
    resamples: int = 1000,
    seed: int = 0,
) -> Metrics:
    """The metrics of a forked run (one list of session verdicts per fork).

    The published figures are fork 0's, the free run's (exactly a ``--history free`` run's metrics), and
    ``extensions.forked`` adds the forked figures. A later fork's harness errors are listed with the headline's
    (with their ``fork``) and leave the figures incomplete, as fork 0's do.
    """
    metrics = compute_metrics(
        by_fork[0] if by_fork else [],
        model_name=model_name,
        mode=mode,
        count_provider_errors=count_provider_errors,
        resamples=resamples,
        seed=seed,
    )
    later = [
        {"session_id": v.session_id, "error": v.harness_error, "fork": i}
        for i, verdicts in enumerate(by_fork)
        if i > 0
        for v in verdicts
        if v.harness_error is not None
    ]
    if later:
        metrics.extensions["harness_error_sessions"] = [*metrics.extensions["harness_error_sessions"], *later]
        metrics.extensions["figures_complete"] = False
    metrics.extensions["forked"] = forked_extension(
        by_fork, count_provider_errors=count_provider_errors, resamples=resamples, seed=seed
    )
    return metrics
