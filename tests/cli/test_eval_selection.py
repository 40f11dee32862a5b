"""``eval --limit N`` / ``--sessions ID,...``: the run holds exactly the chosen sessions, and keeps them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from toolwild.cli.main import app

SESSIONS = (
    Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "wildtoolbench" / "sessions_0_4.reconstructed.jsonl"
)
pytestmark = pytest.mark.skipif(not SESSIONS.is_file(), reason=f"fixture not found: {SESSIONS}")


def run(*args: str):
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "120"})


def evaluate(tmp_path: Path, name: str, *options: str):
    return run(
        "eval", "--suite", str(SESSIONS), "--agent", "oracle", "--runs-dir", str(tmp_path), "--name", name, *options
    )


def ran(run_dir: Path) -> list[str]:
    return [json.loads(line)["session_id"] for line in (run_dir / "trajectories.jsonl").read_text().splitlines()]


def test_sessions_by_id_and_by_count(tmp_path):
    chosen = evaluate(tmp_path, "ids", "--sessions", "wild_tool_bench_3, wild_tool_bench_1")
    assert chosen.exit_code == 0, chosen.output
    assert sorted(ran(tmp_path / "ids")) == ["wild_tool_bench_1", "wild_tool_bench_3"]
    first = evaluate(tmp_path, "first", "--limit", "2")
    assert first.exit_code == 0, first.output
    assert sorted(ran(tmp_path / "first")) == ["wild_tool_bench_0", "wild_tool_bench_1"]
    # the run keeps the sessions it ran: re-scoring reads them, not the whole suite
    rescored = run("score", str(tmp_path / "first"))
    assert rescored.exit_code == 0, rescored.output
    assert "8/8" in rescored.output and "2/2" in rescored.output


def test_an_unknown_session_is_refused_before_anything_is_written(tmp_path):
    result = evaluate(tmp_path, "bad", "--sessions", "wild_tool_bench_1,nope")
    assert result.exit_code == 1 and "nope" in result.output
    assert not (tmp_path / "bad").exists()


def test_a_resumed_run_keeps_its_sessions(tmp_path):
    assert evaluate(tmp_path, "r", "--limit", "1").exit_code == 0
    again = run("eval", "--resume", str(tmp_path / "r"), "--limit", "3")
    assert again.exit_code == 1 and "keeps its sessions" in again.output
