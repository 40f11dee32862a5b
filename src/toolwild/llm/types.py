"""The request and result of one chat completion, independent of any provider.

Both are pydantic models because they cross process and file boundaries: the cache stores completions, run
directories record requests' parameters, and the fake servers in the tests speak the same shapes.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ChatRequest", "Completion", "CompletionToolCall", "Usage", "canonical_json"]


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no whitespace: the same value always gives the same text (cache keys)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


class ChatRequest(BaseModel):
    """One chat-completion request.

    ``tool_choice`` is ``"auto"``, ``"required"``, ``"none"`` or the name of one tool to force.
    ``response_format`` is a JSON Schema the reply text must satisfy (structured output), or None.
    Temperature and seed are always explicit: nothing is implied by a provider's defaults.
    """

    model_config = ConfigDict(extra="forbid")

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None
    """OpenAI function tools (``{"type": "function", "function": {...}}``)."""
    tool_choice: str = "auto"
    response_format: dict[str, Any] | None = None
    temperature: float = 0.0
    seed: int | None = 0
    max_tokens: int | None = 1024

    def cache_payload(self) -> dict[str, Any]:
        """The fields that can change a reply (all of them: there is nothing transport-only in a request)."""
        return self.model_dump(mode="json")


class CompletionToolCall(BaseModel):
    """A tool call as returned by the model.

    ``raw`` is the argument text exactly as produced; ``arguments`` its parse, or None with ``error`` set when the
    text is not a JSON object (a typed outcome, not an exception: a model emitting bad JSON is model behaviour).
    """

    model_config = ConfigDict(extra="forbid")

    id: str | None = None
    name: str
    raw: str
    arguments: dict[str, Any] | None = None
    error: str | None = None

    @classmethod
    def parse(cls, name: str, raw: str | dict[str, Any] | None, *, id: str | None = None) -> CompletionToolCall:
        """Build from the provider's argument text, recording (not raising) a parse failure."""
        if isinstance(raw, dict):
            return cls(id=id, name=name, raw=json.dumps(raw, ensure_ascii=False), arguments=raw)
        text = raw if isinstance(raw, str) else ""
        try:
            value = json.loads(text) if text.strip() else {}
        except json.JSONDecodeError as exc:
            return cls(id=id, name=name, raw=text, error=f"arguments are not valid JSON: {exc.msg}")
        if not isinstance(value, dict):
            return cls(id=id, name=name, raw=text, error=f"arguments are a JSON {type(value).__name__}, not an object")
        return cls(id=id, name=name, raw=text, arguments=value)


class Usage(BaseModel):
    """Token counts of one call."""

    model_config = ConfigDict(extra="forbid")

    prompt_tokens: int = 0
    completion_tokens: int = 0


class Completion(BaseModel):
    """The result of one chat completion, normalised across providers."""

    model_config = ConfigDict(extra="forbid")

    text: str | None = None
    tool_calls: list[CompletionToolCall] = Field(default_factory=list)
    finish_reason: Literal["stop", "length", "tool_calls", "content_filter", "other"] = "stop"
    usage: Usage = Field(default_factory=Usage)
    latency_s: float = 0.0
    reasoning: str | None = None
    model: str | None = None
    """The model name the provider reported."""
    dropped_messages: int = 0
    """Messages the backend removed from the front of the conversation to fit its context window (the embedded
    model does this): recorded because it changes what was evaluated."""
