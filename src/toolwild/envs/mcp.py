"""The ``mcp`` backend: tools answered by a live MCP server, one server session per episode.

An environment imported with ``toolwild import mcp`` keeps the server's tools and how to reach it
(:class:`~toolwild.core.environment.McpServer`). Each episode (:meth:`McpEnvironment.reset`) has its own session
with the official ``mcp`` client, opened by its first call: a new process for a stdio server, a new streamable-HTTP
session (its own ``Mcp-Session-Id``) for a URL. ``episode.close()`` ends it (the process is stopped, the HTTP session
deleted). The client connects with
the initialize handshake first, because that is the protocol era that has sessions a server can keep state in; a
server that only speaks the 2026 session-less protocol is then reached in that mode, and isolates episodes only as
far as it keeps no state between requests.

Calls:

- arguments are checked against the recorded schema first (:func:`~toolwild.envs.base.precheck`), so a call is
  refused the same way whichever backend answers it;
- a result's ``structuredContent``, else the JSON of its text content (the text itself when it is not JSON), is the
  observation's result;
- a result with ``isError`` is a typed failure: a leading ``<kind>:`` naming one of our error kinds is honoured (that
  is how ``toolwild serve mcp`` writes its errors, and a foreign server that writes ``not_found:`` means the same),
  anything else is ``rejected``: per the MCP spec such errors are the tool's own answer for the model to read and
  correct, not an outage, and ``rejected`` is the one kind that claims no particular cause;
- a server that cannot be started, dies, breaks its own output schema or does not answer within the timeout (per
  call; the server's ``timeout_s``, 30 s by default) answers ``unavailable``: the environment's fault, never a hang.

``state()`` is ``{}``: MCP has no way to read a server's state, so the state checks of a run do not apply to this
backend (and a write cannot be seen to change anything).

Threads: every episode runs its client on a private event loop in its own thread. The client's connection is an
anyio context that must be entered and left in one task of one loop, while the episode is used from the runner's
loop (``acall``), from plain code (``call``: ``toolwild env call``) or from several loops in turn; the private loop is
the one place the connection lives, and both kinds of call are submitted to it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import logging
import os
import re
import shutil
import tempfile
import threading
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AsyncExitStack
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from toolwild.core.environment import BackendKind, Environment, McpServer
from toolwild.core.tool import Tool
from toolwild.envs.base import EnvironmentBackend, Episode, Observation, ToolErrorKind, precheck
from toolwild.errors import ConfigError, MissingDependencyError, ToolwildError

if TYPE_CHECKING:
    from mcp import Client

__all__ = [
    "McpEnvironment",
    "McpEpisode",
    "McpListing",
    "error_from_text",
    "list_server_tools",
    "mcp_backend",
    "observation_from_result",
]

T = TypeVar("T")

CLOSE_TIMEOUT_S = 10.0
"""How long closing an episode may wait for the server to stop (the SDK's own shutdown is bounded at about 6 s)."""
MAX_PAGES = 1000
"""``tools/list`` pages read at most: a server whose cursor never ends cannot hang an import."""
_STDERR_TAIL = 400
_KIND = re.compile(r"^\s*([a-z_]+)\s*:\s*(.*)$", re.S)
_KINDS = {kind.value: kind for kind in ToolErrorKind}


def _require_sdk() -> None:
    """Fail with an install hint when the optional ``mcp`` extra is missing."""
    try:
        import mcp  # noqa: F401
    except ImportError as exc:
        raise MissingDependencyError("MCP environments need the official MCP SDK: pip install 'toolwild[mcp]'") from exc
    # the SDK logs connection teardown noise (a closed SSE stream ...) as tracebacks; with no handler of its own
    # Python would print them on stderr through its last-resort handler. An application's handlers still get them.
    for name in ("mcp", "client"):  # the SDK's client session logs as "client"
        sdk_logger = logging.getLogger(name)
        if not sdk_logger.handlers:
            sdk_logger.addHandler(logging.NullHandler())


class McpUnavailable(ToolwildError):
    """The server could not be reached or did not answer; the message says why in words."""


# ---------------------------------------------------------------------------------------------------------------
# results -> observations (pure)


def error_from_text(text: str, structured: Any = None) -> tuple[ToolErrorKind, str]:
    """The kind and message of a tool error: a known kind named in structured content (``{"kind": ...}`` or
    ``{"error": {"kind": ...}}``) or as the text's leading ``<kind>:``; otherwise ``rejected`` and the whole text."""
    named = None
    if isinstance(structured, dict):
        inner = structured.get("error") if isinstance(structured.get("error"), dict) else structured
        value = inner.get("kind")
        named = value if isinstance(value, str) and value in _KINDS else None
    match = _KIND.match(text)
    if match and match.group(1) in _KINDS:
        return _KINDS[named or match.group(1)], match.group(2).strip() or text.strip()
    if named is not None:
        return _KINDS[named], text.strip()
    return ToolErrorKind.REJECTED, text.strip()


def _block_value(block: Mapping[str, Any]) -> Any:
    """One content block as a JSON value: text parsed as JSON when it is JSON; other blocks summarised (an image's
    base64 data says nothing to a text agent and would flood its context)."""
    if block.get("type") == "text":
        text = str(block.get("text", ""))
        try:
            return json.loads(text)
        except ValueError:
            return text
    keep = ("type", "mimeType", "uri", "name")
    summary = {k: block[k] for k in keep if k in block}
    resource = block.get("resource")
    if isinstance(resource, dict):
        summary["resource"] = {k: resource[k] for k in ("uri", "mimeType", "text") if k in resource}
    return summary


def observation_from_result(result: Mapping[str, Any]) -> Observation:
    """An MCP ``CallToolResult`` (wire form: ``content``, ``structuredContent``, ``isError``) as an observation."""
    content = [b for b in result.get("content") or [] if isinstance(b, dict)]
    if result.get("isError"):
        text = "\n".join(str(b.get("text", "")) for b in content if b.get("type") == "text").strip()
        kind, message = error_from_text(text or "the tool failed without saying why", result.get("structuredContent"))
        return Observation.failure(kind, message)
    if result.get("structuredContent") is not None:
        return Observation(ok=True, result=result["structuredContent"])
    values = [_block_value(b) for b in content]
    return Observation(ok=True, result=values[0] if len(values) == 1 else (values or None))


# ---------------------------------------------------------------------------------------------------------------
# one client session on a private loop


def _stdio_environment(server: McpServer) -> dict[str, str]:
    """The variables the server asks for by name, with the caller's values (never written anywhere)."""
    return {name: os.environ[name] for name in server.env if name in os.environ}


def _tail(stream: IO[str] | None) -> str:
    """The last words of a stdio server on its stderr, for the message of a failure.

    Read with ``pread``: the server shares the file's offset, so seeking it would move where its next line lands.
    """
    if stream is None:
        return ""
    try:
        fd = stream.fileno()
        size = os.fstat(fd).st_size
        data = os.pread(fd, 4 * _STDERR_TAIL, max(0, size - 4 * _STDERR_TAIL))
    except (OSError, ValueError, AttributeError):  # AttributeError: no pread (Windows): no last words then
        return ""
    lines = [line for line in data.decode("utf-8", errors="replace").splitlines() if line.strip()]
    return " | ".join(lines[-4:])[-_STDERR_TAIL:]


async def _open_client(stack: AsyncExitStack, server: McpServer, errlog: IO[str] | None) -> Client:
    """A connected client: the initialize handshake (sessions), or the 2026 protocol when the server refuses it."""
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client
    from mcp.shared.exceptions import MCPError
    from mcp_types import UNSUPPORTED_PROTOCOL_VERSION

    for mode in ("legacy", "auto"):
        if server.command is not None:
            params = StdioServerParameters(
                command=server.command[0],
                args=server.command[1:],
                env=_stdio_environment(server) or None,
                cwd=server.cwd,
            )
            transport: Any = stdio_client(params, errlog=errlog) if errlog is not None else stdio_client(params)
            client = Client(transport, mode=mode, cache=None)
        else:
            client = Client(str(server.url), mode=mode, cache=None)
        try:
            return await stack.enter_async_context(client)
        except MCPError as exc:
            if mode == "legacy" and exc.code == UNSUPPORTED_PROTOCOL_VERSION:
                continue
            raise
    raise AssertionError("unreachable")  # pragma: no cover


def _describe(exc: BaseException) -> str:
    """An exception in words, one line (exception groups from anyio task groups unwrapped)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class _Session:
    """One MCP client session on a private event loop in a daemon thread: started by the first action (an episode
    that is reset and closed without a call, as generation often does, never starts a server), held open until
    :meth:`close`."""

    def __init__(self, server: McpServer, timeout_s: float, start_timeout_s: float | None = None) -> None:
        self.server = server
        self.timeout_s = timeout_s
        self.start_timeout_s = start_timeout_s if start_timeout_s is not None else timeout_s
        self._not_started = "did not start" if server.command is not None else "could not be reached"
        self._stderr: IO[str] | None = None
        self._client: Client | None = None
        self._stop: asyncio.Event | None = None
        self._failure: str | None = None
        self._closed = False
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._held: concurrent.futures.Future[None] | None = None
        self.ready: concurrent.futures.Future[None] = concurrent.futures.Future()

    def _start(self) -> asyncio.AbstractEventLoop:
        """The private loop, with the connection on its way (started once, under the lock)."""
        with self._lock:
            if self._loop is None:
                if self.server.command is not None:
                    self._stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")
                self._loop = asyncio.new_event_loop()
                self._thread = threading.Thread(target=self._loop.run_forever, name="toolwild-mcp", daemon=True)
                self._thread.start()
                self._held = asyncio.run_coroutine_threadsafe(self._hold(), self._loop)
            return self._loop

    def _unavailable(self, what: str) -> McpUnavailable:
        last = _tail(self._stderr)
        said = f"; the server's stderr ends: {last}" if last else ""
        return McpUnavailable(f"MCP server `{self.server.describe()}` {what}{said}")

    async def _hold(self) -> None:
        """Connect, then keep the connection open until asked to stop (entered and left in this one task)."""
        self._stop = asyncio.Event()
        try:
            async with AsyncExitStack() as stack:
                async with asyncio.timeout(self.start_timeout_s):
                    client = await _open_client(stack, self.server, self._stderr)
                    # every page listed once: the SDK checks each structured result against its tool's output
                    # schema, and lists the tools again on every call of a tool it has not seen listed
                    await _list_all(client)
                    self._client = client
                self.ready.set_result(None)
                await self._stop.wait()
        except TimeoutError:
            self._fail(f"{self._not_started} within {self.start_timeout_s:g} s")
        except asyncio.CancelledError:
            self._fail("was closed")
        except BaseException as exc:  # any failure of the connection: the server is unavailable
            self._fail(f"{self._not_started if not self.ready.done() else 'dropped the connection'}: {_describe(exc)}")
        finally:
            self._client = None
            if not self.ready.done():
                self.ready.set_exception(self._unavailable(self._failure or self._not_started))

    def _fail(self, what: str) -> None:
        if self._failure is None:
            self._failure = what

    async def run(self, action: Callable[[Client], Awaitable[T]]) -> T:
        """Run ``action`` on the connected client (in the private loop), bounded by the timeout.

        Raises:
            McpUnavailable: the server did not start, is gone, or did not answer in time.
        """
        from mcp.shared.exceptions import MCPError
        from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

        await asyncio.wrap_future(self.ready)  # raises McpUnavailable when it never started
        client = self._client
        if client is None:
            raise self._unavailable(self._failure or "is closed")
        try:
            # one deadline per action, whatever it waits on (a request, an HTTP connect, a re-listing)
            async with asyncio.timeout(self.timeout_s):
                return await action(client)
        except TimeoutError:
            raise self._unavailable(f"did not answer within {self.timeout_s:g} s") from None
        except MCPError as exc:
            if exc.code == REQUEST_TIMEOUT:
                raise self._unavailable(f"did not answer within {self.timeout_s:g} s") from None
            if exc.code == CONNECTION_CLOSED:
                raise self._unavailable("closed the connection (the server stopped or died)") from None
            raise

    def submit(self, action: Callable[[Client], Awaitable[T]]) -> concurrent.futures.Future[T]:
        """Schedule :meth:`run` on the private loop from any thread (the first one starts the server)."""
        if self._closed:
            future: concurrent.futures.Future[T] = concurrent.futures.Future()
            future.set_exception(McpUnavailable(f"MCP server `{self.server.describe()}`: the episode is closed"))
            return future
        return asyncio.run_coroutine_threadsafe(self.run(action), self._start())

    def wait(self, future: concurrent.futures.Future[T]) -> T:
        """The result of a submitted action, from plain (non-async) code; never waits past the bounds."""
        try:
            return future.result(timeout=self.start_timeout_s + self.timeout_s + 5)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise self._unavailable(f"did not answer within {self.timeout_s:g} s") from None

    def _request_stop(self) -> None:
        """In the private loop: a connected session stops gracefully (the process is stopped, the HTTP session
        deleted); one still connecting is cancelled rather than waited for."""
        if self._stop is not None and self.ready.done():
            self._stop.set()
        elif self._held is not None:
            self._held.cancel()

    def close(self) -> None:
        """End the session and the private loop (idempotent; bounded in time)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            loop, thread, held = self._loop, self._thread, self._held
        if loop is None or thread is None or held is None:
            return  # never started
        loop.call_soon_threadsafe(self._request_stop)
        try:
            held.result(timeout=CLOSE_TIMEOUT_S)
        except (concurrent.futures.TimeoutError, concurrent.futures.CancelledError):
            held.cancel()
        if not self.ready.done():  # cancelled before it ran: no call may wait for a start that will not come
            with contextlib.suppress(concurrent.futures.InvalidStateError):
                self.ready.set_exception(self._unavailable("was closed"))
        try:
            asyncio.run_coroutine_threadsafe(_cancel_others(), loop).result(timeout=CLOSE_TIMEOUT_S)
        except (concurrent.futures.TimeoutError, concurrent.futures.CancelledError):
            pass
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=CLOSE_TIMEOUT_S)
        if not thread.is_alive():
            loop.close()
        if self._stderr is not None:
            self._stderr.close()


