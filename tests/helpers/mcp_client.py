"""Reaching ``toolwild serve mcp`` from the tests with the official ``mcp`` client: the server in a thread over
streamable HTTP (an ephemeral port on 127.0.0.1), or the real command as a subprocess over stdio."""

from __future__ import annotations

import contextlib
import json
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

from mcp import StdioServerParameters

from toolwild.serve.mcp_server import McpEnvironmentServer

__all__ = ["result_json", "serve_http_in_thread", "stdio_command"]


@contextlib.contextmanager
def serve_http_in_thread(server: McpEnvironmentServer) -> Iterator[str]:
    """Serve ``server`` over streamable HTTP with uvicorn in a thread (lifespan on: it runs the MCP sessions);
    yields the URL to connect to. On exit the server stops, which ends every session still open."""
    import uvicorn

    config = uvicorn.Config(
        server.http_app(), host="127.0.0.1", port=0, log_level="warning", lifespan="on", timeout_graceful_shutdown=1
    )
    uv = uvicorn.Server(config)
    thread = threading.Thread(target=uv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not uv.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the MCP test server did not start")
        time.sleep(0.01)
    port = uv.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        uv.should_exit = True
        thread.join(10)


def stdio_command(*args: str, env: dict[str, str] | None = None) -> StdioServerParameters:
    """``toolwild serve mcp ARGS`` as a subprocess the SDK's stdio client starts (the serve app's own module, so
    the test does not depend on where the lead registers the command group)."""
    return StdioServerParameters(
        command=sys.executable, args=["-m", "toolwild.cli.main", "serve", "mcp", *args], env=env
    )


def result_json(result: Any) -> Any:
    """The JSON value in a tool result's text content."""
    return json.loads(result.content[0].text)
