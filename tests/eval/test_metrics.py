"""The metric JSON: published structure and counting rules, and the extensions."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from toolwild.core.formats.wtb import load_wtb_suite
from toolwild.core.trajectory import Step, TaskTrajectory, Trajectory, TrajectoryStatus
from toolwild.core.verdict import ScoringMode
from toolwild.eval.agents.oracle import oracle_steps, oracle_trajectory
from toolwild.eval.metrics.accuracy import compute_metrics
from toolwild.eval.metrics.ci import bootstrap_accuracy
from toolwild.eval.scoring.session import score_suite

FIXTURE = Path(__file__).resolve().parents[2].parent / "shared/fixtures/wildtoolbench/sessions_0_4.reconstructed.jsonl"


@pytest.fixture(scope="module")
def suite():
    if not FIXTURE.exists():
        pytest.skip(f"fixture not found: {FIXTURE}")
    return load_wtb_suite(FIXTURE)[0]


def _with_task_replaced(session, task_index, steps):
    traj = oracle_trajectory(session)
    traj.tasks[task_index] = TaskTrajectory(task_index=task_index, steps=steps)
    return traj


def test_published_structure_and_key_order(suite):
    m = compute_metrics(score_suite(suite, [oracle_trajectory(s) for s in suite.sessions]), model_name="o")
    dumped = m.model_dump()
    assert list(dumped)[:7] == [
        "model_name",
        "total_info",
        "task_type_info",
        "layer_info",
        "turn_subtype_info",
        "optimal_info",
        "progress_info",
    ]
    assert list(dumped["task_type_info"]) == [
        "Single-Tool",
        "Multi-Tool",
        "Parallel Multi-Tool",
        "Sequential Multi-Tool",
        "Mixed Multi-Tool",
        "Clarify",
        "Chat",
    ]
    assert list(dumped["total_info"]["task"]) == ["accuracy", "correct_count", "total_count"]
    assert list(dumped["progress_info"]["Total"]) == ["rate", "complete_step", "total_step"]
    assert list(dumped["layer_info"]) == ["0", "1", "2", "3"]


def test_counts_with_one_failed_mixed_task(suite):
    s0 = suite.sessions[0]
    gold = oracle_steps(s0.tasks[2])
    broken = _with_task_replaced(s0, 2, [gold[0], Step(content="stop")])
    trajectories = [broken] + [oracle_trajectory(s) for s in suite.sessions[1:]]
    m = compute_metrics(score_suite(suite, trajectories), model_name="m")
    assert m.total_info["task"] == {"accuracy": 19 / 20, "correct_count": 19, "total_count": 20}
    assert m.total_info["session"]["correct_count"] == 4
    assert m.task_type_info["Mixed Multi-Tool"]["correct_count"] == 0
    assert m.task_type_info["Multi-Tool"] == {"accuracy": 2 / 3, "correct_count": 2, "total_count": 3}
    assert m.layer_info["2"]["correct_count"] == 4
    assert m.turn_subtype_info["Subsequent Turn"]["correct_count"] == 14
    assert m.turn_subtype_info[s0.tasks[2].subtype.value]["correct_count"] == 4
    assert m.optimal_info["Total"] == {"accuracy": 2 / 3, "correct_count": 2, "total_count": 3}
    # progress: only Sequential + Mixed tasks; 2 steps logged of 5 gold nodes
    assert m.progress_info["Mixed Multi-Tool"] == {"rate": 2 / 5, "complete_step": 2, "total_step": 5}
    assert m.progress_info["Sequential Multi-Tool"]["total_step"] == 0
    assert m.extensions["error_taxonomy"]["Early Termination"]["count"] == 1


def test_transition_buckets(suite):
    m = compute_metrics(score_suite(suite, [oracle_trajectory(s) for s in suite.sessions]), model_name="o")
    buckets = {k: v["session"]["total_count"] for k, v in m.extensions["transition_info"].items()}
    expected = {"0": 0, "1": 0, "2": 0, "3": 0}
    for s in suite.sessions:
        coarse = [t.type.coarse for t in s.tasks]
        expected[str(sum(a != b for a, b in itertools.pairwise(coarse)))] += 1
    assert buckets == expected


def test_provider_errors_are_excluded_unless_counted(suite):
    trajs = [oracle_trajectory(s) for s in suite.sessions]
    trajs[1] = Trajectory(session_id=suite.sessions[1].id, status=TrajectoryStatus.PROVIDER_ERROR, error="503")
    verdicts = score_suite(suite, trajs)
    excluded = compute_metrics(verdicts, model_name="m")
    assert excluded.total_info["session"] == {"accuracy": 1.0, "correct_count": 4, "total_count": 4}
    assert excluded.extensions["provider_error_sessions"] == [suite.sessions[1].id]
    assert excluded.extensions["figures_complete"] is True
    counted = compute_metrics(verdicts, model_name="m", count_provider_errors=True)
    assert counted.total_info["session"]["total_count"] == 5 and counted.total_info["task"]["correct_count"] == 16


def test_a_run_written_before_the_outcome_classes_reads_infra_error_as_a_provider_error(suite):
    line = json.dumps({"session_id": suite.sessions[1].id, "status": "infra_error", "error": "503"})
    traj = Trajectory.model_validate_json(line)
    assert traj.status is TrajectoryStatus.PROVIDER_ERROR and not traj.final


def test_harness_errors_are_never_counted_and_mark_the_figures_incomplete(suite):
    trajs = [oracle_trajectory(s) for s in suite.sessions]
    trajs[2] = Trajectory(session_id=suite.sessions[2].id, status=TrajectoryStatus.HARNESS_ERROR, error="env raised")
    verdicts = score_suite(suite, trajs)
    assert verdicts[2].harness_error == "env raised" and not verdicts[2].provider_error
    for counted in (False, True):
        m = compute_metrics(verdicts, model_name="m", count_provider_errors=counted)
        assert m.total_info["session"] == {"accuracy": 1.0, "correct_count": 4, "total_count": 4}
        assert m.extensions["harness_error_sessions"] == [{"session_id": suite.sessions[2].id, "error": "env raised"}]
        assert m.extensions["figures_complete"] is False


def test_missing_session_counts_as_failed(suite):
    verdicts = score_suite(suite, [oracle_trajectory(s) for s in suite.sessions[:4]])
    m = compute_metrics(verdicts, model_name="m")
    assert m.total_info["session"]["correct_count"] == 4 and m.total_info["session"]["total_count"] == 5
    assert m.extensions["error_taxonomy"]["Inference Failed"]["count"] == 4


def test_bootstrap_is_seeded_and_brackets_the_estimate():
    data = [(4, 4)] * 3 + [(2, 4)] * 5 + [(0, 4)] * 2
    a = bootstrap_accuracy(data, resamples=500, seed=7)
    b = bootstrap_accuracy(data, resamples=500, seed=7)
    assert a == b
    point_task = sum(c for c, _ in data) / sum(t for _, t in data)
    assert a["task"]["low"] <= point_task <= a["task"]["high"]
    assert a["session"]["low"] <= 0.3 <= a["session"]["high"]
    assert a["task"]["high"] - a["task"]["low"] > 0.05
    assert bootstrap_accuracy(data, resamples=500, seed=8) != a


def test_every_headline_ratio_gets_an_interval_from_the_same_draws():
    data = [(4, 4)] * 3 + [(2, 4)] * 5 + [(0, 4)] * 2
    ratios = [{"optimal": (1, 1), "progress": (3, 4), "none": (0, 0)}] * 4 + [
        {"optimal": (0, 1), "progress": (1, 4), "none": (0, 0)}
    ] * 6
    plain = bootstrap_accuracy(data, resamples=500, seed=7)
    both = bootstrap_accuracy(data, resamples=500, seed=7, ratios=ratios)
    assert both["task"] == plain["task"] and both["session"] == plain["session"]  # the draws are unchanged
    assert both["optimal"]["low"] <= 0.4 <= both["optimal"]["high"] and both["optimal"]["high"] > both["optimal"]["low"]
    assert both["progress"]["low"] <= 0.45 <= both["progress"]["high"]
    assert "none" not in both  # a figure with no case has no interval


def test_strict_mode_is_recorded(suite):
    verdicts = score_suite(suite, [oracle_trajectory(s) for s in suite.sessions], mode=ScoringMode.STRICT)
    assert compute_metrics(verdicts, model_name="o", mode=ScoringMode.STRICT).extensions["mode"] == "strict"


def test_two_results_for_one_session_are_rejected(suite):
    from toolwild.errors import ScoringError

    trajs = [oracle_trajectory(s) for s in suite.sessions]
    with pytest.raises(ScoringError, match="two results"):
        score_suite(suite, [*trajs, trajs[0]])
