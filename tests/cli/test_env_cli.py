"""``toolwild env``: tools, one call, and the interactive shell on the inventory domain."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_openai import FakeOpenAI, Reply, serve_in_thread
from typer.testing import CliRunner

from toolwild.cli.main import app
from toolwild.core.schema import example_value


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


# ------------------------------------------------------------------ environment files (replay and llm)
SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures"
needs_fixtures = pytest.mark.skipif(not SHARED.exists(), reason="shared fixtures not present")


@needs_fixtures
def test_import_wtb_envs_then_call_a_recorded_tool(tmp_path):
    suite = SHARED / "wildtoolbench" / "sessions_0_4.reconstructed.jsonl"
    result = run("import", "wtb-envs", str(suite), "--out", str(tmp_path))
    assert result.exit_code == 0, result.output
    env_file = tmp_path / "wtb-session-wild_tool_bench_0.env.json"
    args = '{"city": "Chicago", "startDate": "2024-07-13", "endDate": "2024-07-14"}'
    answer = run("env", "call", str(env_file), "getCityForecast", "--args", args)
    assert answer.exit_code == 0 and json.loads(answer.output)["ok"] is True
    other = run("env", "call", str(env_file), "getCityForecast", "--args", '{"city": "Oslo"}')
    assert json.loads(other.output)["error"]["kind"] in ("no_recording", "invalid_arguments")
    tools_only = run("import", "wtb-envs", str(SHARED / "wildtoolbench" / "tools_en.jsonl"), "--out", str(tmp_path))
    assert tools_only.exit_code == 1 and "use --backend llm" in tools_only.output


@needs_fixtures
def test_import_synthtools_envs_and_call_one_through_an_openai_compatible_simulator(tmp_path):
    tarball = SHARED / "synthtools" / "tool_content.tar.gz"
    result = run("import", "synthtools", str(tarball), "--envs-out", str(tmp_path))
    assert result.exit_code == 0, result.output
    assert len(list(tmp_path.glob("*.env.json"))) == 573
    env_file = tmp_path / "ecommerce_and_retail_tool_spec_43.env.json"
    env = json.loads(env_file.read_text())
    tool = next(t for t in env["tools"] if t["name"] == "Refund_Calculator")

    # schema errors are answered without any model (none is reachable here)
    bad = run(
        "env",
        "call",
        str(env_file),
        "Refund_Calculator",
        "--args",
        '{"nope": 1}',
        "--model",
        "openai:m",
        "--base-url",
        "http://127.0.0.1:9/v1",
    )
    assert bad.exit_code == 0 and json.loads(bad.output)["error"]["kind"] == "invalid_arguments"

    # a valid call goes to the simulator model (a fake OpenAI server on loopback) and its reply is validated
    reply = {"result": {name: example_value(spec) for name, spec in tool["returns"]["properties"].items()}, "patch": []}
    # its contract has error modes, so a precondition check comes first
    fake = FakeOpenAI(
        lambda body: Reply(text='{"holds": true}' if '"holds"' in json.dumps(body) else json.dumps(reply))
    )
    with serve_in_thread(fake) as base_url:
        args = example_value(tool["parameters"])
        ok = run(
            "env",
            "call",
            str(env_file),
            "Refund_Calculator",
            "--args",
            json.dumps(args),
            "--model",
            "openai:sim",
            "--base-url",
            base_url,
            "--cache",
            str(tmp_path / "c.sqlite"),
        )
    assert ok.exit_code == 0, ok.output
    observation = json.loads(ok.output)
    assert observation["ok"] is True and observation["result"] == reply["result"]
    assert len(fake.requests) == 2 and "Refund_Calculator" in fake.requests[-1]["messages"][-1]["content"]