async def _cancel_others() -> None:
    """Cancel what is still running on a private loop that is about to stop (calls in flight at close)."""
    me = asyncio.current_task()
    others = [task for task in asyncio.all_tasks() if task is not me]
    for task in others:
        task.cancel()
    await asyncio.gather(*others, return_exceptions=True)


# ---------------------------------------------------------------------------------------------------------------
# the backend


def _failure(exc: BaseException) -> Observation:
    """What a call answers when the client raised instead of returning a result."""
    from mcp.shared.exceptions import MCPError
    from mcp_types import INVALID_PARAMS

    if isinstance(exc, McpUnavailable):
        return Observation.failure(ToolErrorKind.UNAVAILABLE, str(exc))
    if isinstance(exc, MCPError) and exc.code == INVALID_PARAMS:
        return Observation.failure(ToolErrorKind.INVALID_ARGUMENTS, " ".join(str(exc).split()))
    if isinstance(exc, MCPError):
        message = " ".join(str(exc).split())
        return Observation.failure(ToolErrorKind.UNAVAILABLE, f"the MCP server answered error {exc.code}: {message}")
    return Observation.failure(ToolErrorKind.UNAVAILABLE, f"the MCP call failed: {_describe(exc)}")


class McpEpisode(Episode):
    """One MCP session with the server (its own process or HTTP session), open until :meth:`close`."""

    def __init__(self, backend: McpEnvironment) -> None:
        self.backend = backend
        self._session = _Session(backend.server, backend.timeout_s, backend.start_timeout_s)

    def _checked(self, name: str, arguments: Any) -> Observation | None:
        tool = precheck(self.backend.tool(name), name, arguments)
        return tool if isinstance(tool, Observation) else None

    @staticmethod
    async def _call(client: Client, name: str, arguments: dict[str, Any]) -> Observation:
        result = await client.call_tool(name, arguments)
        return observation_from_result(result.model_dump(mode="json", by_alias=True))

    def call(self, name: str, arguments: dict[str, Any]) -> Observation:
        """Execute one call from plain code (``toolwild env call``), waiting on the private loop."""
        refused = self._checked(name, arguments)
        if refused is not None:
            return refused
        try:
            return self._session.wait(self._session.submit(lambda client: self._call(client, name, arguments)))
        except Exception as exc:  # every failure of a live server is an answer, not a crash
            return _failure(exc)

    async def acall(self, name: str, arguments: dict[str, Any]) -> Observation:
        """Execute one call from async code (the runner, synth), awaiting the private loop."""
        refused = self._checked(name, arguments)
        if refused is not None:
            return refused
        future = self._session.submit(lambda client: self._call(client, name, arguments))
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            future.cancel()
            raise
        except Exception as exc:  # see call()
            return _failure(exc)

    def state(self) -> dict[str, Any]:
        """Always ``{}``: MCP offers no way to read a server's state (state checks do not apply)."""
        return {}

    def close(self) -> None:
        """End the MCP session: the stdio process is stopped, the HTTP session deleted."""
        self._session.close()


