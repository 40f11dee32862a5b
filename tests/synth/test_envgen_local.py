"""Environment synthesis end to end on the embedded model, offline: one field, at least one environment kept.

Slow (a few calls of SmolLM2-135M, 1-2 minutes). Quality is not judged (the model is tiny); the contract is: the
run keeps at least one environment with at least one tool (a run that keeps none exits 1, and this test fails:
it once passed on zero environments), every file it writes validates, every kept tool has a valid JSON Schema and
a contract the checks accepted, and the summary accounts for every generated tool.
"""

from __future__ import annotations

import importlib.util
import json

import pytest
from jsonschema.validators import validator_for
from typer.testing import CliRunner

from toolwild.cli.main import app
from toolwild.core.formats.environment import load_environment
from toolwild.synth.checks import contract_problems, schema_problems

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None, reason="llama-cpp-python not installed"),
]


def test_one_field_on_the_embedded_model(tmp_path):
    args = ["synth", "envs", "--fields", "finance", "--out", str(tmp_path), "--per-field", "1"]
    result = CliRunner().invoke(app, [*args, "--families", "1", "--tools", "2"])
    assert result.exit_code == 0, result.output
    files = sorted(tmp_path.glob("*.env.json"))
    assert files, f"no environment kept:\n{result.output}"
    environments = [load_environment(f) for f in files]  # raises on any invalid file
    summary = json.loads((tmp_path / "summary.json").read_text())
    kept = sum(len(e.tools) for e in environments)
    assert kept >= 1 and all(e.tools for e in environments)
    assert summary["environments"] == len(environments) and summary["tools_kept"] == kept
    assert summary["tools_generated"] == kept + sum(summary["tools_dropped"].values())
    assert summary["usage"]["roles"]["synth"]["calls"] >= 1
    for env in environments:
        assert env.backend.value == "llm" and env.field == "finance"
        assert len({t.name for t in env.tools}) == len(env.tools)
        for tool in env.tools:
            validator_for(tool.parameters).check_schema(tool.parameters)
            assert tool.parameters["type"] == "object"
            assert schema_problems(tool) == [] and contract_problems(tool) == []
