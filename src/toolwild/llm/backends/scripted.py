"""The scripted backend: replays given responses, like a mock model, for tests and users' own tests.

Responses may be :class:`Completion` objects, plain strings (text replies), dicts (``{"content": ...}`` or
``{"tool_calls": [{"name": ..., "arguments": {...} or "raw text"}]}``), exceptions (raised, to script provider
failures), or a callable ``request -> any of these``. Running out of responses fails loudly.

``delay_s`` makes every answer take that long (cancellably, like a remote call or the local model's abortable
generation) and ``max_connections`` caps how many run at once, so a scripted backend can stand in for a slow
one-at-a-time model behind ``toolwild model serve`` in tests.
"""

from __future__ import annotations

import asyncio
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
    """Replays scripted responses and records every request it received.

    Attributes:
        requests: every request received, in order.
        finished: requests answered (or raised) to the end; a request cancelled during its delay is not counted.
    """

    kind = "scripted"

    def __init__(
        self,
        responses: Iterable[Any] | Responder,
        *,
        model: str = "scripted",
        native_tools: bool = True,
        delay_s: float = 0.0,
        max_connections: int = 16,
    ) -> None:
        super().__init__(model=model)
        if delay_s < 0 or max_connections < 1:
            raise ValueError(f"delay_s must be >= 0 and max_connections >= 1, got {delay_s}, {max_connections}")
        self.delay_s = delay_s
        self._max_connections = max_connections
        self.finished = 0
        self._responder: Responder | None = responses if callable(responses) else None
        self._items: Iterator[Any] | None = None if callable(responses) else iter(list(responses))
        self._native_tools = native_tools
        self.requests: list[ChatRequest] = []

    @property
    def native_tools(self) -> bool:
        """As configured (False exercises prompt mode)."""
        return self._native_tools

    def max_connections(self) -> int:
        """As configured (1 stands in for the one-context local model)."""
        return self._max_connections

    async def complete(self, request: ChatRequest) -> Completion:
        """Return the next scripted response (raising it if it is an exception)."""
        self.requests.append(request)
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
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
        self.finished += 1
        if isinstance(item, BaseException):
            raise item
        return to_completion(item)
