"""A tiny MCP server for the tests, written with the official SDK (``mcp`` 2.x, low-level ``Server``).

It is a notebook service: ``add_note`` (a write, with an output schema), ``list_notes`` (read-only, output schema),
``delete_note`` (destructive; an unknown id is a tool error), ``word_count`` (no output schema, no annotations: its
answer is JSON text only), ``token_length`` (the length of the ``TOY_TOKEN`` variable it was started with),
``explode`` (always fails: a tool error), ``stall`` (never answers: for timeouts) and ``crash`` (the server process
dies mid-call, ``os._exit``). Tools are listed two per page, so a client that does not follow ``nextCursor`` misses
some.

State is kept per MCP session: one per process over stdio, one per ``Mcp-Session-Id`` over streamable HTTP, so two
sessions never see each other's notes (the isolation the ``mcp`` backend promises).

Run it as a script over stdio (``python mcp_toy_server.py [--bad-schema]``), as a streamable-HTTP server process
(``--http PORT``: ``crash`` then kills the whole server), or serve it over streamable HTTP in a thread of the test
with :func:`serve_http_in_thread`. ``--bad-schema`` adds a tool whose input schema is not JSON Schema.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

__all__ = ["SCRIPT", "TOOLS", "build_server", "free_port", "serve_http_in_thread", "stdio_command"]

SCRIPT = Path(__file__).resolve()
PAGE = 2
"""Tools per ``tools/list`` page."""

_NOTE = {
    "type": "object",
    "properties": {"id": {"type": "integer"}, "text": {"type": "string"}, "tag": {"type": "string"}},
    "required": ["id", "text", "tag"],
}
TOOLS: list[types.Tool] = [
    types.Tool(
        name="add_note",
        description="Add a note to the notebook and return its id.",
        input_schema={
            "type": "object",
            "properties": {
                "text": {"type": "string", "minLength": 1},
                "tag": {"type": "string", "enum": ["work", "home"], "default": "home"},
            },
            "required": ["text"],
        },
        output_schema={
            "type": "object",
            "properties": {"id": {"type": "integer"}, "count": {"type": "integer"}},
            "required": ["id", "count"],
        },
        annotations=types.ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False),
    ),
    types.Tool(
        name="list_notes",
        description="The notes of the notebook, optionally only those of one tag.",
        input_schema={"type": "object", "properties": {"tag": {"type": "string"}}},
        output_schema={
            "type": "object",
            "properties": {"notes": {"type": "array", "items": _NOTE}},
            "required": ["notes"],
        },
        annotations=types.ToolAnnotations(title="List notes", read_only_hint=True, open_world_hint=False),
    ),
    types.Tool(
        name="delete_note",
        description="Delete a note by id.",
        input_schema={"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]},
        output_schema={"type": "object", "properties": {"deleted": {"type": "integer"}}, "required": ["deleted"]},
        annotations=types.ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True),
    ),
    types.Tool(
        name="word_count",
        description="Count the words of a text.",
        input_schema={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    ),
    types.Tool(
        name="token_length",
        description="The length of the token the server was started with (TOY_TOKEN), never the token itself.",
        input_schema={"type": "object", "properties": {}},
        output_schema={"type": "object", "properties": {"length": {"type": "integer"}}, "required": ["length"]},
        annotations=types.ToolAnnotations(read_only_hint=True),
    ),
    types.Tool(
        name="explode",
        description="A tool that always fails.",
        input_schema={"type": "object", "properties": {}},
        annotations=types.ToolAnnotations(read_only_hint=True),
    ),
    types.Tool(
        name="stall",
        description="A tool that never answers.",
        input_schema={"type": "object", "properties": {}},
        annotations=types.ToolAnnotations(read_only_hint=True),
    ),
    types.Tool(
        name="crash",
        description="Stops the server process in the middle of the call.",
        input_schema={"type": "object", "properties": {}},
    ),
]
BAD_TOOL = types.Tool(
    name="broken",
    description="A tool whose input schema is not JSON Schema.",
    input_schema={"type": "object", "properties": {"n": {"type": "integre"}}},
)

_notebooks: dict[str, dict[str, Any]] = {}
"""Notebooks by MCP session (``"stdio"`` for the one session of a stdio process)."""


def _notebook(ctx: Any) -> dict[str, Any]:
    """The calling session's notebook: per ``Mcp-Session-Id`` over HTTP, per process over stdio."""
    request = getattr(ctx, "request", None)
    key = "stdio"
    if request is not None and hasattr(request, "headers"):
        key = request.headers.get("mcp-session-id") or "stateless"
    return _notebooks.setdefault(key, {"next": 1, "notes": []})


def _result(value: dict[str, Any]) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(text=json.dumps(value))],
        structured_content=value,
    )


def _error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)


async def _call(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    args = params.arguments or {}
    book = _notebook(ctx)
    if params.name == "add_note":
        note = {"id": book["next"], "text": args["text"], "tag": args.get("tag", "home")}
        book["next"] += 1
        book["notes"].append(note)
        return _result({"id": note["id"], "count": len(book["notes"])})
    if params.name == "list_notes":
        tag = args.get("tag")
        return _result({"notes": [n for n in book["notes"] if tag is None or n["tag"] == tag]})
    if params.name == "delete_note":
        kept = [n for n in book["notes"] if n["id"] != args["id"]]
        if len(kept) == len(book["notes"]):
            return _error(f"no note with id {args['id']}")
        book["notes"] = kept
        return _result({"deleted": args["id"]})
    if params.name == "word_count":
        return types.CallToolResult(content=[types.TextContent(text=json.dumps({"words": len(args["text"].split())}))])
    if params.name == "token_length":
        return _result({"length": len(os.environ.get("TOY_TOKEN", ""))})
    if params.name == "explode":
        return _error("the notebook exploded")
    if params.name == "stall":
        await anyio.sleep_forever()
    if params.name == "crash":
        sys.stdout.flush()
        os._exit(3)
    raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {params.name}")


def build_server(*, bad_schema: bool = False) -> Server[Any]:
    """The toy server; ``bad_schema`` adds a tool whose input schema is invalid."""
    tools = [*TOOLS, BAD_TOOL] if bad_schema else list(TOOLS)

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        start = int(params.cursor) if params is not None and params.cursor else 0
        end = start + PAGE
        return types.ListToolsResult(tools=tools[start:end], next_cursor=str(end) if end < len(tools) else None)

    return Server("toy-notebook", version="1.0", on_list_tools=list_tools, on_call_tool=_call)


def stdio_command(*extra: str) -> list[str]:
    """The command that runs the toy server over stdio (this interpreter, this file)."""
    return [sys.executable, str(SCRIPT), *extra]


def free_port() -> int:
    """A port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def serve_http_in_thread(*, bad_schema: bool = False) -> Iterator[str]:
    """Serve the toy server over streamable HTTP on 127.0.0.1 in a thread; yields its URL (``.../mcp``)."""
    import uvicorn

    app = build_server(bad_schema=bad_schema).streamable_http_app()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the toy MCP server did not start")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.should_exit = True
        thread.join(5)


async def _main(bad_schema: bool) -> None:
    from mcp.server.stdio import stdio_server

    server = build_server(bad_schema=bad_schema)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def _serve_http(port: int) -> None:
    import uvicorn

    uvicorn.run(build_server().streamable_http_app(), host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    if "--http" in sys.argv[1:]:  # python mcp_toy_server.py --http PORT: a server process a test can see die
        _serve_http(int(sys.argv[sys.argv.index("--http") + 1]))
    else:
        anyio.run(_main, "--bad-schema" in sys.argv[1:])
