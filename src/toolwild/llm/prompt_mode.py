"""Prompt mode: tool calling for models without native tool support.

The tools are described in the system prompt and the reply is constrained (JSON Schema as ``response_format``) to
``{"tool_calls": [{"name": ..., "arguments": {...}}]}`` or ``{"content": "..."}``, then parsed back into the same
:class:`Completion` a native tool-calling model returns. Earlier tool calls and tool results in the conversation
are rendered in the same JSON form, so the model sees its own protocol.
"""

from __future__ import annotations

import json
import re
from typing import Any

from toolwild.llm.types import ChatRequest, Completion, CompletionToolCall

__all__ = ["from_prompt_reply", "reply_schema", "to_prompt_request"]

_INSTRUCTIONS = {
    "auto": (
        'Reply with one JSON object only. To call tools: {"tool_calls": [{"name": "<tool name>", "arguments": '
        '{...}}]} (several calls run in parallel). To answer the user or ask them a question: {"content": "<text>"}.'
    ),
    "required": 'Reply with one JSON object only: {"tool_calls": [{"name": "<tool name>", "arguments": {...}}]}.',
    "none": 'Reply with one JSON object only: {"content": "<text>"}. Do not call tools.',
}


def _function(tool: dict[str, Any]) -> dict[str, Any]:
    fn = tool.get("function", tool)
    return {
        "name": fn.get("name"),
        "description": fn.get("description", ""),
        "parameters": _plain(fn.get("parameters")),
    }


def _plain(schema: Any) -> Any:
    """A parameters schema with WildToolBench's non-standard ``float`` type mapped to ``number``."""
    if isinstance(schema, dict):
        return {k: ("number" if k == "type" and v == "float" else _plain(v)) for k, v in schema.items()}
    if isinstance(schema, list):
        return [_plain(v) for v in schema]
    return schema if schema is not None else {"type": "object", "properties": {}}


def _type_name(schema: Any) -> str:
    if not isinstance(schema, dict):
        return "any"
    if "enum" in schema and isinstance(schema["enum"], list):
        return "|".join(json.dumps(v, ensure_ascii=False) for v in schema["enum"][:8])
    kind = schema.get("type")
    if isinstance(kind, list):
        return "|".join(str(k) for k in kind)
    if kind == "array":
        return f"{_type_name(schema.get('items'))}[]"
    if kind is None and "anyOf" in schema:
        return "|".join(_type_name(s) for s in schema["anyOf"] if isinstance(s, dict) and s.get("type") != "null")
    return str(kind or "any")


def _signature(fn: dict[str, Any]) -> str:
    """One compact line per tool: a small model reads it faster and as well as a full JSON Schema (the reply's
    schema still constrains the arguments exactly)."""
    params = fn["parameters"] if isinstance(fn["parameters"], dict) else {}
    required = set(params.get("required", []) or [])
    props = params.get("properties", {}) or {}
    args = ", ".join(f"{name}{'' if name in required else '?'}: {_type_name(schema)}" for name, schema in props.items())
    description = " ".join(str(fn.get("description") or "").split())
    return f"- {fn['name']}({args}): {description}" if description else f"- {fn['name']}({args})"


def _call_schema(fn: dict[str, Any]) -> dict[str, Any]:
    params = fn["parameters"] if isinstance(fn["parameters"], dict) else {"type": "object"}
    return {
        "type": "object",
        "properties": {"name": {"type": "string", "enum": [fn["name"]]}, "arguments": params},
        "required": ["name", "arguments"],
    }


def reply_schema(tools: list[dict[str, Any]], tool_choice: str) -> dict[str, Any]:
    """The JSON Schema of a prompt-mode reply for these tools and this tool choice."""
    functions = [_function(t) for t in tools]
    if tool_choice not in ("auto", "required", "none"):
        functions = [f for f in functions if f["name"] == tool_choice] or functions
    calls = [_call_schema(f) for f in functions]
    call_item = calls[0] if len(calls) == 1 else {"anyOf": calls}
    with_calls = {
        "type": "object",
        "properties": {"tool_calls": {"type": "array", "items": call_item, "minItems": 1}},
        "required": ["tool_calls"],
    }
    with_content = {"type": "object", "properties": {"content": {"type": "string"}}, "required": ["content"]}
    if tool_choice == "none" or not functions:
        return with_content
    if tool_choice == "auto":
        return {"anyOf": [with_calls, with_content]}
    return with_calls


