"""Any toolwild environment as an MCP server (``toolwild serve mcp``): one isolated episode per MCP session.

Built on the official SDK's **low-level** ``Server`` (``mcp`` 2.3), not its high-level ``MCPServer``, for three
reasons: our tools are data (a name, a description and a JSON schema), not Python functions whose signatures
``MCPServer`` would turn into schemas; the low-level server lets every episode live in the per-connection state of
its MCP session and end with it; and it leaves the outcome of a call to us, where ``MCPServer`` turns *any*
exception of a tool into an ``isError`` result, which would disguise a toolwild bug as the tool's answer.

What a client sees:

- **tools**: name, description, ``inputSchema`` = the tool's parameter schema, ``outputSchema`` when the tool
  declares an object result, and annotations from the effect (a read is ``readOnlyHint``; a write is
  ``destructiveHint`` and not ``idempotentHint``) with a title made from the name;
- **results**: the observation's result as JSON text (and as ``structuredContent`` when it is an object); a tool's
  own failure (unknown tool, invalid arguments, a rejected write ...) is an ``isError`` result whose text starts
  with the typed kind (``rejected: beancount rejected ...``) and whose ``structuredContent`` is
  ``{"ok": false, "error": {"kind", "message"}}``; a failure of toolwild itself (a bug, or a simulator model that
  cannot be reached) is a protocol error, logged on the server, never a tool result;
- **sessions**: every MCP session gets its own episode (``backend.reset(seed=...)``), created at its first tool
  call and closed when the session ends, so two sessions never see each other's writes (except with
  ``--ledger FILE --write-through``, where every session works on the user's file itself). Over stdio the process
  serves one client: one session, whichever protocol era the client speaks. Over streamable HTTP a session is the
  2025 handshake's ``Mcp-Session-Id``; the 2026-07-28 protocol has no sessions, so this server advertises the
  handshake versions only (``mcp`` clients in their default ``auto`` mode fall back to the handshake), and a tool
  call made without a session is refused with a protocol error that says why (a fresh episode per request would
  silently drop every write).

``--record FILE`` appends one :class:`RecordedCall` per call served, so a run of an agent that talks MCP can be
scored from what happened.

Where the SDK falls short of JSON-RPC 2.0 this module fills in: a stdin line that is not JSON is answered with a
parse error (``-32700``, ``"id": null``) and logged, where the SDK drops it silently; an invalid-params error
(``-32602``) names the offending field, where the SDK says only "Invalid request parameters"; and when the client
closes stdin, every request already read is answered before the process exits, where the SDK cancels them (see
:func:`run_stdio`).
"""

from __future__ import annotations

import ipaddress
import json
import logging
import re
import sys
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from toolwild.core.tool import Effect, Tool
from toolwild.envs.base import EnvironmentBackend, Episode, Observation
from toolwild.errors import ConfigError, ToolwildError
from toolwild.llm.redact import redact_text

try:  # the optional extra `mcp`: toolwild works without it, and `serve mcp` says how to get it
    import anyio
    import mcp_types
    from mcp.server.lowlevel import Server
    from mcp.shared.exceptions import MCPError
    from mcp.shared.message import SessionMessage
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
except ImportError:  # pragma: no cover - exercised by the wheel check without extras
    mcp_types = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from anyio.abc import ObjectReceiveStream, ObjectSendStream
    from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
    from starlette.applications import Starlette

__all__ = [
    "DEFAULT_PORT",
    "MCP_PATH",
    "McpEnvironmentServer",
    "RecordedCall",
    "Transport",
    "call_result",
    "check_host",
    "http_url",
    "invalid_params_error",
    "is_loopback",
    "log_to_stderr",
    "mcp_tool",
    "require_mcp",
    "run_http",
    "run_stdio",
    "tool_title",
]

logger = logging.getLogger(__name__)

