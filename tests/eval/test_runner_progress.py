"""The runner's live progress (model calls and tasks as the agent works, not only finished sessions), the
preflight gate its model calls wait on, and the results it hands back as sessions end, from which eval prepares
its last writes (issue 34)."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest
from fake_openai import FakeOpenAI, HttpError, fake_backend

from toolwild.core.formats.wtb import load_wtb_suite
from toolwild.core.trajectory import Step
from toolwild.errors import ConfigError
from toolwild.eval import runner
from toolwild.eval.agents.base import AgentContext
from toolwild.eval.agents.oracle import OracleAgent, oracle_steps
from toolwild.eval.run_config import RunConfig
from toolwild.eval.run_dir import load_run_trajectories, verdict_line, write_verdicts
from toolwild.eval.runner import EvalWorker, RunProgress, SessionTrial, run_suite
from toolwild.llm.client import LLM
from toolwild.llm.preflight import preflight_alongside
from toolwild.run import LocalExecutor

FIXTURE = Path(__file__).resolve().parents[2].parent / "shared/fixtures/wildtoolbench/sessions_0_4.reconstructed.jsonl"
pytestmark = [
    pytest.mark.skipif(not FIXTURE.exists(), reason=f"fixture not found: {FIXTURE}"),
    pytest.mark.anyio,
]


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture(scope="module")
def suite():
    return load_wtb_suite(FIXTURE)[0]


def _config(**kw) -> RunConfig:
    return RunConfig(suite=str(FIXTURE), agent="oracle", **kw)


class CountingOracle(OracleAgent):
    """The oracle, noting for each turn whether the gate was open when the agent was asked."""

    def __init__(self, ready: asyncio.Future[None] | None = None) -> None:
        super().__init__()
        self.ready = ready
        self.turns: list[bool] = []

    async def next_step(self, context: AgentContext) -> Step:
        self.turns.append(self.ready is None or self.ready.done())
        return await super().next_step(context)


def _turns(suite) -> int:
    return sum(len(oracle_steps(t)) for s in suite.sessions for t in s.tasks)


async def test_calls_and_tasks_move_before_any_session_ends(tmp_path, suite, monkeypatch):
    monkeypatch.setattr(runner, "LIVE_EVERY_S", 0.0)  # report every turn
    seen: list[RunProgress] = []
    await run_suite(
        suite,
        CountingOracle(),
        _config(concurrency=1),
        tmp_path / "run",
        on_progress=lambda p: seen.append(dataclasses.replace(p)),
    )
    first_end = next(k for k, p in enumerate(seen) if p.done)
    before = seen[:first_end]
    first = suite.session(load_run_trajectories(tmp_path / "run")[0].session_id)  # one at a time: the first line
    assert [p.calls for p in before] == list(range(1, first_end + 1))  # one report per turn, as it happens
    assert before[-1].tasks_done == len(first.tasks) - 1  # the tasks before the last one ended while it ran
    assert all(p.done == 0 for p in before)
    last = seen[-1]
    assert last.done == last.total == len(suite.sessions)
    assert last.tasks_done == last.total_tasks == sum(len(s.tasks) for s in suite.sessions)
    assert last.calls == _turns(suite)


async def test_reports_while_running_are_spaced(tmp_path, suite, monkeypatch):
    """A report per model call would cost more than a display shows: live reports come at most every
    LIVE_EVERY_S, and every session's end is reported."""
    monkeypatch.setattr(runner, "LIVE_EVERY_S", 3600.0)
    seen: list[RunProgress] = []
    await run_suite(
        suite, CountingOracle(), _config(concurrency=1), tmp_path / "run", on_progress=lambda p: seen.append(p)
    )
    assert len(seen) == 1 + len(suite.sessions)  # the first turn, then each session's end


async def test_no_turn_is_taken_before_the_gate_opens(tmp_path, suite):
    ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    agent = CountingOracle(ready)
    asyncio.get_running_loop().call_later(0.05, ready.set_result, None)
    verdicts = await run_suite(suite, agent, _config(concurrency=4), tmp_path / "run", ready=ready)
    assert agent.turns and all(agent.turns)
    assert all(v.correct for v in verdicts)


