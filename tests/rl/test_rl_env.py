"""SessionEnv: the oracle earns the most, a wrong write the least, and every verdict is the one `eval` gives."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from typing import Any

import pytest
from rl_policies import call, message, oracle_script, play

from toolwild.core.session import Session
from toolwild.core.task import NodeKind, TaskType
from toolwild.core.trajectory import Step, state_digest
from toolwild.core.verdict import ScoringMode
from toolwild.envs.base import EnvironmentBackend, Episode, Observation
from toolwild.envs.registry import get_environment
from toolwild.errors import ConfigError, DataError, HarnessError
from toolwild.eval.agents.base import AgentContext
from toolwild.eval.scoring.session import score_session
from toolwild.eval.session import HistoryMode, run_session
from toolwild.rl import RewardKind, SessionEnv, assistant_step, task_score


def _with_write(suite) -> tuple[Session, int]:
    """A ledger session and a task of it whose first gold step is add_transaction."""
    for session in suite.sessions:
        for i, task in enumerate(session.tasks):
            if task.gold[0].name == "add_transaction":
                return session, i
    pytest.fail("the ledger suite has no task that starts with add_transaction")


def _wrong_amount(session: Session, index: int) -> dict[str, Any]:
    """The task's add_transaction with an amount one dollar off the gold's."""
    arguments = dict(session.tasks[index].gold[0].action.arguments)
    arguments["amount"] = round(float(arguments["amount"]) + 1, 2)
    return call("add_transaction", arguments)


@pytest.mark.parametrize(
    ("suite_name", "reward", "mode"),
    [
        ("rl_ledger_suite", "task", "wtb"),
        ("rl_ledger_suite", "state", "wtb"),
        ("rl_ledger_suite", "progress", "strict"),
        ("rl_inventory_suite", "task", "wtb"),
        ("rl_inventory_suite", "state", "wtb"),
        ("rl_inventory_suite", "progress", "strict"),
    ],
)
def test_the_oracle_gets_the_maximum_reward_on_every_task(request, suite_name, reward, mode):
    suite = request.getfixturevalue(suite_name)
    kinds = {t.type for s in suite.sessions for t in s.tasks}
    assert {TaskType.SINGLE, TaskType.CLARIFY, TaskType.CHAT, TaskType.PARALLEL} <= kinds  # every kind is covered
    for session in suite.sessions:
        with SessionEnv(session, reward=reward, scoring_mode=mode) as env:
            results = play(env, oracle_script(session))
            paid = [r.reward for r in results if r.reward]
            assert paid == [1.0] * len(session.tasks), session.id  # each task pays its full score when it ends
            assert sum(r.reward for r in results) == env.max_return == len(session.tasks)
            assert [task_score(v, RewardKind(reward)) for v in results[-1].verdict] == [1.0] * len(session.tasks)
            assert all(v.label == "correct" and v.state_match for v in results[-1].verdict), session.id


def test_terminal_timing_pays_the_mean_score_on_the_last_step_only(rl_ledger_suite):
    session, index = _with_write(rl_ledger_suite)
    script = oracle_script(session)
    script[index][0] = _wrong_amount(session, index)
    with SessionEnv(session, timing="terminal") as env:
        results = play(env, script)
    assert [r.reward for r in results[:-1]] == [0.0] * (len(results) - 1)
    n = len(session.tasks)
    assert results[-1].reward == pytest.approx((n - 1) / n) and env.max_return == 1.0


@pytest.mark.parametrize(("reward", "mode"), [("task", "wtb"), ("state", "wtb"), ("progress", "strict")])
def test_a_wrong_write_gets_the_minimum_reward_for_its_task(rl_ledger_suite, reward, mode):
    session, index = _with_write(rl_ledger_suite)
    script = oracle_script(session)
    script[index][0] = _wrong_amount(session, index)
    with SessionEnv(session, reward=reward, scoring_mode=mode) as env:
        results = play(env, script)
    ended = next(r for r in results if len(r.verdict) == index + 1)  # the step that finished the task
    assert ended.reward == 0.0
    verdict = results[-1].verdict[index]
    assert verdict.label == "error" and verdict.state_match is False
    assert "amount" in verdict.explanation
    assert all(v.label == "correct" for k, v in enumerate(results[-1].verdict) if k != index)


class _Recorder:
    """An eval agent that plays a message script and keeps every request's conversation."""

    name = "recorder"

    def __init__(self, script: list[list[dict[str, Any]]]) -> None:
        self.script = script
        self.seen: list[list[dict[str, Any]]] = []

    async def next_step(self, context: AgentContext) -> Step:
        self.seen.append(json.loads(json.dumps(context.messages)))
        steps = self.script[context.task_index]
        return assistant_step(steps[context.step_index]) if context.step_index < len(steps) else Step()