Transport = Literal["stdio", "http"]
DEFAULT_PORT = 8766
"""The HTTP port when none is given (``toolwild model serve`` uses 8765)."""
MCP_PATH = "/mcp"
"""Where the streamable-HTTP endpoint is mounted."""
_STATE_KEY = "toolwild.session"
"""The key of our session in the SDK's per-connection state."""
_SHUTDOWN_GRACE_S = 1.0
"""On Ctrl-C, how long open HTTP streams may finish before they are cancelled (a client may hold one for hours)."""


def require_mcp() -> None:
    """Fail with an install hint when the optional MCP SDK is missing."""
    if mcp_types is None:
        raise ConfigError("serving MCP needs the official MCP SDK: pip install 'toolwild[mcp]'")


class RecordedCall(BaseModel):
    """One line of ``--record FILE``: a tool call served, in the order it ran within its session."""

    model_config = ConfigDict(extra="forbid")

    session: int
    """The MCP session, numbered from 1 in the order the sessions made their first call."""
    seq: int
    """The call's number within its session, from 1."""
    tool: str
    arguments: dict[str, Any]
    observation: dict[str, Any]
    """``{"ok": true, "result": ...}`` or ``{"ok": false, "error": {"kind", "message"}}``: what the agent saw."""


# ---------------------------------------------------------------------------------------------- tools and results


def tool_title(name: str) -> str:
    """A human-readable title from a tool name: ``add_transaction`` and ``addTransaction`` -> ``Add transaction``."""
    words = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name).replace("_", " ").replace("-", " ").split()
    text = " ".join(w if w.isupper() and len(w) > 1 else w.lower() for w in words)
    return text[:1].upper() + text[1:] if text else name


def _annotations(tool: Tool) -> mcp_types.ToolAnnotations:
    """The hints MCP clients use to decide what needs the user's confirmation: from the tool's declared effect (a
    tool without one, e.g. imported from a published list, gets only its title: nothing is claimed)."""
    title = tool_title(tool.name)
    if tool.effect is Effect.READ:
        return mcp_types.ToolAnnotations(title=title, read_only_hint=True)
    if tool.effect is Effect.WRITE:
        return mcp_types.ToolAnnotations(
            title=title, read_only_hint=False, destructive_hint=True, idempotent_hint=False
        )
    return mcp_types.ToolAnnotations(title=title)


def _object_schema(schema: dict[str, Any] | None) -> dict[str, Any] | None:
    """An output schema MCP accepts: the handshake versions require an object at the root, so a tool that returns
    a list or a number declares none (its result still comes as text)."""
    return schema if isinstance(schema, dict) and schema.get("type") == "object" else None


def mcp_tool(tool: Tool) -> mcp_types.Tool:
    """A toolwild tool as an MCP tool listing."""
    require_mcp()
    parameters = dict(tool.parameters) if tool.parameters else {}
    parameters.setdefault("type", "object")  # MCP requires an object root; a bare {"properties": ...} means one
    return mcp_types.Tool(
        name=tool.name,
        title=tool_title(tool.name),
        description=tool.description or None,
        input_schema=parameters,
        output_schema=_object_schema(tool.returns),
        annotations=_annotations(tool),
    )


def _observation_dict(observation: Observation) -> dict[str, Any]:
    """What the agent is shown, as a dict: the same JSON as :meth:`Observation.to_text`."""
    return json.loads(observation.to_text())


def call_result(observation: Observation) -> mcp_types.CallToolResult:
    """An observation as an MCP tool result: the result as JSON text, or an ``isError`` result whose text starts
    with the error kind (an agent reads the text; a program reads ``structuredContent``)."""
    require_mcp()
    if observation.ok:
        text = json.dumps(observation.result, ensure_ascii=False)
        structured = observation.result if isinstance(observation.result, dict) else None
        return mcp_types.CallToolResult(
            content=[mcp_types.TextContent(text=text)], structured_content=structured, is_error=False
        )
    error = observation.error
    kind, message = (error.kind.value, error.message) if error is not None else ("error", "the call failed")
    return mcp_types.CallToolResult(
        content=[mcp_types.TextContent(text=f"{kind}: {message}")],
        structured_content={"ok": False, "error": {"kind": kind, "message": message}},
        is_error=True,
    )


