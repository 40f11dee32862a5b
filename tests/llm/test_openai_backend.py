"""OpenAIBackend against an in-process fake server, through the real ``openai`` SDK (no sockets)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx2
import pytest
from fake_openai import FAKE_BASE_URL, Delay, FakeOpenAI, FakeToolCall, HttpError, RawBody, Reply, fake_backend

from toolwild.errors import (
    ConfigError,
    MalformedResponseError,
    PermanentBackendError,
    TransientBackendError,
)
from toolwild.llm.backends.openai_compat import OpenAIBackend
from toolwild.llm.types import ChatRequest

pytestmark = pytest.mark.anyio

SECRET = "sk-test-DISTINCTIVE-9f8e7d6c5b4a"
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def _no_real_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never see a developer's real key or endpoint."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


@pytest.fixture
async def make() -> AsyncIterator[Callable[..., tuple[FakeOpenAI, OpenAIBackend]]]:
    """Build a fake server from a script plus a backend wired to it; backends are closed afterwards."""
    backends: list[OpenAIBackend] = []

    def build(script: Any = None, **kw: Any) -> tuple[FakeOpenAI, OpenAIBackend]:
        fake = FakeOpenAI(script)
        backend = fake_backend(fake, **kw)
        backends.append(backend)
        return fake, backend

    yield build
    for backend in backends:
        await backend.aclose()


def ask(**kw: Any) -> ChatRequest:
    kw.setdefault("messages", [{"role": "user", "content": "hi"}])
    return ChatRequest(**kw)


async def test_plain_text_reply(make: Callable[..., tuple[FakeOpenAI, OpenAIBackend]]) -> None:
    fake, backend = make([Reply(text="Hello there")])
    result = await backend.complete(ask(seed=7, max_tokens=50, temperature=0.3))

    assert result.text == "Hello there"
    assert result.tool_calls == []
    assert result.finish_reason == "stop"
    body = fake.last_request
    assert body["messages"] == [{"role": "user", "content": "hi"}]
    assert body["model"] == "fake-model"
    assert (body["seed"], body["max_tokens"], body["temperature"]) == (7, 50, 0.3)
    assert "tools" not in body and "tool_choice" not in body and "response_format" not in body


async def test_none_seed_and_max_tokens_are_omitted(make: Callable[..., tuple[FakeOpenAI, OpenAIBackend]]) -> None:
    fake, backend = make()
    await backend.complete(ask(seed=None, max_tokens=None))
    assert "seed" not in fake.last_request
    assert "max_tokens" not in fake.last_request


async def test_empty_content_becomes_none(make: Callable[..., tuple[FakeOpenAI, OpenAIBackend]]) -> None:
    _, backend = make([Reply(text="")])
    assert (await backend.complete(ask())).text is None


async def test_forced_tool_call(make: Callable[..., tuple[FakeOpenAI, OpenAIBackend]]) -> None:
    fake, backend = make([Reply(text=None, tool_calls=(FakeToolCall("get_weather", '{"city": "Paris"}', "c1"),))])
    result = await backend.complete(ask(tools=[WEATHER_TOOL], tool_choice="get_weather"))

    body = fake.last_request
    assert body["tools"] == [WEATHER_TOOL]
    assert body["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert result.text is None
    assert result.finish_reason == "tool_calls"
    [call] = result.tool_calls
    assert (call.id, call.name, call.arguments, call.error) == ("c1", "get_weather", {"city": "Paris"}, None)
    assert call.raw == '{"city": "Paris"}'


@pytest.mark.parametrize("choice", ["auto", "required", "none"])
async def test_tool_choice_keywords_pass_as_strings(
    make: Callable[..., tuple[FakeOpenAI, OpenAIBackend]], choice: str
) -> None:
    fake, backend = make()
    await backend.complete(ask(tools=[WEATHER_TOOL], tool_choice=choice))
    assert fake.last_request["tool_choice"] == choice


async def test_tool_call_with_invalid_json_is_typed_not_raised(
    make: Callable[..., tuple[FakeOpenAI, OpenAIBackend]],
) -> None:
    _, backend = make([Reply(text=None, tool_calls=(FakeToolCall("get_weather", '{"city": "Par'),))])
    result = await backend.complete(ask(tools=[WEATHER_TOOL]))

    [call] = result.tool_calls
    assert call.name == "get_weather"
    assert call.arguments is None
    assert call.error is not None and "JSON" in call.error
    assert call.raw == '{"city": "Par'


async def test_response_format_is_strict_json_schema(make: Callable[..., tuple[FakeOpenAI, OpenAIBackend]]) -> None:
    fake, backend = make([Reply(text='{"answer": "x"}')])
    result = await backend.complete(ask(response_format=SCHEMA))

    assert result.text == '{"answer": "x"}'
    assert fake.last_request["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "reply", "schema": SCHEMA, "strict": True},
    }


async def test_strict_fallback_is_remembered(make: Callable[..., tuple[FakeOpenAI, OpenAIBackend]]) -> None:
    fake, backend = make([HttpError(400, "response_format.json_schema.strict is not supported by this server")])

    first = await backend.complete(ask(response_format=SCHEMA))
    assert first.text == "ok"
    assert fake.calls == 2
    assert fake.requests[0]["response_format"]["json_schema"]["strict"] is True
    assert fake.requests[1]["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "reply", "schema": SCHEMA},
    }

    await backend.complete(ask(response_format=SCHEMA))
    assert fake.calls == 3, "a remembered fallback must not cost another rejected request"
    assert "strict" not in fake.requests[2]["response_format"]["json_schema"]


async def test_json_schema_unsupported_falls_back_to_json_object(
    make: Callable[..., tuple[FakeOpenAI, OpenAIBackend]],
) -> None:
    fake, backend = make(
        [
            HttpError(400, "strict mode is not supported"),
            HttpError(400, "response_format type json_schema is unavailable"),
        ]
    )
    await backend.complete(ask(response_format=SCHEMA))

    assert [r["response_format"]["type"] for r in fake.requests] == ["json_schema", "json_schema", "json_object"]
    await backend.complete(ask(response_format=SCHEMA))
    assert fake.calls == 4
    assert fake.last_request["response_format"] == {"type": "json_object"}


async def test_unrelated_400_with_response_format_does_not_fall_back(
    make: Callable[..., tuple[FakeOpenAI, OpenAIBackend]],
) -> None:
    fake, backend = make([HttpError(400, "messages must not be empty")])
    with pytest.raises(PermanentBackendError):
        await backend.complete(ask(response_format=SCHEMA))
    assert fake.calls == 1


async def test_429_with_retry_after_is_transient(make: Callable[..., tuple[FakeOpenAI, OpenAIBackend]]) -> None:
    _, backend = make([HttpError(429, "slow down", headers={"retry-after": "2"})])
    with pytest.raises(TransientBackendError) as info:
        await backend.complete(ask())
    assert info.value.status == 429
    assert info.value.retry_after == 2.0
    assert "429" in str(info.value) and "slow down" in str(info.value)


async def test_retry_after_ms_and_http_date(make: Callable[..., tuple[FakeOpenAI, OpenAIBackend]]) -> None:
    _, backend = make(
        [
            HttpError(503, headers={"retry-after-ms": "1500"}),
            HttpError(429, headers={"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}),
        ]
    )
    with pytest.raises(TransientBackendError) as info:
        await backend.complete(ask())
    assert info.value.retry_after == 1.5
    with pytest.raises(TransientBackendError) as info:
        await backend.complete(ask())
    assert info.value.retry_after == 0.0, "a date in the past means: retry now"


@pytest.mark.parametrize("status", [408, 409, 500, 502, 503])
async def test_transient_statuses(make: Callable[..., tuple[FakeOpenAI, OpenAIBackend]], status: int) -> None:
    _, backend = make([HttpError(status, "server trouble")])
    with pytest.raises(TransientBackendError) as info:
        await backend.complete(ask())
    assert not isinstance(info.value, MalformedResponseError)
    assert info.value.status == status
    assert info.value.retry_after is None


@pytest.mark.parametrize("status", [400, 403, 404, 422])
async def test_other_4xx_are_permanent(make: Callable[..., tuple[FakeOpenAI, OpenAIBackend]], status: int) -> None:
    _, backend = make([HttpError(status, "bad request")])
    with pytest.raises(PermanentBackendError) as info:
        await backend.complete(ask())
    assert info.value.status == status
    assert "bad request" in str(info.value)


async def test_401_never_shows_the_key(
    make: Callable[..., tuple[FakeOpenAI, OpenAIBackend]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    fake, backend = make([HttpError(401, f"Incorrect API key provided: {SECRET}")])
    with pytest.raises(PermanentBackendError) as info:
        await backend.complete(ask())

    assert fake.headers[0]["authorization"] == f"Bearer {SECRET}", "the key from the env var is what is sent"
    error = info.value
    assert error.status == 401
    for text in (str(error), repr(error), repr(error.__cause__), repr(error.__context__)):
        assert SECRET not in text
    assert SECRET not in repr(backend)
    assert SECRET not in str(backend.identity())
    assert SECRET not in repr(vars(backend))


async def test_slow_server_times_out(make: Callable[..., tuple[FakeOpenAI, OpenAIBackend]]) -> None:
    _, backend = make([Delay(1.0)], timeout_s=0.2)
    started = time.perf_counter()
    with pytest.raises(TransientBackendError) as info:
        await asyncio.wait_for(backend.complete(ask()), 5)
    assert time.perf_counter() - started < 0.9
    assert "timeout" in str(info.value)
    assert info.value.status is None


@pytest.mark.parametrize(
    "body",
    [
        {"id": "x", "object": "chat.completion", "model": "m"},
        {"id": "x", "choices": []},
        {"id": "x", "choices": [{"index": 0, "finish_reason": "stop"}]},
        [1, 2, 3],
    ],
    ids=["no-choices", "empty-choices", "no-message", "not-an-object"],
)
async def test_malformed_bodies(make: Callable[..., tuple[FakeOpenAI, OpenAIBackend]], body: Any) -> None:
    _, backend = make([RawBody(body)])
    with pytest.raises(MalformedResponseError):
        await backend.complete(ask())


@pytest.mark.parametrize(
    ("content_type", "body"),
    [("text/html", b"<html>gateway</html>"), ("application/json", b'{"choices": ['), ("application/json", b"")],
    ids=["html", "truncated-json", "empty"],
)
async def test_non_json_bodies_are_malformed(content_type: str, body: bytes) -> None:
    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": content_type}, content=body)

    backend = OpenAIBackend(
        model="m", base_url=FAKE_BASE_URL, http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler))
    )
    try:
        with pytest.raises(MalformedResponseError):
            await backend.complete(ask())
    finally:
        await backend.aclose()


async def test_injected_http_client_is_used_as_is_at_the_sdk_endpoint() -> None:
    seen: list[str] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(str(request.url))
        return httpx2.Response(200, json={"choices": [{"index": 0, "message": {"content": "hi"}}]})

    http_client = httpx2.AsyncClient(transport=httpx2.MockTransport(handler))
    backend = OpenAIBackend(model="m", base_url="http://fake/v1", http_client=http_client)
    try:
        assert backend._client._client is http_client
        assert (await backend.complete(ask())).text == "hi"
        assert seen == ["http://fake/v1/chat/completions"]
    finally:
        await backend.aclose()


@pytest.mark.parametrize("base_url", ["http://h/v1", "http://h/v1/", "http://h:8000", "https://h/d?api-version=1"])
async def test_endpoint_is_joined_exactly_as_the_sdk_joins_a_relative_path(base_url: str) -> None:
    """The backend passes the SDK an absolute URL computed once; it must be the one the SDK would build itself."""
    backend = OpenAIBackend(model="m", base_url=base_url)
    try:
        assert backend._endpoint == str(backend._client._prepare_url("/chat/completions"))
    finally:
        await backend.aclose()


@pytest.mark.parametrize("function", [{"arguments": "{}"}, {"name": "", "arguments": "{}"}, {"name": 7}, None])
async def test_tool_call_without_name_is_the_models_failure_not_a_provider_error(
    make: Callable[..., tuple[FakeOpenAI, OpenAIBackend]], function: Any
) -> None:
    """Issue 20: a nameless call was a MalformedResponseError (retried, then the session dropped as a provider
    error); it is the model's output, so it comes back as a call with no name and an error, next to the valid one."""
    calls = [
        {"id": "a", "type": "function", "function": function},
        {"id": "b", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}},
    ]
    message = {"role": "assistant", "content": None, "tool_calls": calls}
    _, backend = make([RawBody({"id": "x", "choices": [{"index": 0, "message": message}]})])
    completion = await backend.complete(ask(tools=[WEATHER_TOOL]))
    nameless, named = completion.tool_calls
    assert (nameless.name, nameless.id, nameless.error) == ("", "a", "tool call without a function name")
    assert (named.name, named.arguments, named.error) == ("get_weather", {"city": "Oslo"}, None)


