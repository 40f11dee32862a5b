"""``toolwild score RUN_DIR``: the run's metrics are never overwritten by another mode, the run's usage survives a
re-score, and a suite other than the run's is refused.

The run directory is built by hand (config, oracle trajectories, a metrics.json with usage blocks) on a small
ledger suite, so these tests need neither a model nor the shared fixtures.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from toolwild.cli.main import app
from toolwild.core.formats.wtb import load_wtb_suite
from toolwild.core.verdict import ScoringMode
from toolwild.eval.agents.oracle import oracle_trajectory
from toolwild.eval.run_config import RunConfig
from toolwild.synth.providers.ledger import write_ledger_suite

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
USAGE = {"roles": {"agent": {"calls": 12, "input_tokens": 3456, "output_tokens": 789, "cost_usd": 0.0123}}}
SIM_USAGE = {"roles": {"simulator": {"calls": 3, "input_tokens": 900, "output_tokens": 120}}}


def run(*args: str | Path):
    result = CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "200", "NO_COLOR": "1"})
    result.text = ANSI.sub("", result.output)  # type: ignore[attr-defined]
    return result


@pytest.fixture(scope="module")
def suite_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("suite") / "ledger.jsonl"
    write_ledger_suite(path, n_sessions=3, seed=5)
    return path


def make_run(root: Path, suite_file: Path, *, digest: str | None = "auto", mode: ScoringMode = ScoringMode.WTB) -> Path:
    """A finished run: config.json, the oracle's trajectories, and metrics.json with the run's usage blocks."""
    suite, _ = load_wtb_suite(suite_file)
    run_dir = root / "run"
    run_dir.mkdir()
    config = RunConfig(
        suite=str(suite_file.resolve()),
        suite_digest=suite.fingerprint() if digest == "auto" else digest,
        agent="oracle",
        mode=mode,
    )
    (run_dir / "config.json").write_text(config.model_dump_json(indent=2), encoding="utf-8")
    lines = [json.dumps(oracle_trajectory(s).model_dump(mode="json")) for s in suite.sessions]
    (run_dir / "trajectories.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    metrics = {"model_name": "oracle", "extensions": {"mode": mode.value, "usage": USAGE, "simulator_usage": SIM_USAGE}}
    (run_dir / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n", encoding="utf-8")
    return run_dir


def test_another_mode_writes_beside_the_run_metrics_never_over_them(tmp_path, suite_file):
    """Finding: `score --mode strict RUN_DIR` overwrote the run's wtb metrics."""
    run_dir = make_run(tmp_path, suite_file)
    before = (run_dir / "metrics.json").read_bytes()
    result = run("score", "--mode", "strict", run_dir)
    assert result.exit_code == 0, result.text
    assert (run_dir / "metrics.json").read_bytes() == before
    strict = json.loads((run_dir / "metrics.strict.json").read_text())
    assert strict["extensions"]["mode"] == "strict"
    assert strict["total_info"]["task"]["accuracy"] == 1.0  # the oracle, re-scored
    assert strict["extensions"]["usage"] == USAGE  # the run's usage goes along
    assert "metrics.strict.json" in result.text


def test_another_mode_refuses_an_explicit_out_over_the_run_metrics(tmp_path, suite_file):
    run_dir = make_run(tmp_path, suite_file)
    before = (run_dir / "metrics.json").read_bytes()
    result = run("score", "--mode", "strict", "--out", run_dir / "metrics.json", run_dir)
    assert result.exit_code == 1 and "holds the run's wtb metrics" in result.text
    assert (run_dir / "metrics.json").read_bytes() == before


