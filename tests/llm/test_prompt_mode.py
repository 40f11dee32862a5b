"""Prompt mode's history: an assistant reply is rendered in the protocol's form exactly once (issue 34).

The demo showed each turn re-escaping the previous one (``{"content": "{\\"content\\": ...``): a reply that did not
parse as a call came back as text, and the next request wrapped that text again.
"""

from __future__ import annotations

import json

from toolwild.llm.prompt_mode import to_prompt_request
from toolwild.llm.types import ChatRequest

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    }
]


def _rendered(assistant: object) -> str:
    history = [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": assistant},
        {"role": "user", "content": "and now?"},
    ]
    messages = to_prompt_request(ChatRequest(messages=history, tools=TOOLS)).messages
    replies = [m["content"] for m in messages if m["role"] == "assistant"]
    assert len(replies) == 1
    return str(replies[0])


def test_plain_text_is_wrapped_once() -> None:
    assert json.loads(_rendered("It is sunny.")) == {"content": "It is sunny."}
    assert json.loads(_rendered('He said "hi"')) == {"content": 'He said "hi"'}
    assert json.loads(_rendered(None)) == {"content": ""}


def test_a_protocol_reply_that_came_back_as_text_is_not_wrapped_again() -> None:
    cut = '{ "tool_calls": [{"name": "get_weather", "arguments": { "city": "Par'
    assert _rendered(cut) == cut
    whole = '{"content": "It is sunny."}'
    assert _rendered(whole) == whole
    calls = '{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}'
    assert _rendered(calls) == calls
    assert _rendered('{"content": "x", "tool_calls": []}') == '{"content": "x", "tool_calls": []}'


def test_json_that_is_not_the_protocol_is_still_content() -> None:
    assert json.loads(_rendered('{"temp": 21}')) == {"content": '{"temp": 21}'}
    assert json.loads(_rendered("{}")) == {"content": "{}"}
    assert json.loads(_rendered("[1, 2]")) == {"content": "[1, 2]"}


def test_rendering_a_rendered_history_does_not_nest() -> None:
    """The demo's failure: each turn fed the previous rendering back; the text stays the same however often."""
    text = "Did food go past $2,000?"
    once = _rendered(text)
    assert _rendered(once) == once
    assert _rendered(_rendered(once)) == once
