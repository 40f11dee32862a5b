"""``toolwild.evaluate`` from Python, no CLI: the same run directory and metrics as ``toolwild eval``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import toolwild
from toolwild.cli.main import app
from toolwild.core.verdict import ScoringMode
from toolwild.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
SESSIONS = ROOT.parent / "shared" / "fixtures" / "wildtoolbench" / "sessions_0_4.reconstructed.jsonl"
needs_fixture = pytest.mark.skipif(
    not SESSIONS.is_file(), reason=f"WildToolBench session fixture not found at {SESSIONS} (shared fixtures absent)"
)


def _metrics(run_dir: Path) -> dict:
    return json.loads((run_dir / "metrics.json").read_text())


@needs_fixture
@pytest.mark.parametrize("mode", [ScoringMode.WTB, ScoringMode.STRICT])
def test_evaluate_gives_the_metrics_and_files_of_toolwild_eval(tmp_path, mode):
    args = ["eval", "--suite", str(SESSIONS), "--agent", "oracle", "--mode", mode.value]
    result = CliRunner().invoke(app, [*args, "--runs-dir", str(tmp_path), "--name", "cli"])
    assert result.exit_code == 0, result.output

    run = toolwild.evaluate(SESSIONS, agent="oracle", mode=mode, run_dir=tmp_path / "py")

    assert run.path == tmp_path / "py"
    assert run.metrics is not None
    assert run.metrics.model_dump(mode="json") == _metrics(tmp_path / "cli") == _metrics(run.path)
    for name in ("verdicts.jsonl", "trajectories.jsonl"):
        assert (run.path / name).read_bytes() == (tmp_path / "cli" / name).read_bytes()
    assert [v.session_id for v in run.verdicts] == [s.id for s in run.suite.sessions]
    assert (run.path / "report.html").is_file()
    # the run read back is the run that was returned
    again = toolwild.load_run(run.path)
    assert [v.model_dump() for v in again.verdicts] == [v.model_dump() for v in run.verdicts]
    assert toolwild.load_metrics(again.path, again.config, again.verdicts, model_name="oracle") == run.metrics


@needs_fixture
def test_evaluate_resumes_a_run_and_reports_progress(tmp_path):
    seen: list[tuple[int, int]] = []
    first = toolwild.evaluate(SESSIONS, agent="oracle", limit=2, run_dir=tmp_path / "r")
    assert len(first.verdicts) == 2
    again = toolwild.evaluate(resume=tmp_path / "r", on_progress=lambda p: seen.append((p.done, p.calls)))
    assert again.metrics == first.metrics
    assert seen[0] == (0, 0) and seen[-1] == (2, 0)  # the totals first; both sessions read back, no turn taken
    assert len((tmp_path / "r" / "trajectories.jsonl").read_text().splitlines()) == 2  # none run twice


@needs_fixture
def test_evaluate_takes_a_suite_in_hand_and_keeps_a_copy(tmp_path):
    suite, _ = toolwild.load_wtb_suite(SESSIONS)
    run = toolwild.evaluate(suite, agent="oracle", sessions=suite.sessions[1].id, run_dir=tmp_path / "r")
    assert [s.id for s in run.suite.sessions] == [suite.sessions[1].id]
    kept, _ = toolwild.load_wtb_suite(tmp_path / "r" / "suite.jsonl")
    assert [s.id for s in kept.sessions] == [suite.sessions[1].id]
    assert run.metrics is not None and run.metrics.total_info["task"]["accuracy"] == 1.0


def test_evaluate_refuses_an_unknown_option_before_writing(tmp_path):
    with pytest.raises(ConfigError, match="no option modle"):
        toolwild.evaluate(agent="oracle", modle="x", run_dir=tmp_path / "r")
    assert not (tmp_path / "r").exists()


def test_evaluate_refuses_a_run_folder_that_holds_a_run(tmp_path):
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "trajectories.jsonl").write_text('{"session_id": "x"}\n')
    with pytest.raises(ConfigError, match="already holds a run"):
        toolwild.evaluate(agent="oracle", run_dir=tmp_path / "r")
