"""Failing steps say in words what was expected and what came, without touching the published reasons."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolwild.core.formats.wtb import load_wtb_suite
from toolwild.core.task import ASK_ACTION
from toolwild.core.trajectory import Step, ToolCall
from toolwild.core.verdict import ScoringMode, SessionVerdict, StepVerdict
from toolwild.eval.scoring.session import api_parameters
from toolwild.eval.scoring.task import Reason, score_task

FIXTURE = Path(__file__).resolve().parents[2].parent / "shared/fixtures/wildtoolbench/sessions_0_4.reconstructed.jsonl"
pytestmark = pytest.mark.skipif(not FIXTURE.exists(), reason=f"fixture not found: {FIXTURE}")
MODES = list(ScoringMode)


@pytest.fixture(scope="module")
def suite():
    return load_wtb_suite(FIXTURE)[0]


def judge(suite, session_id: str, task: int, steps: list[Step], mode: ScoringMode):
    session = suite.session(session_id)
    return score_task(session, task, steps, parameters=api_parameters(session), mode=mode)


def call(name: str, **arguments) -> Step:
    return Step(tool_calls=[ToolCall.of(name, arguments)])


ANSWER = Step(content="Here you are.")


@pytest.mark.parametrize("mode", MODES)
def test_text_where_a_call_was_due_names_the_expected_tool(suite, mode):
    verdict = judge(suite, "wild_tool_bench_2", 0, [Step(content="I cannot look that up.")], mode)
    step = verdict.steps[0]
    assert step.error_reason == Reason.NOT_CANDIDATE  # the published string, unchanged
    assert step.expected == ["getBudgets"]
    assert step.explanation == "expected a call of getBudgets; got a text reply"
    assert verdict.explanation == step.explanation


@pytest.mark.parametrize("mode", MODES)
def test_wrong_name_of_an_existing_tool_says_what_was_called(suite, mode):
    verdict = judge(suite, "wild_tool_bench_2", 2, [call("getBudgets", user_id="12345")], mode)
    step = verdict.steps[0]
    assert step.error_reason == Reason.NOT_CANDIDATE
    assert step.explanation == "expected a call of syncTransactions; called getBudgets"


@pytest.mark.parametrize("mode", MODES)
def test_a_name_the_session_does_not_have_is_called_out(suite, mode):
    verdict = judge(suite, "wild_tool_bench_2", 1, [call("restock")], mode)
    assert verdict.steps[0].explanation == (
        "expected a call of createTransaction; called restock, which is not a tool of this session"
    )


@pytest.mark.parametrize("mode", MODES)
def test_missing_ask_names_the_pseudo_action(suite, mode):
    verdict = judge(suite, "wild_tool_bench_3", 2, [call("getLocationByIP", ip="1.2.3.4")], mode)
    step = verdict.steps[0]
    assert step.expected == [ASK_ACTION]
    assert step.explanation == f"expected {ASK_ACTION} (a required value is missing); called getLocationByIP"


@pytest.mark.parametrize("mode", MODES)
def test_bad_argument_names_it_with_expected_got_and_rouge(suite, mode):
    gold = {"dateRange": {"endDate": "2024-12-18", "startDate": "2024-10-18"}, "topic": "Nature and wildlife"}
    verdict = judge(suite, "wild_tool_bench_1", 0, [call("getParliamentDebates", **gold), ANSWER], mode)
    assert verdict.label == "error" and verdict.arguments_label == "error"
    step = verdict.steps[0]
    assert step.argument_checks[0].result.startswith("error_match: string similarity too low at 'topic' (rouge")
    assert step.expected == ["getParliamentDebates"]
    assert step.explanation == (
        'getParliamentDebates: argument \'topic\' expected "Environmental protection", got "Nature and wildlife" '
        "(rouge score 0.00, needs 0.70)"
    )
    assert verdict.explanation == step.explanation


@pytest.mark.parametrize("mode", MODES)
def test_short_string_argument_gives_the_edit_score(suite, mode):
    args = {"city": "Boston", "endDate": "2024-07-14", "startDate": "2024-07-13"}
    verdict = judge(suite, "wild_tool_bench_0", 0, [call("getCityForecast", **args), ANSWER], mode)
    explanation = verdict.steps[0].explanation
    assert explanation.startswith('getCityForecast: argument \'city\' expected "Chicago", got "Boston" (edit score')
    assert explanation.endswith("needs 0.80)")


@pytest.mark.parametrize("mode", MODES)
def test_missing_required_argument_is_named(suite, mode):
    verdict = judge(suite, "wild_tool_bench_2", 0, [call("getBudgets"), ANSWER], mode)
    assert verdict.steps[0].argument_checks[0].result == "error_schema: required args missing"
    assert verdict.steps[0].explanation == "getBudgets: required argument 'user_id' missing"


@pytest.mark.parametrize("mode", MODES)
def test_empty_reply(suite, mode):
    verdict = judge(suite, "wild_tool_bench_4", 1, [], mode)
    step = verdict.steps[0]
    assert step.error_reason == Reason.EMPTY
    assert step.explanation == "reply was empty; expected a call of emailLogin"


@pytest.mark.parametrize("mode", MODES)
def test_parse_error_quotes_the_parser(suite, mode):
    verdict = judge(suite, "wild_tool_bench_4", 1, [Step(parse_error="no closing brace")], mode)
    step = verdict.steps[0]
    assert step.error_reason == f"{Reason.PARSE}, error: no closing brace"
    assert step.explanation == "the tool call did not parse: no closing brace; expected a call of emailLogin"


def test_call_after_the_last_step_says_none_was_left(suite):
    args = {"user_id": "12345"}
    steps = [call("getBudgets", **args), call("getBudgets", **args)]
    verdict = judge(suite, "wild_tool_bench_2", 0, steps, ScoringMode.STRICT)
    assert verdict.steps[1].expected == ["prepare_to_answer"]
    assert verdict.steps[1].explanation == "expected a text answer; called getBudgets"


@pytest.mark.parametrize("mode", MODES)
def test_correct_but_longer_path_says_how_many_steps_more(suite, mode):
    session = suite.session("wild_tool_bench_3")
    gold = session.tasks[1].gold
    steps = [call(g.name, **g.action.arguments) for g in gold[:2]] + [ANSWER]
    verdict = judge(suite, "wild_tool_bench_3", 1, steps, mode)
    assert verdict.label == "correct" and not verdict.is_optimal
    assert verdict.explanation == "not optimal: 1 step more than the shortest path"


def test_passing_steps_carry_no_explanation(suite):
    gold = suite.session("wild_tool_bench_2").tasks[0].gold[0]
    verdict = judge(suite, "wild_tool_bench_2", 0, [call(gold.name, **gold.action.arguments), ANSWER], ScoringMode.WTB)
    assert verdict.is_optimal and verdict.explanation == ""
    assert all(s.explanation == "" and s.expected == [] for s in verdict.steps)


def test_an_old_verdict_line_without_the_new_fields_still_loads(suite):
    verdict = judge(suite, "wild_tool_bench_2", 0, [Step(content="no")], ScoringMode.WTB)
    old = {"session_id": "wild_tool_bench_2", "mode": "wtb", "transitions": 0, "tasks": [verdict.model_dump()]}
    del old["tasks"][0]["explanation"]
    for step in old["tasks"][0]["steps"]:
        del step["expected"], step["explanation"]
    loaded = SessionVerdict.model_validate_json(json.dumps(old, default=str))
    assert loaded.tasks[0].explanation == "" and loaded.tasks[0].steps[0].expected == []
    assert StepVerdict.model_validate({"step": 0, "kind": "text", "name_label": "error"}).explanation == ""


def test_task_explanation_is_the_first_failure_not_the_deleted_step(suite):
    """wtb: after an argument error the next step is deleted; the task is explained by the argument error."""
    steps = [Step(tool_calls=[ToolCall(name="userActivityReport", arguments="{oops")])]
    verdict = judge(suite, "wild_tool_bench_4", 2, steps, ScoringMode.WTB)
    assert verdict.dropped_step == 1 and verdict.steps[1].explanation.startswith("reply was empty")
    assert verdict.explanation == 'userActivityReport: the arguments are not valid JSON: "{oops"'
