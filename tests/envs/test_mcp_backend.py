"""The ``mcp`` backend against a real MCP server (the toy notebook, over stdio and streamable HTTP): results equal the
server's, errors are typed, episodes are isolated, and a server that dies, stalls or never starts gives a typed
``unavailable`` answer instead of a hang. Plus the pure parts: listing -> tools, result -> observation."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

pytest.importorskip("mcp", reason="the mcp extra is not installed (pip install 'toolwild[mcp]')")

from mcp_toy_server import BAD_TOOL, TOOLS, free_port, serve_http_in_thread, stdio_command
from pydantic import ValidationError

from toolwild.core.environment import BackendKind, Environment, McpServer
from toolwild.core.formats.mcp import environment_from_mcp, tools_from_mcp
from toolwild.core.tool import Effect
from toolwild.envs.base import Observation, ToolErrorKind
from toolwild.envs.mcp import McpEnvironment, list_server_tools, mcp_backend, observation_from_result
from toolwild.errors import ConfigError, DataError

LISTING = [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in TOOLS]


def _environment(server: McpServer) -> Environment:
    environment, skipped = environment_from_mcp(LISTING, env_id="toy", server=server)
    assert skipped == []
    return environment


@pytest.fixture(params=["stdio", "http"])
def server(request) -> Iterator[McpServer]:
    """The toy server, reached as a command (a process per episode) or as a URL (an HTTP session per episode)."""
    if request.param == "stdio":
        yield McpServer(command=stdio_command(), timeout_s=10)
    else:
        with serve_http_in_thread() as url:
            yield McpServer(url=url, timeout_s=10)


# ---------------------------------------------------------------------------------------------------------------
# pure: listing -> tools, result -> observation


def test_a_listing_becomes_tools_with_schemas_effects_and_the_raw_annotations():
    tools, skipped = tools_from_mcp(LISTING)
    assert skipped == [] and [t.name for t in tools] == [t.name for t in TOOLS]
    by_name = {t.name: t for t in tools}
    add, listed, count = by_name["add_note"], by_name["list_notes"], by_name["word_count"]
    assert add.parameters == TOOLS[0].input_schema and add.returns == TOOLS[0].output_schema
    assert add.description == "Add a note to the notebook and return its id."
    # readOnlyHint true is the only way to a read; no annotations at all is MCP's default: a write
    assert (add.effect, listed.effect, count.effect) == (Effect.WRITE, Effect.READ, Effect.WRITE)
    assert by_name["delete_note"].extra["mcp"]["annotations"] == {
        "readOnlyHint": False,
        "destructiveHint": True,
        "idempotentHint": True,
    }
    assert listed.extra["mcp"]["annotations"]["title"] == "List notes" and count.extra == {} and count.returns is None


def test_an_unusable_schema_names_the_tool_and_field_or_is_skipped_when_asked():
    bad = [*LISTING, BAD_TOOL.model_dump(mode="json", by_alias=True, exclude_none=True), LISTING[0]]
    with pytest.raises(DataError) as caught:
        tools_from_mcp(bad)
    assert caught.value.field == f"tools[{len(LISTING)}].inputSchema" and "'broken'" in caught.value.message
    tools, skipped = tools_from_mcp(bad, skip_invalid=True)
    assert len(tools) == len(LISTING)
    assert [(s.name, s.field) for s in skipped] == [
        ("broken", f"tools[{len(LISTING)}].inputSchema"),
        ("add_note", f"tools[{len(LISTING) + 1}].name"),  # a repeated name
    ]
    with pytest.raises(DataError, match="no usable tool"):
        environment_from_mcp([bad[len(LISTING)]], env_id="x", server=McpServer(url="http://h/mcp"), skip_invalid=True)
    with pytest.raises(DataError, match="no recorded answers"):
        environment_from_mcp(LISTING, env_id="x", server=McpServer(url="http://h/mcp"), backend=BackendKind.REPLAY)


def test_results_become_observations():
    text = {"type": "text", "text": '{"a": 1}'}
    assert observation_from_result({"content": [text], "structuredContent": {"b": 2}}).result == {"b": 2}
    assert observation_from_result({"content": [text]}).result == {"a": 1}
    assert observation_from_result({"content": [{"type": "text", "text": "plain"}]}).result == "plain"
    image = {"type": "image", "data": "AAAA" * 100, "mimeType": "image/png"}
    assert observation_from_result({"content": [text, image]}).result == [
        {"a": 1},
        {"type": "image", "mimeType": "image/png"},
    ]

    def error(text: str, structured: object = None) -> tuple[ToolErrorKind, str]:
        observation = observation_from_result(
            {"content": [{"type": "text", "text": text}], "isError": True, "structuredContent": structured}
        )
        assert not observation.ok and observation.error is not None
        return observation.error.kind, observation.error.message

    # toolwild's own `serve mcp` writes "<kind>: message"; any other text is the tool refusing: rejected
    assert error("not_found: no order 7") == (ToolErrorKind.NOT_FOUND, "no order 7")
    assert error("quota exceeded") == (ToolErrorKind.REJECTED, "quota exceeded")
    assert error("Error: boom") == (ToolErrorKind.REJECTED, "Error: boom")
    assert error("duplicate: twice", {"kind": "duplicate"}) == (ToolErrorKind.DUPLICATE, "twice")
    assert error("it was there already", {"error": {"kind": "duplicate"}})[0] is ToolErrorKind.DUPLICATE


def test_the_connection_never_holds_a_secret():
    with pytest.raises(ValidationError, match="credentials"):
        McpServer(url="https://user:token@example.com/mcp")
    with pytest.raises(ValidationError, match="names only"):
        McpServer(command=["srv"], env=["TOKEN=abc"])
    with pytest.raises(ValidationError, match="exactly one"):
        McpServer(command=["srv"], url="http://h/mcp")
    with pytest.raises(ValidationError, match="needs `mcp`"):
        Environment(id="x", tools=_environment(McpServer(url="http://h/mcp")).tools, backend=BackendKind.MCP)


def test_a_server_that_cannot_start_here_is_refused_before_anything_starts(monkeypatch):
    monkeypatch.delenv("TOY_TOKEN", raising=False)
    with pytest.raises(ConfigError, match="TOY_TOKEN"):
        mcp_backend(_environment(McpServer(command=stdio_command(), env=["TOY_TOKEN"])))
    with pytest.raises(ConfigError, match="'no-such-mcp-server' was not found"):
        mcp_backend(_environment(McpServer(command=["no-such-mcp-server"])))
    with pytest.raises(ConfigError, match="not mcp"):
        mcp_backend(_environment(McpServer(url="http://h/mcp")).model_copy(update={"backend": BackendKind.LLM}))


# ---------------------------------------------------------------------------------------------------------------
# live


def test_listing_follows_every_page(server):
    listing = list_server_tools(server)
    assert [t["name"] for t in listing.tools] == [t.name for t in TOOLS]
    assert listing.pages == 4 and listing.server_name == "toy-notebook" and listing.server_version == "1.0"


def test_calls_answer_like_the_server_with_typed_errors_and_isolated_episodes(server):
    backend = mcp_backend(_environment(server))
    first, second = backend.reset(), backend.reset()
    try:
        assert first.call("add_note", {"text": "buy milk"}) == Observation(ok=True, result={"id": 1, "count": 1})
        assert first.call("add_note", {"text": "call Ann", "tag": "work"}).result == {"id": 2, "count": 2}
        # the other episode is another MCP session: it sees none of the first one's notes
        assert second.call("list_notes", {}).result == {"notes": []}
        assert asyncio.run(second.acall("add_note", {"text": "own"})).result == {"id": 1, "count": 1}
        assert first.call("list_notes", {"tag": "work"}).result == {
            "notes": [{"id": 2, "text": "call Ann", "tag": "work"}]
        }
        assert first.call("word_count", {"text": "three short words"}).result == {"words": 3}  # JSON text, no schema

        missing = first.call("delete_note", {"id": 99})
        assert missing.error is not None and (missing.error.kind, missing.error.message) == (
            ToolErrorKind.REJECTED,
            "no note with id 99",
        )
        assert first.call("explode", {}).error.kind is ToolErrorKind.REJECTED
        # arguments are refused against the recorded schema before the server sees them, like replay and llm
        refused = first.call("add_note", {"text": "x", "tag": "office"})
        assert refused.error is not None and refused.error.kind is ToolErrorKind.INVALID_ARGUMENTS
        assert first.call("no_such_tool", {}).error.kind is ToolErrorKind.UNKNOWN_TOOL
        assert first.call("list_notes", {}).result["notes"][-1]["id"] == 2  # nothing above reached the notebook
        assert first.state() == {} and second.state() == {}  # MCP has no state API
    finally:
        first.close()
        second.close()
    assert first.call("list_notes", {}).error.kind is ToolErrorKind.UNAVAILABLE  # closed: an answer, not a hang


def test_variables_reach_the_server_by_name(monkeypatch):
    monkeypatch.setenv("TOY_TOKEN", "s3cret-value")
    episode = mcp_backend(_environment(McpServer(command=stdio_command(), env=["TOY_TOKEN"]))).reset()
    try:
        assert episode.call("token_length", {}).result == {"length": len("s3cret-value")}
    finally:
        episode.close()


def test_a_server_that_dies_mid_session_gives_a_typed_error(server):
    backend = McpEnvironment(_environment(server))
    doomed = backend.reset()
    try:
        assert doomed.call("add_note", {"text": "a"}).ok
        if server.url is not None:
            # the thread's server cannot die without taking the test with it: that case is a process, below
            return
        died = doomed.call("crash", {})
        assert died.error is not None and died.error.kind is ToolErrorKind.UNAVAILABLE
        assert "closed the connection" in died.error.message
        again = asyncio.run(doomed.acall("list_notes", {}))
        assert again.error is not None and again.error.kind is ToolErrorKind.UNAVAILABLE
        fresh = backend.reset()  # the next episode starts a new server
        try:
            assert fresh.call("list_notes", {}).result == {"notes": []}
        finally:
            fresh.close()
    finally:
        doomed.close()


def _wait_for_port(port: int, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and process.poll() is None:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.02)
    raise AssertionError("the toy MCP server process did not start listening")


def test_an_http_server_process_that_dies_gives_a_typed_error():
    port = free_port()
    process = subprocess.Popen([*stdio_command(), "--http", str(port)], stderr=subprocess.DEVNULL)
    try:
        _wait_for_port(port, process)
        backend = mcp_backend(_environment(McpServer(url=f"http://127.0.0.1:{port}/mcp", timeout_s=10)))
        first, second = backend.reset(), backend.reset()
        assert first.call("add_note", {"text": "a"}).ok and second.call("list_notes", {}).ok
        died = first.call("crash", {})
        assert died.error is not None and died.error.kind is ToolErrorKind.UNAVAILABLE
        assert process.wait(10) == 3
        after = second.call("list_notes", {})  # the other session lost its server too
        assert after.error is not None and after.error.kind is ToolErrorKind.UNAVAILABLE
        first.close()
        second.close()
    finally:
        process.kill()
        process.wait()


def test_a_stalled_call_answers_unavailable_within_the_timeout_and_the_session_goes_on():
    backend = mcp_backend(_environment(McpServer(command=stdio_command(), timeout_s=0.5)), start_timeout_s=10)
    episode = backend.reset()
    try:
        assert episode.call("list_notes", {}).ok  # the server is up (its start is not part of the stall)
        stalled = episode.call("stall", {})
        assert stalled.error is not None and stalled.error.kind is ToolErrorKind.UNAVAILABLE
        assert "did not answer within 0.5 s" in stalled.error.message
        assert episode.call("add_note", {"text": "still here"}).ok
    finally:
        episode.close()


def test_a_server_that_never_starts_says_why():
    failing = [sys.executable, "-c", "import sys; print('config file missing', file=sys.stderr); sys.exit(2)"]
    episode = mcp_backend(_environment(McpServer(command=failing, timeout_s=10))).reset()
    try:
        observation = episode.call("list_notes", {})
        assert observation.error is not None and observation.error.kind is ToolErrorKind.UNAVAILABLE
        assert "did not start" in observation.error.message and "config file missing" in observation.error.message
    finally:
        episode.close()
    with pytest.raises(ConfigError, match="config file missing"):
        list_server_tools(McpServer(command=failing, timeout_s=10))


def test_an_episode_starts_its_server_only_when_called(tmp_path):
    marker = tmp_path / "started"
    starts = [sys.executable, "-c", f"open({str(marker)!r}, 'w').close()"]
    backend = mcp_backend(_environment(McpServer(command=starts, timeout_s=10)))
    backend.reset().close()  # generation resets and drops many episodes without a call: no process for those
    assert not marker.exists()
    episode = backend.reset()
    try:
        assert episode.call("list_notes", {}).error.kind is ToolErrorKind.UNAVAILABLE  # it exits at once
    finally:
        episode.close()
    assert marker.exists()


def test_without_the_sdk_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "mcp", None)
    with pytest.raises(ConfigError, match=r"pip install 'toolwild\[mcp\]'"):
        mcp_backend(_environment(McpServer(command=stdio_command())))