class McpEnvironment(EnvironmentBackend):
    """An imported MCP environment answered by its live server (see the module docstring).

    Args:
        environment: the tools and the server (``environment.mcp``).
        timeout_s: seconds the server may take to answer a call (default: the file's ``timeout_s``).
        start_timeout_s: seconds it may take to start (default: ``timeout_s``).

    Raises:
        ConfigError: no server recorded, a variable the server needs is not set, or its program or working
            directory is not found.
        MissingDependencyError: the ``mcp`` extra is not installed.
    """

    observable_state = False
    """MCP has no way to read a server's state: ``state()`` is ``{}``."""

    def __init__(
        self, environment: Environment, *, timeout_s: float | None = None, start_timeout_s: float | None = None
    ) -> None:
        _require_sdk()
        if environment.mcp is None:
            raise ConfigError(f"environment {environment.id!r} records no MCP server (`mcp`: a command or a url)")
        for value in (timeout_s, start_timeout_s):
            if value is not None and not value > 0:
                raise ConfigError(f"an MCP timeout must be a positive number of seconds, got {value}")
        if (problem := _runnable_problem(environment.mcp)) is not None:
            raise ConfigError(f"environment {environment.id!r}: {problem}")
        self.id = environment.id
        self.environment = environment
        self.server = environment.mcp
        self.timeout_s = float(timeout_s if timeout_s is not None else environment.mcp.timeout_s)
        self.start_timeout_s = float(start_timeout_s if start_timeout_s is not None else self.timeout_s)
        self._tools = {t.name: t for t in environment.tools}

    @property
    def tools(self) -> list[Tool]:
        """The tools recorded at import (the server is not asked again)."""
        return list(self.environment.tools)

    def tool(self, name: str) -> Tool | None:
        """A tool by name."""
        return self._tools.get(name)

    def reset(self, *, seed: int = 0) -> McpEpisode:
        """A new MCP session, opened by the episode's first call (so resetting costs nothing until then).

        The seed does not reach the server: MCP has no way to seed one.
        """
        return McpEpisode(self)