@pytest.mark.parametrize("mode", [ScoringMode.WTB, ScoringMode.STRICT])
def test_messages_and_verdicts_are_those_of_eval_history_free(rl_ledger_suite, mode):
    session = next(s for s in rl_ledger_suite.sessions if s.tasks[0].gold[0].name == "add_transaction")
    script = oracle_script(session)
    script[0][0] = _wrong_amount(session, 0)  # a wrong write
    script[1][0] = call("delete_transaction", {"id": "txn-0001"})  # a wrong tool, executed all the same
    script[2] = [{"role": "assistant", "content": ""}]  # an empty reply
    recorder = _Recorder(script)
    trajectory = asyncio.run(
        run_session(
            session, recorder, history=HistoryMode.FREE, scoring_mode=mode, environment=get_environment("ledger")
        )
    )
    expected = score_session(session, trajectory, mode=mode)
    with SessionEnv(session, scoring_mode=mode) as env:
        seen = [env.reset()[0]]
        task, k = 0, 0
        while True:
            result = env.step(script[task][k] if k < len(script[task]) else {"role": "assistant", "content": ""})
            if result.done:
                break
            seen.append(env.messages)
            assert env.messages[-len(result.messages) :] == result.messages
            task, k = (task, k + 1) if result.task_index == task else (result.task_index, 0)
    assert seen == recorder.seen
    assert [v.model_dump() for v in result.verdict] == [v.model_dump() for v in expected.tasks]


def test_an_accepted_question_is_answered_with_the_gold_reply(rl_ledger_suite):
    session, index = next(
        (s, i) for s in rl_ledger_suite.sessions for i, t in enumerate(s.tasks) if t.gold[0].kind is NodeKind.ASK
    )
    with SessionEnv(session, task=index) as env:
        messages, tools = env.reset()
        assert messages[-1] == {"role": "user", "content": session.tasks[index].utterance}
        assert {t["function"]["name"] for t in tools} == {t.name for t in session.tools}
        result = env.step(message(Step(content="Which one?")))
    assert result.messages == [{"role": "user", "content": session.tasks[index].gold[0].user_input}]
    assert result.reward == 0.0 and not result.done and result.task_index == index


def test_a_task_episode_starts_where_the_gold_of_earlier_tasks_leaves_it(rl_ledger_suite):
    session = rl_ledger_suite.sessions[0]
    index = len(session.tasks) - 2
    with SessionEnv(session, task=index, reward="state") as env:
        messages, _ = env.reset()
        utterances = [m["content"] for m in messages if m["role"] == "user"]
        assert utterances[0] == session.tasks[0].utterance and utterances[-1] == session.tasks[index].utterance
        assert state_digest(env.state()) == session.tasks[index - 1].expected_digest
        script = oracle_script(session)
        results = []
        for msg in script[index]:
            results.append(env.step(msg))
        assert results[-1].done and results[-1].task_index == index + 1
        assert [v.task_index for v in results[-1].verdict] == [index]
        assert sum(r.reward for r in results) == env.max_return == 1.0
        assert state_digest(env.state()) == session.tasks[index].expected_digest  # open until close
    assert env.state() is None


