"""Session generation offline with the embedded model wording the utterances: every utterance keeps the wording
rules (the model's own, or the template it fell back to), and the suite verifies.

Slow (SmolLM2-135M writes up to two drafts per task; about a minute). The model's prose is not judged, only the
contract: stated values present, hidden ones absent, and the suite still replays, scores 100% for the oracle and
keeps its subtype labels.
"""

from __future__ import annotations

import importlib.util
import json

import pytest
from typer.testing import CliRunner

from toolwild.cli.main import app
from toolwild.core.formats.wtb import load_wtb_suite

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None, reason="llama-cpp-python not installed"),
]


def test_embedded_model_words_two_sessions(tmp_path):
    out = tmp_path / "suite.jsonl"
    args = ["synth", "sessions", "--env", "inventory", "--n", "2", "--model", "local", "--out", str(out)]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "suite.jsonl.report.json").read_text())
    assert report["problems"] == [] and report["sessions"] == 2
    assert sum(report["utterances"].values()) == 8
    assert set(report["utterances"]) <= {"model", "template-fallback"}
    assert report["usage"]["writer"]["total"]["calls"] >= 8
    suite, _ = load_wtb_suite(out)
    assert all(task.utterance.strip() for s in suite.sessions for task in s.tasks)
    # a second run is answered from the cache: the same suite, no model call
    before = out.read_bytes()
    again = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert again.exit_code == 0, again.output
    assert out.read_bytes() == before
    report = json.loads((tmp_path / "suite.jsonl.report.json").read_text())
    usage = report["usage"]["writer"]["total"]
    assert usage["calls"] == 0 and usage["cache_hits"] >= 8
