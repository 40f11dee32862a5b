"""The runner: behaviour files for every live-loop rule, faults, provider errors, and the run directory."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from fake_openai import Delay, FakeOpenAI, HttpError, fake_backend, serve_in_thread
from gold_responder import body_key, gold_responder
from typer.testing import CliRunner

from toolwild.cli.main import app
from toolwild.core.formats.wtb import load_wtb_suite
from toolwild.core.verdict import ErrorClass
from toolwild.eval.agents.model import ModelAgent
from toolwild.eval.agents.oracle import oracle_steps
from toolwild.eval.metrics.accuracy import compute_metrics
from toolwild.eval.run_config import RunConfig
from toolwild.eval.run_dir import load_run_trajectories
from toolwild.eval.runner import run_suite
from toolwild.eval.session import HistoryMode
from toolwild.llm.client import LLM, RetryPolicy

FIXTURE = Path(__file__).resolve().parents[2].parent / "shared/fixtures/wildtoolbench/sessions_0_4.reconstructed.jsonl"
pytestmark = pytest.mark.skipif(not FIXTURE.exists(), reason=f"fixture not found: {FIXTURE}")


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture(scope="module")
def suite():
    return load_wtb_suite(FIXTURE)[0]


def gold_behaviour(suite) -> dict:
    """The oracle as a behaviour file: {session: [[step, ...] per task]}."""
    out = {}
    for s in suite.sessions:
        out[s.id] = []
        for t in s.tasks:
            steps = []
            for st in oracle_steps(t):
                if st.tool_calls:
                    steps.append(
                        {"tool_calls": [{"name": c.name, "arguments": json.loads(c.arguments)} for c in st.tool_calls]}
                    )
                else:
                    steps.append({"content": st.content})
            out[s.id].append(steps)
    return out


def run_cli(tmp_path: Path, behaviour: dict, *extra: str) -> tuple[dict, list[dict]]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "behaviour.json"
    path.write_text(json.dumps(behaviour))
    args = ["eval", "--suite", str(FIXTURE), "--agent", f"scripted:{path}", "--runs-dir", str(tmp_path), "--name", "r"]
    result = CliRunner().invoke(app, [*args, *extra])
    assert result.exit_code == 0, result.output
    metrics = json.loads((tmp_path / "r" / "metrics.json").read_text())
    return metrics, [json.loads(line) for line in (tmp_path / "r" / "trajectories.jsonl").read_text().splitlines()]


# ------------------------------------------------------------------ behaviour files, one rule each (spec §4)
RULES = {
    # name: (session, task, steps, expected label, expected error class, optimal?)
    "text where a call is due": (
        "wild_tool_bench_2",
        0,
        [{"content": "I cannot look that up."}],
        "error",
        ErrorClass.REFUSAL,
    ),
    "wrong name": (
        "wild_tool_bench_2",
        0,
        [{"tool_calls": [{"name": "getTransactions", "arguments": {}}]}],
        "error",
        None,
    ),
    "empty reply": ("wild_tool_bench_2", 1, [], "error", ErrorClass.EARLY_TERMINATION),
    "chat answered with a tool": (
        "wild_tool_bench_0",
        3,
        [{"tool_calls": [{"name": "getRealtimeCity", "arguments": {"city": "Las Vegas"}}]}],
        "error",
        ErrorClass.WRONG_REFUSAL,
    ),
}


@pytest.mark.parametrize("rule", list(RULES))
def test_behaviour_rule(tmp_path, suite, rule):
    session_id, task_index, steps, _label, error_class = RULES[rule]
    behaviour = gold_behaviour(suite)
    behaviour[session_id][task_index] = steps
    metrics, _ = run_cli(tmp_path, behaviour)
    assert metrics["total_info"]["task"]["correct_count"] == 19
    assert metrics["total_info"]["session"]["correct_count"] == 4
    position = metrics["layer_info"][str(task_index)]
    assert position["correct_count"] == 4 and position["total_count"] == 5
    if error_class is not None:
        assert metrics["extensions"]["error_taxonomy"][error_class.value]["count"] == 1


def test_wrong_name_of_an_existing_tool_is_a_call_error(tmp_path, suite):
    session = suite.session("wild_tool_bench_2")
    other = next(t.name for t in session.tools if t.name != session.tasks[0].gold[0].name)
    behaviour = gold_behaviour(suite)
    behaviour["wild_tool_bench_2"][0] = [{"tool_calls": [{"name": other, "arguments": {}}]}]
    metrics, _ = run_cli(tmp_path, behaviour)
    assert metrics["extensions"]["error_taxonomy"]["Call Error"]["count"] == 1


def test_extra_call_is_redundant(tmp_path, suite):
    behaviour = gold_behaviour(suite)
    gold_call = behaviour["wild_tool_bench_2"][0][0]["tool_calls"][0]
    behaviour["wild_tool_bench_2"][0] = [{"tool_calls": [gold_call, gold_call]}, {"content": "done"}]
    metrics, _ = run_cli(tmp_path, behaviour)
    assert metrics["total_info"]["task"]["correct_count"] == 19
    assert metrics["extensions"]["error_taxonomy"]["Redundant Call"]["count"] == 1


def test_parallel_batch_one_call_per_turn_is_correct_but_not_optimal(tmp_path, suite):
    behaviour = gold_behaviour(suite)
    batch, answer = behaviour["wild_tool_bench_4"][2]
    behaviour["wild_tool_bench_4"][2] = [{"tool_calls": [c]} for c in batch["tool_calls"]] + [answer]
    metrics, _ = run_cli(tmp_path, behaviour)
    assert metrics["total_info"]["task"]["correct_count"] == 20
    assert metrics["optimal_info"]["Parallel Multi-Tool"] == {"accuracy": 0.5, "correct_count": 1, "total_count": 2}


def test_clarification_then_call(tmp_path, suite):
    behaviour = gold_behaviour(suite)
    ask_ask_call_answer = behaviour["wild_tool_bench_1"][3]
    assert [("content" in s) for s in ask_ask_call_answer] == [True, True, False, True]
    behaviour["wild_tool_bench_1"][3] = [
        {"content": "Which type?"},
        {"content": "Which one?"},
        *ask_ask_call_answer[2:],
    ]
    metrics, trajectories = run_cli(tmp_path, behaviour)
    assert metrics["task_type_info"]["Clarify"]["correct_count"] == 4
    steps = next(t for t in trajectories if t["session_id"] == "wild_tool_bench_1")["tasks"][3]["steps"]
    assert [s["user_reply"] for s in steps[:2]] == ["The topic I asked later", "The third one"]
    # skipping the clarification and calling at once is "missing info"
    behaviour["wild_tool_bench_1"][3] = ask_ask_call_answer[2:]
    metrics, _ = run_cli(tmp_path / "b", behaviour)
    assert metrics["extensions"]["error_taxonomy"]["Wrong Name / Missing Info"]["count"] == 1


def test_invalid_json_arguments_from_a_behaviour_file(tmp_path, suite):
    behaviour = gold_behaviour(suite)
    behaviour["wild_tool_bench_2"][0][0] = {"tool_calls": [{"name": "getBudgets", "arguments": '{"user_id": "12345"'}]}
    metrics, _ = run_cli(tmp_path, behaviour)
    assert metrics["extensions"]["error_taxonomy"]["Type"]["count"] == 1


def test_gold_behaviour_file_scores_perfectly_in_both_modes_and_exports(tmp_path, suite):
    for mode in ("wtb", "strict"):
        out = tmp_path / mode
        metrics, _ = run_cli(out, gold_behaviour(suite), "--mode", mode, "--export-wtb-result", str(out / "wtb.jsonl"))
        assert metrics["total_info"]["session"]["accuracy"] == 1.0
        rescored = CliRunner().invoke(app, ["score", "--suite", str(FIXTURE), str(out / "wtb.jsonl"), "--mode", mode])
        assert rescored.exit_code == 0 and "100.00%" in rescored.output


# ------------------------------------------------------------------ a model over HTTP: faults and infra errors
def _config(**kw) -> RunConfig:
    kw.setdefault("agent", "model")
    return RunConfig(suite=str(FIXTURE), concurrency=4, **kw)


async def _run(suite, fake, run_dir, *, retry=None, history=HistoryMode.WTB):
    llm = LLM(
        fake_backend(fake, timeout_s=0.2), retry=retry or RetryPolicy(base_delay_s=0.0, max_attempts=12), timeout_s=5
    )
    verdicts = await run_suite(suite, ModelAgent(llm), _config(history=history), run_dir)
    await llm.aclose()
    return verdicts, compute_metrics(verdicts, model_name="m", resamples=0)


@pytest.mark.anyio
@pytest.mark.parametrize("history", [HistoryMode.WTB, HistoryMode.FREE])
async def test_gold_model_over_http_scores_perfectly(tmp_path, suite, history):
    _, metrics = await _run(suite, FakeOpenAI(gold_responder(suite)), tmp_path / "run", history=history)
    assert metrics.total_info["session"]["accuracy"] == 1.0
    assert metrics.optimal_info["Total"]["accuracy"] == 1.0


def _faulty(suite, *, rate: float, always_fail: str | None = None):
    respond = gold_responder(suite)
    seen: dict[str, int] = {}

    def script(body):
        key = body_key(body)
        if always_fail and suite.session(always_fail).tasks[0].utterance in key:
            return HttpError(500, "down for this session")
        attempt = seen.get(key, 0)
        seen[key] = attempt + 1
        digest = int(hashlib.sha256(f"{key}/{attempt}".encode()).hexdigest(), 16) % 1000
        if digest < rate * 1000:
            return [HttpError(429, "slow down", headers={"retry-after": "0"}), HttpError(500, "oops"), Delay(1.0)][
                digest % 3
            ]
        return respond(body)

    return script


@pytest.mark.anyio
async def test_faults_are_retried_and_metrics_equal_a_fault_free_run(tmp_path, suite):
    _, clean = await _run(suite, FakeOpenAI(gold_responder(suite)), tmp_path / "clean")
    fake = FakeOpenAI(_faulty(suite, rate=0.2))
    _, faulty = await _run(suite, fake, tmp_path / "faulty")
    assert fake.calls > 5 * 4 * 2  # failures happened and were retried
    assert faulty.model_dump(exclude={"extensions"}) == clean.model_dump(exclude={"extensions"})
    assert faulty.extensions["provider_error_sessions"] == []


@pytest.mark.anyio
async def test_persistent_provider_failure_is_a_provider_error_counted_apart(tmp_path, suite):
    fake = FakeOpenAI(_faulty(suite, rate=0.0, always_fail="wild_tool_bench_3"))
    verdicts, metrics = await _run(suite, fake, tmp_path / "run", retry=RetryPolicy(base_delay_s=0.0, max_attempts=3))
    assert metrics.extensions["provider_error_sessions"] == ["wild_tool_bench_3"]
    assert metrics.total_info["session"] == {"accuracy": 1.0, "correct_count": 4, "total_count": 4}
    counted = compute_metrics(verdicts, model_name="m", count_provider_errors=True, resamples=0)
    assert counted.total_info["session"]["total_count"] == 5 and counted.total_info["task"]["correct_count"] == 16
    lines = (tmp_path / "run" / "trajectories.jsonl").read_text().splitlines()
    assert sum('"provider_error"' in line for line in lines) == 1


@pytest.mark.anyio
async def test_resume_redoes_provider_errors_only_and_never_duplicates(tmp_path, suite):
    run_dir = tmp_path / "run"
    failing = FakeOpenAI(_faulty(suite, rate=0.0, always_fail="wild_tool_bench_3"))
    await _run(suite, failing, run_dir, retry=RetryPolicy(base_delay_s=0.0, max_attempts=2))
    calls_before = failing.calls
    healthy = FakeOpenAI(gold_responder(suite))
    llm = LLM(fake_backend(healthy, timeout_s=0.2))
    verdicts = await run_suite(suite, ModelAgent(llm), _config(), run_dir, resume=True)
    await llm.aclose()
    assert calls_before > 0
    assert {m["messages"][1]["content"] for m in healthy.requests} == {
        suite.session("wild_tool_bench_3").tasks[0].utterance
    }
    trajectories = load_run_trajectories(run_dir)
    assert sorted(t.session_id for t in trajectories) == sorted(s.id for s in suite.sessions)
    assert len((run_dir / "trajectories.jsonl").read_text().splitlines()) == 5
    assert compute_metrics(verdicts, model_name="m", resamples=0).total_info["session"]["accuracy"] == 1.0


def test_resume_tolerates_a_torn_last_line(tmp_path, suite):
    behaviour = gold_behaviour(suite)
    run_cli(tmp_path, behaviour)
    path = tmp_path / "r" / "trajectories.jsonl"
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:3]) + "\n" + lines[3][: len(lines[3]) // 2])
    result = CliRunner().invoke(app, ["eval", "--resume", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    assert len(path.read_text().splitlines()) == 5
    metrics = json.loads((tmp_path / "r" / "metrics.json").read_text())
    assert metrics["total_info"]["session"]["accuracy"] == 1.0


def test_a_finished_run_directory_is_not_overwritten(tmp_path, suite):
    run_cli(tmp_path, gold_behaviour(suite))
    path = tmp_path / "behaviour.json"
    result = CliRunner().invoke(
        app,
        ["eval", "--suite", str(FIXTURE), "--agent", f"scripted:{path}", "--runs-dir", str(tmp_path), "--name", "r"],
    )
    assert result.exit_code == 1 and "--resume" in result.output


def test_score_run_dir_rescores_without_a_model(tmp_path, suite):
    run_cli(tmp_path, gold_behaviour(suite))
    result = CliRunner().invoke(
        app, ["score", str(tmp_path / "r"), "--mode", "strict", "--out", str(tmp_path / "m.json")]
    )
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "m.json").read_text())["extensions"]["mode"] == "strict"


def test_no_secret_reaches_the_run_directory(tmp_path, suite, monkeypatch):
    """The openai backend, a key in the environment and a password in --base-url, and one session lost to the
    provider (so its error text is written): neither secret appears in any file of the run, nor in the output."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-very-secret-123")
    respond = gold_responder(suite)
    down = suite.session("wild_tool_bench_3").tasks[0].utterance

    def script(body):
        key = body_key(body)
        if down in key:
            return HttpError(500, "down", headers={"retry-after": "0"})
        return respond(body)

    fake = FakeOpenAI(script)
    with serve_in_thread(fake) as url:
        credentialed = url.replace("http://", "http://alice:hunter2pw@")
        result = CliRunner().invoke(
            app,
            [
                "eval", "--suite", str(FIXTURE), "--model", f"openai:{fake.model}", "--base-url", credentialed,
                "--runs-dir", str(tmp_path), "--name", "r", "--request-timeout", "5",
            ],
        )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert fake.headers and all("authorization" in h for h in fake.headers)  # the credentials were used
    traj = (tmp_path / "r" / "trajectories.jsonl").read_text()
    assert '"provider_error"' in traj  # an error text was written
    assert json.loads((tmp_path / "r" / "config.json").read_text())["base_url"].startswith("http://***@127.0.0.1")
    for f in (tmp_path / "r").iterdir():
        data = f.read_bytes()
        assert b"sk-very-secret-123" not in data and b"hunter2pw" not in data, f.name
    assert "hunter2pw" not in result.output and "sk-very-secret-123" not in result.output


