"""``toolwild env``: tools, one call, and the interactive shell on the inventory domain."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
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


def test_env_call_exits_1_when_the_tool_answers_with_an_error():
    """Finding: `env call` exited 0 on a tool error. The error observation is still printed, on stdout."""
    result = run("env", "call", "ledger", "amend_transaction", "--args", '{"transaction_id": "txn-9999", "amount": 3}')
    assert result.exit_code == 1
    assert json.loads(result.stdout) == {
        "ok": False,
        "error": {"kind": "not_found", "message": "no transaction with id 'txn-9999'"},
    }
    unknown = run("env", "call", "ledger", "no_such_tool")
    assert unknown.exit_code == 1 and json.loads(unknown.stdout)["error"]["kind"] == "unknown_tool"


def test_an_error_that_quotes_markup_is_printed_as_text_not_a_traceback():
    result = CliRunner().invoke(app, ["env", "call", "[/x]", "t"])
    assert result.exit_code == 1
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "[/x]" in result.output


def test_env_call_deeply_nested_args_fail_cleanly():
    result = run("env", "call", "ledger", "list_accounts", "--args", "[" * 100_000 + "]" * 100_000)
    assert result.exit_code == 1 and "nested too deeply" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


# Lines that used to end the shell (an unbalanced quote raised out of shlex) or might: each must get a message,
# and the episode must carry on with its state.
HOSTILE_LINES = [
    'add_transaction {"payee": "Joe\'s',  # unbalanced quote (the reported crash)
    'add_transaction "unterminated',  # unbalanced double quote
    "no_such_tool {}",  # unknown tool
    "add_transaction {oops",  # bad JSON
    "add_transaction [1, 2]",  # JSON, but not an object
    "list_accounts " + "[" * 50_000 + "]" * 50_000,  # nested past the recursion limit
    "list_accounts " + "x" * 1_100_000,  # huge line
    "\x00\x01 \x7f",  # control characters
    "   ",  # blank
]


def test_env_shell_survives_any_line_and_keeps_the_episode():
    """Finding: an unbalanced quote killed `env shell` and lost the episode."""
    add = (
        'add_transaction {"date": "2024-04-20", "payee": "Corner Shop", "narration": "Milk", "amount": 4.2, '
        '"expense_account": "Expenses:Food:Groceries"}'
    )
    script = "\n".join([add, *HOSTILE_LINES, 'find_transactions {"payee": "corner shop"}', "quit"]) + "\n"
    result = run("env", "shell", "ledger", input=script)
    assert result.exit_code == 0, result.output
    assert result.exception is None
    out = result.output
    assert "no tool 'no_such_tool'" in out and "the arguments is not JSON" in out
    assert "the arguments must be a JSON object" in out and "nested too deeply" in out
    assert "line too long" in out
    # the transaction added before the hostile lines is still there: same episode, state kept
    assert '"count": 1' in out and '"payee": "Corner Shop"' in out


def test_env_shell_ctrl_c_and_ctrl_d_keep_or_end_the_episode_cleanly(monkeypatch):
    import toolwild.cli.env as env_cli

    lines = iter(
        [
            'add_transaction {"date": "2024-04-20", "payee": "Kiosk", "narration": "Tea", "amount": 2.5, '
            '"expense_account": "Expenses:Food:Groceries"}',
            KeyboardInterrupt,  # Ctrl-C at the prompt
            "slow_call {}",  # Ctrl-C while a call runs
            'find_transactions {"payee": "kiosk"}',
            EOFError,  # Ctrl-D
        ]
    )

    def read_line(prompt: str) -> str:
        line = next(lines)
        if isinstance(line, type) and issubclass(line, BaseException):
            raise line
        return line

    real_step = env_cli._shell_step

    async def step(episode, line: str) -> bool:
        if line.startswith("slow_call"):
            raise KeyboardInterrupt
        return await real_step(episode, line)

    monkeypatch.setattr(env_cli, "_read_line", read_line)
    monkeypatch.setattr(env_cli, "_shell_step", step)
    result = run("env", "shell", "ledger")
    assert result.exit_code == 0, result.output
    assert result.exception is None
    assert "interrupted; the episode is kept" in result.output
    assert "call interrupted; the episode is kept" in result.output
    assert '"count": 1' in result.output and '"payee": "Kiosk"' in result.output


def _interruptible() -> None:
    """In the child: SIGINT delivered and handled by default, whatever the test process inherited or set (a child
    inherits an ignored SIGINT and the forking thread's signal mask; in the full suite an earlier test left one of
    them so, and the shell never saw the Ctrl-C)."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_env_shell_survives_a_real_sigint_at_the_prompt():
    """The real thing: SIGINT while the shell waits for a line, then more commands on the same episode."""
    proc = subprocess.Popen(
        [str(Path(sys.executable).with_name("toolwild")), "env", "shell", "ledger"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "COLUMNS": "200", "NO_COLOR": "1"},
        preexec_fn=_interruptible,
    )
    seen = bytearray()

    def drain() -> None:
        while chunk := proc.stdout.read1(65536):
            seen.extend(chunk)

    threading.Thread(target=drain, daemon=True).start()

    def wait_for(text: str, count: int = 1) -> None:
        deadline = time.monotonic() + 60
        while seen.count(text.encode()) < count:
            assert time.monotonic() < deadline, f"no {text!r} in {bytes(seen)!r}"
            time.sleep(0.05)

    try:
        wait_for("ledger> ")
        add = (
            '{"date": "2024-04-20", "payee": "Kiosk", "narration": "Tea", "amount": 2.5, '
            '"expense_account": "Expenses:Food:Groceries"}'
        )
        proc.stdin.write(f"add_transaction {add}\n".encode())
        proc.stdin.flush()
        wait_for("ledger> ", 2)
        proc.send_signal(signal.SIGINT)
        wait_for("interrupted; the episode is kept")
        proc.stdin.write(b'find_transactions {"payee": "kiosk"}\nquit\n')
        proc.stdin.flush()
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    text = bytes(seen).decode()
    assert "Traceback" not in text
    assert '"count": 1' in text.split("interrupted")[-1]


