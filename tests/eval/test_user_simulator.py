"""The simulated user and the interactive loop: what the user knows, how a model plays it, and how a session with a
simulated user is scored (oracle 100%, answers in another order still pass on state, the simulator's failure is
not the agent's, every model call cached)."""

from __future__ import annotations

import hashlib
import json
import re
from importlib import resources

import pytest

from toolwild.core.hidden_intent import mentions
from toolwild.core.trajectory import Step, ToolCall
from toolwild.envs.registry import get_environment
from toolwild.errors import ConfigError, TransientBackendError
from toolwild.eval.agents.oracle import OracleAgent, oracle_steps
from toolwild.eval.agents.scripted import ScriptedAgent
from toolwild.eval.interactive import run_interactive_session, score_interactive_session
from toolwild.eval.scoring.session import score_session
from toolwild.eval.user import (
    ModelUser,
    RecordedUser,
    ScriptedUser,
    UserSimulatorError,
    UserTurn,
    UserView,
    parse_user_spec,
    render_view,
    task_facts,
    user_prompt,
)
from toolwild.llm.backends.scripted import ScriptedBackend
from toolwild.llm.cache import ResponseCache
from toolwild.llm.client import LLM, RetryPolicy

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture(scope="module")
def suite(ledger_suite_64):
    return ledger_suite_64


@pytest.fixture(scope="module")
def ledger():
    return get_environment("ledger")


def _asks(task) -> int:
    return len(task_facts(task).replies)


def _with_task(suite, predicate):
    """The first (session, task index) of the suite whose task satisfies ``predicate``."""
    for session in suite.sessions:
        for i, task in enumerate(session.tasks):
            if predicate(task):
                return session, i
    pytest.fail("the ledger suite has no such task: pick another")


def _two_questions(task) -> bool:
    """A task whose gold asks for two values, then again for the one the first reply left out."""
    facts = task_facts(task)
    return len(facts.replies) == 2 and len(facts.withheld) == 2


# ---------------------------------------------------------------------------------------------- facts and prompt
def test_facts_hold_the_withheld_values_their_recorded_words_and_when_they_are_asked(suite):
    session, i = _with_task(suite, _two_questions)
    facts = task_facts(session.tasks[i])
    first, second = facts.withheld  # payee asked first; amount asked twice, given in the second reply
    assert first.param == "payee" and first.asks == [0] and first.required_at == 0
    assert second.param == "amount" and second.asks == [0, 1] and second.required_at == 1
    assert second.said == facts.replies[1] and mentions(second.said, second.value)
    assert all(f.value is not None for f in facts.stated)
    assert not any(f.param in ("payee", "amount") for f in facts.stated)


def test_values_the_recorded_reply_names_in_its_own_words_are_found_by_those_words(suite):
    session, i = _with_task(suite, lambda t: any(f.param == "start_date" for f in task_facts(t).withheld))
    start = next(f for f in task_facts(session.tasks[i]).withheld if f.param == "start_date")
    assert start.phrase  # "This month so far." / "Last month."
    assert set(start.phrase) <= set(re.findall(r"[a-z0-9']+", start.said.lower()))


def test_the_prompt_is_one_versioned_file_and_its_sha256_is_that_of_the_file():
    prompt = user_prompt()
    data = resources.files("toolwild.eval").joinpath("prompts", "user.md").read_bytes()
    assert prompt.sha256 == hashlib.sha256(data).hexdigest()
    assert data.decode().splitlines()[0] == f"version: {prompt.version}"
    assert "version:" not in prompt.text and '"dont_know"' in prompt.text
    assert prompt.record() == {"user_prompt_version": prompt.version, "user_prompt_sha256": prompt.sha256}


def test_user_forms():
    assert parse_user_spec("recorded") is None
    assert parse_user_spec("model:openai:gpt-4o-mini") == "openai:gpt-4o-mini"
    for bad in ("model", "model:", "llm:local", ""):
        with pytest.raises(ConfigError, match="--user"):
            parse_user_spec(bad)


