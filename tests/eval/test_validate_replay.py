"""``validate --replay``: gold calls replayed on each session's environment must give the recorded observations."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from toolwild.cli.main import app
from toolwild.core.formats.wtb import load_wtb_suite, write_wtb_suite
from toolwild.eval.validate import Severity, validate_suite
from toolwild.synth.providers.ledger import build_ledger_suite


def _tamper(path: Path, line: int, mutate) -> None:
    lines = path.read_text().splitlines()
    record = json.loads(lines[line])
    mutate(record)
    lines[line] = json.dumps(record)
    path.write_text("\n".join(lines) + "\n")


def test_replay_on_the_ledger_catches_a_doctored_observation(tmp_path):
    suite = build_ledger_suite(6)
    assert validate_suite(suite, replay=True) == []
    session = suite.sessions[2]
    task_index, node = next((i, n) for i, t in enumerate(session.tasks) for n in t.call_nodes)
    node.observation = {"ok": True, "result": {"doctored": 1}}
    problems = validate_suite(suite, replay=True, oracle_check=False)
    assert [p.severity for p in problems] == [Severity.ERROR]
    assert problems[0].where == f"{session.id} task {task_index} node {node.idx}"
    assert "not the recorded observation" in problems[0].message


def test_replay_catches_a_wrong_expected_state_and_a_missing_environment(tmp_path):
    suite = build_ledger_suite(2)
    suite.sessions[0].tasks[1].expected_state = {"ledger": []}
    suite.sessions[1].environment = "no-such-env.env.json"
    problems = validate_suite(suite, replay=True, oracle_check=False)
    messages = {p.where: p.message for p in problems}
    assert messages[f"{suite.sessions[0].id} task 1"] == "gold calls do not reach the expected state"
    assert "unknown environment" in messages[suite.sessions[1].id]


def test_cli_replay_on_a_suite_of_replay_files(tmp_path):
    fixture = (
        Path(__file__).resolve().parents[2].parent / "shared/fixtures/wildtoolbench/sessions_0_4.reconstructed.jsonl"
    )
    result = CliRunner().invoke(app, ["import", "wtb-envs", str(fixture), "--out", str(tmp_path / "envs")])
    assert result.exit_code == 0, result.output
    suite, _ = load_wtb_suite(fixture)
    for session in suite.sessions:
        session.environment = f"envs/wtb-session-{session.id}.env.json"  # relative to the suite's folder
    write_wtb_suite(suite, tmp_path / "suite.jsonl")
    ok = CliRunner().invoke(app, ["validate", str(tmp_path / "suite.jsonl"), "--replay"])
    assert ok.exit_code == 0, ok.output
    # a recording changed after the fact: the suite no longer replays
    env_file = tmp_path / "envs" / f"wtb-session-{suite.sessions[0].id}.env.json"
    env = json.loads(env_file.read_text())
    env["recordings"][0]["observation"] = {"changed": True}
    env_file.write_text(json.dumps(env))
    bad = CliRunner().invoke(app, ["validate", str(tmp_path / "suite.jsonl"), "--replay"], env={"COLUMNS": "200"})
    assert bad.exit_code == 1 and "not the recorded observation" in bad.output
