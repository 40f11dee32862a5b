"""The state check on a live ledger episode with expected states stored as digests and changes (issue #34): one cent
off in a write fails its task, and a suite holding whole states (as files before) scores and diagnoses the same."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from toolwild.core.session import Session
from toolwild.core.state_change import expected_state_at
from toolwild.core.trajectory import Step, ToolCall
from toolwild.envs.registry import session_environment
from toolwild.eval.agents.oracle import oracle_steps
from toolwild.eval.agents.scripted import ScriptedAgent
from toolwild.eval.scoring.session import score_session
from toolwild.eval.session import HistoryMode, environment_seed, run_session


@pytest.fixture(scope="module")
def ledger_session():
    """A built-in ledger session whose gold adds a transaction with an amount (a write to get one cent wrong)."""
    from toolwild.synth.providers.ledger import build_ledger_suite

    for session in build_ledger_suite(12, seed=0).sessions:
        for i, task in enumerate(session.tasks):
            if any(n.name == "add_transaction" and "amount" in n.action.arguments for n in task.call_nodes):
                return session, i
    pytest.fail("no session of the built-in suite adds a transaction: pick another seed")


def _one_cent_off(session: Session, index: int) -> list[list[Step]]:
    """The oracle's steps, with the amount of task ``index``'s add off by 0.01."""
    steps = [oracle_steps(t) for t in session.tasks]
    for step in steps[index]:
        for k, call in enumerate(step.tool_calls or []):
            arguments = json.loads(call.arguments)
            if call.name == "add_transaction":
                amount = Decimal(str(arguments["amount"])) + Decimal("0.01")
                arguments["amount"] = str(amount) if isinstance(arguments["amount"], str) else float(amount)
                step.tool_calls[k] = ToolCall.of(call.name, arguments, id=call.id)
    return steps


def _whole_states(session: Session) -> Session:
    """The same session as a file before issue #34 stores it: whole expected states, no digests or changes."""
    episode = session_environment(session).reset(seed=environment_seed(session))
    start = episode.state()
    episode.close()
    old = session.model_copy(deep=True)
    for i, task in enumerate(old.tasks):
        old.tasks[i] = task.model_copy(
            update={
                "expected_state": expected_state_at(session.tasks, i, start),
                "expected_state_digest": None,
                "expected_state_change": None,
            }
        )
    return old


async def _verdicts(session: Session, behaviour: list[list[Step]]):
    trajectory = await run_session(
        session,
        ScriptedAgent({session.id: behaviour}),
        history=HistoryMode.FREE,
        environment=session_environment(session),
    )
    return trajectory, score_session(session, trajectory)


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.mark.anyio
async def test_a_write_one_cent_off_fails_its_task_and_the_exact_oracle_passes(ledger_session):
    session, index = ledger_session
    _, exact = await _verdicts(session, [oracle_steps(t) for t in session.tasks])
    assert all(t.state_match for t in exact.tasks)
    trajectory, off = await _verdicts(session, _one_cent_off(session, index))
    assert [t.state_match for t in off.tasks[: index + 1]] == [True] * index + [False]
    (diff,) = [d for d in trajectory.tasks[index].state_diff or [] if d["path"].endswith("/amount")][:1]
    assert abs(abs(Decimal(diff["after"]) - Decimal(diff["before"])) - Decimal("0.01")) == 0


@pytest.mark.anyio
async def test_a_suite_with_whole_states_scores_and_diagnoses_the_same(ledger_session):
    session, index = ledger_session
    old = _whole_states(session)
    assert all(t.expected_digest == n.expected_digest for t, n in zip(old.tasks, session.tasks, strict=True))
    new_run, new = await _verdicts(session, _one_cent_off(session, index))
    old_run, was = await _verdicts(old, _one_cent_off(session, index))
    assert [t.model_dump() for t in was.tasks] == [t.model_dump() for t in new.tasks]
    assert [t.state_diff for t in old_run.tasks] == [t.state_diff for t in new_run.tasks]
    assert any(t.state_diff for t in new_run.tasks)
