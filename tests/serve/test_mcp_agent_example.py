"""The worked example of evaluating an agent that talks MCP (examples/mcp_agent.py), end to end.

The agent is a chat model behind the real ``openai`` SDK (a fake server playing the gold path), its tools come from
``toolwild serve mcp`` over stdio through the official ``mcp`` client, and toolwild scores what it did by replaying
its behaviour file on the same environment: every observation of the replay must be the one the servers recorded,
the oracle must score 100% with every expected state met, and one wrong write must fail exactly its task.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
from pathlib import Path

import pytest
from fake_openai import FakeOpenAI, serve_in_thread
from gold_responder import gold_responder
from typer.testing import CliRunner

from toolwild.cli.main import app
from toolwild.core.formats.wtb import load_wtb_suite
from toolwild.synth.providers.ledger import write_ledger_suite

pytest.importorskip("mcp", reason="the mcp extra is not installed")
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mcp_agent.py"


def _example():
    spec = importlib.util.spec_from_file_location("mcp_agent_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _eval(suite: Path, behaviour: Path, runs: Path, name: str) -> dict:
    args = ["eval", "--suite", str(suite), "--agent", f"scripted:{behaviour}", "--history", "free"]
    result = CliRunner().invoke(app, [*args, "--runs-dir", str(runs), "--name", name], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return json.loads((runs / name / "metrics.json").read_text())


def _verdicts(runs: Path, name: str) -> dict[str, list[bool]]:
    lines = (runs / name / "verdicts.jsonl").read_text().splitlines()
    return {v["session_id"]: [t["label"] == "correct" for t in v["tasks"]] for v in map(json.loads, lines)}


def test_an_mcp_agent_is_scored_on_what_it_did(tmp_path):
    suite_path = tmp_path / "suite.jsonl"
    write_ledger_suite(suite_path, n_sessions=3)
    suite, _ = load_wtb_suite(suite_path)
    behaviour, record = tmp_path / "behaviour.json", tmp_path / "calls"

    with serve_in_thread(FakeOpenAI(gold_responder(suite))) as url:
        argv = [str(suite_path), "--base-url", url, "--model", "fake", "-o", str(behaviour), "--record", str(record)]
        assert asyncio.run(_example().main(argv)) == 0

    metrics = _eval(suite_path, behaviour, tmp_path / "runs", "mcp")
    assert metrics["total_info"]["task"]["accuracy"] == 1.0 and metrics["total_info"]["task"]["total_count"] == 12

    # what the replay observed is what the agent saw over MCP, call for call
    replayed = {
        t["session_id"]: [o for task in t["tasks"] for step in task["steps"] for o in step.get("observations") or []]
        for t in map(json.loads, (tmp_path / "runs" / "mcp" / "trajectories.jsonl").read_text().splitlines())
    }
    for session in suite.sessions:
        served = [json.loads(line) for line in (record / f"{session.id}.jsonl").read_text().splitlines()]
        assert served, f"{session.id}: the agent made no call over MCP"
        assert [json.loads(o) for o in replayed[session.id]] == [line["observation"] for line in served]
    states = [
        t
        for line in (tmp_path / "runs" / "mcp" / "trajectories.jsonl").read_text().splitlines()
        for t in json.loads(line)["tasks"]
    ]
    assert all(not t.get("state_diff") for t in states), "every expected state is met"

    # one wrong write: the amount of the first add the agent made is off by one dollar
    data = json.loads(behaviour.read_text())
    target = next(
        (sid, ti, step, call)
        for sid, tasks in data.items()
        for ti, steps in enumerate(tasks)
        for step in steps
        for call in step.get("tool_calls", [])
        if call["name"] == "add_transaction"
    )
    sid, ti, _step, call = target
    arguments = json.loads(call["arguments"]) if isinstance(call["arguments"], str) else call["arguments"]
    arguments["amount"] = float(arguments["amount"]) + 1
    call["arguments"] = json.dumps(arguments)
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps(data))
    _eval(suite_path, wrong, tmp_path / "runs", "wrong")
    verdicts = _verdicts(tmp_path / "runs", "wrong")
    assert verdicts[sid][ti] is False
    assert sum(not ok for tasks in verdicts.values() for ok in tasks) >= 1
    assert all(all(tasks) for other, tasks in verdicts.items() if other != sid)
