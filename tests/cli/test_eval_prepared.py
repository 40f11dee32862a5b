"""What ``eval`` prepares as each session ends (its verdict lines and report records) is what it would have
written at the end: ``score --verdicts`` writes the same file, also when the user audit leaves sessions out after
the run, which changes their verdicts (issue 34)."""

from __future__ import annotations

import json

from fake_openai import FakeOpenAI, Reply, serve_in_thread
from typer.testing import CliRunner

from toolwild.cli.main import app
from toolwild.core.formats.wtb import write_wtb_suite
from toolwild.eval.user import task_facts
from toolwild.synth.providers.ledger import build_ledger_suite

ENV = {"COLUMNS": "200", "OPENAI_API_KEY": "test"}


def test_verdicts_of_sessions_left_out_after_the_run_are_written_as_left_out(tmp_path):
    suite = build_ledger_suite(8)
    suite.sessions = suite.sessions[:3]
    path = tmp_path / "suite.jsonl"
    write_wtb_suite(suite, path)
    clarify = {s.id for s in suite.sessions if any(task_facts(t).replies for t in s.tasks)}
    assert clarify  # the case needs a session the always-done user breaks
    always_done = FakeOpenAI(lambda body: Reply(text=json.dumps({"action": "done", "message": "ok"})))
    args = ["eval", "--suite", str(path), "--agent", "oracle", "--user", "model:openai:fake-model"]
    args += ["--runs-dir", str(tmp_path / "runs"), "--name", "r", "--no-preflight", "--exclude-user-failures"]
    with serve_in_thread(always_done) as base_url:
        result = CliRunner().invoke(app, [*args, "--base-url", base_url], env=ENV)
    assert result.exit_code == 0, result.output
    run = tmp_path / "runs" / "r"
    written = (run / "verdicts.jsonl").read_text()
    left_out = {v["session_id"] for v in map(json.loads, written.splitlines()) if v.get("user_error")}
    assert left_out == clarify
    out = tmp_path / "v.jsonl"
    again = CliRunner().invoke(app, ["score", str(run), "--verdicts", str(out), "--out", str(tmp_path / "m")], env=ENV)
    assert again.exit_code == 0, again.output
    assert out.read_text() == written
    report = (run / "report.html").read_text()
    assert report.count('"label":"excluded"') == sum(len(s.tasks) for s in suite.sessions if s.id in clarify)