def test_unusable_messages_fail_the_task_and_the_episode_goes_on(rl_ledger_suite):
    session = rl_ledger_suite.sessions[0]
    with SessionEnv(session) as env:
        env.reset()
        first = env.step("this is not JSON")
        assert first.reward == 0.0 and first.task_index == 1 and not first.done
        assert first.messages[-1] == {"role": "user", "content": session.tasks[1].utterance}
        assert first.verdict[0].label == "error" and "not JSON" in (first.verdict[0].error_reason or "")
        nameless = env.step(
            {"role": "assistant", "tool_calls": [{"type": "function", "function": {"arguments": "{}"}}]}
        )
        assert nameless.task_index == 2 and nameless.verdict[1].label == "error"
        with pytest.raises(DataError, match="assistant message"):
            env.step(42)  # type: ignore[arg-type]


def test_misuse_is_refused_with_a_clear_error(rl_ledger_suite):
    session = rl_ledger_suite.sessions[0]
    env = SessionEnv(session)
    with pytest.raises(RuntimeError, match="reset"):
        env.step({"role": "assistant", "content": "hi"})
    with pytest.raises(ConfigError, match="no task 9"):
        SessionEnv(session, task=9)
    with pytest.raises(ConfigError, match="runs on no environment"):
        SessionEnv(session.model_copy(update={"environment": None}), reward="state")
    unexpected = session.model_copy(deep=True)
    unexpected.tasks[1].expected_state_change = None
    unexpected.tasks[1].expected_state_digest = None
    with pytest.raises(ConfigError, match="task 1: no expected state"):
        SessionEnv(unexpected, reward="state")
    results = play(env, oracle_script(session))
    with pytest.raises(RuntimeError, match="done"):
        env.step({"role": "assistant", "content": "again"})
    env.close()
    assert results[-1].done

    async def inside_a_loop() -> None:
        with pytest.raises(RuntimeError, match="areset"):
            SessionEnv(session).reset()

    asyncio.run(inside_a_loop())


def test_recorded_observations_when_the_session_names_no_environment(rl_ledger_suite):
    opens_with_call = next(s for s in rl_ledger_suite.sessions if s.tasks[0].gold[0].kind is NodeKind.CALL)
    session = opens_with_call.model_copy(update={"environment": None})
    with SessionEnv(session) as env:
        results = play(env, oracle_script(session))
        assert env.state() is None
    assert sum(r.reward for r in results) == len(session.tasks)
    gold = session.tasks[0].gold[0].observation
    assert json.loads(results[0].messages[0]["content"]) == gold  # the recording, not a live answer


class _Raising(EnvironmentBackend):
    """The ledger, whose writes raise instead of answering (an environment bug)."""

    id = "ledger"

    def __init__(self) -> None:
        self.inner = get_environment("ledger")
        self.closed = 0

    @property
    def tools(self):
        return self.inner.tools

    def reset(self, *, seed: int = 0) -> Episode:
        owner, episode = self, self.inner.reset(seed=seed)

        class Broken(Episode):
            def call(self, name: str, arguments: dict[str, Any]) -> Observation:
                if name == "add_transaction":
                    raise OSError("disk full")
                return episode.call(name, arguments)

            def state(self) -> dict[str, Any]:
                return episode.state()

            def close(self) -> None:
                owner.closed += 1
                episode.close()

        return Broken()


def test_an_environment_that_raises_is_a_harness_error_and_the_episode_is_released(rl_ledger_suite):
    session, index = _with_write(rl_ledger_suite)
    backend = _Raising()
    env = SessionEnv(session, environment=backend, task=index)
    env.reset()
    with pytest.raises(HarnessError, match="disk full"):
        env.step(oracle_script(session)[index][0])
    assert backend.closed == 1 and env.state() is None
    env.close()