def _runnable_problem(server: McpServer) -> str | None:
    """Why a server cannot start here (a missing variable, program or folder), before anything is started."""
    missing = [name for name in server.env if name not in os.environ]
    if missing:
        return (
            f"its MCP server needs the environment variable(s) {', '.join(missing)}: set them (their values are "
            "never stored in the file)"
        )
    if server.command is None:
        return None
    if server.cwd is not None and not Path(server.cwd).is_dir():
        return f"the MCP server's working directory {server.cwd} does not exist"
    program = server.command[0]
    if os.sep in program or (os.altsep is not None and os.altsep in program):
        found = (Path(server.cwd or ".") / program).is_file()  # an absolute program ignores the folder
    else:
        found = shutil.which(program) is not None
    return None if found else f"the MCP server's program {program!r} was not found"


def mcp_backend(
    environment: Environment, *, timeout_s: float | None = None, start_timeout_s: float | None = None
) -> EnvironmentBackend:
    """The backend of an ``mcp`` environment (what the registry's ``backend_for`` calls for ``BackendKind.MCP``)."""
    if environment.backend is not BackendKind.MCP:
        raise ConfigError(f"environment {environment.id!r} is a {environment.backend.value} environment, not mcp")
    return McpEnvironment(environment, timeout_s=timeout_s, start_timeout_s=start_timeout_s)


