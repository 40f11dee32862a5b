"""The ledger suite evaluated free-running on real beancount: oracle, doubled writes, add-instead-of-amend."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from toolwild.core.trajectory import Step, ToolCall
from toolwild.envs.registry import get_environment
from toolwild.eval.agents.oracle import oracle_steps
from toolwild.eval.agents.scripted import ScriptedAgent
from toolwild.eval.run_config import RunConfig
from toolwild.eval.runner import run_suite
from toolwild.eval.scoring.dag import GoldDag
from toolwild.eval.session import HistoryMode, environment_seed

BEAN_CHECK = Path(sys.executable).parent / "bean-check"


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture(scope="module")
def suite(ledger_suite_64):
    return ledger_suite_64


@pytest.fixture(scope="module")
def pool(ledger_suite_64, ledger_published):
    """Every session of the built-in and the like-published suites: where to look for a pair of templates."""
    return ledger_suite_64.model_copy(update={"sessions": [*ledger_suite_64.sessions, *ledger_published.sessions]})


def _session(suite, templates: tuple[str, str]):
    """The first session whose consecutive tasks use these templates (the first may name several, ``a|b``), and the
    index of the second."""
    for s in suite.sessions:
        names = s.extra["ledger_templates"]
        for i in range(len(names) - 1):
            if names[i] in templates[0].split("|") and names[i + 1] == templates[1]:
                return s, i + 1
    pytest.fail(f"the built-in suite has no session with templates {templates}: pick another pair")


def _gold(session):
    return [oracle_steps(t) for t in session.tasks]


async def _run(tmp_path, session, behaviour):
    from toolwild.core.session import Suite

    config = RunConfig(suite="ledger", agent="scripted", history=HistoryMode.FREE)
    (verdict,) = await run_suite(
        Suite(name="one", sessions=[session]), ScriptedAgent({session.id: behaviour}), config, tmp_path
    )
    return verdict


def _gold_call(session, task_index: int, name: str):
    node = next(n for n in session.tasks[task_index].gold if n.name == name)
    return node.action.arguments


@pytest.mark.anyio
async def test_rerunning_the_add_when_asked_about_the_category_is_a_redundant_write(tmp_path, pool):
    session, chat = _session(pool, ("add_missing_two|add_missing_amount|add_date_in_parts", "category_check"))
    behaviour = _gold(session)
    behaviour[chat] = [
        Step(tool_calls=[ToolCall.of("add_transaction", _gold_call(session, chat - 1, "add_transaction"))])
    ]
    verdict = await _run(tmp_path, session, behaviour)
    task = verdict.tasks[chat]
    assert task.label == "error" and task.redundant_writes == 1
    assert sum(t.redundant_writes or 0 for t in verdict.tasks) == 1
    line = json.loads((tmp_path / "trajectories.jsonl").read_text().splitlines()[0])
    refused = json.loads(line["tasks"][chat]["steps"][0]["observations"][0])
    assert refused["error"]["kind"] == "duplicate"  # the environment did not write it twice


@pytest.mark.anyio
async def test_adding_instead_of_amending_fails_the_final_ledger_check(tmp_path, pool):
    session, amend_task = _session(pool, ("add_missing_two|add_missing_amount|add_date_in_parts", "amend_amount"))
    behaviour = _gold(session)
    added = dict(_gold_call(session, amend_task - 1, "add_transaction"))
    added["amount"] = round(float(added["amount"]) + 5.0, 2)
    behaviour[amend_task] = [Step(tool_calls=[ToolCall.of("add_transaction", added)]), Step(content="Done.")]
    verdict = await _run(tmp_path, session, behaviour)
    assert verdict.tasks[amend_task].label == "error"
    assert verdict.tasks[amend_task].state_match is False
    assert verdict.tasks[-1].state_match is False  # the final ledger is wrong


@pytest.mark.anyio
async def test_oracle_free_running_reaches_every_expected_state(tmp_path, suite):
    from toolwild.eval.agents.oracle import OracleAgent

    config = RunConfig(suite="ledger", agent="oracle", history=HistoryMode.FREE, concurrency=4)
    verdicts = await run_suite(suite, OracleAgent(), config, tmp_path)
    assert all(v.correct for v in verdicts)
    assert all(t.state_match for v in verdicts for t in v.tasks)
    assert all(t.redundant_writes == 0 for v in verdicts for t in v.tasks)


@pytest.mark.skipif(not BEAN_CHECK.exists(), reason="bean-check not installed")
def test_oracle_final_ledgers_pass_bean_check(suite):
    env = get_environment("ledger")
    for session in suite.sessions[:8]:
        episode = env.reset(seed=environment_seed(session))
        try:
            for task in session.tasks:
                for batch in GoldDag.from_task(task).first_optimal_path():
                    for i in batch:
                        node = task.gold[i]
                        if node.kind.value == "call":
                            assert episode.call(node.name, node.action.arguments).ok
            result = subprocess.run([str(BEAN_CHECK), str(episode.path)], capture_output=True, text=True, timeout=60)
            assert result.returncode == 0, result.stdout + result.stderr
        finally:
            episode.close()
