"""Free-running evaluation on environment files: recorded (replay) and model-simulated (llm) services."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from toolwild.core.environment import BackendKind
from toolwild.core.formats.environment import write_environment
from toolwild.core.formats.wtb import load_wtb_suite, write_wtb_suite
from toolwild.core.formats.wtb_envs import environment_from_session
from toolwild.errors import ConfigError
from toolwild.eval.agents.oracle import OracleAgent
from toolwild.eval.metrics.accuracy import compute_metrics
from toolwild.eval.run_config import RunConfig
from toolwild.eval.run_dir import load_run_trajectories
from toolwild.eval.runner import run_suite
from toolwild.eval.session import HistoryMode
from toolwild.llm.backends.scripted import ScriptedBackend
from toolwild.llm.client import LLM
from toolwild.llm.types import ChatRequest

FIXTURE = Path(__file__).resolve().parents[2].parent / "shared/fixtures/wildtoolbench/sessions_0_4.reconstructed.jsonl"
pytestmark = pytest.mark.skipif(not FIXTURE.exists(), reason=f"fixture not found: {FIXTURE}")


@pytest.fixture
def anyio_backend():
    return "asyncio"


def suite_on_files(tmp_path: Path, backend: BackendKind) -> tuple[Path, object]:
    """The fixture suite with each session pointing at its own environment file (a path relative to the suite)."""
    suite, _ = load_wtb_suite(FIXTURE)
    for session in suite.sessions:
        env = environment_from_session(session, backend)
        write_environment(env, tmp_path / "envs" / f"{env.id}.env.json")
        session.environment = f"envs/{env.id}.env.json"
    path = tmp_path / "suite.jsonl"
    write_wtb_suite(suite, path)
    return path, load_wtb_suite(path)[0]


def recorded_answer(request: ChatRequest) -> str:
    """A simulator that answers a call with the matching entry of ``known_answers`` in the state it is shown."""
    text = request.messages[-1]["content"]
    state = json.loads(re.search(r"^Current state: (.*)$", text, flags=re.M).group(1))
    call = json.loads(re.search(r"^Call: (.*)$", text, flags=re.M).group(1))
    for known in state["known_answers"]:
        if known["name"] == call["name"] and known["arguments"] == call["arguments"]:
            return json.dumps({"result": known["observation"], "patch": []})
    return json.dumps({"result": {"error": "unknown"}, "patch": []})


def config(path: Path) -> RunConfig:
    return RunConfig(suite=str(path), agent="oracle", history=HistoryMode.FREE, concurrency=3)


@pytest.mark.anyio
async def test_oracle_free_running_on_replay_files_sees_the_recorded_observations(tmp_path):
    path, suite = suite_on_files(tmp_path, BackendKind.REPLAY)
    verdicts = await run_suite(suite, OracleAgent(), config(path), tmp_path / "run")
    metrics = compute_metrics(verdicts, model_name="oracle", resamples=0)
    assert metrics.total_info["task"]["accuracy"] == 1.0
    observed = [
        json.loads(text)
        for traj in load_run_trajectories(tmp_path / "run")
        for task in traj.tasks
        for step in task.steps
        for text in step.observations or []
    ]
    gold = [n.observation for s in suite.sessions for t in s.tasks for n in t.call_nodes]
    assert len(observed) == len(gold) and all(o["ok"] for o in observed)
    assert sorted(json.dumps(o["result"], sort_keys=True) for o in observed) == sorted(
        json.dumps(g, sort_keys=True) for g in gold
    )


@pytest.mark.anyio
async def test_oracle_free_running_on_simulated_files_uses_the_simulator(tmp_path):
    path, suite = suite_on_files(tmp_path, BackendKind.LLM)
    with pytest.raises(ConfigError, match="simulated by a model"):
        await run_suite(suite, OracleAgent(), config(path), tmp_path / "no-model")
    assert (
        not (tmp_path / "no-model" / "trajectories.jsonl").exists()
        or not (tmp_path / "no-model" / "trajectories.jsonl").read_text()
    )

    simulator = LLM(ScriptedBackend(recorded_answer))
    verdicts = await run_suite(suite, OracleAgent(), config(path), tmp_path / "run", simulator=simulator)
    metrics = compute_metrics(verdicts, model_name="oracle", resamples=0)
    assert metrics.total_info["task"]["accuracy"] == 1.0
    calls = sum(len(t.call_nodes) for s in suite.sessions for t in s.tasks)
    assert simulator.usage.roles["simulator"].calls == calls
    results = [
        json.loads(text)["result"]
        for traj in load_run_trajectories(tmp_path / "run")
        for task in traj.tasks
        for step in task.steps
        for text in step.observations or []
    ]
    assert {"error": "unknown"} not in results and len(results) == calls