# ---------------------------------------------------------------------------------------------- the loop, scored
def _reworded(view: UserView) -> UserTurn:
    """A faithful user in its own words: the recorded facts, then thanks."""
    if view.turn < len(view.facts.replies):
        return UserTurn(action="answer", message=f"Sure. {view.facts.replies[view.turn]}")
    return UserTurn(action="done", message="Thanks, that's all.")


async def test_the_oracle_against_a_faithful_user_scores_100_percent_on_calls_state_and_answers(suite, ledger):
    for session in suite.sessions:
        run = await run_interactive_session(session, OracleAgent(), ScriptedUser(_reworded), environment=ledger)
        verdict = score_interactive_session(session, run.trajectory)
        assert run.user_error is None
        assert [t.label for t in verdict.tasks] == ["correct"] * len(session.tasks), [
            t.explanation for t in verdict.tasks
        ]
        assert all(t.state_match for t in verdict.tasks if session.tasks[t.task_index].checks_state)
        assert all(t.is_optimal and t.redundant_writes == 0 for t in verdict.tasks)


async def test_without_an_environment_calls_are_answered_from_the_gold_recordings(suite):
    session = suite.sessions[0]
    run = await run_interactive_session(session, OracleAgent(), RecordedUser())
    gold = oracle_steps(session.tasks[0])[0]
    assert run.trajectory.tasks[0].steps[0].observations == gold.observations
    assert all(t.label == "correct" for t in score_interactive_session(session, run.trajectory).tasks)
    stray = ScriptedAgent({session.id: [[Step(tool_calls=[ToolCall.of("list_accounts", {"prefix": "Nope"})])]]})
    run = await run_interactive_session(session, stray, RecordedUser(), max_steps_per_task=1)
    assert '"no_recording"' in (run.trajectory.tasks[0].steps[0].observations or [""])[0]


def _one_question_behaviour(session, question: str = "Where was it from, and how much was it?"):
    """A correct agent that asks once per task that needs asking, then makes the gold calls and answers."""
    tasks = []
    for task in session.tasks:
        steps = [s for s in oracle_steps(task) if s.tool_calls or s.user_reply is None]
        tasks.append(([Step(content=question)] if _asks(task) else []) + steps)
    return tasks


async def test_two_values_in_one_reply_still_let_a_correct_agent_pass_on_state(suite, ledger):
    session, i = _with_task(suite, _two_questions)
    both = " and ".join(f.said for f in task_facts(session.tasks[i]).withheld)

    def user(view: UserView) -> UserTurn:
        if view.task_index == i:  # both values at once, where the gold gives one; then the task is done
            return UserTurn(action="answer", message=both) if view.turn == 0 else UserTurn(action="done")
        return _reworded(view)

    agent = ScriptedAgent({session.id: _one_question_behaviour(session)})
    run = await run_interactive_session(session, agent, ScriptedUser(user), environment=ledger)
    verdict = score_interactive_session(session, run.trajectory)
    task = verdict.tasks[i]
    assert task.state_match is True and task.label == "correct", task.explanation
    assert not task.is_optimal  # one question fewer than the gold is not the gold's path, but no error
    # the published live loop, replayed as is, fails the same steps: it waits for the gold's second question
    assert score_session(session, run.trajectory).tasks[i].label == "error"


async def test_the_second_value_first_still_lets_a_correct_agent_pass_on_state(suite, ledger):
    session, i = _with_task(suite, _two_questions)
    facts = task_facts(session.tasks[i])

    def user(view: UserView) -> UserTurn:
        if view.task_index == i and view.turn < 2:  # the amount first, then the payee
            return UserTurn(action="answer", message=facts.withheld[1 - view.turn].said)
        return _reworded(view)

    run = await run_interactive_session(session, OracleAgent(), ScriptedUser(user), environment=ledger)
    task = score_interactive_session(session, run.trajectory).tasks[i]
    assert task.state_match is True and task.label == "correct", task.explanation


