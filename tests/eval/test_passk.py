"""pass^k and pass@k: the estimators against hand arithmetic, lost trials, the variance, and the intervals' draws."""

from __future__ import annotations

from fractions import Fraction
from itertools import combinations

import pytest

from toolwild.core.task import TaskType, TurnSubtype
from toolwild.core.verdict import ErrorClass, ScoringMode, SessionVerdict, TaskVerdict
from toolwild.eval.metrics.accuracy import compute_metrics
from toolwild.eval.metrics.ci import bootstrap_accuracy, bootstrap_ratios
from toolwild.eval.metrics.passk import compute_trial_metrics, pass_at_k, pass_hat_k, tally_trials


def _task(sid: str, index: int, ok: bool) -> TaskVerdict:
    return TaskVerdict(
        session_id=sid,
        task_index=index,
        task_type=TaskType.SINGLE,
        subtype=TurnSubtype.FIRST if index == 0 else TurnSubtype.PARTIAL,
        label="correct" if ok else "error",
        name_label="correct" if ok else "error",
        is_optimal=ok,
        steps_used=1,
        min_length=1,
        progress_complete=0,
        progress_total=0,
        error_class=None if ok else ErrorClass.EARLY_TERMINATION,
    )


def _session(sid: str, outcomes: list[bool], *, provider_error: bool = False, harness: bool = False) -> SessionVerdict:
    return SessionVerdict(
        session_id=sid,
        mode=ScoringMode.WTB,
        provider_error=provider_error,
        harness_error="boom" if harness else None,
        transitions=0,
        tasks=[_task(sid, i, ok) for i, ok in enumerate(outcomes)],
    )


def _trials(plan: dict[str, list[str]]) -> list[list[SessionVerdict]]:
    """``{session: ["110", "011", ...]}``: per trial, one character per task (1 correct, 0 failed, P provider error
    of the whole session, H harness error)."""
    k = len(next(iter(plan.values())))
    out: list[list[SessionVerdict]] = []
    for t in range(k):
        trial = []
        for sid, runs in plan.items():
            run = runs[t]
            if run in ("P", "H"):
                trial.append(_session(sid, [False, False], provider_error=run == "P", harness=run == "H"))
            else:
                trial.append(_session(sid, [c == "1" for c in run]))
        out.append(trial)
    return out


def _brute(n: int, c: int, k: int) -> tuple[Fraction, Fraction]:
    """pass^k and pass@k by enumerating every k-subset of n runs of which the first c succeed."""
    subsets = list(combinations(range(n), k))
    every = sum(all(i < c for i in s) for s in subsets)
    some = sum(any(i < c for i in s) for s in subsets)
    return Fraction(every, len(subsets)), Fraction(some, len(subsets))


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8])
def test_the_closed_forms_equal_counting_subsets(n):
    for c in range(n + 1):
        for k in range(1, n + 1):
            assert (pass_hat_k(n, c, k), pass_at_k(n, c, k)) == _brute(n, c, k), (n, c, k)


def test_estimators_refuse_k_beyond_the_trials():
    with pytest.raises(ValueError, match="k <= n"):
        pass_hat_k(2, 1, 3)