def test_rescoring_in_the_runs_mode_keeps_its_usage_blocks(tmp_path, suite_file):
    """Finding: `score RUN_DIR` rewrote metrics.json without the run's usage (no model is called when scoring)."""
    run_dir = make_run(tmp_path, suite_file, mode=ScoringMode.STRICT)
    result = run("score", run_dir)
    assert result.exit_code == 0, result.text
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["extensions"]["mode"] == "strict"  # the run's mode by default
    assert metrics["total_info"]["task"]["accuracy"] == 1.0
    assert metrics["extensions"]["usage"] == USAGE
    assert metrics["extensions"]["simulator_usage"] == SIM_USAGE
    assert not (run_dir / "metrics.strict.json").exists()


def test_a_suite_other_than_the_runs_is_refused_with_both_fingerprints(tmp_path, suite_file):
    """Finding: results scored against a different suite with overlapping session ids gave a number, exit 0."""
    run_dir = make_run(tmp_path, suite_file)
    records = [json.loads(line) for line in suite_file.read_text(encoding="utf-8").splitlines()]
    records[0]["english_tasks"][0] += " Thanks!"  # same session ids, other content
    other = tmp_path / "other.jsonl"
    other.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    ours = load_wtb_suite(suite_file)[0].fingerprint()
    theirs = load_wtb_suite(other)[0].fingerprint()
    assert ours != theirs
    before = (run_dir / "metrics.json").read_bytes()

    result = run("score", "--suite", other, run_dir)
    assert result.exit_code == 1, result.text
    assert "is not the suite this run used" in result.text
    assert theirs[:12] in result.text and ours[:12] in result.text
    assert (run_dir / "metrics.json").read_bytes() == before

    # the same suite, named explicitly, is fine
    assert run("score", "--suite", suite_file, run_dir).exit_code == 0


def test_a_suite_edited_after_the_run_is_refused(tmp_path, suite_file):
    edited = tmp_path / "edited.jsonl"
    edited.write_bytes(suite_file.read_bytes())
    run_dir = make_run(tmp_path, edited)
    lines = edited.read_text(encoding="utf-8").splitlines()
    edited.write_text("\n".join(lines[:-1]) + "\n", encoding="utf-8")  # one session fewer
    result = run("score", run_dir)
    assert result.exit_code == 1 and "is not the suite this run used" in result.text


def test_a_run_without_a_recorded_fingerprint_still_scores(tmp_path, suite_file):
    """Runs from before fingerprints were recorded have nothing to compare: they score as before."""
    run_dir = make_run(tmp_path, suite_file, digest=None)
    result = run("score", run_dir)
    assert result.exit_code == 0, result.text
    assert json.loads((run_dir / "metrics.json").read_text())["extensions"]["usage"] == USAGE


def test_an_unreadable_run_config_fails_cleanly(tmp_path, suite_file):
    run_dir = make_run(tmp_path, suite_file)
    (run_dir / "config.json").write_bytes(b"\xff\xfe not json")
    result = run("score", run_dir)
    assert result.exit_code == 1 and "config.json: not UTF-8 text" in result.text.replace("\n", "")
    assert "Traceback" not in result.text


def test_published_results_of_another_suite_with_the_same_ids_are_refused(tmp_path, suite_file):
    """Finding: `score --suite S RESULT.jsonl` scored a result of another suite whose session ids overlap."""
    from toolwild.eval.scoring.session import score_suite
    from toolwild.export.wtb_result import write_wtb_results

    suite, _ = load_wtb_suite(suite_file)
    trajectories = [oracle_trajectory(s) for s in suite.sessions]
    results = tmp_path / "results.jsonl"
    write_wtb_results(results, suite, trajectories, score_suite(suite, trajectories), model_name="oracle")
    assert run("score", "--suite", suite_file, results).exit_code == 0

    records = [json.loads(line) for line in suite_file.read_text(encoding="utf-8").splitlines()]
    records[1]["english_tasks"][2] = "How much did I spend on coffee in March?"  # same ids, another request
    other = tmp_path / "other.jsonl"
    other.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    result = run("score", "--suite", other, results)
    assert result.exit_code == 1, result.text
    assert "belongs to another suite" in result.text