async def test_usage_latency_model_reasoning(make: Callable[..., tuple[FakeOpenAI, OpenAIBackend]]) -> None:
    _, backend = make(
        [
            Delay(0.05, Reply(text="42", usage=(123, 45), reasoning_content="think", model="served-model-v2")),
            Reply(text="a", extra_message={"reasoning": "other field"}, usage=None, finish_reason="length"),
            Reply(finish_reason="something_new"),
        ]
    )
    first = await backend.complete(ask())
    assert (first.usage.prompt_tokens, first.usage.completion_tokens) == (123, 45)
    assert first.model == "served-model-v2"
    assert first.reasoning == "think"
    assert 0.05 <= first.latency_s < 2.0

    second = await backend.complete(ask())
    assert second.reasoning == "other field"
    assert (second.usage.prompt_tokens, second.usage.completion_tokens) == (0, 0)
    assert second.finish_reason == "length"

    assert (await backend.complete(ask())).finish_reason == "other"


async def test_key_configuration(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="MY_KEY_VAR"):
        OpenAIBackend(model="gpt-x", api_key_env="MY_KEY_VAR")

    local = OpenAIBackend(model="local", base_url="http://127.0.0.1:9/v1", api_key_env="MY_KEY_VAR")
    assert local.identity() == {"kind": "openai", "model": "local", "base_url": "http://127.0.0.1:9/v1"}
    await local.aclose()

    monkeypatch.setenv("MY_KEY_VAR", SECRET)
    remote = OpenAIBackend(model="gpt-x", api_key_env="MY_KEY_VAR", max_connections=3)
    assert remote.max_connections() == 3
    assert SECRET not in repr(remote) and SECRET not in str(remote.identity())
    await remote.aclose()


