"""Issue #32, environments, ledger includes and ``serve mcp`` over stdio: an environment file whose ``required``
names no property is refused on load; a ledger's includes stay in its folder (symlinks followed) unless allowed, and
a file outside it is never quoted back; and the stdio server answers a line that is not JSON with a parse error,
names the field of an invalid-params error, and answers every request it read before stdin closed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from toolwild.cli.main import app
from toolwild.core.formats.environment import load_environment
from toolwild.core.formats.mcp import tools_from_mcp
from toolwild.core.schema import undeclared_required
from toolwild.envs.domains.ledger import LedgerEpisode, copy_ledger_tree, load_ledger_file
from toolwild.envs.domains.ledger.files import OUTSIDE_INCLUDES_ENV
from toolwild.errors import ConfigError, DataError

WIDE = {"COLUMNS": "200"}


def _run(*args: str) -> Any:
    return CliRunner().invoke(app, list(args), env=WIDE)


def _flat(text: str) -> str:
    return " ".join(text.split())


# ---------------------------------------------------------------------------------------------- environment files
def _env_file(tmp_path: Path, parameters: dict[str, Any]) -> Path:
    path = tmp_path / "weather.env.json"
    tools = [
        {"name": "get_time", "parameters": {"type": "object", "properties": {}}},
        {"name": "get_forecast", "description": "The forecast of a town.", "parameters": parameters},
    ]
    path.write_text(json.dumps({"id": "weather", "backend": "replay", "tools": tools}, indent=1))
    return path


def test_an_environment_requiring_a_property_it_does_not_declare_is_refused_naming_file_tool_and_property(tmp_path):
    path = _env_file(
        tmp_path,
        {"type": "object", "properties": {"town": {"type": "string"}}, "required": ["town", "city"]},
    )
    with pytest.raises(DataError) as caught:
        load_environment(path)
    error = caught.value
    assert error.file == str(path) and error.field == "tools[1].parameters.required[1]"
    assert "'get_forecast'" in error.message and "'city'" in error.message
    result = _run("env", "tools", str(path))
    assert result.exit_code == 1 and "Traceback" not in result.output
    said = _flat(result.output)
    assert "weather.env.json" in said and "tools[1].parameters.required[1]" in said and "'city'" in said


def test_an_undeclared_required_property_of_a_nested_object_is_named_by_its_path(tmp_path):
    address = {"type": "object", "properties": {"street": {"type": "string"}}, "required": ["zip"]}
    path = _env_file(tmp_path, {"type": "object", "properties": {"address": address}, "required": ["address"]})
    with pytest.raises(DataError) as caught:
        load_environment(path)
    assert caught.value.field == "tools[1].parameters.properties.address.required[0]"
    assert "'zip'" in caught.value.message


def test_an_mcp_import_names_or_skips_a_tool_whose_environment_file_would_not_load():
    broken = {"name": "getBook", "inputSchema": {"type": "object", "properties": {"book": {}}, "required": ["book_id"]}}
    fine = {"name": "ping", "inputSchema": {"type": "object"}}
    with pytest.raises(DataError) as caught:
        tools_from_mcp([fine, broken])
    assert caught.value.field == "tools[1].inputSchema.required[0]" and "'book_id'" in caught.value.message
    tools, skipped = tools_from_mcp([fine, broken], skip_invalid=True)
    assert [t.name for t in tools] == ["ping"] and [s.name for s in skipped] == ["getBook"]


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"a": {}, "b": {}}, "anyOf": [{"required": ["a"]}, {"required": ["b"]}]},
        {"type": "object", "allOf": [{"properties": {"a": {}}}], "required": ["a"]},
        {"type": "object", "properties": {"a": {}}, "not": {"required": ["legacy"]}},
        {"type": "object", "additionalProperties": {"type": "string"}, "required": ["anything"]},
        {"type": "object", "patternProperties": {"^x_": {}}, "required": ["x_id"]},
        {"type": "object", "$defs": {"A": {"properties": {"a": {}}}}, "$ref": "#/$defs/A", "required": ["a"]},
    ],
)
def test_schemas_that_may_declare_a_required_name_elsewhere_are_accepted(schema):
    assert undeclared_required(schema) is None


# ---------------------------------------------------------------------------------------------- ledger includes
PASSWD = "root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n"
ACCOUNTS = "2024-01-01 open Assets:Cash USD\n2024-01-01 open Expenses:Food USD\n"


def _books(tmp_path: Path, include: str) -> Path:
    (tmp_path / "books").mkdir(exist_ok=True)
    main = tmp_path / "books" / "main.beancount"
    main.write_text(
        f'option "operating_currency" "USD"\ninclude "{include}"\n\n'
        '2024-01-02 * "Cafe" "Coffee"\n  Expenses:Food   3.50 USD\n  Assets:Cash\n'
    )
    return main


@pytest.fixture
def confined(monkeypatch: pytest.MonkeyPatch) -> None:
    """No opt-in from the environment of whoever runs the tests."""
    monkeypatch.delenv(OUTSIDE_INCLUDES_ENV, raising=False)


@pytest.mark.usefixtures("confined")
def test_an_include_climbing_out_of_the_ledger_folder_is_refused_unread_and_never_quoted(tmp_path):
    (tmp_path / "passwd").write_text(PASSWD)
    main = _books(tmp_path, "../passwd")
    with pytest.raises(ConfigError) as caught:
        load_ledger_file(main)
    message = str(caught.value)
    assert "main.beancount line 2" in message and "outside the ledger's folder" in message
    assert "--allow-outside-includes" in message and "root:x" not in message and "daemon" not in message
    with pytest.raises(ConfigError, match="outside the ledger's folder"):
        LedgerEpisode(ledger_path=main)
    with pytest.raises(ConfigError, match="outside the ledger's folder"):
        copy_ledger_tree(main, tmp_path / "copy")
    result = _run("env", "tools", "ledger", "--ledger", str(main))
    assert result.exit_code == 1 and "outside the ledger's folder" in _flat(result.output)
    assert "root:x" not in result.output and "Traceback" not in result.output


@pytest.mark.usefixtures("confined")
def test_a_symlink_in_the_folder_to_a_file_outside_it_is_outside(tmp_path):
    (tmp_path / "passwd").write_text(PASSWD)
    main = _books(tmp_path, "accounts.beancount")
    (tmp_path / "books" / "accounts.beancount").symlink_to(tmp_path / "passwd")
    with pytest.raises(ConfigError) as caught:
        load_ledger_file(main)
    message = str(caught.value)
    assert "a link to" in message and "outside the ledger's folder" in message and "root:x" not in message


@pytest.mark.usefixtures("confined")
def test_an_allowed_include_outside_the_folder_loads_but_its_errors_never_quote_it(tmp_path):
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "accounts.beancount").write_text(ACCOUNTS)
    main = _books(tmp_path, "../shared/accounts.beancount")
    with pytest.raises(ConfigError, match="outside the ledger's folder"):
        load_ledger_file(main)
    assert len(load_ledger_file(main, allow_outside_includes=True).transactions) == 1
    listed = _run("env", "tools", "ledger", "--ledger", str(main), "--allow-outside-includes")
    assert listed.exit_code == 0, listed.output
    called = _run(
        "env",
        "call",
        "ledger",
        "find_transactions",
        "--args",
        '{"payee": "Cafe"}',
        "--ledger",
        str(main),
        "--allow-outside-includes",
    )
    assert called.exit_code == 0 and json.loads(called.stdout)["result"]["count"] == 1
    # allowed, the foreign file is read, but what beancount says of it is not shown
    (tmp_path / "passwd").write_text(PASSWD)
    exposed = _books(tmp_path, "../passwd")
    with pytest.raises(ConfigError) as caught:
        load_ledger_file(exposed, allow_outside_includes=True)
    message = str(caught.value)
    assert "passwd line 1" in message and "message is not shown" in message
    # the file's own text, never the temporary path (which holds "root" when the tests run as root)
    assert not any(quoted in message for quoted in ("root:x", ":/root:", "daemon", "bin/bash"))
    result = _run("env", "tools", "ledger", "--ledger", str(exposed), "--allow-outside-includes")
    assert result.exit_code == 1 and "root:x" not in result.output and "message is not shown" in _flat(result.output)


def test_the_environment_variable_allows_outside_includes_for_commands_without_the_option(tmp_path, monkeypatch):
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "accounts.beancount").write_text(ACCOUNTS)
    main = _books(tmp_path, "../shared/accounts.beancount")
    monkeypatch.setenv(OUTSIDE_INCLUDES_ENV, "1")
    assert len(load_ledger_file(main).transactions) == 1
    episode = LedgerEpisode(ledger_path=main)
    try:
        added = episode.call(
            "add_transaction",
            {
                "date": "2024-01-03",
                "payee": "Deli",
                "narration": "Lunch",
                "amount": 9.5,
                "expense_account": "Expenses:Food",
                "payment_account": "Assets:Cash",
            },
        )
        assert added.ok, added.error  # a write on the copy validates with the outside file, still allowed
    finally:
        episode.close()


def test_allow_outside_includes_without_a_ledger_is_refused():
    result = _run("env", "tools", "ledger", "--allow-outside-includes")
    assert result.exit_code == 1 and "--allow-outside-includes needs --ledger" in _flat(result.output)


# ---------------------------------------------------------------------------------------------- serve mcp over stdio
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def _serve(lines: list[str], *args: str) -> tuple[list[dict[str, Any]], str]:
    """Run ``toolwild serve mcp ARGS`` as a real subprocess: write every line, close stdin at once (no waiting for
    answers), read everything it writes. Returns the stdout messages and stderr."""
    done = subprocess.run(
        [sys.executable, "-m", "toolwild.cli.main", "serve", "mcp", *(args or ("inventory",))],
        input="".join(line + "\n" for line in lines),
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **WIDE},
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()], done.stderr


def _call(rid: int, params: Any) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params})


def test_a_line_that_is_not_json_gets_a_parse_error_with_a_null_id_and_a_log_line():
    lines = [
        json.dumps(INITIALIZE),
        json.dumps(INITIALIZED),
        "this is not json {",
        "",  # a blank line between messages is no message: skipped, not answered
        '{"jsonrpc": "2.0", "id": 7}',  # JSON, but neither request nor response
        json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    ]
    answers, stderr = _serve(lines)
    errors = [a for a in answers if "error" in a]
    assert [e["error"]["code"] for e in errors] == [-32700, -32600]
    parse = errors[0]
    assert parse["id"] is None and parse["jsonrpc"] == "2.0" and "not JSON" in parse["error"]["message"]
    assert errors[1]["id"] == 7  # an invalid request whose id can be read is answered with it
    assert "this is not json" not in json.dumps(answers)  # the line is not quoted back
    assert sorted(a["id"] for a in answers if "result" in a) == [1, 2]  # the session went on
    assert "stdin line 3" in stderr and "-32700" in stderr and "stdin line 5" in stderr


def test_invalid_params_errors_name_the_field():
    lines = [
        json.dumps(INITIALIZE),
        json.dumps(INITIALIZED),
        _call(2, {"arguments": {"item": "tea", "units": 1}}),  # no tool name
        _call(3, {"name": "restock", "arguments": "units=1"}),  # arguments not an object
    ]
    answers, _ = _serve(lines)
    by_id = {a["id"]: a for a in answers}
    for rid, field in ((2, "params.name"), (3, "params.arguments")):
        error = by_id[rid]["error"]
        assert error["code"] == -32602 and field in error["message"]
        assert field in [e["field"] for e in error["data"]["errors"]]
        assert "units=1" not in json.dumps(error)  # the client's value is not echoed


def test_a_request_before_initialize_is_told_why_it_is_refused():
    answers, _ = _serve([_call(5, {"name": "restock", "arguments": {"item": "tea", "units": 1}})])
    error = answers[0]["error"]
    assert answers[0]["id"] == 5 and error["code"] == -32602 and "initialize" in error["message"]


@pytest.mark.parametrize("env", ["inventory", "ledger"])
def test_every_request_read_before_stdin_closes_is_answered(env):
    if env == "ledger":
        arguments = {
            "date": "2026-01-15",
            "payee": "Cafe {i}",
            "narration": "coffee",
            "amount": 4.5,
            "expense_account": "Expenses:Food:Restaurants",
        }
        calls = [
            _call(10 + i, {"name": "add_transaction", "arguments": {**arguments, "payee": f"Cafe {i}"}})
            for i in range(8)
        ]
    else:
        calls = [_call(10 + i, {"name": "restock", "arguments": {"item": "tea", "units": 1}}) for i in range(20)]
    lines = [
        json.dumps(INITIALIZE),
        json.dumps(INITIALIZED),
        *calls,
        json.dumps({"jsonrpc": "2.0", "id": 99, "method": "tools/list"}),
    ]
    answers, stderr = _serve(lines, env)
    ids = sorted(a["id"] for a in answers)
    assert ids == sorted([1, 99, *(10 + i for i in range(len(calls)))]), stderr
    results = [a["result"] for a in answers if a["id"] not in (1, 99)]
    assert all(r["isError"] is False for r in results), results
    assert "session 1: ended after" in stderr