@pytest.mark.anyio
async def test_env_shell_step_reports_an_environment_crash_and_goes_on(capsys):
    """An environment that raises (a bug) gets a message, even one that looks like console markup; the step does
    not propagate it."""
    from toolwild.cli.env import _shell_step
    from toolwild.envs.base import Episode

    class Broken(Episode):
        def call(self, name, arguments):
            raise ZeroDivisionError("boom [/] [/x]")

        def state(self):
            return {"n": 1}

    assert await _shell_step(Broken(), "anything {}") is True
    assert "ZeroDivisionError: boom [/] [/x]" in capsys.readouterr().out
    assert await _shell_step(Broken(), "quit") is False


@pytest.fixture
def anyio_backend():
    return "asyncio"


def test_suite_ledger_writes_a_valid_suite(tmp_path):
    out = tmp_path / "ledger.jsonl"
    result = run("suite", "ledger", "--out", str(out), "--sessions", "8", "--seed", "3")
    assert result.exit_code == 0, result.output
    assert len(out.read_text().splitlines()) == 8
    checked = run("validate", str(out))
    assert checked.exit_code == 0 and "suite is valid" in checked.output
    again = tmp_path / "again" / "ledger.jsonl"  # the same name: sessions are named after the file
    run("suite", "ledger", "--out", str(again), "--sessions", "8", "--seed", "3")
    assert again.read_bytes() == out.read_bytes()
    assert [json.loads(line)["id"] for line in out.read_text().splitlines()][:2] == ["ledger_0", "ledger_1"]


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
    # the observation is printed, and the exit code says the call failed
    assert bad.exit_code == 1 and json.loads(bad.output)["error"]["kind"] == "invalid_arguments"

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