async def test_a_call_without_asking_where_the_gold_asks_is_still_an_error(suite, ledger):
    session, i = _with_task(suite, lambda t: _asks(t) == 1)
    behaviour = [oracle_steps(t) for t in session.tasks]
    behaviour[i] = [s for s in behaviour[i] if s.user_reply is None]  # the right call, but the value was guessed
    run = await run_interactive_session(
        session, ScriptedAgent({session.id: behaviour}), ScriptedUser(_reworded), environment=ledger
    )
    task = score_interactive_session(session, run.trajectory).tasks[i]
    assert task.state_match is True and task.label == "error" and task.name_label == "error"


async def test_a_write_the_argument_check_lets_through_still_fails_on_state(suite, ledger):
    def wordy(task) -> bool:
        calls = task.call_nodes
        return len(calls) == 1 and len(str(calls[0].action.arguments.get("narration", "")).split()) >= 2

    session, i = _with_task(suite, wordy)
    behaviour = [oracle_steps(t) for t in session.tasks]
    at = next(k for k, s in enumerate(behaviour[i]) if s.tool_calls)
    call = behaviour[i][at].tool_calls[0]
    arguments = json.loads(call.arguments)
    arguments["narration"] += " today"  # close enough for the published string rule (rouge >= 0.7)
    behaviour[i][at] = Step(tool_calls=[ToolCall.of(call.name, arguments, id=call.id)])
    run = await run_interactive_session(
        session, ScriptedAgent({session.id: behaviour}), ScriptedUser(_reworded), environment=ledger
    )
    task = score_interactive_session(session, run.trajectory).tasks[i]
    assert task.name_label == "correct" and task.arguments_label == "correct"
    assert task.state_match is False and task.label == "error" and "state" in (task.error_reason or "")


async def test_an_answer_that_states_a_number_the_results_do_not_hold_fails(suite, ledger):
    session = next(s for s in suite.sessions if s.tasks[0].call_nodes)  # a tool task first: its answer is checked
    behaviour = [oracle_steps(t) for t in session.tasks]
    behaviour[0][-1] = Step(content="Done: that came to $4,321.00.")
    run = await run_interactive_session(
        session, ScriptedAgent({session.id: behaviour}), RecordedUser(), environment=ledger
    )
    task = score_interactive_session(session, run.trajectory).tasks[0]
    assert task.state_match is True and task.name_label == "correct"
    assert task.label == "error" and "4,321.00" in (task.error_reason or ""), task.error_reason


async def test_a_raw_json_answer_fails(suite, ledger):
    session = suite.sessions[0]
    behaviour = [oracle_steps(t) for t in session.tasks]
    behaviour[0][-1] = Step(content=json.dumps({"id": "txn-0146", "ok": True}))
    run = await run_interactive_session(
        session, ScriptedAgent({session.id: behaviour}), RecordedUser(), environment=ledger
    )
    task = score_interactive_session(session, run.trajectory).tasks[0]
    assert task.label == "error" and "raw JSON" in (task.error_reason or "")


async def test_a_user_that_never_ends_runs_into_the_step_budget(suite):
    session = suite.sessions[0]
    always = ScriptedUser(lambda view: UserTurn(action="answer", message="Hm?"))
    chatter = ScriptedAgent({session.id: [[Step(content="Anything else?")] * 10] * 4})
    run = await run_interactive_session(session, chatter, always, max_steps_per_task=3)
    assert [t.failure.kind.value for t in run.trajectory.tasks if t.failure] == ["step_budget"] * 4
    assert len(run.turns) == 12 and all(t.action == "answer" for t in run.turns)


# ---------------------------------------------------------------------------------------------- the model user
def _view(suite) -> UserView:
    session, i = _with_task(suite, lambda t: _asks(t) == 1)
    task = session.tasks[i]
    return UserView(
        session_id=session.id,
        task_index=i,
        utterance=task.utterance,
        facts=task_facts(task),
        agent_message="How much was it?",
        trial=2,
    )


def _llm(responses, cache=None) -> LLM:
    return LLM(ScriptedBackend(responses), cache=cache, retry=RetryPolicy(max_attempts=1))