@pytest.mark.anyio
async def test_an_agent_exception_fails_its_tasks_and_the_run_goes_on(tmp_path, suite):
    from toolwild.eval.agents.oracle import OracleAgent

    class Flaky(OracleAgent):
        async def next_step(self, context):
            if context.session.id == "wild_tool_bench_2":
                raise RuntimeError("boom")
            return await super().next_step(context)

    verdicts = await run_suite(suite, Flaky(), _config(agent="oracle"), tmp_path / "run")
    metrics = compute_metrics(verdicts, model_name="m", resamples=0)
    assert metrics.extensions["provider_error_sessions"] == []
    assert metrics.extensions["harness_error_sessions"] == []
    # the crashing agent's session counts, and fails: 4 of 5 sessions, not 4 of 4
    assert metrics.total_info["session"] == {"accuracy": 0.8, "correct_count": 4, "total_count": 5}
    n_tasks = len(suite.session("wild_tool_bench_2").tasks)
    assert metrics.extensions["model_failures"] == {"tasks": n_tasks, "by_kind": {"agent_error": n_tasks}}
    line = next(ln for ln in (tmp_path / "run" / "trajectories.jsonl").read_text().splitlines() if "bench_2" in ln)
    record = json.loads(line)
    assert record["status"] == "ok"
    assert [t["failure"]["kind"] for t in record["tasks"]] == ["agent_error"] * n_tasks
    assert "RuntimeError: boom" in record["tasks"][0]["failure"]["message"]
