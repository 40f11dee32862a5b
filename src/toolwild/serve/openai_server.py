"""An OpenAI-compatible chat-completions endpoint in front of any toolwild :class:`LLM`.

``toolwild model serve`` uses it to expose the embedded model on 127.0.0.1, so any OpenAI client (or another
harness) can evaluate it; requests go through the same cache, prompt mode and limits as everything else.

Serving a model that answers one request at a time to a harness that sends eight needs three things:

- **a queue**: every answer carries the number of requests the model runs at once (``x-toolwild-concurrency``),
  which toolwild's client adopts at its preflight, so it queues on its side where no request timeout runs yet;
  other clients' extra requests wait their turn here, first come first served; past ``max_queue`` waiting
  requests the server answers 503 at once, with a ``Retry-After`` estimated from recent generation times, which
  clients' retries honour;
- **no work for nobody**: a client that goes away (it timed out, or was stopped) is noticed while its request waits
  or runs, and the request is cancelled, which also aborts an embedded-model generation within a token;
- **a prompt exit**: on SIGINT/SIGTERM the server stops accepting, gives running requests one second, then cancels
  them (see :func:`run_server`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import time
import uuid
from collections.abc import Coroutine
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive

from toolwild.errors import BackendError, PermanentBackendError, TransientBackendError
from toolwild.llm.backends.openai_compat import CONCURRENCY_HEADER
from toolwild.llm.client import LLM
from toolwild.llm.redact import redact_text
from toolwild.llm.types import ChatRequest, Completion

__all__ = ["DEFAULT_MAX_QUEUE", "Admission", "completion_to_openai", "create_app", "request_from_openai", "run_server"]

DEFAULT_MAX_QUEUE = 64
"""Requests that may wait for the model at once; more get an immediate 503 with ``Retry-After``."""

GRACEFUL_SHUTDOWN_S = 1.0
"""On SIGINT/SIGTERM, how long running requests may finish before they are cancelled."""

_CLIENT_GONE = 499  # nginx's "client closed request": never sent (nobody is listening), but it shows in logs


def _error(status: int, message: str, kind: str = "invalid_request_error") -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": kind}}, status_code=status)


def request_from_openai(body: dict[str, Any]) -> ChatRequest:
    """Map an OpenAI request body to a :class:`ChatRequest` (raises ValueError on a malformed body)."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ValueError("'messages' must be a non-empty list")
    choice = body.get("tool_choice", "auto")
    if isinstance(choice, dict):
        choice = choice.get("function", {}).get("name")
        if not isinstance(choice, str):
            raise ValueError("tool_choice object must name a function")
    fmt = body.get("response_format")
    schema = None
    if isinstance(fmt, dict):
        if fmt.get("type") == "json_schema":
            schema = (fmt.get("json_schema") or {}).get("schema")
        elif fmt.get("type") == "json_object":
            schema = fmt.get("schema") or {"type": "object"}
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens", 1024))
    return ChatRequest(
        messages=messages,
        tools=body.get("tools") or None,
        tool_choice=choice or "auto",
        response_format=schema,
        temperature=float(body.get("temperature", 0.0)),
        seed=body.get("seed", 0),
        max_tokens=max_tokens,
    )


def completion_to_openai(completion: Completion, *, model: str) -> dict[str, Any]:
    """Map a :class:`Completion` to an OpenAI ``chat.completion`` object."""
    message: dict[str, Any] = {"role": "assistant", "content": completion.text}
    if completion.tool_calls:
        message["tool_calls"] = [
            {
                "id": call.id or f"call_{i}",
                "type": "function",
                "function": {"name": call.name, "arguments": call.raw},
            }
            for i, call in enumerate(completion.tool_calls)
        ]
    if completion.reasoning:
        message["reasoning_content"] = completion.reasoning
    out: dict[str, Any] = {
        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": completion.model or model,
        "choices": [{"index": 0, "message": message, "finish_reason": completion.finish_reason}],
        "usage": {
            "prompt_tokens": completion.usage.prompt_tokens,
            "completion_tokens": completion.usage.completion_tokens,
            "total_tokens": completion.usage.prompt_tokens + completion.usage.completion_tokens,
        },
    }
    if completion.dropped_messages:
        # an extension field (clients ignore unknown keys): toolwild's openai backend reads it back, so a remote
        # evaluation of the embedded model records its context truncation as a local one does
        out["toolwild"] = {"dropped_messages": completion.dropped_messages}
    return out