def test_the_async_api_runs_an_episode_on_the_callers_loop(rl_inventory_suite):
    session = rl_inventory_suite.sessions[0]
    script = oracle_script(session)

    async def episode() -> float:
        async with SessionEnv(session) as env:
            await env.areset()
            total, task, k = 0.0, 0, 0
            while True:
                result = await env.astep(script[task][k])
                total += result.reward
                if result.done:
                    return total
                task, k = (task, k + 1) if result.task_index == task else (result.task_index, 0)

    assert asyncio.run(episode()) == len(session.tasks)


def test_a_task_past_its_step_budget_fails_and_the_next_task_begins(rl_inventory_suite):
    session = next(s for s in rl_inventory_suite.sessions if len(oracle_script(s)[0]) >= 3)
    gold = oracle_script(session)[0]
    with SessionEnv(session, max_steps_per_task=2) as env:
        env.reset()
        assert env.step(gold[0]).task_index == 0
        result = env.step(gold[1])  # legal, and the budget's last step: the task was still going
    assert result.task_index == 1 and result.reward == 0.0
    assert result.messages[-1] == {"role": "user", "content": session.tasks[1].utterance}
    assert result.verdict[0].failure is not None and result.verdict[0].failure.value == "step_budget"


def test_a_task_episode_refuses_a_session_whose_earlier_gold_does_not_replay(rl_ledger_suite):
    broken = rl_ledger_suite.sessions[0].model_copy(deep=True)
    broken.tasks[0].expected_state = {"ledger": []}
    env = SessionEnv(broken, task=1)
    with pytest.raises(DataError, match="gold of task 0 does not replay"):
        env.reset()
    assert env.state() is None  # the episode was released
    env.close()


class _Slow(EnvironmentBackend):
    """The inventory, whose calls wait until released: a step that can be cancelled halfway."""

    id = "inventory"

    def __init__(self) -> None:
        self.inner = get_environment("inventory")
        self.entered = asyncio.Event()

    @property
    def tools(self):
        return self.inner.tools

    def reset(self, *, seed: int = 0) -> Episode:
        owner, episode = self, self.inner.reset(seed=seed)

        class Waiting(Episode):
            def call(self, name: str, arguments: dict[str, Any]) -> Observation:
                return episode.call(name, arguments)

            async def acall(self, name: str, arguments: dict[str, Any]) -> Observation:
                owner.entered.set()
                await asyncio.Event().wait()  # never released
                raise AssertionError("unreachable")

            def state(self) -> dict[str, Any]:
                return episode.state()

        return Waiting()


def test_a_cancelled_step_ends_the_episode_instead_of_desynchronising_it(rl_inventory_suite):
    session = rl_inventory_suite.sessions[0]
    first = session.tasks[0].gold[0]

    async def scenario() -> None:
        backend = _Slow()
        env = SessionEnv(session, environment=backend)
        await env.areset()
        pending = asyncio.ensure_future(env.astep(call(first.name, first.action.arguments)))
        await backend.entered.wait()
        pending.cancel()
        with pytest.raises(asyncio.CancelledError):
            await pending
        with pytest.raises(RuntimeError, match="done"):
            await env.astep({"role": "assistant", "content": "hello?"})
        await env.aclose()
        assert env.state() is None

    asyncio.run(scenario())


def test_the_core_runs_without_gymnasium_and_the_adapter_says_what_to_install():
    script = (
        "import sys\n"
        "sys.modules['gymnasium'] = None  # as if not installed\n"
        "import toolwild.rl\n"
        "from toolwild.errors import MissingDependencyError\n"
        "try:\n"
        "    import toolwild.rl.gymnasium\n"
        "except MissingDependencyError as exc:\n"
        "    print(exc)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert "pip install 'toolwild[rl]'" in result.stdout
