"""RL environment throughput: the oracle policy through SessionEnv on the built-in ledger suite.

Run: ``.venv/bin/python bench/rl.py`` (about a minute). Prints, for the 64-session ledger suite played along
the gold path: the same sessions through ``run_session`` with the oracle agent (what ``eval --agent oracle
--history free`` costs per session, no files), then SessionEnv with the synchronous API one episode at a time, and
the asynchronous API with every episode open at once; per case the CPU time (best of 3), policy steps per second
of CPU and the overhead per step over the plain live loop. All of it is the harness: the policy answers at once.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, TypeVar

from toolwild.core.session import Session
from toolwild.core.trajectory import Step
from toolwild.envs.registry import get_environment
from toolwild.eval.agents.oracle import OracleAgent, oracle_steps
from toolwild.eval.session import HistoryMode, run_session
from toolwild.rl import SessionEnv
from toolwild.synth.providers.ledger import build_ledger_suite

T = TypeVar("T")


def message(step: Step) -> dict[str, Any]:
    out: dict[str, Any] = {"role": "assistant", "content": step.content or ""}
    if step.tool_calls:
        out["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in step.tool_calls
        ]
    return out


def script(session: Session) -> list[list[dict[str, Any]]]:
    return [[message(s) for s in oracle_steps(t)] for t in session.tasks]


async def episode(session: Session) -> tuple[int, float]:
    """One oracle episode through the async API: (steps, return)."""
    plan = script(session)
    async with SessionEnv(session) as env:
        await env.areset()
        steps, total, task, k = 0, 0.0, 0, 0
        while True:
            result = await env.astep(plan[task][k])
            steps, total = steps + 1, total + result.reward
            if result.done:
                return steps, total
            task, k = (task, k + 1) if result.task_index == task else (result.task_index, 0)


def sync_episode(session: Session) -> tuple[int, float]:
    """One oracle episode through the sync API."""
    plan = script(session)
    with SessionEnv(session) as env:
        env.reset()
        steps, total, task, k = 0, 0.0, 0, 0
        while True:
            result = env.step(plan[task][k])
            steps, total = steps + 1, total + result.reward
            if result.done:
                return steps, total
            task, k = (task, k + 1) if result.task_index == task else (result.task_index, 0)


async def live_loop(sessions: list[Session]) -> None:
    ledger = get_environment("ledger")
    for session in sessions:
        await run_session(session, OracleAgent(), history=HistoryMode.FREE, environment=ledger)


async def all_at_once(sessions: list[Session]) -> list[tuple[int, float]]:
    return await asyncio.gather(*(episode(s) for s in sessions))


def timed(run: Callable[[], T]) -> tuple[T, float]:
    """The result of ``run`` and its best CPU time of 3 (CPU, not wall: other processes on the machine do not count)."""
    best = float("inf")
    for _ in range(3):
        started = time.process_time()
        result = run()
        best = min(best, time.process_time() - started)
    return result, best


def main() -> None:
    sessions = build_ledger_suite(64).sessions
    tasks = sum(len(s.tasks) for s in sessions)
    _, base = timed(lambda: asyncio.run(live_loop(sessions)))
    sync, sync_s = timed(lambda: [sync_episode(s) for s in sessions])
    concurrent, async_s = timed(lambda: asyncio.run(all_at_once(sessions)))
    steps = sum(n for n, _ in sync)
    assert sync == concurrent and sum(r for _, r in sync) == tasks, "the oracle must earn every task's reward"
    print(f"{len(sessions)} sessions, {tasks} tasks, {steps} policy steps (oracle: return {tasks:.0f} of {tasks})")
    print(f"{'case (best of 3)':<32}{'CPU s':>8}{'steps/s':>10}{'ms/step over loop':>20}")
    print(f"{'run_session + OracleAgent':<32}{base:>8.2f}{steps / base:>10.0f}{'':>20}")
    for name, cpu in (("SessionEnv sync, one at a time", sync_s), ("SessionEnv async, 64 at once", async_s)):
        print(f"{name:<32}{cpu:>8.2f}{steps / cpu:>10.0f}{(cpu - base) / steps * 1000:>20.2f}")


if __name__ == "__main__":
    main()
