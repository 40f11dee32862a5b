"""Structured output: ask for a pydantic model's JSON Schema, validate, and retry with the error fed back.

A stage never parses free text with regexes when a schema can be asked for. When a reply does not validate, the
model sees its reply and the validation error and tries again, a bounded number of times; the final failure is a
:class:`StructuredOutputError` carrying the last reply.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from toolwild.errors import StructuredOutputError, ToolwildError
from toolwild.llm.client import LLM
from toolwild.llm.types import ChatRequest

__all__ = ["InvalidReply", "generate_checked", "generate_structured", "write_checked"]

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")


def _short(exc: ValidationError, limit: int = 5) -> str:
    lines = []
    for err in exc.errors()[:limit]:
        loc = ".".join(str(p) for p in err.get("loc", ())) or "(root)"
        lines.append(f"- {loc}: {err.get('msg')}")
    return "\n".join(lines)


def _validate(output_type: type[M], text: str) -> M:
    """Validate JSON text; raw control characters inside strings (llama.cpp grammars allow them) are tolerated."""
    try:
        return output_type.model_validate_json(text)
    except ValidationError as first:
        try:
            value = json.loads(text, strict=False)
        except json.JSONDecodeError:
            raise first from None
        return output_type.model_validate(value)


async def generate_structured(
    llm: LLM,
    messages: list[dict[str, Any]],
    output_type: type[M],
    *,
    role: str = "generator",
    max_attempts: int = 3,
    temperature: float = 0.0,
    seed: int = 0,
    max_tokens: int | None = 1024,
) -> M:
    """Get a reply that validates as ``output_type``.

    Raises:
        StructuredOutputError: no valid reply within ``max_attempts``.
    """

    def check(text: str) -> M:
        try:
            return _validate(output_type, text)
        except ValidationError as exc:
            raise InvalidReply(_short(exc)) from None

    return await generate_checked(
        llm,
        messages,
        _schema_of(output_type),
        check,
        name=output_type.__name__,
        role=role,
        max_attempts=max_attempts,
        temperature=temperature,
        seed=seed,
        max_tokens=max_tokens,
    )


class InvalidReply(ToolwildError, ValueError):
    """Raised by a reply check: the message (a few ``- where: what`` lines) is shown to the model to fix."""


async def generate_checked(
    llm: LLM,
    messages: list[dict[str, Any]],
    schema: dict[str, Any],
    check: Callable[[str], T],
    *,
    name: str = "reply",
    role: str = "generator",
    max_attempts: int = 3,
    temperature: float = 0.0,
    seed: int = 0,
    max_tokens: int | None = 1024,
) -> T:
    """Ask for JSON of ``schema`` and return ``check(text)``; a reply ``check`` rejects is fed back and retried.

    Why a check beyond the schema: some rules cannot be said in JSON Schema (a state patch must apply to the
    current state, a read tool must not write). The model sees its reply and exactly what was wrong with it.

    Raises:
        StructuredOutputError: no reply passed ``check`` within ``max_attempts``.
    """
    conversation = list(messages)
    last_text: str | None = None
    for attempt in range(1, max_attempts + 1):
        request = ChatRequest(
            messages=conversation,
            response_format=schema,
            temperature=temperature,
            seed=seed,
            max_tokens=max_tokens,
        )
        completion = await llm.complete(request, role=role)
        last_text = completion.text or ""
        try:
            return check(last_text)
        except InvalidReply as exc:
            if attempt == max_attempts:
                raise StructuredOutputError(
                    f"{name}: no valid reply after {attempt} attempts; last error:\n{exc}",
                    last_reply=last_text,
                    attempts=attempt,
                ) from None
            conversation = [
                *conversation,
                {"role": "assistant", "content": last_text},
                {
                    "role": "user",
                    "content": f"That reply is not valid:\n{exc}\nReply again with one JSON object that fixes this.",
                },
            ]
    raise StructuredOutputError("unreachable", last_reply=last_text, attempts=max_attempts)  # pragma: no cover


@functools.lru_cache(maxsize=256)
def _schema_of(output_type: type[BaseModel]) -> dict[str, Any]:
    """A model's JSON Schema, built once per type (pydantic rebuilds it on every call, about a millisecond; a
    simulated environment asks for the same verdict schema on every call). Callers only read it."""
    return output_type.model_json_schema()


async def write_checked(
    llm: LLM,
    messages: list[dict[str, Any]],
    reply_model: type[BaseModel],
    field: str,
    problems: Callable[[str], list[str]],
    fallback: str,
    *,
    name: str,
    role: str,
    seed: int = 0,
    max_tokens: int = 300,
    max_attempts: int = 2,
) -> tuple[str, bool]:
    """A text a model writes (the ``field`` of a one-field JSON reply) that ``problems`` accepts, or ``fallback``.

    Why: generated data is model-written where a model is given and template-written otherwise, under the same rules
    (an utterance must state what the user supplies, an answer must not invent a number); a reply that breaks them is
    sent back with its problems, then the template is used. Returns (text, written by the model).
    """

    def check(text: str) -> str:
        try:
            reply = reply_model.model_validate_json(text)
        except ValueError as exc:
            raise InvalidReply(f"- reply: not the JSON object asked for ({str(exc)[:200]})") from None
        value = str(getattr(reply, field)).strip()
        found = problems(value)
        if found:
            raise InvalidReply("\n".join(found))
        return value

    try:
        text = await generate_checked(
            llm,
            messages,
            reply_model.model_json_schema(),
            check,
            name=name,
            role=role,
            max_attempts=max_attempts,
            seed=seed,
            max_tokens=max_tokens,
        )
    except StructuredOutputError:
        return fallback, False
    return text, True
