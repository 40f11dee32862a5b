"""An in-process fake of an OpenAI-compatible chat-completions server, driven by a script of actions.

Why a real HTTP app rather than a mocked SDK: the backend must be tested through the real ``openai`` client, so
that request mapping, error classes, headers and timeouts are the SDK's own. The app is plain ASGI (Starlette), so
tests reach it through ``httpx2.ASGITransport`` without opening sockets, and benchmarks can serve the very same
app with uvicorn on 127.0.0.1 (see :func:`serve`).

Typical use::

    fake = FakeOpenAI([Reply(text="hi"), HttpError(429, headers={"retry-after": "2"})])
    backend = fake_backend(fake)
    ...
    assert fake.calls == 2 and fake.requests[0]["model"] == "fake-model"
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx2
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from toolwild.llm.backends.openai_compat import OpenAIBackend

__all__ = [
    "Action",
    "Delay",
    "FakeOpenAI",
    "FakeToolCall",
    "HttpError",
    "RawBody",
    "Reply",
    "Script",
    "client_for",
    "fake_backend",
    "serve",
    "serve_in_thread",
]

FAKE_BASE_URL = "http://fake/v1"


@dataclass(frozen=True)
class FakeToolCall:
    """One tool call in a scripted reply; ``arguments`` is sent verbatim, so it may be invalid JSON on purpose."""

    name: str
    arguments: str = "{}"
    id: str | None = None


@dataclass(frozen=True)
class Reply:
    """A normal completion.

    ``finish_reason`` defaults to ``"tool_calls"`` when there are tool calls and ``"stop"`` otherwise; ``model``
    defaults to the model named in the request. ``usage=None`` omits the usage block entirely (some local servers
    do), and ``extra_message`` adds arbitrary fields to the message (e.g. ``{"reasoning": "..."}``).
    """

    text: str | None = "ok"
    tool_calls: tuple[FakeToolCall, ...] = ()
    usage: tuple[int, int] | None = (10, 5)
    finish_reason: str | None = None
    reasoning_content: str | None = None
    model: str | None = None
    extra_message: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class HttpError:
    """An HTTP error answer. ``body`` defaults to the OpenAI error envelope around ``message``."""

    status: int
    message: str = "error"
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Delay:
    """Wait ``seconds`` before answering with ``then`` (to provoke client timeouts)."""

    seconds: float
    then: Action | None = None


@dataclass(frozen=True)
class RawBody:
    """Send ``body`` as JSON exactly as given (malformed completions such as a body without ``choices``)."""

    body: Any
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)


Action = Reply | HttpError | Delay | RawBody
Script = Iterable[Action] | Callable[[dict[str, Any]], Action | None]


class FakeOpenAI:
    """A scripted OpenAI-compatible server; instances are ASGI apps.

    Args:
        script: the actions to play, one per chat-completion request, in order; or a callable that picks the
            action from the request body (returning None means the default reply). When a list runs out, every
            further request gets the default reply ``"ok"``.
        model: the model listed by ``/v1/models``.

    Attributes:
        requests: every chat-completion request body received, in order (the parsed JSON).
        headers: the request headers of each received chat-completion request (lower-case names).
    """

    def __init__(self, script: Script | None = None, *, model: str = "fake-model") -> None:
        self.model = model
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self._picker: Callable[[dict[str, Any]], Action | None] | None = None
        self._queue: list[Action] = []
        if callable(script):
            self._picker = script
        elif script is not None:
            self._queue = list(script)
        self._ids = itertools.count(1)
        self.app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._chat, methods=["POST"]),
                Route("/v1/models", self._models, methods=["GET"]),
            ]
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)

    @property
    def calls(self) -> int:
        """How many chat-completion requests arrived."""
        return len(self.requests)

    @property
    def last_request(self) -> dict[str, Any]:
        """The body of the most recent chat-completion request."""
        return self.requests[-1]

    def push(self, *actions: Action) -> None:
        """Append actions to a list script."""
        self._queue.extend(actions)

    def _next_action(self, body: dict[str, Any]) -> Action:
        if self._picker is not None:
            picked = self._picker(body)
            return picked if picked is not None else Reply()
        return self._queue.pop(0) if self._queue else Reply()

    async def _chat(self, request: Request) -> Response:
        raw = await request.body()
        try:
            body = json.loads(raw) if raw else {}
        except json.JSONDecodeError:
            body = {"_unparsed": raw.decode("utf-8", "replace")}
        self.requests.append(body)
        self.headers.append({k.lower(): v for k, v in request.headers.items()})
        return await self._play(self._next_action(body), body)

    async def _play(self, action: Action, body: dict[str, Any]) -> Response:
        if isinstance(action, Delay):
            await asyncio.sleep(action.seconds)
            return await self._play(action.then if action.then is not None else Reply(), body)
        if isinstance(action, HttpError):
            payload = action.body
            if payload is None:
                payload = {"error": {"message": action.message, "type": "invalid_request_error", "code": None}}
            return JSONResponse(payload, status_code=action.status, headers=action.headers)
        if isinstance(action, RawBody):
            return JSONResponse(action.body, status_code=action.status, headers=action.headers)
        return JSONResponse(self._completion(action, body))

    def _completion(self, reply: Reply, body: dict[str, Any]) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": reply.text}
        if reply.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call.id or f"call_{next(self._ids)}",
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in reply.tool_calls
            ]
        if reply.reasoning_content is not None:
            message["reasoning_content"] = reply.reasoning_content
        message.update(reply.extra_message)
        finish = reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")
        out: dict[str, Any] = {
            "id": f"chatcmpl-{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": reply.model or body.get("model") or self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        }
        if reply.usage is not None:
            prompt, completion = reply.usage
            out["usage"] = {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            }
        return out

    async def _models(self, request: Request) -> Response:
        return JSONResponse(
            {"object": "list", "data": [{"id": self.model, "object": "model", "created": 0, "owned_by": "fake"}]}
        )


def client_for(app: Any) -> httpx2.AsyncClient:
    """An ``httpx2`` client that talks to ``app`` in-process (no sockets)."""
    return httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://fake")


def fake_backend(fake: FakeOpenAI, **kw: Any) -> OpenAIBackend:
    """An :class:`OpenAIBackend` wired to ``fake`` in-process; keyword arguments override the defaults."""
    kw.setdefault("model", fake.model)
    kw.setdefault("base_url", FAKE_BASE_URL)
    kw.setdefault("http_client", client_for(fake))
    return OpenAIBackend(**kw)


@contextlib.asynccontextmanager
async def serve(app: Any, *, host: str = "127.0.0.1", port: int = 0) -> AsyncIterator[str]:
    """Serve ``app`` with uvicorn on a free local port for the duration of the block; yields the ``/v1`` base URL.

    For benchmarks that need real sockets and connection pooling; unit tests should use :func:`client_for`.
    """
    import uvicorn

    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="off", access_log=False)
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    try:
        while not server.started:
            if task.done():
                task.result()  # re-raise why it could not start
                raise RuntimeError("uvicorn stopped before it started")
            await asyncio.sleep(0.01)
        bound = server.servers[0].sockets[0].getsockname()
        yield f"http://{host}:{bound[1]}/v1"
    finally:
        server.should_exit = True
        await task


@contextlib.contextmanager
def serve_in_thread(app: Any) -> Iterator[str]:
    """Serve an ASGI app with uvicorn in a thread, for CLI tests (the CLI runs its own event loop in the caller's
    thread); yields the ``/v1`` base URL."""
    import threading

    import uvicorn

    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.should_exit = True
        thread.join(5)


def writer_echo(body: dict, reword: Callable[[str], str] = lambda text: text) -> str | None:
    """The reply of a data writer that keeps the brief's correct example (reworded by ``reword``): the utterance
    writer's ``{"utterance": ...}`` or the answer writer's ``{"answer": ...}``; None for any other request."""
    system = body["messages"][0]["content"]
    field = (
        "utterance"
        if system.startswith("You write what a user types")
        else "answer"
        if system.startswith("You write an assistant's final reply")
        else None
    )
    if field is None:
        return None
    brief = json.loads(body["messages"][1]["content"])
    return json.dumps({field: reword(brief["a correct example"])})