_PROTOCOL_KEYS = frozenset({"content", "tool_calls"})
_PROTOCOL_START = re.compile(r'\s*\{\s*"(?:content|tool_calls)"\s*:')
"""How a prompt-mode reply begins, for a reply cut off before it closed (it cannot be parsed to check its keys)."""


def _is_protocol_reply(text: str) -> bool:
    """Whether an assistant's text already is a prompt-mode reply: one that did not parse as a call and so came back
    as text (cut off mid-JSON, say), or a protocol reply handed back raw."""
    try:
        value = json.loads(text, strict=False)
    except json.JSONDecodeError:
        return _PROTOCOL_START.match(text) is not None
    return isinstance(value, dict) and bool(value) and set(value) <= _PROTOCOL_KEYS


def _render_reply_text(content: Any) -> str:
    """An assistant text turn in the protocol's form, wrapped once: text that already is a protocol reply is shown
    as the model wrote it, not escaped into ``{"content": "{\\"content\\": ...``, which taught the model to nest
    its replies deeper on every turn."""
    if isinstance(content, str) and _is_protocol_reply(content):
        return content
    return json.dumps({"content": content or ""})


def _render_history(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Turn tool-call turns and tool results into plain text turns in the prompt-mode JSON form."""
    out: list[dict[str, Any]] = []
    names_by_id: dict[str, str] = {}
    for msg in messages:
        role = msg.get("role")
        if role == "assistant" and msg.get("tool_calls"):
            calls = []
            for call in msg["tool_calls"]:
                fn = call.get("function", {})
                args = fn.get("arguments", "{}")
                try:
                    parsed = json.loads(args) if isinstance(args, str) else args
                except json.JSONDecodeError:
                    parsed = args
                calls.append({"name": fn.get("name"), "arguments": parsed})
                if call.get("id"):
                    names_by_id[call["id"]] = fn.get("name", "")
            out.append({"role": "assistant", "content": json.dumps({"tool_calls": calls}, ensure_ascii=False)})
        elif role == "assistant":
            out.append({"role": "assistant", "content": _render_reply_text(msg.get("content"))})
        elif role == "tool":
            name = names_by_id.get(msg.get("tool_call_id", ""), "tool")
            out.append({"role": "user", "content": f"Result of {name}: {msg.get('content', '')}"})
        else:
            out.append({"role": role, "content": msg.get("content") or ""})
    return out


def to_prompt_request(request: ChatRequest) -> ChatRequest:
    """Rewrite a request with tools into one without: tools in the system prompt, reply schema as response format."""
    tools = request.tools or []
    functions = [_function(t) for t in tools]
    choice = request.tool_choice
    instruction = _INSTRUCTIONS.get(choice) or (
        f'Reply with one JSON object only: {{"tool_calls": [{{"name": "{choice}", "arguments": {{...}}}}]}}.'
    )
    tool_text = "\n".join(_signature(f) for f in functions)
    section = f"You can call these tools (? marks an optional argument):\n{tool_text}\n\n{instruction}"
    messages = _render_history(request.messages)
    if messages and messages[0]["role"] == "system":
        messages[0] = {"role": "system", "content": f"{messages[0]['content']}\n\n{section}"}
    else:
        messages.insert(0, {"role": "system", "content": section})
    return request.model_copy(
        update={
            "messages": messages,
            "tools": None,
            "tool_choice": "auto",
            "response_format": reply_schema(tools, choice),
        }
    )


def from_prompt_reply(completion: Completion) -> Completion:
    """Parse a prompt-mode reply back into text or tool calls; a reply that is not the protocol is plain text."""
    text = completion.text or ""
    try:
        # strict=False accepts raw control characters inside strings: llama.cpp's JSON grammar lets a small model
        # put literal newlines in a string, and such a reply is still the protocol, not free text.
        value = json.loads(text, strict=False)
    except json.JSONDecodeError:
        return completion
    if isinstance(value, dict) and isinstance(value.get("tool_calls"), list) and value["tool_calls"]:
        calls = []
        for i, item in enumerate(value["tool_calls"]):
            if not isinstance(item, dict) or not isinstance(item.get("name"), str):
                return completion
            args = item.get("arguments", {})
            raw = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
            calls.append(CompletionToolCall.parse(item["name"], raw, id=f"call_{i}"))
        return completion.model_copy(update={"text": None, "tool_calls": calls, "finish_reason": "tool_calls"})
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return completion.model_copy(update={"text": value["content"] or None})
    return completion
