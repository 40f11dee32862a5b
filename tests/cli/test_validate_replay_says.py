"""``validate --replay`` says what it replayed, and why it could not replay the rest."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from toolwild.cli.main import app

SESSIONS = (
    Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "wildtoolbench" / "sessions_0_4.reconstructed.jsonl"
)


def run(*args: str):
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})


def test_a_generated_suite_is_replayed_whole(tmp_path):
    suite = tmp_path / "s.jsonl"
    assert run("synth", "sessions", "--env", "inventory", "--n", "3", "-o", str(suite), "--no-verify").exit_code == 0
    result = run("validate", str(suite), "--replay")
    assert result.exit_code == 0, result.output
    assert "replay: 3 of 3 session(s) replayed" in result.output and "not replayed" not in result.output


def test_a_published_suite_says_why_nothing_was_replayed():
    if not SESSIONS.is_file():
        pytest.skip(f"fixture not found: {SESSIONS}")
    result = run("validate", str(SESSIONS), "--replay")
    assert "replay: 0 of 5 session(s) replayed" in result.output
    assert "5 not replayed: they name no environment" in result.output
