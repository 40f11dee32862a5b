"""``toolwild model serve``'s app, driven by the real openai client in-process (no sockets)."""

from __future__ import annotations

import httpx2
import openai
import pytest

from toolwild.llm.backends.scripted import ScriptedBackend
from toolwild.llm.client import LLM
from toolwild.serve.openai_server import create_app

TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather of a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


@pytest.fixture
def anyio_backend():
    return "asyncio"


def client(app) -> openai.AsyncOpenAI:
    http = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://served")
    return openai.AsyncOpenAI(api_key="x", base_url="http://served/v1", http_client=http, max_retries=0)


@pytest.mark.anyio
async def test_served_model_answers_tool_calls_through_prompt_mode():
    backend = ScriptedBackend(
        ['{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}}]}'], native_tools=False
    )
    c = client(create_app(LLM(backend)))
    reply = await c.chat.completions.create(
        model="anything",
        messages=[{"role": "user", "content": "weather in Oslo?"}],
        tools=[TOOL],
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
    )
    call = reply.choices[0].message.tool_calls[0]
    assert call.function.name == "get_weather" and call.function.arguments == '{"city": "Oslo"}'
    assert reply.choices[0].finish_reason == "tool_calls"
    sent = backend.requests[0]
    assert sent.tools is None and "get_weather" in sent.messages[0]["content"]
    assert sent.response_format["properties"]["tool_calls"]["items"]["properties"]["name"]["enum"] == ["get_weather"]


@pytest.mark.anyio
async def test_served_model_plain_text_models_list_and_bad_requests():
    app = create_app(LLM(ScriptedBackend(["hello"])), model_name="smol")
    c = client(app)
    reply = await c.chat.completions.create(model="smol", messages=[{"role": "user", "content": "hi"}])
    assert reply.choices[0].message.content == "hello" and reply.model == "smol"
    models = await c.models.list()
    assert [m.id for m in models.data] == ["smol"]
    with pytest.raises(openai.BadRequestError):
        await c.chat.completions.create(model="smol", messages=[])


@pytest.mark.anyio
async def test_provider_failure_becomes_503():
    from toolwild.errors import TransientBackendError
    from toolwild.llm.client import RetryPolicy

    app = create_app(
        LLM(ScriptedBackend([TransientBackendError("down", status=500)]), retry=RetryPolicy(max_attempts=1))
    )
    with pytest.raises(openai.InternalServerError) as info:
        await client(app).chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert info.value.status_code == 503
