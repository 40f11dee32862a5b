"""``toolwild eval --user model:M``: a simulated user answers the agent, is audited first (``user_audit.json``), its
error rate is printed next to the accuracy, ``--exclude-user-failures`` leaves out the sessions it breaks, and its
own failure is listed apart, never the agent's."""

from __future__ import annotations

import json
import re

import pytest
from fake_openai import FakeOpenAI, Reply, serve_in_thread
from typer.testing import CliRunner

from toolwild.cli.main import app
from toolwild.core.formats.wtb import write_wtb_suite
from toolwild.eval.user import task_facts
from toolwild.synth.providers.ledger import build_ledger_suite

ENV = {"COLUMNS": "200", "OPENAI_API_KEY": "test"}


def _faithful(body: dict) -> Reply:
    """A model user that gives, at the k-th question of a task, the k-th withheld fact's recorded words (a fact given
    in parts gives one part per question)."""
    text = body["messages"][1]["content"]
    latest = text.rsplit("The assistant's latest message:", 1)[1]
    said = []
    for single, parts in re.findall(r'you would say: "(.*)"\)|one per question: "(.*)"\)', text):
        said += [single] if single else parts.split('", then, when asked again, "')
    replies = text.split("The conversation so far:", 1)[1].count("\nYou: ") - 1
    if "?" in latest and replies < len(dict.fromkeys(said)):
        return Reply(text=json.dumps({"action": "answer", "message": list(dict.fromkeys(said))[replies]}))
    return Reply(text=json.dumps({"action": "done", "message": "Thanks."}))


def _suite(tmp_path, n: int = 3):
    suite = build_ledger_suite(8)
    suite.sessions = suite.sessions[:n]
    path = tmp_path / "suite.jsonl"
    write_wtb_suite(suite, path)
    return suite, path


def _eval(tmp_path, path, base_url, *extra: str):
    args = ["eval", "--suite", str(path), "--agent", "oracle", "--user", "model:openai:fake-model"]
    args += ["--base-url", base_url, "--runs-dir", str(tmp_path / "runs"), "--name", "r", "--no-preflight", *extra]
    return CliRunner().invoke(app, args, env=ENV)


def test_the_oracle_with_a_faithful_simulated_user_scores_100_percent_and_the_audit_is_kept(tmp_path):
    _suite_obj, path = _suite(tmp_path)
    with serve_in_thread(FakeOpenAI(_faithful)) as base_url:
        result = _eval(tmp_path, path, base_url)
    assert result.exit_code == 0, result.output
    run = tmp_path / "runs" / "r"
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["total_info"]["task"]["accuracy"] == 1.0
    config = json.loads((run / "config.json").read_text())
    assert config["user"] == "model:openai:fake-model" and config["user_prompt_sha256"] and config["mode"] == "strict"
    assert config["history"] == "free"
    audit = json.loads((run / "user_audit.json").read_text())
    assert audit["error_rate"] == 0.0 and audit["runs"] == 3
    assert "its audit broke 0 of 3 session(s)" in result.output
    # re-scoring a run with a simulated user scores it the same way
    again = CliRunner().invoke(app, ["score", str(run)], env=ENV)
    assert again.exit_code == 0, again.output
    assert json.loads((run / "metrics.json").read_text())["total_info"]["task"]["accuracy"] == 1.0


def test_sessions_the_audit_finds_broken_are_left_out_with_exclude_user_failures(tmp_path):
    suite, path = _suite(tmp_path)
    clarify = {s.id for s in suite.sessions if any(task_facts(t).replies for t in s.tasks)}
    always_done = FakeOpenAI(lambda body: Reply(text=json.dumps({"action": "done", "message": "ok"})))
    with serve_in_thread(always_done) as base_url:
        result = _eval(tmp_path, path, base_url, "--exclude-user-failures")
    assert result.exit_code == 0, result.output
    run = tmp_path / "runs" / "r"
    metrics = json.loads((run / "metrics.json").read_text())
    left_out = {e["session_id"] for e in metrics["extensions"]["user_error_sessions"]}
    assert left_out == clarify and metrics["extensions"]["sessions_scored"] == 3 - len(clarify)
    assert f"{len(clarify)} session(s) left out by --exclude-user-failures" in result.output
    again = CliRunner().invoke(app, ["score", str(run)], env=ENV)  # re-scoring leaves out the same sessions
    assert again.exit_code == 0, again.output
    rescored = json.loads((run / "metrics.json").read_text())["extensions"]
    assert {e["session_id"] for e in rescored["user_error_sessions"]} == clarify


def test_the_users_own_failure_is_listed_apart_and_not_the_agents(tmp_path):
    suite, path = _suite(tmp_path)
    victim = suite.sessions[0].tasks[0].utterance

    def flaky(body: dict) -> Reply:
        if f'Your request: "{victim}"' in body["messages"][1]["content"]:
            return Reply(text="not json at all")
        return _faithful(body)

    with serve_in_thread(FakeOpenAI(flaky)) as base_url:
        result = _eval(tmp_path, path, base_url)
    assert result.exit_code == 0, result.output
    run = tmp_path / "runs" / "r"
    metrics = json.loads((run / "metrics.json").read_text())
    assert [e["session_id"] for e in metrics["extensions"]["user_error_sessions"]] == [suite.sessions[0].id]
    assert metrics["total_info"]["task"]["accuracy"] == 1.0  # the other sessions, all correct
    lines = [json.loads(x) for x in (run / "trajectories.jsonl").read_text().splitlines()]
    assert {x["session_id"]: x["status"] for x in lines}[suite.sessions[0].id] == "user_error"
    assert "1 session(s) lost to its errors" in result.output


def test_a_simulated_user_needs_free_history(tmp_path):
    _suite_obj, path = _suite(tmp_path)
    args = ["eval", "--suite", str(path), "--agent", "oracle", "--user", "model:local", "--history", "wtb"]
    result = CliRunner().invoke(app, [*args, "--runs-dir", str(tmp_path)], env=ENV)
    assert result.exit_code == 1 and "--history free" in result.output


@pytest.mark.parametrize("bad", ["robot", "model:"])
def test_an_unknown_user_is_refused(tmp_path, bad):
    _suite_obj, path = _suite(tmp_path)
    args = ["eval", "--suite", str(path), "--agent", "oracle", "--user", bad, "--runs-dir", str(tmp_path)]
    result = CliRunner().invoke(app, args, env=ENV)
    assert result.exit_code == 1 and "--user" in result.output
