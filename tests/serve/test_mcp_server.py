"""``toolwild serve mcp`` through the official ``mcp`` client: over stdio (the real command as a subprocess) and
over streamable HTTP (the server in a thread on 127.0.0.1). Tools, annotations, results, typed tool errors, one
isolated episode per session, the record, the user's own ledger (copy and write-through) and the host guard."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import pytest
from beancount import loader
from fake_openai import FakeOpenAI, Reply, serve_in_thread
from library_env import LIBRARY, library_model
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_client import result_json, serve_http_in_thread, stdio_command
from typer.testing import CliRunner

from toolwild.cli.serve import serve_app
from toolwild.core.formats.environment import write_environment
from toolwild.core.tool import Effect, Tool
from toolwild.envs.base import EnvironmentBackend, Episode, Observation, ToolErrorKind
from toolwild.envs.registry import get_environment
from toolwild.envs.simulated import SimulatedEnvironment
from toolwild.llm.backends.scripted import ScriptedBackend
from toolwild.llm.client import LLM
from toolwild.serve.mcp_server import McpEnvironmentServer, RecordedCall, call_result, check_host, mcp_tool

pytestmark = pytest.mark.anyio

COFFEE = {
    "date": "2026-01-15",
    "payee": "MCP Test Cafe",
    "narration": "coffee",
    "amount": 4.5,
    "expense_account": "Expenses:Food:Restaurants",
    "payment_account": "Assets:Bank:Checking",
}
UNKNOWN_ACCOUNT = {**COFFEE, "payee": "Nowhere", "expense_account": "Expenses:Food:Coffee"}
"""A write beancount refuses: the account is not open in the ledger."""


# ---------------------------------------------------------------------------------------------- per environment


def _library_backend() -> SimulatedEnvironment:
    """The library environment simulated by a faithful scripted model (in-process, no network)."""
    return SimulatedEnvironment(LIBRARY, LLM(ScriptedBackend(library_model)))


SCENARIOS: dict[str, dict[str, Any]] = {
    # a write, then a read that shows whether the write happened: (tool, arguments, the value the read shows)
    "ledger": {
        "write": ("add_transaction", COFFEE),
        "read": ("find_transactions", {"payee": "MCP Test Cafe"}),
        "seen": lambda r: r["count"],
    },
    "inventory": {
        "write": ("restock", {"item": "tea", "units": 5}),
        "read": ("get_stock", {"item": "tea"}),
        "seen": lambda r: r["units"],
    },
    "library": {
        "write": ("lend_book", {"book_id": "B-101", "member_id": "M-7"}),
        "read": ("get_book", {"book_id": "B-101"}),
        "seen": lambda r: r["available"],
    },
}


def _backend(name: str) -> EnvironmentBackend:
    return _library_backend() if name == "library" else get_environment(name)


async def _read(client: Client, name: str) -> Any:
    tool, args = SCENARIOS[name]["read"]
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.content
    return SCENARIOS[name]["seen"](result_json(result))


async def _list_then_two_isolated_sessions(url_or_params: Any, name: str) -> str:
    """Two concurrent sessions: the first lists the tools (checked against the environment's), then a write in
    the first is seen there and not in the second. Returns the protocol version the clients spoke."""
    async with Client(url_or_params) as first, Client(url_or_params) as second:
        _annotations_match_effects((await first.list_tools()).tools, _backend(name).tools)
        before = await _read(second, name)
        tool, args = SCENARIOS[name]["write"]
        written = await first.call_tool(tool, args)
        assert not written.is_error, written.content
        assert await _read(first, name) != before
        assert await _read(second, name) == before
        return first.protocol_version


def _annotations_match_effects(listed: list[Any], tools: list[Tool]) -> None:
    by_name = {t.name: t for t in tools}
    assert sorted(t.name for t in listed) == sorted(by_name)
    for mcp in listed:
        tool = by_name[mcp.name]
        assert mcp.input_schema["properties"] == tool.parameters.get("properties", {})
        assert mcp.description == tool.description
        hints = mcp.annotations
        assert hints.title and mcp.title == hints.title
        if tool.effect is Effect.READ:
            assert hints.read_only_hint is True
        else:
            assert tool.effect is Effect.WRITE
            assert (hints.read_only_hint, hints.destructive_hint, hints.idempotent_hint) == (False, True, False)


# ---------------------------------------------------------------------------------------------- units


def test_a_tool_listing_carries_schema_title_and_the_hints_of_its_effect():
    read = Tool(name="getBudgets", description="d", effect=Effect.READ, returns={"type": "object", "properties": {}})
    write = Tool(name="add_transaction", effect=Effect.WRITE, returns={"type": "array"})
    unknown = Tool(name="lookup", parameters={"properties": {"q": {"type": "string"}}})
    r, w, u = mcp_tool(read), mcp_tool(write), mcp_tool(unknown)
    assert (r.title, r.annotations.read_only_hint, r.annotations.destructive_hint) == ("Get budgets", True, None)
    assert r.output_schema == {"type": "object", "properties": {}}
    assert (w.title, w.annotations.read_only_hint, w.annotations.destructive_hint) == ("Add transaction", False, True)
    assert w.annotations.idempotent_hint is False
    assert w.output_schema is None  # MCP wants an object at the root: a list result is described as text only
    assert w.description is None  # an empty description is left out, not sent as ""
    # a tool without a declared effect claims nothing; a schema without "type" gets the object root MCP requires
    assert (u.annotations.read_only_hint, u.annotations.destructive_hint) == (None, None)
    assert u.input_schema == {"type": "object", "properties": {"q": {"type": "string"}}}


def test_an_observation_becomes_a_result_and_a_tool_error_an_is_error_result_with_its_kind():
    ok = call_result(Observation(ok=True, result={"units": 3}))
    assert (ok.is_error, json.loads(ok.content[0].text), ok.structured_content) == (False, {"units": 3}, {"units": 3})
    listed = call_result(Observation(ok=True, result=["tea", "coffee"]))
    assert json.loads(listed.content[0].text) == ["tea", "coffee"] and listed.structured_content is None
    failed = call_result(Observation.failure(ToolErrorKind.REJECTED, "beancount rejected the change"))
    assert failed.is_error and failed.content[0].text == "rejected: beancount rejected the change"
    assert failed.structured_content == {
        "ok": False,
        "error": {"kind": "rejected", "message": "beancount rejected the change"},
    }


def test_a_host_other_machines_reach_needs_allow_remote_and_then_gets_a_warning():
    assert check_host("127.0.0.1", allow_remote=False) is None
    assert check_host("::1", allow_remote=False) is None and check_host("localhost", allow_remote=False) is None
    with pytest.raises(Exception, match="--allow-remote"):
        check_host("192.168.1.20", allow_remote=False)
    assert "NO authentication" in (check_host("0.0.0.0", allow_remote=True) or "")


def test_serve_mcp_refuses_host_0000_without_allow_remote_with_a_clear_message():
    runner = CliRunner()
    result = runner.invoke(serve_app, ["mcp", "inventory", "--transport", "http", "--host", "0.0.0.0"])
    assert result.exit_code == 1
    out = " ".join(result.output.split())
    assert "--host 0.0.0.0 would accept connections from other machines" in out and "--allow-remote" in out
    assert "Traceback" not in result.output
    stdio_host = runner.invoke(serve_app, ["mcp", "inventory", "--host", "127.0.0.1"])
    assert stdio_host.exit_code == 1 and "apply to --transport http only" in " ".join(stdio_host.output.split())


# ---------------------------------------------------------------------------------------------- streamable HTTP


@pytest.mark.parametrize("name", ["ledger", "inventory", "library"])
async def test_http_lists_and_calls_the_tools_and_every_session_has_its_own_episode(name, tmp_path):
    backend = _backend(name)
    server = McpEnvironmentServer(backend, transport="http", record=tmp_path / "calls.jsonl")
    with serve_http_in_thread(server) as url:
        # the handshake era: its sessions are where episodes live
        assert await _list_then_two_isolated_sessions(url, name) == "2025-11-25"
        await anyio.sleep(0.2)  # the sessions' teardown (DELETE) is answered before their episodes close
        assert server.open_sessions == {}
    lines = [RecordedCall.model_validate_json(line) for line in (tmp_path / "calls.jsonl").read_text().splitlines()]
    # sessions are numbered by their first call: the second client read first
    assert [(c.session, c.seq, c.tool) for c in lines] == [
        (1, 1, SCENARIOS[name]["read"][0]),
        (2, 1, SCENARIOS[name]["write"][0]),
        (2, 2, SCENARIOS[name]["read"][0]),
        (1, 2, SCENARIOS[name]["read"][0]),
    ]
    assert lines[1].arguments == SCENARIOS[name]["write"][1] and lines[1].observation["ok"] is True


async def test_http_tool_errors_arrive_as_is_error_results_with_their_kind():
    server = McpEnvironmentServer(get_environment("ledger"), transport="http")
    with serve_http_in_thread(server) as url:
        async with Client(url) as client:
            rejected = await client.call_tool("add_transaction", UNKNOWN_ACCOUNT)
            unknown = await client.call_tool("transfer_everything", {})
            invalid = await client.call_tool("add_transaction", {"payee": "x"})
            missing = await client.call_tool("delete_transaction", {"transaction_id": "txn-9999"})
    for result, kind in [(rejected, "rejected"), (unknown, "unknown_tool"), (invalid, "invalid_arguments")]:
        assert result.is_error and result.content[0].text.startswith(f"{kind}: ")
        assert result.structured_content["error"]["kind"] == kind
    assert "unknown account 'Expenses:Food:Coffee'" in rejected.content[0].text
    assert missing.is_error and missing.structured_content["error"]["kind"] == "not_found"


class _Broken(EnvironmentBackend):
    """An environment whose second tool has a bug (it raises)."""

    id = "broken"

    @property
    def tools(self) -> list[Tool]:
        return [Tool(name="fine", effect=Effect.READ), Tool(name="buggy", effect=Effect.READ)]

    def reset(self, *, seed: int = 0) -> Episode:
        class Ep(Episode):
            def call(self, name: str, arguments: dict[str, Any]) -> Observation:
                if name == "buggy":
                    raise KeyError("oops")
                return Observation(ok=True, result={"fine": True})

            def state(self) -> dict[str, Any]:
                return {}

        return Ep()


async def test_a_bug_in_toolwild_is_a_logged_server_error_never_a_tool_result(tmp_path, caplog):
    server = McpEnvironmentServer(_Broken(), transport="http", record=tmp_path / "calls.jsonl")
    caplog.set_level(logging.ERROR, logger="toolwild.serve.mcp_server")
    with serve_http_in_thread(server) as url:
        async with Client(url) as client:
            with pytest.raises(MCPError, match="a bug, see the server's log") as caught:
                await client.call_tool("buggy", {})
            assert "KeyError" in str(caught.value)
            assert not (await client.call_tool("fine", {})).is_error  # the session and its episode go on
    logged = [r for r in caplog.records if "a bug in toolwild" in r.getMessage()]
    assert logged and logged[0].exc_info and logged[0].exc_info[0] is KeyError  # with its traceback
    recorded = [json.loads(line)["tool"] for line in (tmp_path / "calls.jsonl").read_text().splitlines()]
    assert recorded == ["fine"]  # a call that was not answered is not in the record


async def test_a_client_without_a_session_is_told_why_its_calls_are_refused():
    """The 2026-07-28 protocol has no sessions over HTTP: a fresh episode per request would drop every write."""
    server = McpEnvironmentServer(get_environment("inventory"), transport="http")
    with serve_http_in_thread(server) as url:
        async with Client(url, mode="2026-07-28") as client:
            assert len((await client.list_tools()).tools) == 4  # listing needs no episode
            with pytest.raises(MCPError, match="no sessions over HTTP"):
                await client.call_tool("get_stock", {"item": "tea"})
    assert server.open_sessions == {}


def test_serve_mcp_http_prints_the_url_and_stops_cleanly_on_ctrl_c_with_a_client_connected(tmp_path):
    record = tmp_path / "calls.jsonl"
    args = ["mcp", "inventory", "--transport", "http", "--port", "0", "--record", str(record)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "toolwild.cli.main", "serve", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp")

        async def use() -> None:
            async with Client(url) as client:
                assert result_json(await client.call_tool("get_stock", {"item": "tea"})) == {"item": "tea", "units": 15}
                proc.send_signal(signal.SIGINT)  # while the client still holds its session open
                assert await anyio.to_thread.run_sync(proc.wait, 10) == 0

        anyio.run(use)
    finally:
        if proc.poll() is None:
            proc.kill()
    stderr = proc.stderr.read()
    assert "serving inventory over MCP (streamable HTTP)" in stderr
    assert "session 1: ended after 1 call(s)" in stderr  # the open session's episode was closed on the way out
    assert "Traceback" not in stderr and "ERROR" not in stderr  # an interrupted stream is an ordinary stop
    assert [json.loads(line)["tool"] for line in record.read_text().splitlines()] == ["get_stock"]


# ---------------------------------------------------------------------------------------------- stdio


def _library_file(tmp_path: Path) -> Path:
    return write_environment(LIBRARY, tmp_path / "library.env.json")


def _simulator_reply(body: dict[str, Any]) -> Reply:
    """The fake OpenAI server answering as the library's simulator model (the scripted model, over HTTP)."""
    return Reply(text=library_model(SimpleNamespace(messages=body["messages"])))


@pytest.mark.parametrize("name", ["ledger", "inventory", "library"])
def test_stdio_lists_and_calls_the_tools_and_two_clients_are_isolated(name, tmp_path):
    fake = FakeOpenAI(_simulator_reply)
    with serve_in_thread(fake) if name == "library" else contextlib.nullcontext("") as base_url:
        args = [name]
        if name == "library":  # an environment file simulated by a model: here a fake OpenAI server on loopback
            args = [str(_library_file(tmp_path)), "--model", "openai:sim", "--base-url", base_url]

        async def run() -> None:
            await _list_then_two_isolated_sessions(stdio_command(*args), name)

        anyio.run(run)
    if name == "library":
        assert fake.calls == 4  # the simulator model answered every call of both sessions


def test_stdio_writes_nothing_but_protocol_to_stdout(tmp_path):
    """Raw JSON-RPC in, every stdout line must be a JSON-RPC message; the server's own lines go to stderr."""
    messages = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "0"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "restock", "arguments": {"item": "tea", "units": 1}},
        },
        {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "restock", "arguments": {"item": "x"}}},
    ]
    proc = subprocess.Popen(
        [sys.executable, "-m", "toolwild.cli.main", "serve", "mcp", "inventory"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    watchdog = threading.Timer(60, proc.kill)  # a hung server fails the test instead of hanging it
    watchdog.start()
    try:
        proc.stdin.write("".join(json.dumps(m) + "\n" for m in messages))
        proc.stdin.flush()
        lines = [proc.stdout.readline() for _ in range(4)]  # a client waits for its answers before it hangs up
        proc.stdin.close()  # end of the session: the server answers nothing more and exits
        rest, stderr = proc.stdout.read(), proc.stderr.read()
        proc.wait(30)
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, stderr
    done = SimpleNamespace(stdout="".join(lines) + rest, stderr=stderr)
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert [a.get("id") for a in answers] == [1, 2, 3, 4] and all(a["jsonrpc"] == "2.0" for a in answers)
    assert answers[2]["result"]["isError"] is False and answers[3]["result"]["isError"] is True
    assert answers[3]["result"]["content"][0]["text"].startswith("invalid_arguments: ")
    assert "serving inventory over MCP (stdio)" in done.stderr and "session 1: ended after 2 call(s)" in done.stderr


# ---------------------------------------------------------------------------------------------- the user's ledger

BOOKS = """option "title" "Test books"
option "operating_currency" "USD"

2024-01-01 open Assets:Bank:Checking USD
2024-01-01 open Expenses:Food:Restaurants USD
2024-01-01 open Equity:Opening-Balances USD

; opening balance
2024-01-02 * "Opening" "balance"
  Assets:Bank:Checking       1000.00 USD
  Equity:Opening-Balances

2024-02-01 * "Cafe" "lunch"
  Expenses:Food:Restaurants    12.50 USD
  Assets:Bank:Checking
"""


def _books(tmp_path: Path) -> Path:
    path = tmp_path / "books.beancount"
    path.write_bytes(BOOKS.encode())
    return path


def _calls_on_own_books(books: Path, *extra: str) -> tuple[Any, Any, Any]:
    """A rejected write, an accepted add, then a search for it, over stdio on ``--ledger books``; the file's bytes
    after the rejection are checked by the caller through the returned snapshot."""
    snapshots: dict[str, bytes] = {}

    async def run() -> tuple[Any, Any, Any]:
        async with Client(stdio_command("ledger", "--ledger", str(books), *extra)) as client:
            rejected = await client.call_tool("add_transaction", UNKNOWN_ACCOUNT)
            snapshots["after_rejected"] = books.read_bytes()
            added = await client.call_tool("add_transaction", COFFEE)
            found = await client.call_tool("find_transactions", {"payee": "MCP Test Cafe"})
            return rejected, added, found

    results = anyio.run(run)
    assert snapshots["after_rejected"] == BOOKS.encode()
    return results


def test_own_ledger_copy_mode_never_touches_the_file(tmp_path):
    books = _books(tmp_path)
    rejected, added, found = _calls_on_own_books(books)
    assert rejected.is_error and rejected.content[0].text.startswith("rejected: ")
    assert not added.is_error and result_json(found)["count"] == 1  # the episode's copy has it
    assert books.read_bytes() == BOOKS.encode()  # the user's file does not


def test_own_ledger_write_through_writes_only_validated_changes(tmp_path):
    books = _books(tmp_path)
    rejected, added, found = _calls_on_own_books(books, "--write-through")
    assert rejected.is_error and rejected.structured_content["error"]["kind"] == "rejected"
    assert not added.is_error and result_json(found)["count"] == 1
    text = books.read_text()
    assert text != BOOKS and "MCP Test Cafe" in text and "Nowhere" not in text
    assert text.startswith(BOOKS)  # an add appends: every line of the user's, comments and alignment, is kept
    entries, errors, _ = loader.load_file(str(books))
    assert errors == [] and len([e for e in entries if getattr(e, "payee", None) == "MCP Test Cafe"]) == 1


def test_write_through_needs_own_ledger_and_says_so_when_serving(tmp_path):
    runner = CliRunner()
    alone = runner.invoke(serve_app, ["mcp", "ledger", "--write-through"])
    assert alone.exit_code == 1 and "--write-through needs --ledger" in " ".join(alone.output.split())
    other = runner.invoke(serve_app, ["mcp", "inventory", "--ledger", str(_books(tmp_path))])
    assert other.exit_code == 1 and "ledger environment only" in " ".join(other.output.split())
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "toolwild.cli.main",
            "serve",
            "mcp",
            "ledger",
            "--ledger",
            str(_books(tmp_path)),
            "--write-through",
        ],
        input="",
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert done.returncode == 0 and done.stdout == ""
    assert "--write-through: every accepted write changes" in " ".join(done.stderr.split())