# ---------------------------------------------------------------------------------------------------------------
# listing a server's tools (toolwild import mcp)


class McpListing(BaseModel):
    """What a server says about itself and its tools (tools in wire form, every page joined)."""

    model_config = ConfigDict(extra="forbid")

    tools: list[dict[str, Any]] = Field(default_factory=list)
    pages: int = 1
    server_name: str | None = None
    server_version: str | None = None
    protocol_version: str | None = None
    instructions: str | None = None


async def _list_all(client: Client) -> McpListing:
    tools: list[dict[str, Any]] = []
    cursor: str | None = None
    seen: set[str] = set()
    for page in range(1, MAX_PAGES + 1):
        answer = await client.list_tools(cursor=cursor)
        tools.extend(t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in answer.tools)
        cursor = answer.next_cursor
        if not cursor:
            info = client.server_info
            return McpListing(
                tools=tools,
                pages=page,
                server_name=info.name if info else None,
                server_version=(info.version or None) if info else None,
                protocol_version=client.protocol_version,
                instructions=client.instructions,
            )
        if cursor in seen:
            raise McpUnavailable(f"the server's tool listing repeats the cursor {cursor[:40]!r}: it never ends")
        seen.add(cursor)
    raise McpUnavailable(f"the server's tool listing did not end within {MAX_PAGES} pages")


def list_server_tools(server: McpServer, *, timeout_s: float | None = None) -> McpListing:
    """Connect to a server, list every tool (following ``nextCursor``), and disconnect.

    Raises:
        ConfigError: the server cannot be started or reached, or does not answer within the timeout.
        MissingDependencyError: the ``mcp`` extra is not installed.
    """
    _require_sdk()
    if (problem := _runnable_problem(server)) is not None:
        raise ConfigError(f"cannot list the tools: {problem}")
    session = _Session(server, float(timeout_s if timeout_s is not None else server.timeout_s))
    try:
        return session.wait(session.submit(_list_all))
    except McpUnavailable as exc:
        raise ConfigError(f"cannot list the tools: {exc}") from None
    except Exception as exc:  # an error answer or a broken connection, in words
        raise ConfigError(f"cannot list the tools of MCP server `{server.describe()}`: {_describe(exc)}") from None
    finally:
        session.close()
