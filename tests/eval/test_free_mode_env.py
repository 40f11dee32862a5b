"""Free-running evaluation on a stateful environment: real observations, expected state, redundant writes."""

from __future__ import annotations

import json

import pytest

from toolwild.core.session import Session, Suite
from toolwild.core.task import Action, GoldNode, Task, TaskType, TurnSubtype
from toolwild.core.trajectory import Step, ToolCall
from toolwild.envs.registry import get_environment
from toolwild.eval.agents.scripted import ScriptedAgent
from toolwild.eval.metrics.accuracy import compute_metrics
from toolwild.eval.run_config import RunConfig
from toolwild.eval.runner import run_suite
from toolwild.eval.session import HistoryMode


@pytest.fixture
def anyio_backend():
    return "asyncio"


def _suite() -> tuple[Suite, str]:
    env = get_environment("inventory")
    episode = env.reset(seed=7)
    item = episode.call("list_items", {}).result[0]
    restock = episode.call("restock", {"item": item, "units": 5})
    after_restock = episode.state()
    tasks = [
        Task(
            utterance=f"Five more {item} arrived, please record them.",
            type=TaskType.SINGLE,
            gold=[
                GoldNode(
                    idx=0,
                    action=Action(name="restock", arguments={"item": item, "units": 5}),
                    observation=restock.model_dump(include={"ok", "result"}),
                    dependency_list=[],
                ),
                GoldNode(
                    idx=1,
                    action=Action(name="prepare_to_answer", arguments={"answer_type": "tool"}),
                    observation="Recorded.",
                    dependency_list=[0],
                ),
            ],
            expected_state=after_restock,
        ),
        Task(
            utterance="Did that go through?",
            type=TaskType.CHAT,
            subtype=TurnSubtype.COREFERENTIAL,
            gold=[
                GoldNode(
                    idx=0,
                    action=Action(name="prepare_to_answer", arguments={"answer_type": "chat"}),
                    observation="Yes.",
                    dependency_list=[],
                )
            ],
            expected_state=after_restock,
        ),
    ]
    session = Session(
        id="inv-0",
        env_info="2024-07-11 10:00:00 Thursday",
        tools=env.tools,
        tasks=tasks,
        environment="inventory",
        extra={"env_seed": 7},
    )
    return Suite(name="inv", sessions=[session]), item


async def _run(tmp_path, steps_per_task):
    suite, _ = _suite()
    agent = ScriptedAgent({"inv-0": steps_per_task})
    config = RunConfig(suite="inv", agent="scripted", history=HistoryMode.FREE)
    verdicts = await run_suite(suite, agent, config, tmp_path)
    lines = (tmp_path / "trajectories.jsonl").read_text().splitlines()
    return verdicts[0], compute_metrics(verdicts, model_name="s", resamples=0), json.loads(lines[0])


def _restock(item: str, units: int = 5) -> Step:
    return Step(tool_calls=[ToolCall.of("restock", {"item": item, "units": units})])


@pytest.mark.anyio
async def test_right_behaviour_reaches_the_expected_state(tmp_path):
    _, item = _suite()
    verdict, metrics, traj = await _run(tmp_path, [[_restock(item), Step(content="Done.")], [Step(content="Yes.")]])
    assert verdict.correct
    assert [t.state_match for t in verdict.tasks] == [True, True]
    assert [t.redundant_writes for t in verdict.tasks] == [0, 0]
    observation = json.loads(traj["tasks"][0]["steps"][0]["observations"][0])
    assert observation["ok"] is True and observation["result"]["item"] == item  # a real observation
    assert metrics.extensions["state_info"]["final_state"]["accuracy"] == 1.0


@pytest.mark.anyio
async def test_rerunning_the_write_when_asked_about_it_is_a_redundant_write(tmp_path):
    _, item = _suite()
    verdict, metrics, _ = await _run(tmp_path, [[_restock(item), Step(content="Done.")], [_restock(item)]])
    chat = verdict.tasks[1]
    assert chat.label == "error" and chat.redundant_writes == 1 and chat.state_match is False
    info = metrics.extensions["state_info"]
    assert info["redundant_writes"] == {"writes": 1, "tasks": 1, "sessions": 1}
    assert info["final_state"]["correct_count"] == 0


@pytest.mark.anyio
async def test_wrong_amount_fails_the_state_check_even_when_the_task_label_is_an_argument_error(tmp_path):
    _, item = _suite()
    verdict, _, traj = await _run(tmp_path, [[_restock(item, 6), Step(content="Done.")], [Step(content="Yes.")]])
    assert verdict.tasks[0].state_match is False and verdict.tasks[0].label == "error"
    assert traj["tasks"][0]["state_diff"], "the difference from the expected state is recorded"