# ---------------------------------------------------------------------------------------------- sessions


class _Session:
    """One MCP session's episode, its call counter, and the lock that runs its calls one at a time (an episode is
    a sequence of calls: two calls of one session sent at once run in the order they arrive)."""

    def __init__(self, number: int) -> None:
        self.number = number
        self.episode: Episode | None = None
        self.calls = 0
        self.lock = anyio.Lock()

    def close(self) -> None:
        if self.episode is not None:
            episode, self.episode = self.episode, None
            episode.close()


def _server_failure(what: str, exc: BaseException) -> MCPError:
    """The protocol error for a failure of toolwild itself (never a tool result: the agent did nothing wrong)."""
    if isinstance(exc, ToolwildError):
        logger.error("%s: %s", what, redact_text(str(exc)))
        return MCPError(code=mcp_types.INTERNAL_ERROR, message=f"{what}: {redact_text(str(exc))}")
    logger.exception("%s: a bug in toolwild", what)
    return MCPError(
        code=mcp_types.INTERNAL_ERROR,
        message=f"{what}: toolwild failed ({type(exc).__name__}; a bug, see the server's log)",
    )


_BARE_INVALID_PARAMS = "Invalid request parameters"
"""The SDK's whole message for every invalid-params error (it keeps pydantic's text, which quotes the client's
input, off the wire)."""
_MAX_FIELDS = 5
"""Invalid fields named in one error's message (``data.errors`` lists up to 20)."""


def _field_path(loc: tuple[int | str, ...]) -> str:
    """A pydantic error location as a path into the request: ``params.arguments``, ``params.items[0]``."""
    parts = list(loc)
    if not parts or parts[0] != "params":  # a handler's own params model: its locations start inside params
        parts.insert(0, "params")
    path = ""
    for part in parts:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path


def invalid_params_error(exc: ValidationError) -> MCPError:
    """A ``-32602`` that names every invalid field: in the message (``params.name: Field required``) and as
    ``data.errors`` (``[{"field", "message"}]``). pydantic's wording is kept, its ``input`` (the client's value,
    possibly large or private) is not."""
    errors = [{"field": _field_path(tuple(e["loc"])), "message": e["msg"]} for e in exc.errors(include_url=False)]
    shown = "; ".join(f"{e['field']}: {e['message']}" for e in errors[:_MAX_FIELDS])
    more = f"; and {len(errors) - _MAX_FIELDS} more" if len(errors) > _MAX_FIELDS else ""
    return MCPError(
        code=mcp_types.INVALID_PARAMS,
        message=f"{_BARE_INVALID_PARAMS}: {shown}{more}",
        data={"errors": errors[:20]},
    )


class _NamedInvalidParams:
    """Server middleware: an invalid-params error says which field and why.

    The SDK validates a request's params against its models and answers any failure with a bare "Invalid request
    parameters" (``data: ""``), so a client cannot tell ``params.name`` missing from ``params.arguments`` not being
    an object. This wraps every request (validation happens inside ``call_next``) and re-raises the failure with
    the fields named; the one other bare ``-32602``, a request before ``initialize``, gets its reason."""

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        try:
            return await call_next(ctx)
        except ValidationError as exc:
            if ctx.request_id is None:  # a notification gets no answer; the SDK logs and drops it
                raise
            raise invalid_params_error(exc) from None
        except MCPError as exc:
            error = exc.error
            if error.code == mcp_types.INVALID_PARAMS and error.message == _BARE_INVALID_PARAMS and not error.data:
                raise MCPError(
                    code=mcp_types.INVALID_PARAMS,
                    message=f"{_BARE_INVALID_PARAMS}: {ctx.method} before the session is initialized: send "
                    "initialize first",
                    data={"errors": [{"field": "method", "message": "the session is not initialized"}]},
                ) from None
            raise


