"""``toolwild import mcp`` on the toy MCP server (stdio and ``--url``): the environment file holds the server's tools
and how to reach it (no secret), the ``mcp`` backend calls it, bad schemas and bad options are clear errors, and
``synth sessions`` runs on an imported environment simulated by a scripted model."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the mcp extra is not installed (pip install 'toolwild[mcp]')")

from fake_openai import FakeOpenAI, Reply, serve_in_thread
from mcp_toy_server import TOOLS, serve_http_in_thread, stdio_command
from typer.testing import CliRunner

from toolwild.cli.main import app
from toolwild.core.environment import BackendKind
from toolwild.core.formats.environment import load_environment
from toolwild.core.formats.wtb import load_wtb_suite
from toolwild.core.tool import Effect
from toolwild.envs.mcp import mcp_backend

READS = {"list_notes", "token_length", "explode", "stall"}


def run(*args: str):
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})


def test_stdio_import_records_the_tools_and_the_server_and_the_backend_calls_it(tmp_path, monkeypatch):
    monkeypatch.setenv("TOY_TOKEN", "tok-123456789")
    out = tmp_path / "notes.env.json"
    result = run("import", "mcp", "-o", str(out), "--env", "TOY_TOKEN", "--", *stdio_command())
    assert result.exit_code == 0, result.output
    assert f"tools: {len(TOOLS)} ({len(READS)} read, {len(TOOLS) - len(READS)} write) from toy-notebook 1.0" in (
        result.output
    )
    assert "tok-123456789" not in out.read_text()  # the variable's name is kept, never its value

    environment = load_environment(out)
    assert environment.id == "notes" and environment.backend is BackendKind.MCP
    assert [t.name for t in environment.tools] == [t.name for t in TOOLS]  # every page of the listing
    for tool, listed in zip(environment.tools, TOOLS, strict=True):
        assert (tool.description, tool.parameters, tool.returns) == (
            listed.description,
            listed.input_schema,
            listed.output_schema,
        )
        assert tool.effect is (Effect.READ if tool.name in READS else Effect.WRITE)
    assert environment.mcp is not None and environment.mcp.command == stdio_command()
    assert environment.mcp.env == ["TOY_TOKEN"] and environment.mcp.cwd == str(Path.cwd().resolve())
    assert environment.source == {
        "format": "mcp",
        "server_name": "toy-notebook",
        "server_version": "1.0",
        "protocol_version": "2025-11-25",
    }

    episode = mcp_backend(environment).reset()
    try:
        assert episode.call("add_note", {"text": "from the file"}).result == {"id": 1, "count": 1}
        assert episode.call("token_length", {}).result == {"length": len("tok-123456789")}
    finally:
        episode.close()


def test_url_import_gives_the_same_tools(tmp_path):
    by_stdio, by_url = tmp_path / "a.env.json", tmp_path / "b.env.json"
    assert run("import", "mcp", "-o", str(by_stdio), "--", *stdio_command()).exit_code == 0
    with serve_http_in_thread() as url:
        result = run("import", "mcp", "--url", url, "-o", str(by_url), "--id", "toy-http")
        assert result.exit_code == 0, result.output
        environment = load_environment(by_url)
        episode = mcp_backend(environment).reset()
        try:
            assert episode.call("list_notes", {}).result == {"notes": []}
        finally:
            episode.close()
    assert environment.id == "toy-http" and environment.mcp is not None and environment.mcp.url == url
    assert environment.mcp.command is None and environment.mcp.cwd is None
    assert environment.tools == load_environment(by_stdio).tools


def test_an_unusable_schema_fails_naming_the_tool_or_is_skipped_with_a_warning(tmp_path):
    out = tmp_path / "bad.env.json"
    failed = run("import", "mcp", "-o", str(out), "--", *stdio_command("--bad-schema"))
    assert failed.exit_code == 1 and not out.exists()
    assert "'broken'" in failed.output and f"tools[{len(TOOLS)}].inputSchema" in failed.output
    assert "Traceback" not in failed.output

    skipped = run("import", "mcp", "-o", str(out), "--skip-invalid", "--", *stdio_command("--bad-schema"))
    assert skipped.exit_code == 0, skipped.output
    assert re.search(r"warning:.*skipped tool broken", skipped.output) and "1 skipped" in skipped.output
    assert [t.name for t in load_environment(out).tools] == [t.name for t in TOOLS]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--",), "give the server"),
        (("--url", "http://127.0.0.1:9/mcp", "--", "python", "srv.py"), "not both"),
        (("--env", "TOKEN=abc", "--", "python", "srv.py"), "NAME only"),
        (("--url", "http://me:pw@127.0.0.1:9/mcp"), "credentials"),
        (("--url", "http://127.0.0.1:9/mcp", "--timeout", "5"), "could not be reached"),
        (("--", "no-such-mcp-server"), "was not found"),
    ],
)
def test_bad_options_are_clear_errors_and_write_nothing(tmp_path, args, says):
    out = tmp_path / "x.env.json"
    result = run("import", "mcp", "-o", str(out), *args)
    assert result.exit_code == 1 and says in result.output and "Traceback" not in result.output
    assert not out.exists()


def test_replay_is_not_a_choice_for_a_listing(tmp_path):
    result = run("import", "mcp", "-o", str(tmp_path / "x.env.json"), "--backend", "replay", "--", "python")
    assert result.exit_code == 2 and "replay" in result.output


def _prompt_value(text: str, label: str) -> object:
    match = re.search(rf"^{label}: (.*)$", text, flags=re.M)
    assert match, f"no {label!r} line in the simulator prompt"
    return json.loads(match.group(1))


def toy_simulator(body: dict) -> str:
    """A faithful simulator of the notebook: answers from the state in the prompt, writes patch it."""
    text = body["messages"][1]["content"]  # the call's prompt (a retry appends the reason after it)
    state, call = _prompt_value(text, "Current state"), _prompt_value(text, "Call")
    assert isinstance(state, dict) and isinstance(call, dict)
    name, args = call["name"], call["arguments"]
    notes = state.get("notes", [])
    if name == "add_note":
        note = {"id": len(notes) + 1, "text": args["text"], "tag": args.get("tag", "home")}
        patch = [
            {"op": "add", "path": "/notes/-", "value": note}
            if notes
            else {"op": "add", "path": "/notes", "value": [note]}
        ]
        return json.dumps({"result": {"id": note["id"], "count": len(notes) + 1}, "patch": patch})
    if name == "list_notes":
        return json.dumps({"result": {"notes": [n for n in notes if args.get("tag") in (None, n["tag"])]}})
    if name == "delete_note":
        index = next((i for i, n in enumerate(notes) if n["id"] == args["id"]), None)
        patch = [] if index is None else [{"op": "remove", "path": f"/notes/{index}"}]
        return json.dumps({"result": {"deleted": args["id"]}, "patch": patch})
    if name == "token_length":
        return json.dumps({"result": {"length": 0}})
    if '"effect":"read"' in text:
        return json.dumps({"result": {"ok": True}})
    return json.dumps({"result": {"ok": True}, "patch": [{"op": "add", "path": f"/{name}_done", "value": True}]})


def test_synth_sessions_runs_on_an_imported_environment_simulated_by_a_model(tmp_path):
    env_file = tmp_path / "notes.env.json"
    imported = run("import", "mcp", "-o", str(env_file), "--backend", "llm", "--", *stdio_command())
    assert imported.exit_code == 0, imported.output
    environment = load_environment(env_file)
    assert environment.backend is BackendKind.LLM and environment.mcp is not None  # the server stays on record

    fake = FakeOpenAI(lambda body: Reply(text=toy_simulator(body)))
    out = tmp_path / "notes.jsonl"
    with serve_in_thread(fake) as base_url:
        result = run(
            "synth", "sessions", "--env", str(env_file), "--n", "4", "--out", str(out),
            "--env-model", "openai:sim", "--base-url", base_url,
        )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert fake.calls > 0  # the tools were answered by the simulator, not by the server
    suite, _ = load_wtb_suite(out)
    assert suite.sessions and {s.environment for s in suite.sessions} == {"notes.env.json"}
    names = {t.name for t in environment.tools}
    called = {n.action.name for s in suite.sessions for t in s.tasks for n in t.gold if n.kind.value == "call"}
    assert called and called <= names


def test_an_imported_file_runs_through_the_cli_and_the_registry(tmp_path):
    """`toolwild env call` on the imported file reaches the live server (the registry's `mcp` branch)."""
    out = tmp_path / "notes.env.json"
    assert run("import", "mcp", "-o", str(out), "--", *stdio_command()).exit_code == 0
    called = run("env", "call", str(out), "add_note", "--args", '{"text": "via the cli"}')
    assert called.exit_code == 0, called.output
    assert json.loads(called.output)["result"] == {"id": 1, "count": 1}


def test_toolwild_served_over_mcp_imports_back_with_its_effects_and_error_kinds(tmp_path):
    """Both ways at once: `import mcp` of `toolwild serve mcp ledger` gives the ledger's tools and effects, and a
    rejected write comes back through the `mcp` backend with its own kind, not a generic one."""
    import sys

    from toolwild.envs.registry import environment_tools

    out = tmp_path / "ledger.env.json"
    command = [sys.executable, "-m", "toolwild.cli.main", "serve", "mcp", "ledger"]
    imported = run("import", "mcp", "-o", str(out), "--", *command)
    assert imported.exit_code == 0, imported.output
    environment = load_environment(out)
    builtin = {t.name: t.effect for t in environment_tools("ledger")}
    assert {t.name: t.effect for t in environment.tools} == builtin
    episode = mcp_backend(environment).reset()
    try:
        args = {"date": "2024-01-05", "payee": "X", "narration": "y", "amount": 3, "expense_account": "Expenses:Nope"}
        rejected = episode.call("add_transaction", args)
        assert not rejected.ok and rejected.error is not None and rejected.error.kind.value == "rejected"
        missing = episode.call("delete_transaction", {"transaction_id": "txn-9999"})
        assert not missing.ok and missing.error is not None and missing.error.kind.value == "not_found"
    finally:
        episode.close()