async def test_a_failing_preflight_cancels_the_run_before_any_turn(tmp_path, suite, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    fake = FakeOpenAI([HttpError(401, "bad key")])
    llm = LLM(fake_backend(fake))
    agent = CountingOracle()
    with pytest.raises(ConfigError, match="refused the API key"):
        await preflight_alongside(
            (llm,), lambda ready: run_suite(suite, agent, _config(concurrency=4), tmp_path / "run", ready=ready)
        )
    await llm.aclose()
    assert agent.turns == []
    assert not (tmp_path / "run" / "trajectories.jsonl").read_text()  # nothing to resume, nothing to trust


async def test_a_passing_preflight_lets_the_run_finish(tmp_path, suite, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    fake = FakeOpenAI()
    llm = LLM(fake_backend(fake))
    verdicts = await preflight_alongside(
        (llm, None, llm), lambda ready: run_suite(suite, OracleAgent(), _config(), tmp_path / "run", ready=ready)
    )
    await llm.aclose()
    assert fake.calls == 1  # one check for the one distinct client
    assert all(v.correct for v in verdicts)


async def test_sessions_run_by_a_worker_are_counted_from_their_trajectories(tmp_path, suite):
    """Where the sessions run elsewhere (Ray's workers) nothing is seen live: their turns and tasks are counted
    when each comes back, so the display still ends at the whole run."""
    run_dir = tmp_path / "run"
    config = _config(concurrency=2)
    seen: list[RunProgress] = []
    held: list[SessionTrial] = []
    await run_suite(
        suite,
        OracleAgent(),
        config,
        run_dir,
        executor=LocalExecutor(2),
        worker=EvalWorker(config, run_dir),
        on_progress=lambda p: seen.append(dataclasses.replace(p)),
        on_result=lambda item, traj, verdict: held.append(item),
    )
    assert len(seen) == len(suite.sessions)  # no live report: one per session as it comes back
    assert seen[-1].calls == _turns(suite)
    assert seen[-1].tasks_done == seen[-1].total_tasks
    assert sorted(item.session.id for item in held) == sorted(s.id for s in suite.sessions)


async def test_every_trajectory_is_handed_back_resumed_ones_first(tmp_path, suite):
    run_dir = tmp_path / "run"
    await run_suite(suite, OracleAgent(), _config(), run_dir)
    path = run_dir / "trajectories.jsonl"
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:3]) + "\n")  # a run killed after three sessions
    handed: list[str] = []
    seen: list[RunProgress] = []
    agent = CountingOracle()
    await run_suite(
        suite,
        agent,
        _config(),
        run_dir,
        resume=True,
        on_progress=lambda p: seen.append(dataclasses.replace(p)),
        on_result=lambda item, traj, verdict: handed.append(traj.session_id),
    )
    resumed = [t.session_id for t in load_run_trajectories(run_dir)][:3]
    assert handed[:3] == resumed and sorted(handed) == sorted(s.id for s in suite.sessions)
    resumed_tasks = sum(len(suite.session(sid).tasks) for sid in resumed)
    after_resumed = seen[2]  # the three resumed sessions are reported first, then the run goes on
    assert (after_resumed.done, after_resumed.tasks_done, after_resumed.calls) == (3, resumed_tasks, 0)
    assert seen[-1].tasks_done == seen[-1].total_tasks
    assert seen[-1].calls == len(agent.turns)  # only this process's turns


async def test_verdict_lines_made_as_sessions_end_are_the_lines_written_whole(tmp_path, suite):
    """eval encodes each verdict line as its session ends; the file is the one encoded at the end, and a line
    made from another verdict object (one changed since, or made again) is not used."""
    made: dict[str, tuple] = {}
    verdicts = await run_suite(
        suite,
        OracleAgent(),
        _config(),
        tmp_path / "run",
        on_result=lambda item, traj, verdict: made.__setitem__(verdict.session_id, (verdict, verdict_line(verdict))),
    )
    write_verdicts(tmp_path / "whole.jsonl", verdicts)
    write_verdicts(tmp_path / "made.jsonl", verdicts, made)
    assert (tmp_path / "made.jsonl").read_text() == (tmp_path / "whole.jsonl").read_text()
    first = verdicts[0]
    made[first.session_id] = (first.model_copy(), "stale\n")
    write_verdicts(tmp_path / "other.jsonl", verdicts, made)
    assert (tmp_path / "other.jsonl").read_text() == (tmp_path / "whole.jsonl").read_text()
    made[first.session_id] = (first, "stale\n")
    write_verdicts(tmp_path / "same.jsonl", verdicts, made)
    assert "stale\n" in (tmp_path / "same.jsonl").read_text()
