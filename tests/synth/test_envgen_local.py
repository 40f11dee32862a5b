"""Environment synthesis end to end on the embedded model, offline: one field, every output file schema-valid.

Slow (about 6 model calls of SmolLM2-135M, 1-2 minutes). Quality is not judged (the model is tiny); the contract
is: the run finishes, every file it writes validates, and the summary accounts for every generated tool.
"""

from __future__ import annotations

import importlib.util
import json

import pytest
from typer.testing import CliRunner

from toolwild.cli.main import app
from toolwild.core.formats.environment import load_environment

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None, reason="llama-cpp-python not installed"),
]


def test_one_field_on_the_embedded_model(tmp_path):
    args = ["synth", "envs", "--fields", "finance", "--out", str(tmp_path), "--per-field", "1"]
    result = CliRunner().invoke(app, [*args, "--families", "1", "--tools", "2"])
    assert result.exit_code == 0, result.output
    files = sorted(tmp_path.glob("*.env.json"))
    environments = [load_environment(f) for f in files]  # raises on any invalid file
    summary = json.loads((tmp_path / "summary.json").read_text())
    kept = sum(len(e.tools) for e in environments)
    assert summary["tools_kept"] == kept
    assert summary["tools_generated"] == kept + sum(summary["tools_dropped"].values())
    assert summary["usage"]["roles"]["synth"]["calls"] >= 1
    assert all(e.backend.value == "llm" and e.field == "finance" for e in environments)