async def test_a_model_user_reads_the_prompt_and_the_facts_and_answers_in_checked_json(suite):
    view = _view(suite)
    llm = _llm([json.dumps({"action": "answer", "message": "  It was 91.20.  "})])
    user = ModelUser(llm, seed=5)
    turn = await user.reply(view)
    assert turn == UserTurn(action="answer", message="It was 91.20.")
    (request,) = llm.backend.requests
    assert request.messages[0] == {"role": "system", "content": user_prompt().text}
    assert request.messages[1]["content"] == render_view(view)
    fact = view.facts.withheld[0]
    assert f'you would say: "{fact.said}"' in render_view(view) and "How much was it?" in render_view(view)
    assert request.seed == 7 and request.response_format is not None  # seed + trial; JSON asked for
    assert llm.usage.roles["user"].calls == 1


async def test_garbage_is_sent_back_then_counted_as_the_simulators_error(suite):
    view = _view(suite)
    fixed = _llm(["not json", json.dumps({"action": "answer", "message": ""}), '{"action": "done"}'])
    assert await ModelUser(fixed).reply(view) == UserTurn(action="done")
    feedback = fixed.backend.requests[1].messages[-1]["content"]
    assert "not the JSON object asked for" in feedback
    assert "empty" in fixed.backend.requests[2].messages[-1]["content"]
    broken = _llm(["nope", "[1]", '{"action": "shout", "message": "x"}'])
    with pytest.raises(UserSimulatorError, match="3 attempts"):
        await ModelUser(broken).reply(view)


async def test_the_simulators_failure_ends_the_session_as_its_own_not_the_agents(suite, ledger):
    session = suite.sessions[0]  # the oracle's first text is task 0's answer: the user fails there
    run = await run_interactive_session(session, OracleAgent(), ModelUser(_llm(["x", "y", "z"])), environment=ledger)
    assert run.user_error is not None and "no usable user turn" in run.user_error
    assert run.turns[-1].error == run.user_error and run.turns[-1].action is None
    assert len(run.trajectory.tasks) == 1 and run.trajectory.tasks[0].failure is None  # nothing blamed on the agent


async def test_a_provider_failure_of_the_user_is_a_provider_error(suite):
    session = suite.sessions[0]
    user = ModelUser(_llm([TransientBackendError("503 from the user model")]))
    with pytest.raises(TransientBackendError, match="503"):
        await run_interactive_session(session, OracleAgent(), user)


async def test_every_user_call_is_cached_a_second_run_makes_no_call(suite, ledger, tmp_path):
    session, _ = _with_task(suite, lambda t: _asks(t) >= 1)

    def play(request) -> str:
        text = request.messages[1]["content"]
        said = text.split('you would say: "', 1)[1].split('")', 1)[0] if "you would say" in text else ""
        asked = "?" in text.rsplit("The assistant's latest message:", 1)[1]
        return json.dumps({"action": "answer", "message": said} if asked and said else {"action": "done"})

    runs, calls = [], []
    for _ in range(2):
        llm = LLM(ScriptedBackend(play), cache=ResponseCache(tmp_path / "cache.sqlite"))
        runs.append(await run_interactive_session(session, OracleAgent(), ModelUser(llm), environment=ledger))
        calls.append(llm.backend_calls)
        await llm.aclose()
    assert calls[0] >= len(session.tasks) and calls[1] == 0
    assert runs[0].turns == runs[1].turns and runs[0].trajectory == runs[1].trajectory


async def test_a_run_with_a_simulated_user_is_rescored_the_same_way_and_failed_sessions_keep_their_class(suite):
    from toolwild.core.trajectory import Trajectory, TrajectoryStatus
    from toolwild.eval.interactive import score_interactive_suite

    first, second, third = suite.sessions[:3]
    run = await run_interactive_session(first, OracleAgent(), RecordedUser())
    lost = Trajectory(session_id=second.id, status=TrajectoryStatus.PROVIDER_ERROR, error="503")
    small = suite.model_copy(update={"sessions": [first, second, third]})
    verdicts = score_interactive_suite(small, [run.trajectory, lost])
    assert [v.session_id for v in verdicts] == [first.id, second.id, third.id]
    assert verdicts[0] == score_interactive_session(first, run.trajectory) and verdicts[0].correct
    assert verdicts[1].provider_error and verdicts[1].excluded
    assert verdicts[2].inference_error == "no result for this session" and not verdicts[2].correct