class McpEnvironmentServer:
    """An environment served over MCP: the tool listing, the calls, one episode per session, the record.

    Args:
        backend: the environment; its episodes must be isolated (every toolwild backend's are).
        seed: the seed of every episode (each session starts from the same state).
        transport: ``stdio`` (the process serves one client, so one session) or ``http`` (a session per
            ``Mcp-Session-Id``).
        record: append a :class:`RecordedCall` line here per call served.
        name: the server's name in the MCP handshake (default: ``toolwild-<environment id>``).
        on_close: awaited once when the server stops (e.g. closing the simulator's model client).
    """

    def __init__(
        self,
        backend: EnvironmentBackend,
        *,
        seed: int = 0,
        transport: Transport = "stdio",
        record: Path | None = None,
        name: str | None = None,
        on_close: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        require_mcp()
        self.backend = backend
        self.seed = seed
        self.transport: Transport = transport
        self.name = name or f"toolwild-{backend.id}"
        self._listing = [mcp_tool(t) for t in backend.tools]
        self._record: IO[str] | None = _open_record(record) if record is not None else None
        self._on_close = on_close
        self._sessions_made = 0
        self.open_sessions: dict[int, _Session] = {}
        """Sessions whose episode is open, by number (tests and logs read it)."""
        self._stdio_session: _Session | None = None
        self.server = self._build()

    # ------------------------------------------------------------------ the SDK server
    def _build(self) -> Server[Any]:
        server: Server[Any] = Server(
            self.name,
            version=_version(),
            instructions=f"The tools of the toolwild environment {self.backend.id!r}. Every MCP session has its own "
            "episode, started from the environment's initial state.",
            lifespan=self._lifespan,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
        )
        if self.transport == "http":
            server.add_request_handler("server/discover", mcp_types.RequestParams, self._discover_handshake_only)
        server.middleware.append(_NamedInvalidParams())  # innermost: the SDK's tracing still sees the failure
        return server

    @asynccontextmanager
    async def _lifespan(self, _: Server[Any]) -> AsyncIterator[dict[str, Any]]:
        """On the way out, close what is still open: episodes, the record, the simulator's client."""
        try:
            yield {}
        finally:
            for session in list(self.open_sessions.values()):
                self._end(session)
            if self._record is not None:
                self._record.close()
                self._record = None
            if self._on_close is not None:
                await self._on_close()

    async def _discover_handshake_only(
        self, ctx: ServerRequestContext[Any], params: mcp_types.RequestParams
    ) -> mcp_types.DiscoverResult:
        """Over HTTP, advertise the handshake versions only: their sessions are where episodes live (a client in
        ``auto`` mode reads this as a legacy server and shakes hands)."""
        return mcp_types.DiscoverResult(
            supported_versions=list(HANDSHAKE_PROTOCOL_VERSIONS),
            capabilities=self.server.get_capabilities(),
            instructions=self.server.instructions,
        )

    async def _list_tools(
        self, ctx: ServerRequestContext[Any], params: mcp_types.PaginatedRequestParams | None
    ) -> mcp_types.ListToolsResult:
        return mcp_types.ListToolsResult(tools=self._listing)

    async def _call_tool(
        self, ctx: ServerRequestContext[Any], params: mcp_types.CallToolRequestParams
    ) -> mcp_types.CallToolResult:
        session = self._session_of(ctx)
        arguments = dict(params.arguments or {})
        async with session.lock:
            episode = self._episode(session)
            try:
                observation = await episode.acall(params.name, arguments)
            except Exception as exc:
                raise _server_failure(f"session {session.number}, {params.name}", exc) from exc
            session.calls += 1
            self._write_record(
                RecordedCall(
                    session=session.number,
                    seq=session.calls,
                    tool=params.name,
                    arguments=arguments,
                    observation=_observation_dict(observation),
                )
            )
        return call_result(observation)

    # ------------------------------------------------------------------ sessions
    def _session_of(self, ctx: ServerRequestContext[Any]) -> _Session:
        """The session a request belongs to, made at its first call: the process's one client over stdio; over
        HTTP the handshake connection (its end, however it comes, closes the episode)."""
        if self.transport == "stdio":
            if self._stdio_session is None:
                self._stdio_session = self._new_session()
            return self._stdio_session
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            raise MCPError(
                code=mcp_types.INVALID_REQUEST,
                message="this server keeps one episode per MCP session, and the 2026-07-28 protocol has no sessions "
                "over HTTP: connect with the initialize handshake (an mcp Client in mode 'auto' or 'legacy'), or "
                "over stdio",
            )
        connection = _connection(ctx)
        session = connection.state.get(_STATE_KEY)
        if session is None:
            session = self._new_session()
            connection.state[_STATE_KEY] = session
            connection.exit_stack.callback(self._end, session)
        return session

    def _new_session(self) -> _Session:
        self._sessions_made += 1
        return _Session(self._sessions_made)

    def _episode(self, session: _Session) -> Episode:
        if session.episode is None:
            try:
                session.episode = self.backend.reset(seed=self.seed)
            except Exception as exc:
                raise _server_failure(f"session {session.number}: starting its episode", exc) from exc
            self.open_sessions[session.number] = session
            logger.info("session %d: episode started (seed %d)", session.number, self.seed)
        return session.episode

    def _end(self, session: _Session) -> None:
        """Close a session's episode (idempotent: the connection's teardown and the server's may both call it)."""
        if self.open_sessions.pop(session.number, None) is None:
            return
        try:
            session.close()
        except Exception:  # a failing close must not stop the others from closing
            logger.exception("session %d: closing its episode failed", session.number)
        logger.info("session %d: ended after %d call(s)", session.number, session.calls)

    def _write_record(self, line: RecordedCall) -> None:
        """Append and flush at once: a server killed mid-run keeps every call it answered."""
        if self._record is None:
            return
        self._record.write(line.model_dump_json() + "\n")
        self._record.flush()

    # ------------------------------------------------------------------ transports
    def http_app(self, *, host: str = "127.0.0.1") -> Starlette:
        """The streamable-HTTP ASGI app, at :data:`MCP_PATH` (its lifespan runs the sessions: serve it with the
        lifespan on). On a loopback host the SDK also refuses requests whose Host or Origin header is not loopback,
        which stops a web page from reaching the server through DNS rebinding."""
        if self.transport != "http":
            raise ConfigError("http_app needs a server made with transport='http'")
        return self.server.streamable_http_app(streamable_http_path=MCP_PATH, host=host)


def _open_record(path: Path) -> IO[str]:
    """The record file, opened for appending before anything is served (a path that cannot be written fails now,
    not at the first call)."""
    try:
        return path.open("a", encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"--record {path}: cannot write it ({exc.strerror or exc})") from None


def _connection(ctx: ServerRequestContext[Any]) -> Any:
    """The SDK's per-connection object of a request (``state`` and ``exit_stack`` live there).

    Why through a private attribute: in ``mcp`` 2.3 the low-level handlers get a ``ServerRequestContext`` whose
    ``session`` wraps the connection, and the public ``Context.connection`` is not built for them yet (the SDK's
    "Context rework", TODO L54). This is the one place that reaches it, and the HTTP tests fail if it moves.
    """
    connection = getattr(ctx.session, "_connection", None)
    if connection is None or not hasattr(connection, "state") or not hasattr(connection, "exit_stack"):
        raise RuntimeError("this mcp SDK version does not expose the per-connection state toolwild keeps episodes in")
    return connection


def _version() -> str:
    from toolwild._version import __version__

    return __version__


class _StdioRelay:
    """Between the SDK's stdio transport and its server: answers lines that are not JSON-RPC, and holds the end of
    input back until every request already read has been answered.

    Why: the SDK's transport hands a line it cannot decode to the server as an exception, which the server drops
    without a word (JSON-RPC 2.0 wants an error response: ``-32700`` or ``-32600``); and at the end of stdin the
    server cancels the requests still running, so a client that writes its requests and closes stdin (``echo ... |
    toolwild serve mcp``) gets no answers. Here the server sees the end of input only once nothing it read is
    unanswered: a request leaves the count when its response or error is written, or when the client cancels it
    (``notifications/cancelled``: the SDK never answers a cancelled request).
    """

    def __init__(
        self, wire_in: ObjectReceiveStream[Any], wire_out: ObjectSendStream[Any], server: McpEnvironmentServer
    ) -> None:
        self._wire_in = wire_in
        self._wire_out = wire_out
        self._server = server
        self._unanswered: Counter[Any] = Counter()
        self._drained: anyio.Event | None = None
        """Set once stdin has ended and every request read has been answered."""

    async def run(self) -> None:
        to_server, server_in = anyio.create_memory_object_stream[Any](0)
        server_out, from_server = anyio.create_memory_object_stream[Any](0)
        sdk = self._server.server
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._inbound, to_server)
            tg.start_soon(self._outbound, from_server)
            await sdk.run(server_in, server_out, sdk.create_initialization_options())

    async def _inbound(self, to_server: ObjectSendStream[Any]) -> None:
        """Every stdin line, in order: a message goes to the server, anything else is answered here."""
        line = 0
        async with to_server:
            async for item in self._wire_in:
                line += 1
                if isinstance(item, Exception):
                    await self._refuse(item, line)
                    continue
                message = item.message
                if isinstance(message, mcp_types.JSONRPCRequest):
                    self._unanswered[message.id] += 1
                elif isinstance(message, mcp_types.JSONRPCNotification) and message.method == "notifications/cancelled":
                    self._settle((message.params or {}).get("requestId"))
                await to_server.send(item)
            waiting = sum(self._unanswered.values())
            if waiting:
                logger.info("stdin closed: answering the %d request(s) already read before exiting", waiting)
                self._drained = anyio.Event()
                await self._drained.wait()

    async def _outbound(self, from_server: ObjectReceiveStream[Any]) -> None:
        """Every message the server writes, to stdout; a response or error settles its request."""
        async with self._wire_out, from_server:
            async for item in from_server:
                await self._wire_out.send(item)
                message = item.message
                if isinstance(message, mcp_types.JSONRPCResponse | mcp_types.JSONRPCError):
                    self._settle(message.id)

    def _settle(self, request_id: Any) -> None:
        if request_id is None or self._unanswered[request_id] <= 0:
            return
        self._unanswered[request_id] -= 1
        if self._unanswered[request_id] == 0:
            del self._unanswered[request_id]
        if self._drained is not None and not self._unanswered:
            self._drained.set()

    async def _refuse(self, exc: Exception, line: int) -> None:
        """Answer a line that is not a JSON-RPC message (a blank line is skipped, as between messages), and log it.

        JSON-RPC 2.0: not JSON is ``-32700`` Parse error with ``"id": null`` (no id can be read); JSON that is not a
        valid message is ``-32600`` Invalid Request, with its ``id`` when it has a usable one, else null. Neither
        quotes the line back (it may be anything, and the log is read by people)."""
        errors = exc.errors(include_url=False) if isinstance(exc, ValidationError) else []
        first = errors[0] if errors else {}
        if first.get("type") == "json_invalid":
            raw = first.get("input")
            if isinstance(raw, str | bytes) and not raw.strip():
                return
            code, what = mcp_types.PARSE_ERROR, "Parse error: the line is not JSON"
            detail = str(first.get("msg", "")).removeprefix("Invalid JSON: ")
        else:
            code, what = mcp_types.INVALID_REQUEST, "Invalid Request: the line is JSON but not a JSON-RPC 2.0 message"
            detail = 'an object with "jsonrpc": "2.0" and a "method" (or a "result" or "error") was expected'
        logger.warning("stdin line %d: %s (%s); answered with error %d", line, what, detail, code)
        reply = mcp_types.JSONRPCError(
            jsonrpc="2.0",
            id=_request_id(errors) if code == mcp_types.INVALID_REQUEST else None,
            error=mcp_types.ErrorData(code=code, message=f"{what} ({detail}; stdin line {line})"),
        )
        await self._wire_out.send(SessionMessage(reply))


