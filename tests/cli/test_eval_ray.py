"""``toolwild eval --executor ray`` on a local Ray instance: the metrics and trajectories of the local executor
(timing aside), free-running on real ledgers, and a resumed Ray run that finishes what a killed one left."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from toolwild.cli.main import app

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'toolwild[ray]')")


pytestmark = pytest.mark.usefixtures("local_ray")


def run(*args: str):
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})


def _trajectories(run_dir) -> dict:
    """Per session, the trajectory without its timing (latencies differ from run to run)."""

    def untimed(value):
        if isinstance(value, dict):
            return {k: untimed(v) for k, v in value.items() if k != "latency_s"}
        if isinstance(value, list):
            return [untimed(v) for v in value]
        return value

    lines = (run_dir / "trajectories.jsonl").read_text().splitlines()
    return {json.loads(line)["session_id"]: untimed(json.loads(line)) for line in lines}


def test_ray_gives_the_local_metrics_and_trajectories_and_resumes(tmp_path):
    suite = tmp_path / "ledger.jsonl"
    assert run("suite", "ledger", "--out", str(suite), "--sessions", "6").exit_code == 0
    common = ("eval", "--suite", str(suite), "--agent", "oracle", "--history", "free", "--runs-dir", str(tmp_path))
    local = run(*common, "--name", "local", "--concurrency", "2")
    assert local.exit_code == 0, local.output
    remote = run(*common, "--name", "ray", "--concurrency", "2", "--executor", "ray")
    assert remote.exit_code == 0, remote.output
    metrics = (tmp_path / "local" / "metrics.json").read_bytes()
    assert (tmp_path / "ray" / "metrics.json").read_bytes() == metrics
    assert _trajectories(tmp_path / "ray") == _trajectories(tmp_path / "local")
    assert "100.00%" in remote.output

    # as if killed after two sessions: the rest is run on Ray again, nothing doubled
    path = tmp_path / "ray" / "trajectories.jsonl"
    path.write_text("\n".join(path.read_text().splitlines()[:2]) + "\n")
    resumed = run("eval", "--resume", str(tmp_path / "ray"), "--executor", "ray")
    assert resumed.exit_code == 0, resumed.output
    assert (tmp_path / "ray" / "metrics.json").read_bytes() == metrics
    assert len(path.read_text().splitlines()) == 6
    assert _trajectories(tmp_path / "ray") == _trajectories(tmp_path / "local")


def test_an_unreachable_cluster_ends_eval_with_a_clear_error(tmp_path):
    suite = tmp_path / "ledger.jsonl"
    assert run("suite", "ledger", "--out", str(suite), "--sessions", "1").exit_code == 0
    result = run(
        "eval", "--suite", str(suite), "--agent", "oracle", "--runs-dir", str(tmp_path), "--name", "x",
        "--executor", "ray", "--ray-address", "127.0.0.1:1",
    )  # fmt: skip
    assert result.exit_code == 1 and "cannot reach the Ray cluster" in result.output