class Admission:
    """Counts the requests admitted (running or waiting) and estimates how long a newcomer would wait.

    Args:
        capacity: requests the model runs at once (the client's concurrency limit).
        max_queue: requests that may wait beyond ``capacity``.
    """

    def __init__(self, capacity: int, max_queue: int) -> None:
        if capacity < 1 or max_queue < 0:
            raise ValueError(f"capacity must be >= 1 and max_queue >= 0, got {capacity}, {max_queue}")
        self.capacity = capacity
        self.max_queue = max_queue
        self.admitted = 0
        self.peak = 0
        """Most requests admitted at once so far (a client that keeps to ``capacity`` never exceeds it)."""
        self.mean_service_s = 1.0
        """Moving average of generation times (seconds), for ``Retry-After``."""

    @property
    def full(self) -> bool:
        """Whether a newcomer would exceed the queue bound."""
        return self.admitted >= self.capacity + self.max_queue

    def admit(self) -> None:
        """Count one more request running or waiting."""
        self.admitted += 1
        self.peak = max(self.peak, self.admitted)

    def release(self) -> None:
        """Count one request done (answered, failed or cancelled)."""
        self.admitted -= 1

    @property
    def waiting(self) -> int:
        """Admitted requests not yet running."""
        return max(self.admitted - self.capacity, 0)

    def retry_after(self) -> int:
        """Whole seconds until a place is likely to free up: the queue ahead, served ``capacity`` at a time."""
        rounds = (self.waiting + 1) / self.capacity
        return max(1, math.ceil(rounds * self.mean_service_s))

    def served(self, completion: Completion) -> None:
        """Fold one generation time into the average."""
        self.mean_service_s = 0.8 * self.mean_service_s + 0.2 * max(completion.latency_s, 0.0)


async def _disconnected(receive: Receive) -> None:
    """Return when the client has gone away (the ASGI server reports ``http.disconnect`` once the body is read)."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return


async def _unless_disconnected(request: Request, work: Coroutine[Any, Any, Completion]) -> Completion | None:
    """Run ``work`` while watching the connection; cancel it and return None when the client goes away first.

    Cancelling the handler itself (server shutdown) cancels the work too, so nothing outlives its request.
    """
    task = asyncio.ensure_future(work)
    watch = asyncio.ensure_future(_disconnected(request.receive))
    try:
        await asyncio.wait({task, watch}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watch.cancel()
        if not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task  # let the cancellation reach the backend (it aborts a local generation) before leaving
    if task.cancelled():
        return None
    return task.result()


def create_app(llm: LLM, *, model_name: str | None = None, max_queue: int = DEFAULT_MAX_QUEUE) -> Starlette:
    """The ASGI app: ``POST /v1/chat/completions`` and ``GET /v1/models``.

    Args:
        llm: the model; its concurrency limit is how many requests run at once.
        model_name: the name reported and listed (default: the backend's). Any requested model name is accepted,
            like llama.cpp's server: there is one model here.
        max_queue: requests that may wait beyond those running; more get 503 with ``Retry-After``.
    """
    name = model_name or llm.backend.model
    admission = Admission(llm.max_connections, max_queue)
    capacity = {CONCURRENCY_HEADER: str(admission.capacity)}

    async def chat(request: Request) -> JSONResponse:
        try:
            body = await request.json()
        except json.JSONDecodeError:
            return _error(400, "request body is not JSON")
        if not isinstance(body, dict):
            return _error(400, "request body must be a JSON object")
        if body.get("stream"):
            return _error(400, "streaming is not supported")
        try:
            chat_request = request_from_openai(body)
        except (ValueError, TypeError) as exc:
            return _error(400, str(exc))
        if admission.full:
            return _busy(admission)
        admission.admit()
        try:
            completion = await _unless_disconnected(request, llm.complete(chat_request, role="served"))
        except TransientBackendError as exc:
            return _error(503, redact_text(str(exc)), "server_error")
        except PermanentBackendError as exc:
            return _error(exc.status or 400, redact_text(str(exc)))
        except BackendError as exc:
            return _error(500, redact_text(str(exc)), "server_error")
        except asyncio.CancelledError:
            # the server is stopping (its request tasks are cancelled after the grace period): the work is already
            # cancelled, and the client gets a retryable answer instead of a dropped connection
            return _error(503, "the server is shutting down", "server_error")
        finally:
            admission.release()
        if completion is None:
            return Response(status_code=_CLIENT_GONE)
        admission.served(completion)
        return JSONResponse(completion_to_openai(completion, model=name), headers=capacity)

    async def models(_: Request) -> JSONResponse:
        listing = {"object": "list", "data": [{"id": name, "object": "model", "owned_by": "toolwild"}]}
        return JSONResponse(listing, headers=capacity)

    app = Starlette(
        routes=[Route("/v1/chat/completions", chat, methods=["POST"]), Route("/v1/models", models, methods=["GET"])]
    )
    app.state.admission = admission
    return app


def _busy(admission: Admission) -> JSONResponse:
    wait = admission.retry_after()
    response = _error(
        503,
        f"the server is busy: {admission.admitted} requests running or waiting (queue limit {admission.max_queue}); "
        f"retry in about {wait} s",
        "server_error",
    )
    response.headers["retry-after"] = str(wait)
    return response


def run_server(app: Any, *, host: str = "127.0.0.1", port: int = 8765) -> None:
    """Serve ``app`` with uvicorn until SIGINT/SIGTERM, then exit promptly.

    Why the short graceful period: uvicorn's default waits for every running request to finish, and a generation
    can take minutes; here running requests get :data:`GRACEFUL_SHUTDOWN_S`, then are cancelled, which aborts
    their generations (the local model stops within a token), so the process exits in about a second.
    """
    import uvicorn

    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        lifespan="off",
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
    )
    with contextlib.suppress(KeyboardInterrupt):  # uvicorn re-raises Ctrl-C after its shutdown: already handled
        uvicorn.Server(config).run()