def _request_id(errors: list[Any]) -> int | str | None:
    """The id of an invalid request when it has a usable one (pydantic reports the decoded object as the input of
    each union member's error), else None: JSON-RPC answers an Invalid Request with its id when it can be read."""
    for error in errors:
        value = error.get("input")
        if isinstance(value, dict):
            rid = value.get("id")
            if isinstance(rid, int | str) and not isinstance(rid, bool):
                return rid
    return None


async def run_stdio(server: McpEnvironmentServer) -> None:
    """Serve one client over stdin/stdout until it closes stdin, then answer what it already asked and return.

    While serving, the SDK points file descriptor 1 at stderr, so nothing but protocol reaches stdout (a stray print
    goes to stderr). Between its transport and its server sits :class:`_StdioRelay`: a line that is not JSON-RPC
    gets its JSON-RPC error and a log line, and the end of stdin waits for every request read to be answered."""
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read_stream, write_stream):
        await _StdioRelay(read_stream, write_stream, server).run()


def is_loopback(host: str) -> bool:
    """Whether a host name or address only listens to this machine."""
    if host.strip().lower() == "localhost":
        return True
    with suppress(ValueError):
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    return False


def check_host(host: str, *, allow_remote: bool) -> str | None:
    """Refuse a non-loopback host unless ``allow_remote``; then return the warning to print (None on loopback).

    Raises:
        ConfigError: a non-loopback host without ``allow_remote``.
    """
    if is_loopback(host):
        return None
    if not allow_remote:
        raise ConfigError(
            f"--host {host} would accept connections from other machines, and this server has no authentication: "
            "anyone who reaches the port could call the tools (and with --write-through change your ledger). "
            "Serve on 127.0.0.1 (the default), or pass --allow-remote to do it anyway"
        )
    return (
        f"listening on {host}, reachable from other machines, with NO authentication: anyone who reaches the port "
        "can call every tool"
    )


