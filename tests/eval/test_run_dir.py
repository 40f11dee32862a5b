"""Run directories: resuming from anywhere, configs that are not configs, and results that are not this run's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from toolwild.cli.main import app

FIXTURE = Path(__file__).resolve().parents[2].parent / "shared/fixtures/wildtoolbench/sessions_0_4.reconstructed.jsonl"
pytestmark = pytest.mark.skipif(not FIXTURE.exists(), reason=f"shared fixtures not present: {FIXTURE}")


def _oracle_run(tmp_path: Path, *extra: str) -> Path:
    result = CliRunner().invoke(
        app, ["eval", "--suite", str(FIXTURE), "--agent", "oracle", "--runs-dir", str(tmp_path), "--name", "r", *extra]
    )
    assert result.exit_code == 0, result.output
    return tmp_path / "r"


@pytest.mark.parametrize(
    "content",
    [None, b"", b"\xff\xfe not utf-8", b"{not json", b'{"suite": 3}', b'{"suite": "s.jsonl", "concurrency": 0}'],
    ids=["missing", "empty", "binary", "bad-json", "wrong-type", "out-of-range"],
)
def test_resume_on_a_folder_without_a_valid_config_is_a_clear_error(tmp_path, content):
    run_dir = tmp_path / "r"
    run_dir.mkdir()
    if content is not None:
        (run_dir / "config.json").write_bytes(content)
    result = CliRunner().invoke(app, ["eval", "--resume", str(run_dir)])
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "config.json" in result.output


def test_resume_refuses_a_trajectory_with_fewer_tasks_than_its_session(tmp_path):
    run_dir = _oracle_run(tmp_path)
    path = run_dir / "trajectories.jsonl"
    lines = path.read_text().splitlines()
    first = json.loads(lines[0])
    first["tasks"] = first["tasks"][:2]
    path.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    result = CliRunner().invoke(app, ["eval", "--resume", str(run_dir)])
    assert result.exit_code == 1, result.output
    assert "trajectories.jsonl, line 1" in result.output and "2 task(s)" in result.output


def test_resume_refuses_a_binary_trajectories_file(tmp_path):
    run_dir = _oracle_run(tmp_path)
    path = run_dir / "trajectories.jsonl"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe\n" + path.read_bytes())
    result = CliRunner().invoke(app, ["eval", "--resume", str(run_dir)])
    assert result.exit_code == 1, result.output
    assert "trajectories.jsonl, line 1" in result.output


def test_a_run_started_with_relative_paths_resumes_and_rescores_from_another_folder(tmp_path, monkeypatch):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    suite = tmp_path / "a" / "suite.jsonl"
    suite.write_bytes(FIXTURE.read_bytes())
    monkeypatch.chdir(tmp_path / "a")
    result = CliRunner().invoke(
        app, ["eval", "--suite", "suite.jsonl", "--agent", "oracle", "--runs-dir", "runs", "--name", "r"]
    )
    assert result.exit_code == 0, result.output
    config = json.loads((tmp_path / "a" / "runs" / "r" / "config.json").read_text())
    assert config["suite"] == str(suite.resolve())
    assert config["suite_digest"] and len(config["suite_digest"]) == 64
    monkeypatch.chdir(tmp_path / "b")
    run_dir = str(tmp_path / "a" / "runs" / "r")
    assert CliRunner().invoke(app, ["eval", "--resume", run_dir]).exit_code == 0
    scored = CliRunner().invoke(app, ["score", run_dir])
    assert scored.exit_code == 0, scored.output
    assert "100.00%" in scored.output


def test_resume_refuses_a_suite_that_changed_since_the_run_started(tmp_path):
    suite = tmp_path / "suite.jsonl"
    suite.write_bytes(FIXTURE.read_bytes())
    result = CliRunner().invoke(
        app, ["eval", "--suite", str(suite), "--agent", "oracle", "--runs-dir", str(tmp_path), "--name", "r"]
    )
    assert result.exit_code == 0, result.output
    lines = suite.read_text().splitlines()
    record = json.loads(lines[0])
    record["english_env_info"] = "2031-01-01 00:00:00 Wednesday"
    suite.write_text("\n".join([json.dumps(record, ensure_ascii=False), *lines[1:]]) + "\n")
    resumed = CliRunner().invoke(app, ["eval", "--resume", str(tmp_path / "r")])
    assert resumed.exit_code == 1, resumed.output
    # errors are never hard-wrapped off a terminal: the message is one line, whatever the length of the path in it
    (line,) = [x for x in resumed.output.splitlines() if x.startswith("error:")]
    assert "suite changed" in line
