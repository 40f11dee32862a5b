"""The embedded model (SmolLM2-135M) plays the user of 2 ledger sessions under ``audit user``: the audit runs to the
end, every turn and finding is recorded in the report, and a second run replays from the cache with zero model calls
and the same report.

Slow (a 135M model writes one JSON turn per oracle text, up to 3 attempts each). Its error rate is whatever it is:
the test checks the machinery, not the model; the figures are printed for the README.
"""

from __future__ import annotations

import importlib.util
import json

import pytest
from typer.testing import CliRunner

from toolwild.cli.main import app
from toolwild.core.formats.wtb import write_wtb_suite
from toolwild.synth.providers.ledger import build_ledger_suite

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None, reason="llama-cpp-python not installed"),
]


def test_the_embedded_model_plays_the_user_of_two_ledger_sessions(tmp_path):
    suite = build_ledger_suite(2)
    path = tmp_path / "suite.jsonl"
    write_wtb_suite(suite, path)
    out = tmp_path / "audit.json"
    args = ["audit", "user", str(path), "--user", "model:local", "--cache", str(tmp_path / "c.sqlite"), "-o", str(out)]
    first = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert first.exit_code == 0, first.output
    report = json.loads(out.read_text())
    turns = [t for run in report["runs_detail"] for t in run["turns"]]
    assert report["runs"] == 2 and report["sessions"] == 2 and report["provider_errors"] == []
    assert report["error_rate"] is not None and report["interval"]["method"] == "wilson"
    assert turns and all(t["action"] is not None or t["error"] for t in turns)
    usage = report["usage"]["total"]
    assert usage["calls"] >= len(turns)  # one call per turn, more when a reply was sent back
    print(
        f"\nSmolLM2-135M as the user: {report['failed_runs']}/{report['runs']} runs broken, by kind "
        f"{report['by_kind']}, oracle task accuracy {report['oracle_task_accuracy']:.0%}, {usage['calls']} calls, "
        f"{len(turns)} turns"
    )
    again = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert again.exit_code == 0, again.output
    replayed = json.loads(out.read_text())
    assert replayed["usage"]["total"]["calls"] == 0 and replayed["usage"]["total"]["cache_hits"] >= len(turns)
    assert replayed["runs_detail"] == report["runs_detail"] and replayed["error_rate"] == report["error_rate"]
