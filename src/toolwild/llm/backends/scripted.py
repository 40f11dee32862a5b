"""The scripted backend: replays given responses, like a mock model, for tests and users' own tests.

Responses may be :class:`Completion` objects, plain strings (text replies), dicts (``{"content": ...}`` or
``{"tool_calls": [{"name": ..., "arguments": {...} or "raw text"}]}``), exceptions (raised, to script provider
failures), or a callable ``request -> any of these``. Running out of responses fails loudly.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from toolwild.errors import ScriptExhaustedError
from toolwild.llm.backend import Backend
from toolwild.llm.types import ChatRequest, Completion, CompletionToolCall

__all__ = ["ScriptedBackend", "to_completion"]

Responder = Callable[[ChatRequest], Any]


def to_completion(item: Any) -> Completion:
    """Normalise one scripted response."""
    if isinstance(item, Completion):
        return item
    if isinstance(item, str):
        return Completion(text=item)
    if isinstance(item, dict):
        if "tool_calls" in item:
            calls = [
                CompletionToolCall.parse(c["name"], c.get("arguments", {}), id=c.get("id") or f"call_{i}")
                for i, c in enumerate(item["tool_calls"] or [])
            ]
            return Completion(
                text=item.get("content"), tool_calls=calls, finish_reason="tool_calls" if calls else "stop"
            )
        if set(item) <= {"content", "text"}:
            return Completion(text=item.get("content", item.get("text")))
        return Completion.model_validate(item)
    raise TypeError(f"cannot use {type(item).__name__} as a scripted response")


class ScriptedBackend(Backend):
    """Replays scripted responses and records every request it received."""

    kind = "scripted"

    def __init__(
        self,
        responses: Iterable[Any] | Responder,
        *,
        model: str = "scripted",
        native_tools: bool = True,
    ) -> None:
        super().__init__(model=model)
        self._responder: Responder | None = responses if callable(responses) else None
        self._items: Iterator[Any] | None = None if callable(responses) else iter(list(responses))
        self._native_tools = native_tools
        self.requests: list[ChatRequest] = []

    @property
    def native_tools(self) -> bool:
        """As configured (False exercises prompt mode)."""
        return self._native_tools

    async def complete(self, request: ChatRequest) -> Completion:
        """Return the next scripted response (raising it if it is an exception)."""
        self.requests.append(request)
        if self._responder is not None:
            item = self._responder(request)
            if inspect.isawaitable(item):
                item = await item  # type: ignore[misc]
        else:
            assert self._items is not None
            try:
                item = next(self._items)
            except StopIteration:
                raise ScriptExhaustedError(
                    f"scripted backend ran out of responses after {len(self.requests) - 1}"
                ) from None
        if isinstance(item, BaseException):
            raise item
        return to_completion(item)
