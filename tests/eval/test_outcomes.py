"""The three outcome classes: a model failure fails its task, a provider error is left out and listed, a harness
error is listed and the run exits non-zero. Each test here failed before the classes existed (the runner turned
every exception into a left-out "infra error", which raised the accuracy of a crashing or looping agent)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from fake_openai import Delay, FakeOpenAI, FakeToolCall, HttpError, Reply, fake_backend, serve_in_thread
from gold_responder import body_key, gold_responder
from typer.testing import CliRunner

from toolwild.cli.main import app
from toolwild.core.formats.wtb import load_wtb_suite
from toolwild.core.trajectory import FailureKind, TrajectoryStatus
from toolwild.eval.agents.model import ModelAgent
from toolwild.eval.agents.oracle import OracleAgent
from toolwild.eval.metrics.accuracy import compute_metrics
from toolwild.eval.run_config import RunConfig
from toolwild.eval.run_dir import load_run_trajectories
from toolwild.eval.runner import run_suite
from toolwild.llm.client import LLM, RetryPolicy

FIXTURE = Path(__file__).resolve().parents[2].parent / "shared/fixtures/wildtoolbench/sessions_0_4.reconstructed.jsonl"
pytestmark = pytest.mark.skipif(not FIXTURE.exists(), reason=f"shared fixtures not present: {FIXTURE}")
SLOW_SESSION = "wild_tool_bench_2"


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture(scope="module")
def suite():
    return load_wtb_suite(FIXTURE)[0]


def _config(**kw) -> RunConfig:
    kw.setdefault("agent", "oracle")
    return RunConfig(suite=str(FIXTURE), concurrency=5, **kw)


class Hanging(OracleAgent):
    """Plays the gold path, except in one session, where it never answers (its own time, not the provider's)."""

    async def next_step(self, context):
        if context.session.id == SLOW_SESSION and context.task_index == 1:
            await asyncio.sleep(3600)
        return await super().next_step(context)


@pytest.mark.anyio
async def test_an_agent_that_runs_out_the_session_time_fails_its_tasks(tmp_path, suite):
    verdicts = await run_suite(suite, Hanging(), _config(session_timeout_s=0.5), tmp_path / "run")
    metrics = compute_metrics(verdicts, model_name="m", resamples=0)
    assert metrics.extensions["provider_error_sessions"] == []
    assert metrics.total_info["session"] == {"accuracy": 0.8, "correct_count": 4, "total_count": 5}
    traj = next(t for t in load_run_trajectories(tmp_path / "run") if t.session_id == SLOW_SESSION)
    assert traj.status is TrajectoryStatus.OK
    kinds = [t.failure.kind if t.failure else None for t in traj.tasks]
    assert kinds[0] is None  # the first task finished before the agent hung
    assert kinds[1] is FailureKind.TIMEOUT
    assert kinds[2:] == [FailureKind.NOT_REACHED] * (len(traj.tasks) - 2)
    assert "spent by the agent" in traj.tasks[1].failure.message
    session = next(v for v in verdicts if v.session_id == SLOW_SESSION)
    assert [t.label for t in session.tasks[1:]] == ["error"] * (len(session.tasks) - 1)


@pytest.mark.anyio
async def test_running_past_the_step_budget_fails_the_task(tmp_path, suite):
    verdicts = await run_suite(suite, OracleAgent(), _config(max_steps_per_task=1), tmp_path / "run")
    failed = [t for v in verdicts for t in v.tasks if t.failure is not None]
    assert failed and all(t.failure is FailureKind.STEP_BUDGET and t.label == "error" for t in failed)
    # exactly the tasks whose shortest gold path needs more than one step
    assert {(t.session_id, t.task_index) for t in failed} == {
        (t.session_id, t.task_index) for v in verdicts for t in v.tasks if t.min_length > 1
    }
    metrics = compute_metrics(verdicts, model_name="m", resamples=0)
    assert metrics.extensions["model_failures"]["by_kind"] == {"step_budget": len(failed)}


@pytest.mark.anyio
async def test_a_nameless_tool_call_is_the_models_failure_not_the_providers(tmp_path, suite):
    respond = gold_responder(suite)
    target = suite.session(SLOW_SESSION).tasks[0].utterance

    def script(body):
        if target in body_key(body):
            return Reply(text=None, tool_calls=(FakeToolCall(name="", arguments="{}"),))
        return respond(body)

    fake = FakeOpenAI(script)
    llm = LLM(fake_backend(fake, timeout_s=2), retry=RetryPolicy(base_delay_s=0.0, max_attempts=3))
    verdicts = await run_suite(suite, ModelAgent(llm), _config(agent="model"), tmp_path / "run")
    await llm.aclose()
    metrics = compute_metrics(verdicts, model_name="m", resamples=0)
    assert metrics.extensions["provider_error_sessions"] == []
    assert metrics.total_info["session"]["total_count"] == 5
    session = next(v for v in verdicts if v.session_id == SLOW_SESSION)
    assert session.tasks[0].label == "error"
    assert "tool call without a function name" in (session.tasks[0].error_reason or "")
    assert not session.provider_error


@pytest.mark.anyio
async def test_a_provider_that_hangs_past_the_session_limit_is_a_provider_error(tmp_path, suite):
    respond = gold_responder(suite)
    target = suite.session(SLOW_SESSION).tasks[0].utterance

    def script(body):
        return Delay(30) if target in body_key(body) else respond(body)

    fake = FakeOpenAI(script)
    llm = LLM(fake_backend(fake, timeout_s=60), retry=RetryPolicy(base_delay_s=0.0, max_attempts=2), timeout_s=60)
    config = _config(agent="model", session_timeout_s=1.0)
    verdicts = await run_suite(suite, ModelAgent(llm), config, tmp_path / "run")
    await llm.aclose()
    metrics = compute_metrics(verdicts, model_name="m", resamples=0)
    assert metrics.extensions["provider_error_sessions"] == [SLOW_SESSION]
    assert metrics.total_info["session"] == {"accuracy": 1.0, "correct_count": 4, "total_count": 4}
    traj = next(t for t in load_run_trajectories(tmp_path / "run") if t.session_id == SLOW_SESSION)
    assert "waiting on the provider" in (traj.error or "")


def _eval(tmp_path: Path, *args: str):
    return CliRunner().invoke(app, ["eval", "--runs-dir", str(tmp_path), "--name", "r", *args])


def test_a_provider_that_always_fails_gives_provider_errors_and_a_non_zero_exit(tmp_path):
    fake = FakeOpenAI(lambda body: HttpError(500, "internal error", headers={"retry-after": "0"}))
    with serve_in_thread(fake) as url:
        result = _eval(
            tmp_path,
            *("--suite", str(FIXTURE), "--model", f"openai:{fake.model}", "--base-url", url),
            *("--request-timeout", "5", "--no-preflight"),
        )
    assert result.exit_code == 4, result.output
    metrics = json.loads((tmp_path / "r" / "metrics.json").read_text())
    assert len(metrics["extensions"]["provider_error_sessions"]) == 5
    assert metrics["total_info"]["session"]["total_count"] == 0
    assert "lost to provider errors" in result.output


def test_an_environment_that_raises_is_a_harness_error_and_the_run_exits_non_zero(tmp_path, monkeypatch):
    from toolwild.envs.toolkit import Toolkit

    suite_path = tmp_path / "ledger.jsonl"
    made = CliRunner().invoke(app, ["suite", "ledger", "--out", str(suite_path), "--sessions", "4"])
    assert made.exit_code == 0, made.output
    original = Toolkit.call

    def broken(self, name, arguments):
        if name.startswith(("add", "record", "amend", "book")):
            raise RuntimeError("ledger file vanished")
        return original(self, name, arguments)

    monkeypatch.setattr(Toolkit, "call", broken)
    result = _eval(tmp_path, "--suite", str(suite_path), "--agent", "oracle", "--history", "free", "--concurrency", "1")
    assert result.exit_code == 3, result.output
    metrics = json.loads((tmp_path / "r" / "metrics.json").read_text())
    harness = metrics["extensions"]["harness_error_sessions"]
    assert harness and metrics["extensions"]["figures_complete"] is False
    assert any("ledger file vanished" in h["error"] for h in harness)
    assert "INCOMPLETE" in result.output
    # the broken sessions are not scored as the agent's failures
    scored = metrics["total_info"]["session"]["total_count"]
    assert scored + len(harness) == 4
    # re-scoring the run says the same: incomplete, exit 3
    rescored = CliRunner().invoke(app, ["score", str(tmp_path / "r")])
    assert rescored.exit_code == 3 and "INCOMPLETE" in rescored.output
    # a resumed run (environment fixed) redoes exactly the harness-error sessions
    monkeypatch.setattr(Toolkit, "call", original)
    resumed = CliRunner().invoke(app, ["eval", "--resume", str(tmp_path / "r")])
    assert resumed.exit_code == 0, resumed.output
    final = json.loads((tmp_path / "r" / "metrics.json").read_text())
    assert final["extensions"]["harness_error_sessions"] == []
    assert final["total_info"]["session"] == {"accuracy": 1.0, "correct_count": 4, "total_count": 4}


@pytest.mark.anyio
async def test_context_truncation_is_recorded_per_task_counted_and_shown(tmp_path, suite):
    from io import StringIO

    from rich.console import Console

    from toolwild.llm.backends.scripted import ScriptedBackend
    from toolwild.llm.types import Completion
    from toolwild.report.scoreboard import render_scoreboard

    backend = ScriptedBackend(lambda request: Completion(text="I cannot help.", dropped_messages=2))
    llm = LLM(backend)
    verdicts = await run_suite(suite, ModelAgent(llm), _config(agent="model"), tmp_path / "run")
    trajectories = load_run_trajectories(tmp_path / "run")
    steps = [s for t in trajectories for task in t.tasks for s in task.steps]
    assert steps and all(s.context_dropped == 2 for s in steps)
    metrics = compute_metrics(verdicts, model_name="m", resamples=0)
    tasks_with_steps = sum(1 for t in trajectories for task in t.tasks if task.steps)
    assert metrics.extensions["context_truncation"] == {"tasks": tasks_with_steps, "messages_dropped": 2 * len(steps)}
    out = StringIO()
    render_scoreboard(metrics, Console(file=out, width=200))
    assert f"{tasks_with_steps} task(s) ran with a truncated context" in out.getvalue()
