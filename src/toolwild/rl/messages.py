"""An OpenAI-style assistant message as the live loop's :class:`~toolwild.core.trajectory.Step`.

Why leniently: in RL the message is the policy's output, and a policy writes broken messages while it learns. A
message that cannot be used (a call without a name, arguments neither text nor an object) becomes a step with a
``parse_error``, which the live loop judges as the published harness judges unusable output (the task fails, the
episode goes on), exactly as :class:`~toolwild.eval.agents.model.ModelAgent` does for a model's reply. Only a value
that is not a message at all is the caller's bug and raises.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from toolwild.core.trajectory import Step, ToolCall
from toolwild.errors import DataError

__all__ = ["assistant_step"]


def _content(value: Any) -> str | None:
    """Text content: a string, or OpenAI content parts (their ``text`` joined); anything else is no text."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        texts = [p["text"] for p in value if isinstance(p, Mapping) and isinstance(p.get("text"), str)]
        return "".join(texts) if texts else None
    return None


def _call(raw: Any, k: int) -> ToolCall | str:
    """One tool call, or why it cannot be used."""
    function = raw.get("function") if isinstance(raw, Mapping) else None
    if not isinstance(function, Mapping):
        return f"tool_calls[{k}] has no 'function' object"
    name = function.get("name")
    if not isinstance(name, str) or not name:
        return "tool call without a function name"
    arguments = function.get("arguments", "{}")
    if isinstance(arguments, Mapping):
        arguments = json.dumps(arguments, ensure_ascii=False)
    if not isinstance(arguments, str):
        return f"tool_calls[{k}].function.arguments is neither a JSON string nor an object"
    call_id = raw.get("id")
    return ToolCall(id=call_id if isinstance(call_id, str) and call_id else None, name=name, arguments=arguments)


def assistant_step(message: Mapping[str, Any] | str) -> Step:
    """The step an assistant message stands for (text and/or tool calls; raw argument text kept as written).

    A string is the message's JSON text, as a text-in/text-out framework passes it: text that is not a JSON object
    is the policy's unusable output (a step with a ``parse_error``).

    Raises:
        DataError: ``message`` is neither a mapping nor a string (field ``assistant_message``).
    """
    if isinstance(message, str):
        try:
            message = json.loads(message)
        except (json.JSONDecodeError, RecursionError) as exc:
            return Step(parse_error=f"the action is not JSON: {exc}")
        if not isinstance(message, Mapping):
            return Step(parse_error=f"the action is JSON {type(message).__name__}, not an assistant message object")
    elif not isinstance(message, Mapping):
        raise DataError(
            f"expected an assistant message (a dict or its JSON text), got {type(message).__name__}",
            field="assistant_message",
        )
    content = _content(message.get("content"))
    raw_calls = message.get("tool_calls") or []
    if not isinstance(raw_calls, list):
        return Step(content=content, parse_error="'tool_calls' is not a list")
    calls: list[ToolCall] = []
    for k, raw in enumerate(raw_calls):
        call = _call(raw, k)
        if isinstance(call, str):
            return Step(content=content, parse_error=call)
        calls.append(call)
    return Step(content=content, tool_calls=calls or None)
