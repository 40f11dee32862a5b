"""The published WildToolBench result format -> `Trajectory`, re-scored against fixture session 0 (and 3).

Result lines are built by hand in the published layout, following the gold DAGs of the fixture as read from its raw
JSON. Session 0 is Single, Single, Mixed (``A -> B -> (C, C) -> P``), Chat; its minimum path length for the mixed
task is 4 (spec §3).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from toolwild.core.formats.results import append_trajectory, load_trajectories
from toolwild.core.formats.wtb import load_wtb_suite
from toolwild.core.formats.wtb_result import load_wtb_results, trajectory_from_wtb_result
from toolwild.core.trajectory import Step, TaskTrajectory, ToolCall, Trajectory, TrajectoryStatus
from toolwild.core.verdict import ErrorClass, ScoringMode
from toolwild.errors import DataError, ScoringError
from toolwild.eval.scoring.session import score_session

ROOT = Path(__file__).resolve().parents[2]
SESSIONS = ROOT.parent / "shared" / "fixtures" / "wildtoolbench" / "sessions_0_4.reconstructed.jsonl"

pytestmark = pytest.mark.skipif(
    not SESSIONS.is_file(), reason=f"WildToolBench session fixture not found at {SESSIONS} (shared fixtures absent)"
)

WTB, STRICT = ScoringMode.WTB, ScoringMode.STRICT
BOTH = pytest.mark.parametrize("mode", [WTB, STRICT], ids=["wtb", "strict"])


# ---------------------------------------------------------------- building published result lines
def raw_record(index: int) -> dict[str, Any]:
    lines = [line for line in SESSIONS.read_text(encoding="utf-8").splitlines() if line.strip()]
    return json.loads(lines[index])


@pytest.fixture(scope="module")
def suite():
    loaded, _ = load_wtb_suite(SESSIONS)
    return loaded


def call(name: str, arguments: dict[str, Any] | str, cid: str = "call_0") -> dict[str, Any]:
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": raw}}


def output(content: str | None = None, tool_calls: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"content": content, "tool_calls": tool_calls, "reasoning_content": None}


def task_result(task_idx: int, outputs: list[dict[str, Any]], *, label: str = "correct") -> dict[str, Any]:
    """One per-task result in the published layout; the labels in it are deliberately not trusted by the reader."""
    log: dict[str, Any] = {
        "task_idx": task_idx,
        "begin_of_current_task": {"messages": [{"role": "user", "content": f"task {task_idx}"}]},
    }
    for k, out in enumerate(outputs):
        log[f"step_{k}"] = {"inference_input": {"messages": [], "tools": []}, "inference_output": out}
    n = len(outputs)
    return {
        "action_name_label": label,
        "is_optimal": label == "correct",
        "inference_log": log,
        "latency": [0.5 + k for k in range(n)],
        "input_token_count": [100 * (k + 1) for k in range(n)],
        "output_token_count": [10 * (k + 1) for k in range(n)],
    }


def gold_outputs(record: dict[str, Any], task: int, batches: list[list[int]]) -> list[dict[str, Any]]:
    """Model outputs that follow the given batches of gold node indices: calls with the gold arguments, text for
    the pseudo-actions (the clarification question / final answer)."""
    dag = record["english_answer_list"][task]
    outs = []
    for batch in batches:
        nodes = [dag[i] for i in batch]
        if nodes[0]["action"]["name"] in ("ask_user_for_required_parameters", "prepare_to_answer"):
            assert len(nodes) == 1
            text = nodes[0]["observation"]
            outs.append(output(content=text if isinstance(text, str) and text else "answer"))
        else:
            outs.append(
                output(tool_calls=[call(n["action"]["name"], n["action"]["arguments"], f"c{n['idx']}") for n in nodes])
            )
    return outs


# Session 0 along its optimal path: task 2 batches the two getShowDetail calls (nodes 2 and 3).
S0_OPTIMAL = [[[0], [1]], [[0], [1]], [[0], [1], [2, 3], [4]], [[0]]]


def session0_result(overrides: dict[int, list[dict[str, Any]]] | None = None) -> dict[str, Any]:
    record = raw_record(0)
    results = []
    for t, batches in enumerate(S0_OPTIMAL):
        outs = (overrides or {}).get(t) or gold_outputs(record, t, batches)
        results.append(task_result(t, outs, label="error"))  # labels in the file must be ignored
    return {"id": record["id"], "model_name": "hand-built", "result": results}


def gold_args(record: dict[str, Any], task: int, node: int) -> dict[str, Any]:
    return copy.deepcopy(record["english_answer_list"][task][node]["action"]["arguments"])


def score(suite, result: dict[str, Any], mode: ScoringMode):
    trajectory = trajectory_from_wtb_result(result)
    return score_session(suite.session(result["id"]), trajectory, mode=mode)


def labels(verdict) -> list[str]:
    return [t.label for t in verdict.tasks]


# ---------------------------------------------------------------- conversion
def test_conversion_reads_steps_calls_text_and_costs():
    result = session0_result()
    traj = trajectory_from_wtb_result(result)
    record = raw_record(0)

    assert traj.session_id == "wild_tool_bench_0"
    assert traj.model == "hand-built"
    assert traj.status is TrajectoryStatus.OK
    assert [t.task_index for t in traj.tasks] == [0, 1, 2, 3]
    assert [len(t.steps) for t in traj.tasks] == [2, 2, 4, 1]

    mixed = traj.tasks[2].steps
    assert [c.name for c in mixed[2].tool_calls] == ["getShowDetail", "getShowDetail"]
    assert [c.id for c in mixed[2].tool_calls] == ["c2", "c3"]
    assert [json.loads(c.arguments) for c in mixed[2].tool_calls] == [gold_args(record, 2, 2), gold_args(record, 2, 3)]
    # the raw argument text is kept as written
    assert mixed[0].tool_calls[0].arguments == json.dumps(gold_args(record, 2, 0))
    assert mixed[3].tool_calls is None
    assert mixed[3].content == record["english_answer_list"][2][4]["observation"]
    assert [s.latency_s for s in mixed] == [0.5, 1.5, 2.5, 3.5]
    assert [s.input_tokens for s in mixed] == [100, 200, 300, 400]
    assert [s.output_tokens for s in mixed] == [10, 20, 30, 40]
    assert all(s.parse_error is None for t in traj.tasks for s in t.steps)


def test_steps_are_ordered_numerically_not_lexically():
    outs = [output(content=f"s{k}") for k in range(12)]
    result = task_result(0, outs)
    log = result["inference_log"]
    keys = sorted((k for k in log if k.startswith("step_")), reverse=True)  # step_9 ... step_10, step_1, step_0
    result["inference_log"] = {"task_idx": 0, **{k: log[k] for k in keys}}
    traj = trajectory_from_wtb_result({"id": "x", "model_name": "m", "result": [result]})
    assert [s.content for s in traj.tasks[0].steps] == [f"s{k}" for k in range(12)]
    assert traj.tasks[0].steps[10].latency_s == 10.5


def test_reasoning_content_and_object_arguments_are_read():
    out = output(tool_calls=[{"id": "a", "type": "function", "function": {"name": "f", "arguments": {"x": 1}}}])
    out["reasoning_content"] = "thinking"
    traj = trajectory_from_wtb_result({"id": "x", "model_name": "m", "result": [task_result(0, [out])]})
    step = traj.tasks[0].steps[0]
    assert step.reasoning == "thinking"
    assert step.tool_calls == [ToolCall(id="a", name="f", arguments='{"x": 1}')]


@pytest.mark.parametrize(
    ("record", "field"),
    [
        ({"model_name": "m", "result": []}, "id"),
        ({"id": "x", "model_name": "m", "result": 3}, "result"),
        ({"id": "x", "model_name": "m", "result": [{"latency": []}]}, "result[0].inference_log"),
        (
            {"id": "x", "model_name": "m", "result": [{"inference_log": {"step_0": {"inference_input": {}}}}]},
            "result[0].inference_log.step_0.inference_output",
        ),
    ],
)
def test_malformed_result_names_its_field(record, field):
    with pytest.raises(DataError) as info:
        trajectory_from_wtb_result(record)
    assert info.value.field == field


def test_load_wtb_results_locates_a_bad_line(tmp_path):
    good = json.dumps(session0_result())
    path = tmp_path / "r.jsonl"
    path.write_text(good + "\n" + '{"id": "x", "result": [{}]}\n', encoding="utf-8")
    with pytest.raises(DataError) as info:
        load_wtb_results(path)
    assert (info.value.line, info.value.field) == (2, "result[0].inference_log")
    trajs, report = load_wtb_results(path, skip_invalid=True)
    assert [t.session_id for t in trajs] == ["wild_tool_bench_0"]
    assert report.skipped_count == 1


# ---------------------------------------------------------------- re-scoring session 0
@BOTH
def test_gold_path_scores_all_correct_and_optimal(suite, mode):
    verdict = score(suite, session0_result(), mode)
    assert labels(verdict) == ["correct"] * 4
    assert verdict.correct
    assert verdict.inference_error is None
    mixed = verdict.tasks[2]
    assert mixed.is_optimal
    assert (mixed.steps_used, mixed.min_length) == (4, 4)
    assert [t.is_optimal for t in verdict.tasks] == [True] * 4
    assert all(t.error_class is None and t.error_reason is None for t in verdict.tasks)


@BOTH
def test_mixed_task_one_call_per_turn_is_correct_but_not_optimal(suite, mode):
    record = raw_record(0)
    outs = gold_outputs(record, 2, [[0], [1], [2], [3], [4]])
    verdict = score(suite, session0_result({2: outs}), mode)
    assert labels(verdict) == ["correct"] * 4
    mixed = verdict.tasks[2]
    assert not mixed.is_optimal
    assert (mixed.steps_used, mixed.min_length) == (5, 4)
    assert mixed.progress_total == 5


def test_progress_favours_one_call_per_turn_in_wtb_mode_only(suite):
    """Spec §9: the published progress counts logged steps, so batching the parallel pair scores 4/5."""
    record = raw_record(0)
    batched = session0_result()
    single = session0_result({2: gold_outputs(record, 2, [[0], [1], [2], [3], [4]])})
    assert score(suite, batched, WTB).tasks[2].progress_complete == 4
    assert score(suite, single, WTB).tasks[2].progress_complete == 5
    assert score(suite, batched, STRICT).tasks[2].progress_complete == 5
    assert score(suite, single, STRICT).tasks[2].progress_complete == 5


@BOTH
def test_reversed_call_order_inside_a_batch_is_harmless(suite, mode):
    outs = gold_outputs(raw_record(0), 2, S0_OPTIMAL[2])
    outs[2]["tool_calls"].reverse()
    verdict = score(suite, session0_result({2: outs}), mode)
    assert labels(verdict) == ["correct"] * 4
    assert verdict.tasks[2].is_optimal


def test_same_name_run_one_per_turn_out_of_idx_order_fails_only_in_wtb(suite):
    """Spec §9: same-name nodes are matched by name in gold idx order (defect); strict pairs by arguments."""
    outs = gold_outputs(raw_record(0), 2, [[0], [1], [3], [2], [4]])
    result = session0_result({2: outs})
    wtb = score(suite, result, WTB)
    assert labels(wtb) == ["correct", "correct", "error", "correct"]
    assert wtb.tasks[2].name_label == "correct"
    assert wtb.tasks[2].arguments_label == "error"
    assert wtb.tasks[2].error_class is ErrorClass.PARAM_VALUE
    assert not wtb.correct
    strict = score(suite, result, STRICT)
    assert labels(strict) == ["correct"] * 4


@BOTH
def test_spacing_difference_in_a_string_argument_passes(suite, mode):
    """Spec §5: "LasVegas" vs "Las Vegas" passes (gold of getCityShow is "LasVegas")."""
    record = raw_record(0)
    assert gold_args(record, 2, 1)["city"] == "LasVegas"
    outs = gold_outputs(record, 2, S0_OPTIMAL[2])
    outs[1]["tool_calls"][0]["function"]["arguments"] = json.dumps({**gold_args(record, 2, 1), "city": "Las Vegas"})
    verdict = score(suite, session0_result({2: outs}), mode)
    assert labels(verdict) == ["correct"] * 4


@BOTH
def test_wrong_date_fails_as_a_value_error(suite, mode):
    """Spec §5: "2024-07-14" vs "2024-07-15" fails."""
    record = raw_record(0)
    assert gold_args(record, 0, 0)["endDate"] == "2024-07-14"
    outs = gold_outputs(record, 0, S0_OPTIMAL[0])
    outs[0]["tool_calls"][0]["function"]["arguments"] = json.dumps({**gold_args(record, 0, 0), "endDate": "2024-07-15"})
    verdict = score(suite, session0_result({0: outs}), mode)
    assert labels(verdict) == ["error", "correct", "correct", "correct"]
    task = verdict.tasks[0]
    assert (task.name_label, task.arguments_label) == ("correct", "error")
    assert not task.is_optimal
    assert task.error_class is ErrorClass.PARAM_VALUE
    assert "endDate" in task.error_reason
    assert not verdict.correct


@BOTH
def test_extra_optional_argument_the_gold_omits_fails(suite, mode):
    """Spec §5: an extra optional argument the gold omits fails (the most common failure in practice)."""
    record = raw_record(0)
    assert "format" not in gold_args(record, 1, 0)
    outs = gold_outputs(record, 1, S0_OPTIMAL[1])
    outs[0]["tool_calls"][0]["function"]["arguments"] = json.dumps({**gold_args(record, 1, 0), "format": "JSON"})
    verdict = score(suite, session0_result({1: outs}), mode)
    assert labels(verdict) == ["correct", "error", "correct", "correct"]
    assert verdict.tasks[1].arguments_label == "error"
    assert verdict.tasks[1].error_class in (ErrorClass.PARAM_VALUE, ErrorClass.PARAM_HALLUCINATION)


def test_argument_error_then_wrong_name_reports_name_correct_in_wtb(suite):
    """Spec §9: after the first argument error the published scorer drops the next step and forces the name label
    to correct; strict keeps the name error."""
    record = raw_record(0)
    outs = gold_outputs(record, 2, S0_OPTIMAL[2])
    outs[0]["tool_calls"][0]["function"]["arguments"] = json.dumps({**gold_args(record, 2, 0), "city": "Chicago"})
    outs[1] = output(tool_calls=[call("getRealtimeCity", {"city": "Las Vegas"})])  # not a legal next step
    result = session0_result({2: outs})

    wtb = score(suite, result, WTB).tasks[2]
    assert wtb.label == "error"
    assert (wtb.name_label, wtb.arguments_label) == ("correct", "error")
    assert wtb.progress_complete == 1  # two entries logged, the one after the argument error dropped

    strict = score(suite, result, STRICT).tasks[2]
    assert strict.label == "error"
    assert strict.name_label == "error"


def test_key_order_mispairs_a_parallel_batch_only_in_wtb(suite):
    """Spec §5/§9 (session 3, second task): calls are sorted by raw argument text and paired by rank in wtb."""
    record = raw_record(3)
    assert record["english_task_types"][1] == "Parallel Multi-Tool"
    outs = []
    for t, batches in enumerate([[[0], [1]], [[0, 1], [2]], [[0], [1], [2]], [[0], [1], [2], [3]]]):
        outs.append(gold_outputs(record, t, batches))
    # write "ip" before "fields": the raw texts now sort by ip, the gold texts by fields -> mis-paired by rank
    for c in outs[1][0]["tool_calls"]:
        args = json.loads(c["function"]["arguments"])
        c["function"]["arguments"] = json.dumps({"ip": args["ip"], "fields": args["fields"]})
    result = {"id": record["id"], "model_name": "m", "result": [task_result(t, o) for t, o in enumerate(outs)]}

    wtb = score(suite, result, WTB)
    assert labels(wtb) == ["correct", "error", "correct", "correct"]
    assert wtb.tasks[1].arguments_label == "error"
    strict = score(suite, result, STRICT)
    assert labels(strict) == ["correct"] * 4


# ---------------------------------------------------------------- failures turned into results
@BOTH
def test_inference_error_string_counts_as_four_failed_tasks(suite, mode):
    result = {"id": "wild_tool_bench_0", "model_name": "m", "result": "some error"}
    traj = trajectory_from_wtb_result(result)
    assert traj.status is TrajectoryStatus.INFERENCE_ERROR
    assert traj.error == "some error"
    assert traj.tasks == []

    verdict = score_session(suite.session("wild_tool_bench_0"), traj, mode=mode)
    assert verdict.inference_error == "some error"
    assert not verdict.provider_error
    assert len(verdict.tasks) == 4
    assert labels(verdict) == ["error"] * 4
    assert all(t.error_class is ErrorClass.INFERENCE_FAILED for t in verdict.tasks)
    assert all(t.error_class.value == "Inference Failed" for t in verdict.tasks)
    assert not any(t.is_optimal for t in verdict.tasks)
    assert not verdict.correct


@BOTH
def test_tool_call_without_function_is_a_parse_error(suite, mode):
    outs = gold_outputs(raw_record(0), 0, S0_OPTIMAL[0])
    del outs[0]["tool_calls"][0]["function"]
    result = session0_result({0: outs})
    traj = trajectory_from_wtb_result(result)
    step = traj.tasks[0].steps[0]
    assert step.parse_error is not None
    assert step.tool_calls is None

    verdict = score_session(suite.session("wild_tool_bench_0"), traj, mode=mode)
    assert labels(verdict) == ["error", "correct", "correct", "correct"]
    task = verdict.tasks[0]
    assert task.name_label == "error"
    assert task.error_reason.startswith("parse tool_calls failed")
    assert task.steps_used == 1


@pytest.mark.parametrize(
    "bad_calls",
    [
        {"id": "a", "type": "function", "function": {"name": "getCityForecast", "arguments": "{}"}},
        [{"id": "a", "type": "function", "function": {"arguments": "{}"}}],
        ["not a call"],
    ],
    ids=["dict-not-list", "missing-name", "string-call"],
)
def test_other_unreadable_tool_calls_are_parse_errors(suite, bad_calls):
    result = session0_result({0: [output(tool_calls=bad_calls)]})
    traj = trajectory_from_wtb_result(result)
    assert traj.tasks[0].steps[0].parse_error
    verdict = score_session(suite.session("wild_tool_bench_0"), traj)
    assert verdict.tasks[0].error_reason.startswith("parse tool_calls failed")


@BOTH
def test_empty_reply_fails_the_task_instead_of_crashing(suite, mode):
    """Spec §9: the published scorer crashes on an empty reply; here it is a failed task with its reason."""
    verdict = score(suite, session0_result({3: [output(content="")]}), mode)
    assert labels(verdict) == ["correct", "correct", "correct", "error"]
    assert verdict.tasks[3].error_reason == "tool_calls and content are None or empty"


@BOTH
def test_missing_per_task_results_fail_those_tasks(suite, mode):
    result = session0_result()
    result["result"] = result["result"][:3]
    verdict = score(suite, result, mode)
    assert labels(verdict) == ["correct", "correct", "correct", "error"]


def test_trajectory_of_another_session_is_refused(suite):
    traj = trajectory_from_wtb_result(session0_result())
    with pytest.raises(ScoringError):
        score_session(suite.session("wild_tool_bench_1"), traj)


# ---------------------------------------------------------------- auto-detecting loader
def own_trajectory() -> Trajectory:
    return Trajectory(
        session_id="wild_tool_bench_1",
        model="mine",
        tasks=[
            TaskTrajectory(
                task_index=0,
                steps=[
                    Step(tool_calls=[ToolCall.of("getParliamentDebates", {"topic": "x"}, id="c0")], latency_s=1.0),
                    Step(content="done", input_tokens=5),
                ],
            )
        ],
    )


def test_load_trajectories_reads_our_own_jsonl(tmp_path):
    trajs = [
        own_trajectory(),
        Trajectory(session_id="wild_tool_bench_2", status=TrajectoryStatus.PROVIDER_ERROR, error="provider down"),
    ]
    path = tmp_path / "trajectories.jsonl"
    with path.open("w", encoding="utf-8") as fh:
        for t in trajs:
            append_trajectory(fh, t)
    assert len(path.read_text(encoding="utf-8").splitlines()) == 2
    loaded, report = load_trajectories(path)
    assert loaded == trajs
    assert report.loaded == 2


def test_load_trajectories_reads_the_published_format(tmp_path):
    records = [session0_result(), {"id": "wild_tool_bench_3", "model_name": "m", "result": "boom"}]
    path = tmp_path / "result.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    loaded, _ = load_trajectories(path)
    assert loaded == [trajectory_from_wtb_result(r) for r in records]
    assert loaded[0].status is TrajectoryStatus.OK
    assert loaded[1].status is TrajectoryStatus.INFERENCE_ERROR


def test_load_trajectories_tells_formats_apart_line_by_line(tmp_path, suite):
    published = session0_result()
    path = tmp_path / "mixed.jsonl"
    with path.open("w", encoding="utf-8") as fh:
        fh.write(json.dumps(published) + "\n")
        append_trajectory(fh, own_trajectory())
    loaded, _ = load_trajectories(path)
    assert [t.session_id for t in loaded] == ["wild_tool_bench_0", "wild_tool_bench_1"]
    assert loaded[0] == trajectory_from_wtb_result(published)
    assert loaded[1] == own_trajectory()
    assert labels(score_session(suite.session("wild_tool_bench_0"), loaded[0])) == ["correct"] * 4


def test_load_trajectories_locates_a_line_in_neither_format(tmp_path):
    path = tmp_path / "bad.jsonl"
    with path.open("w", encoding="utf-8") as fh:
        append_trajectory(fh, own_trajectory())
        fh.write(json.dumps({"session": "wild_tool_bench_0", "steps": []}) + "\n")
    with pytest.raises(DataError) as info:
        load_trajectories(path)
    assert info.value.line == 2
    loaded, report = load_trajectories(path, skip_invalid=True)
    assert loaded == [own_trajectory()]
    assert [e.line for e in report.skipped] == [2]