def test_hand_computed_values_over_tasks_and_sessions():
    # 3 sessions of 2 tasks, 4 trials each. Successes c per task (of n = 4):
    #   a: "11","11","10","01" -> task0 c=3, task1 c=3; session c=2 (trials 0, 1)
    #   b: "00","10","00","00" -> task0 c=1, task1 c=0; session c=0
    #   c: "11","11","11","11" -> task0 c=4, task1 c=4; session c=4
    plan = {"a": ["11", "11", "10", "01"], "b": ["00", "10", "00", "00"], "c": ["11", "11", "11", "11"]}
    trials = compute_trial_metrics(_trials(plan), model_name="m", resamples=0).extensions["trials"]
    # C(4,1)=4, C(4,2)=6, C(4,3)=4, C(4,4)=1
    # pass^1 tasks = (3+3+1+0+4+4)/4 / 6 = 15/24 = 5/8
    # pass^2 tasks: C(3,2)/6 = 3/6 twice, C(1,2)=0, 0, C(4,2)/6 = 1 twice -> (1/2+1/2+0+0+1+1)/6 = 3/6 = 1/2
    # pass^3 tasks: C(3,3)/4 = 1/4 twice, 0, 0, 1, 1 -> (1/4+1/4+2)/6 = 5/12
    # pass^4 tasks: 0, 0, 0, 0, 1, 1 -> 2/6 = 1/3
    assert trials["pass^k"]["task"] == {"1": 5 / 8, "2": 1 / 2, "3": 5 / 12, "4": 1 / 3}
    # pass@2 tasks: 1 - C(4-c,2)/6: c=3 -> 1, c=1 -> 1 - 3/6 = 1/2, c=0 -> 0, c=4 -> 1 -> (1+1+1/2+0+1+1)/6 = 3/4
    # pass@3 tasks: c=1 -> 1 - C(3,3)/4 = 3/4 -> (1+1+3/4+0+1+1)/6 = 19/24
    # pass@4 tasks: c>=1 -> 1 -> 5/6
    assert trials["pass@k"]["task"] == {"1": 5 / 8, "2": 3 / 4, "3": 19 / 24, "4": 5 / 6}
    # sessions: c = 2, 0, 4 of n = 4
    # pass^1 = (2+0+4)/4/3 = 1/2; pass^2 = (C(2,2)/6 + 0 + 1)/3 = (1/6+1)/3 = 7/18; pass^3 = (0+0+1)/3; pass^4 = 1/3
    assert trials["pass^k"]["session"] == {"1": 1 / 2, "2": 7 / 18, "3": 1 / 3, "4": 1 / 3}
    # pass@2 = (1 - C(2,2)/6 + 0 + 1)/3 = (5/6+1)/3 = 11/18; pass@3 = (1 + 0 + 1)/3; pass@4 = 2/3
    assert trials["pass@k"]["session"] == {"1": 1 / 2, "2": 11 / 18, "3": 2 / 3, "4": 2 / 3}
    # variance per task c(n-c)/(n(n-1)) = c(4-c)/12: c=3 -> 3/12 twice, c=1 -> 3/12, c=0 or 4 -> 0 -> (9/12)/6 = 1/8
    assert trials["success_variance"]["value"] == 1 / 8 and trials["success_variance"]["tasks"] == 6
    assert trials["per_session"][0] == {"session_id": "a", "trials": 4, "correct": 2, "tasks_correct": [3, 3]}


def test_pass1_equals_the_pooled_accuracy_exactly():
    # 7 sessions x 3 tasks x 3 trials, outcomes from a fixed pattern: pass^1 over tasks is the mean of c/3, the pooled
    # task accuracy is sum(c)/63; computed in exact fractions both round to the same float.
    plan = {
        f"s{i}": ["".join("1" if (i * 7 + t * 3 + j) % 5 < 3 else "0" for j in range(3)) for t in range(3)]
        for i in range(7)
    }
    metrics = compute_trial_metrics(_trials(plan), model_name="m", resamples=0)
    trials = metrics.extensions["trials"]
    assert trials["pass^k"]["task"]["1"] == metrics.total_info["task"]["accuracy"]
    assert trials["pass@k"]["task"]["1"] == metrics.total_info["task"]["accuracy"]
    assert trials["pass^k"]["session"]["1"] == metrics.total_info["session"]["accuracy"]
    assert metrics.total_info["task"]["total_count"] == 7 * 3 * 3  # pooled: every task of every trial


def test_one_trial_is_exactly_todays_metrics():
    verdicts = _trials({"a": ["10"], "b": ["11"], "c": ["00"], "d": ["P"]})
    one = compute_trial_metrics(verdicts, model_name="m")
    assert one.model_dump() == compute_metrics(verdicts[0], model_name="m").model_dump()
    assert "trials" not in one.extensions