def http_url(host: str, port: int) -> str:
    """The URL a client connects to (an IPv6 address in brackets)."""
    shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
    return f"http://{shown}:{port}{MCP_PATH}"


def run_http(app: Starlette, *, host: str, port: int, announce: Callable[[int], None]) -> None:
    """Serve the app with uvicorn until Ctrl-C/SIGTERM; ``announce(port)`` once it listens (``port`` 0 picks a free
    one, so the URL is only known then).

    On the way out, open streams (a connected client keeps one) get :data:`_SHUTDOWN_GRACE_S`, then are cancelled;
    the sessions end, closing their episodes. A stream cancelled that way is an ordinary stop, not an error, so it
    ends quietly instead of as uvicorn's "Exception in ASGI application" traceback.
    """
    import asyncio

    import uvicorn

    class _Announcing(uvicorn.Server):
        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets=sockets)
            if self.started and self.servers:
                announce(self.servers[0].sockets[0].getsockname()[1])

    async def quiet_on_stop(scope: Any, receive: Any, send: Any) -> None:
        """The app, except that a stream the stop interrupts ends as an ordinary end of response."""
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        sent = {"start": False, "end": False}

        async def tracked(message: Any) -> None:
            if message["type"] == "http.response.start":
                sent["start"] = True
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                sent["end"] = True
            await send(message)

        try:
            await app(scope, receive, tracked)
        except asyncio.CancelledError:
            if not server.should_exit:
                raise
        if server.should_exit and not sent["end"]:
            with suppress(Exception):  # the client may be gone already: nothing left to tell it
                if not sent["start"]:
                    await send({"type": "http.response.start", "status": 503, "headers": []})
                await send({"type": "http.response.body", "body": b"", "more_body": False})

    config = uvicorn.Config(
        quiet_on_stop,
        host=host,
        port=port,
        log_level="warning",
        lifespan="on",
        timeout_graceful_shutdown=_SHUTDOWN_GRACE_S,
    )
    server = _Announcing(config)
    with suppress(KeyboardInterrupt):  # uvicorn re-raises Ctrl-C after its shutdown: already handled
        server.run()


def log_to_stderr(level: int = logging.INFO) -> None:
    """Session lines (started, ended) and failures on stderr: over stdio, stdout carries only the protocol."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s", "%H:%M:%S"))
    logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = False