async def test_models_endpoint_and_default_reply() -> None:
    fake = FakeOpenAI()
    backend = fake_backend(fake)
    try:
        assert (await backend.complete(ask())).text == "ok"
        listed = await backend._client.models.list()
        assert [m.id for m in listed.data] == ["fake-model"]
    finally:
        await backend.aclose()


async def test_callable_script(make: Callable[..., tuple[FakeOpenAI, OpenAIBackend]]) -> None:
    def pick(body: dict[str, Any]) -> Reply | None:
        return Reply(text=body["messages"][-1]["content"].upper()) if body["messages"] else None

    fake, backend = make(pick)
    assert (await backend.complete(ask(messages=[{"role": "user", "content": "echo"}]))).text == "ECHO"
    assert fake.calls == 1


async def test_dropped_messages_reported_by_a_toolwild_server_are_kept(
    make: Callable[..., tuple[FakeOpenAI, OpenAIBackend]],
) -> None:
    message = {"role": "assistant", "content": "hi"}
    body = {"id": "x", "choices": [{"index": 0, "message": message}], "toolwild": {"dropped_messages": 4}}
    _, backend = make([RawBody(body), Reply(text="plain")])
    assert (await backend.complete(ask())).dropped_messages == 4
    assert (await backend.complete(ask())).dropped_messages == 0


async def test_connection_errors_name_the_cause_without_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    backend = OpenAIBackend(model="m", base_url=f"http://bob:pa55word-XYZ@127.0.0.1:{port}/v1")
    try:
        with pytest.raises(TransientBackendError) as info:
            await backend.complete(ask())
    finally:
        await backend.aclose()
    assert str(info.value) == f"cannot reach http://***@127.0.0.1:{port}/v1: connection refused"
    assert "pa55word" not in repr(backend)