def test_lost_trials_are_left_out_listed_and_the_session_keeps_its_valid_ones():
    # "a" lost trial 1 to the provider and trial 2 to the harness: n = 2 (trials 0 and 3), c per task = 2 and 1.
    plan = {"a": ["11", "P", "H", "10"], "b": ["11", "11", "00", "11"]}
    metrics = compute_trial_metrics(_trials(plan), model_name="m", resamples=0)
    trials = metrics.extensions["trials"]
    assert trials["incomplete_sessions"] == [{"session_id": "a", "valid_trials": 2, "lost_trials": [1, 2]}]
    assert trials["valid_runs"] == 6
    # pass^1 tasks = (2/2 + 1/2 + 3/4 + 3/4) / 4 = 3/4; pooled accuracy = (3 + 6)/12 = 3/4 here (by chance) ...
    assert trials["pass^k"]["task"]["1"] == 3 / 4
    # ... pass^3 counts only b's tasks (n=4 >= 3): C(3,3)/C(4,3) = 1/4 each
    assert trials["pass^k"]["task"]["3"] == 1 / 4
    assert trials["counted"]["task"] == {"1": 4, "2": 4, "3": 2, "4": 2}
    assert trials["counted"]["session"] == {"1": 2, "2": 2, "3": 1, "4": 1}
    ext = metrics.extensions
    assert ext["provider_error_sessions"] == ["a@1"]
    assert ext["harness_error_sessions"] == [{"session_id": "a", "error": "boom", "trial": 2}]
    # counted as failures when asked: "a" then has n = 3 (the harness error never counts)
    counted = compute_trial_metrics(_trials(plan), model_name="m", resamples=0, count_provider_errors=True)
    assert counted.extensions["trials"]["incomplete_sessions"][0]["valid_trials"] == 3


def test_pass1_differs_from_pooled_accuracy_only_when_trials_are_lost():
    # a lost 2 of 3 trials; its one valid trial weighs as much per task as b's three: pass^1 = (1 + 1/3)/2 = 2/3,
    # the pooled accuracy (1 + 1)/4 = 1/2.
    plan = {"a": ["1", "P", "P"], "b": ["1", "0", "0"]}
    metrics = compute_trial_metrics(_trials(plan), model_name="m", resamples=0)
    assert metrics.extensions["trials"]["pass^k"]["task"]["1"] == 2 / 3
    assert metrics.total_info["task"]["accuracy"] == 1 / 2


def test_a_session_without_any_valid_trial_is_left_out():
    plan = {"a": ["P", "P"], "b": ["1", "0"]}
    trials = compute_trial_metrics(_trials(plan), model_name="m", resamples=0).extensions["trials"]
    assert trials["sessions"] == 1 and trials["pass^k"]["task"] == {"1": 1 / 2, "2": 0.0}
    assert trials["incomplete_sessions"] == [{"session_id": "a", "valid_trials": 0, "lost_trials": [0, 1]}]


def test_intervals_draw_whole_sessions_with_the_headline_draws():
    # With every trial valid, pass^1 over tasks is the pooled task accuracy in every resample (same draws, same
    # sessions): its interval is the headline's (up to float summation order).
    plan = {f"s{i}": [format((i * 37 + t * 11) % 4, "02b") for t in range(3)] for i in range(12)}
    metrics = compute_trial_metrics(_trials(plan), model_name="m", resamples=300, seed=5)
    headline = metrics.extensions["confidence_intervals"]["task"]
    trial_ci = metrics.extensions["trials"]["confidence_intervals"]["pass^k"]["task"]["1"]
    assert trial_ci["low"] == pytest.approx(headline["low"], abs=1e-12)
    assert trial_ci["high"] == pytest.approx(headline["high"], abs=1e-12)
    assert trial_ci["unit"] == "session" and trial_ci["seed"] == 5 and trial_ci["resamples"] == 300
    for name in ("pass^k", "pass@k"):
        for unit in ("task", "session"):
            for k, bounds in metrics.extensions["trials"]["confidence_intervals"][name][unit].items():
                value = metrics.extensions["trials"][name][unit][k]
                assert bounds["low"] <= value + 1e-12 and value <= bounds["high"] + 1e-12


def test_bootstrap_ratios_uses_the_draws_of_bootstrap_accuracy():
    per_session = [(1, 2), (2, 2), (0, 3), (3, 3), (1, 1)]
    accuracy = bootstrap_accuracy(per_session, resamples=200, seed=3)
    ratios = bootstrap_ratios([{"task": (c, t)} for c, t in per_session], resamples=200, seed=3)
    assert ratios["task"]["low"] == pytest.approx(accuracy["task"]["low"])
    assert ratios["task"]["high"] == pytest.approx(accuracy["task"]["high"])


def test_grouped_sessions_leave_a_one_trial_bootstrap_unchanged():
    per_session = [(1, 2), (2, 2), (0, 3), (3, 3)]
    grouped = [(c, t, int(c == t), 1) for c, t in per_session]
    assert bootstrap_accuracy(per_session, resamples=100) == bootstrap_accuracy(grouped, resamples=100)


def test_tally_follows_first_counted_appearance():
    plan = {"a": ["P", "1"], "b": ["1", "1"]}
    assert [s.session_id for s in tally_trials(_trials(plan))] == ["b", "a"]
