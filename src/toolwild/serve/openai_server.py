"""An OpenAI-compatible chat-completions endpoint in front of any toolwild :class:`LLM`.

``toolwild model serve`` uses it to expose the embedded model on 127.0.0.1, so any OpenAI client (or another
harness) can evaluate it; requests go through the same cache, prompt mode and limits as everything else.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from toolwild.errors import BackendError, PermanentBackendError, TransientBackendError
from toolwild.llm.client import LLM
from toolwild.llm.types import ChatRequest, Completion

__all__ = ["completion_to_openai", "create_app", "request_from_openai"]


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
    return {
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


def create_app(llm: LLM, *, model_name: str | None = None) -> Starlette:
    """The ASGI app: ``POST /v1/chat/completions`` and ``GET /v1/models``."""
    name = model_name or llm.backend.model

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
        try:
            completion = await llm.complete(chat_request, role="served")
        except TransientBackendError as exc:
            return _error(503, str(exc), "server_error")
        except PermanentBackendError as exc:
            return _error(exc.status or 400, str(exc))
        except BackendError as exc:
            return _error(500, str(exc), "server_error")
        return JSONResponse(completion_to_openai(completion, model=name))

    async def models(_: Request) -> JSONResponse:
        return JSONResponse({"object": "list", "data": [{"id": name, "object": "model", "owned_by": "toolwild"}]})

    return Starlette(
        routes=[Route("/v1/chat/completions", chat, methods=["POST"]), Route("/v1/models", models, methods=["GET"])]
    )
