"""64 episodes of one session at once, each with its own write: every final ledger holds its own write only."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from rl_policies import call

from toolwild.core.session import Session
from toolwild.core.task import NodeKind
from toolwild.core.trajectory import state_digest
from toolwild.envs.registry import get_environment
from toolwild.eval.session import environment_seed
from toolwild.rl import SessionEnv

EPISODES = 64


def _write_task(suite) -> tuple[Session, int]:
    """The first ledger task whose gold starts with add_transaction, and its session."""
    for session in suite.sessions:
        for i, task in enumerate(session.tasks):
            if task.gold[0].name == "add_transaction":
                return session, i
    pytest.fail("the ledger suite has no task that starts with add_transaction")


def _arguments(session: Session, index: int, episode: int) -> dict[str, Any]:
    """Episode ``episode``'s own write: the gold transaction with an amount no other episode uses."""
    return dict(session.tasks[index].gold[0].action.arguments, amount=100 + episode + episode / 100)


def _expected_digest(session: Session, index: int, episode: int) -> str:
    """The ledger after this episode's write alone, on a fresh episode (the gold of the tasks before replayed)."""
    ledger = get_environment("ledger").reset(seed=environment_seed(session))
    try:
        for task in session.tasks[:index]:
            for node in task.gold:
                if node.kind is NodeKind.CALL:
                    assert ledger.call(node.name, node.action.arguments).ok
        assert ledger.call("add_transaction", _arguments(session, index, episode)).ok
        return state_digest(ledger.state())
    finally:
        ledger.close()


@pytest.fixture(scope="module")
def expected(rl_ledger_suite) -> list[str]:
    """Per episode, the digest of the ledger after its own write alone."""
    session, index = _write_task(rl_ledger_suite)
    return [_expected_digest(session, index, i) for i in range(EPISODES)]


def _answer() -> dict[str, Any]:
    return {"role": "assistant", "content": "Added it."}


def test_64_concurrent_async_episodes_see_only_their_own_writes(rl_ledger_suite, expected):
    session, index = _write_task(rl_ledger_suite)

    async def run_all() -> list[str]:
        envs = [SessionEnv(session, task=index, reward="state") for _ in range(EPISODES)]
        try:
            await asyncio.gather(*(env.areset() for env in envs))  # 64 episodes open at once
            writes = await asyncio.gather(
                *(env.astep(call("add_transaction", _arguments(session, index, i))) for i, env in enumerate(envs))
            )
            assert all(not w.done for w in writes)
            ends = await asyncio.gather(*(env.astep(_answer()) for env in envs))
            assert all(e.done for e in ends)
            return [state_digest(env.state()) for env in envs]
        finally:
            await asyncio.gather(*(env.aclose() for env in envs))

    digests = asyncio.run(run_all())
    assert len(set(digests)) == EPISODES
    assert digests == expected


def test_64_episodes_in_threads_see_only_their_own_writes(rl_ledger_suite, expected):
    session, index = _write_task(rl_ledger_suite)

    def episode(i: int) -> tuple[str, float]:
        with SessionEnv(session, task=index, reward="state") as env:
            env.reset()
            env.step(call("add_transaction", _arguments(session, index, i)))
            result = env.step(_answer())
            assert result.done
            return state_digest(env.state()), result.reward

    with ThreadPoolExecutor(max_workers=16) as pool:
        outcomes = list(pool.map(episode, range(EPISODES)))
    assert [d for d, _ in outcomes] == expected
    assert len({d for d, _ in outcomes}) == EPISODES
    assert {r for _, r in outcomes} == {0.0}  # a write of its own amount is never the expected ledger
