"""``toolwild env``: tools, one call, and the interactive shell on the inventory domain."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from toolwild.cli.main import app


def run(*args: str, input: str | None = None):
    return CliRunner().invoke(app, list(args), input=input, env={"COLUMNS": "200"})


def test_env_tools_lists_effects():
    result = run("env", "tools", "inventory")
    assert result.exit_code == 0
    assert "place_order" in result.output and "write" in result.output and "read" in result.output


def test_env_call_prints_the_observation():
    result = run("env", "call", "inventory", "list_items", "--seed", "1")
    assert result.exit_code == 0
    assert json.loads(result.output)["ok"] is True


def test_env_call_bad_json_and_unknown_env_fail_cleanly():
    bad = run("env", "call", "inventory", "restock", "--args", "{oops")
    assert bad.exit_code == 1 and "--args is not JSON" in bad.output
    unknown = run("env", "call", "nowhere", "x")
    assert unknown.exit_code == 1 and "unknown environment" in unknown.output


def test_env_shell_keeps_state_between_commands():
    script = 'list_items\nrestock {"item": "coffee", "units": 2}\nstate\nquit\n'
    result = run("env", "shell", "inventory", "--seed", "1", input=script)
    assert result.exit_code == 0
    assert '"units": 16' in result.output and '"coffee": 16' in result.output


def test_suite_ledger_writes_a_valid_suite(tmp_path):
    out = tmp_path / "ledger.jsonl"
    result = run("suite", "ledger", "--out", str(out), "--sessions", "8", "--seed", "3")
    assert result.exit_code == 0, result.output
    assert len(out.read_text().splitlines()) == 8
    checked = run("validate", str(out))
    assert checked.exit_code == 0 and "suite is valid" in checked.output
    again = tmp_path / "again.jsonl"
    run("suite", "ledger", "--out", str(again), "--sessions", "8", "--seed", "3")
    assert again.read_bytes() == out.read_bytes()
