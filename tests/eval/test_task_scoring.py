"""Task-level behaviours of the published scorer (spec §4, §5, §9), in `wtb` mode and fixed in `strict` mode."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolwild.core.formats.wtb import load_wtb_suite
from toolwild.core.session import Session
from toolwild.core.trajectory import Step, ToolCall, Trajectory, TrajectoryStatus
from toolwild.core.verdict import ErrorClass, ScoringMode
from toolwild.eval.agents.oracle import oracle_steps, oracle_trajectory
from toolwild.eval.scoring.session import api_parameters, score_session
from toolwild.eval.scoring.task import Reason, score_task

FIXTURE = Path(__file__).resolve().parents[2].parent / "shared/fixtures/wildtoolbench/sessions_0_4.reconstructed.jsonl"
WTB, STRICT = ScoringMode.WTB, ScoringMode.STRICT


@pytest.fixture(scope="module")
def sessions() -> list[Session]:
    if not FIXTURE.exists():
        pytest.skip(f"fixture not found: {FIXTURE}")
    suite, _ = load_wtb_suite(FIXTURE)
    return suite.sessions


def calls(*pairs: tuple[str, dict | str]) -> Step:
    return Step(tool_calls=[ToolCall.of(name, args) for name, args in pairs])


def text(s: str = "some text") -> Step:
    return Step(content=s)


def score(session: Session, task: int, steps: list[Step], mode: ScoringMode = WTB):
    return score_task(session, task, steps, parameters=api_parameters(session), mode=mode)


# ------------------------------------------------------------------ the oracle
@pytest.mark.parametrize("mode", [WTB, STRICT])
def test_oracle_scores_every_fixture_task_optimally(sessions, mode):
    for s in sessions:
        verdict = score_session(s, oracle_trajectory(s), mode=mode)
        assert verdict.correct
        assert all(t.is_optimal and t.steps_used == t.min_length for t in verdict.tasks)


# ------------------------------------------------------------------ pairing inside a batch
SESSION3_KEYS_REORDERED = [
    calls(
        ("getDetailedInfoByIP", '{"ip": "125.532.55.09", "fields": ["timezone", "currency"]}'),
        ("getDetailedInfoByIP", '{"ip": "228.121.22.88", "fields": ["currency", "population"]}'),
    ),
    text("Here are the details."),
]


def test_session3_task2_keys_in_other_order_are_mispaired_in_wtb(sessions):
    v = score(sessions[3], 1, SESSION3_KEYS_REORDERED, WTB)
    assert v.label == "error" and v.name_label == "correct" and v.arguments_label == "error"
    assert not v.is_optimal
    assert v.error_class is ErrorClass.PARAM_VALUE


def test_session3_task2_keys_in_other_order_are_right_in_strict(sessions):
    v = score(sessions[3], 1, SESSION3_KEYS_REORDERED, STRICT)
    assert v.label == "correct" and v.is_optimal


def test_reversing_the_order_of_calls_in_a_batch_is_harmless(sessions):
    gold = oracle_steps(sessions[3].tasks[1])
    reversed_batch = Step(tool_calls=list(reversed(gold[0].tool_calls)))
    for mode in (WTB, STRICT):
        assert score(sessions[3], 1, [reversed_batch, gold[1]], mode).label == "correct"


# ------------------------------------------------------------------ one argument error, then truncation
def test_argument_error_then_wrong_name_reports_name_correct_and_drops_one_step(sessions):
    s = sessions[0]  # task 2: AQI -> shows -> (detail, detail) -> answer
    steps = [
        calls(("getCityAQIForecast", {"city": "Boston", "endDate": "2024-07-14", "startDate": "2024-07-13"})),
        calls(("getRealtimeCity", {"city": "Las Vegas"})),  # a wrong tool name
    ]
    v = score(s, 2, steps, WTB)
    assert v.label == "error"
    assert v.name_label == "correct"  # forced by the published argument pass
    assert v.arguments_label == "error"
    assert v.progress_complete == 1 and v.progress_total == 5  # two steps logged, one deleted
    assert len(v.steps) == 2 and v.dropped_step == 1
    assert v.error_class is ErrorClass.PARAM_VALUE
    strict = score(s, 2, steps, STRICT)
    assert strict.name_label == "error" and strict.arguments_label == "error"
    assert strict.progress_complete == 0


def test_argument_pass_stops_at_the_first_argument_error(sessions):
    s = sessions[0]
    gold = oracle_steps(s.tasks[2])
    bad_first = calls(("getCityAQIForecast", {"city": "Boston", "endDate": "2024-07-14", "startDate": "2024-07-13"}))
    bad_third = calls(("getShowDetail", {"activity_id": "nope"}), ("getShowDetail", {"activity_id": "nah"}))
    v = score(s, 2, [bad_first, gold[1], bad_third, gold[3]], WTB)
    checked = [st for st in v.steps if st.argument_checks]
    assert len(checked) == 1 and checked[0].step == 0
    assert v.progress_complete == 3  # 4 steps logged, the one after the error deleted
    strict = score(s, 2, [bad_first, gold[1], bad_third, gold[3]], STRICT)
    assert [st.arguments_label for st in strict.steps if st.kind == "calls"] == ["error", "correct", "error"]


def test_argument_error_on_the_last_call_step_drops_the_answer_step(sessions):
    s = sessions[2]
    v = score(s, 0, [calls(("getBudgets", {"user_id": "99999"})), text()], WTB)
    assert v.name_label == "correct" and v.arguments_label == "error"
    assert v.progress_complete == 1


# ------------------------------------------------------------------ progress and optimal path
def test_progress_favours_one_call_per_turn_in_wtb_only(sessions):
    s = sessions[0]
    gold = oracle_steps(s.tasks[2])  # batched: 4 steps for 5 nodes
    one_per_turn = [*gold[:2], *[Step(tool_calls=[c]) for c in gold[2].tool_calls], gold[3]]
    batched_wtb = score(s, 2, gold, WTB)
    single_wtb = score(s, 2, one_per_turn, WTB)
    assert batched_wtb.label == single_wtb.label == "correct"
    assert (batched_wtb.progress_complete, single_wtb.progress_complete) == (4, 5)
    assert batched_wtb.is_optimal and not single_wtb.is_optimal
    assert score(s, 2, gold, STRICT).progress_complete == score(s, 2, one_per_turn, STRICT).progress_complete == 5


def test_parallel_done_one_call_per_turn_is_correct_but_not_optimal(sessions):
    s = sessions[4]
    gold = oracle_steps(s.tasks[2])
    split = [Step(tool_calls=[c]) for c in gold[0].tool_calls] + [gold[1]]
    for mode in (WTB, STRICT):
        v = score(s, 2, split, mode)
        assert v.label == "correct" and not v.is_optimal and v.steps_used == 3 and v.min_length == 2


# ------------------------------------------------------------------ same-name calls
def test_same_name_run_one_per_turn_in_other_order_mispairs_in_wtb_only(sessions):
    s = sessions[0]
    gold = oracle_steps(s.tasks[2])
    first, second = gold[2].tool_calls
    steps = [*gold[:2], Step(tool_calls=[second]), Step(tool_calls=[first]), gold[3]]
    wtb = score(s, 2, steps, WTB)
    assert wtb.label == "error" and wtb.arguments_label == "error"
    assert score(s, 2, steps, STRICT).label == "correct"


# ------------------------------------------------------------------ text steps
def test_any_text_counts_as_the_ask_and_as_the_answer(sessions):
    s = sessions[1]  # task 3: ask -> ask -> call -> answer
    gold = oracle_steps(s.tasks[3])
    steps = [text("what?"), text("hmm?"), gold[2], text("anything at all")]
    for mode in (WTB, STRICT):
        assert score(s, 3, steps, mode).label == "correct"


def test_any_text_on_a_chat_task_is_correct(sessions):
    assert score(sessions[0], 3, [text("no idea")]).label == "correct"


def test_tool_call_on_a_chat_task_is_a_wrong_refusal(sessions):
    v = score(sessions[0], 3, [calls(("getRealtimeCity", {"city": "Chicago"}))])
    assert v.label == "error" and v.error_reason == Reason.NOT_CANDIDATE
    assert v.error_class is ErrorClass.WRONG_REFUSAL


def test_answering_in_text_where_a_call_was_due_is_a_refusal(sessions):
    v = score(sessions[2], 0, [text("I cannot do that")])
    assert v.error_reason == Reason.NOT_CANDIDATE and v.error_class is ErrorClass.REFUSAL


def test_stopping_halfway_is_early_termination(sessions):
    gold = oracle_steps(sessions[0].tasks[2])
    v = score(sessions[0], 2, [gold[0], text("done")])
    assert v.error_class is ErrorClass.EARLY_TERMINATION


def test_calling_instead_of_asking_is_missing_info(sessions):
    gold = oracle_steps(sessions[1].tasks[3])
    v = score(sessions[1], 3, [gold[2]])
    assert v.error_class is ErrorClass.WRONG_NAME_MISSING_INFO


def test_unknown_tool_name_is_wrong_name(sessions):
    v = score(sessions[2], 0, [calls(("noSuchTool", {}))])
    assert v.error_class is ErrorClass.WRONG_NAME_MISSING_INFO


def test_repeating_a_call_after_the_last_one_is_redundant(sessions):
    gold = oracle_steps(sessions[2].tasks[0])
    v = score(sessions[2], 0, [gold[0], gold[0]])
    assert v.error_reason == Reason.NOT_CANDIDATE and v.error_class is ErrorClass.REDUNDANT_CALL


def test_pseudo_action_called_as_a_function(sessions):
    s = sessions[1]
    ask = calls(("ask_user_for_required_parameters", {"tool_list": []}))
    gold = oracle_steps(s.tasks[3])
    steps = [ask, ask, gold[2], text()]
    assert score(s, 3, steps, WTB).label == "correct"  # matched by name like any call (published defect)
    v = score(s, 3, steps, STRICT)
    assert v.label == "error" and v.error_reason == Reason.PSEUDO_CALLED


def test_answer_called_as_a_function_then_more_text_fails_without_crashing(sessions):
    s = sessions[2]
    gold = oracle_steps(s.tasks[0])
    steps = [gold[0], calls(("prepare_to_answer", {"answer_type": "tool"})), text("here")]
    v = score(s, 0, steps, WTB)
    assert v.label == "error" and v.error_reason == Reason.TEXT_AFTER_END
    steps = [gold[0], calls(("prepare_to_answer", {"answer_type": "tool"})), calls(("getBudgets", {}))]
    assert score(s, 0, steps, WTB).error_reason == Reason.no_step(2)


def test_empty_reply_and_running_out_of_steps(sessions):
    s = sessions[2]
    v = score(s, 0, [Step(content="")])
    assert v.error_reason == Reason.EMPTY and v.progress_complete == 1
    v = score(s, 0, [])
    assert v.error_reason == Reason.EMPTY and v.error_class is ErrorClass.EARLY_TERMINATION


def test_invalid_json_arguments_fail_as_type(sessions):
    s = sessions[2]
    v = score(s, 0, [Step(tool_calls=[ToolCall(name="getBudgets", arguments='{"user_id": ')]), text()])
    assert v.arguments_label == "error" and v.error_class is ErrorClass.PARAM_TYPE


def test_hallucinated_extra_argument(sessions):
    s = sessions[0]
    args = {"city": "Chicago", "endDate": "2024-07-14", "startDate": "2024-07-13", "format": "XML"}
    v = score(s, 0, [calls(("getCityForecast", args)), text()])
    assert v.error_class is ErrorClass.PARAM_HALLUCINATION  # "XML" appears nowhere in the conversation


def test_unparseable_tool_calls(sessions):
    v = score(sessions[2], 0, [Step(parse_error="missing 'function'")])
    assert v.error_reason.startswith(Reason.PARSE) and v.error_class is ErrorClass.CALL_ERROR


# ------------------------------------------------------------------ sessions
def test_inference_error_session_counts_as_four_failed_tasks(sessions):
    s = sessions[0]
    v = score_session(s, Trajectory(session_id=s.id, status=TrajectoryStatus.INFERENCE_ERROR, error="boom"))
    assert len(v.tasks) == 4 and all(t.label == "error" for t in v.tasks)
    assert {t.error_class for t in v.tasks} == {ErrorClass.INFERENCE_FAILED}


def test_verdicts_serialise(sessions):
    v = score_session(sessions[0], oracle_trajectory(sessions[0]))
    assert json.loads(v.model_dump_json())["tasks"][2]["min_length"] == 4
