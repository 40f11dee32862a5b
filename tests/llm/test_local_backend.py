"""The local llama.cpp backend against the real SmolLM2-135M model: plain text, schema-constrained JSON, determinism.

Slow (the model is loaded once per module, a few seconds); skipped only when llama-cpp-python or the GGUF wheel is
not installed.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from toolwild.errors import ConfigError, MissingDependencyError, PermanentBackendError
from toolwild.llm.backends.local import LocalBackend, default_model_path
from toolwild.llm.types import ChatRequest

pytestmark = [pytest.mark.slow, pytest.mark.anyio]

TOOL_CALL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "tool_calls": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "enum": ["get_weather"]},
                    "arguments": {
                        "type": "object",
                        "properties": {"city": {"type": "string"}},
                        "required": ["city"],
                    },
                },
                "required": ["name", "arguments"],
            },
            "minItems": 1,
        }
    },
    "required": ["tool_calls"],
}


class City(BaseModel):
    name: str
    population: int


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def backend() -> Iterator[LocalBackend]:
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama-cpp-python is not installed (pip install llama-cpp-python)")
    try:
        default_model_path()
    except MissingDependencyError as exc:
        pytest.skip(str(exc))
    yield LocalBackend(n_ctx=1024)


def _request(content: str, *, max_tokens: int = 48, **kwargs: Any) -> ChatRequest:
    return ChatRequest(messages=[{"role": "user", "content": content}], max_tokens=max_tokens, **kwargs)


def _check_tool_calls(value: Any) -> None:
    """TOOL_CALL_SCHEMA checked by hand (jsonschema is not a dependency)."""
    assert isinstance(value, dict) and set(value) == {"tool_calls"}
    calls = value["tool_calls"]
    assert isinstance(calls, list) and len(calls) >= 1
    for call in calls:
        assert isinstance(call, dict) and set(call) == {"name", "arguments"}
        assert call["name"] == "get_weather"
        assert isinstance(call["arguments"], dict) and set(call["arguments"]) == {"city"}
        assert isinstance(call["arguments"]["city"], str)


async def test_plain_reply_is_text(backend: LocalBackend) -> None:
    completion = await backend.complete(_request("Say hello in one short sentence."))
    assert completion.text and completion.text.strip()
    assert completion.finish_reason in ("stop", "length")
    assert completion.usage.prompt_tokens > 0 and completion.usage.completion_tokens > 0
    assert completion.model == "smollm2-135m-instruct"
    assert completion.latency_s > 0


async def test_schema_forces_a_well_formed_tool_call(backend: LocalBackend) -> None:
    request = ChatRequest(
        messages=[
            {"role": "system", "content": "Reply with a JSON tool call. The tool get_weather(city) gives the weather."},
            {"role": "user", "content": "What is the weather in Paris?"},
        ],
        response_format=TOOL_CALL_SCHEMA,
        max_tokens=64,
    )
    completion = await backend.complete(request)
    assert completion.finish_reason == "stop", completion.text
    _check_tool_calls(json.loads(completion.text or ""))


async def test_schema_from_a_pydantic_model(backend: LocalBackend) -> None:
    request = _request(
        "Give the name and population of Paris as JSON.", response_format=City.model_json_schema(), max_tokens=64
    )
    completion = await backend.complete(request)
    assert completion.finish_reason == "stop", completion.text
    city = City.model_validate_json(completion.text or "")
    assert isinstance(city.population, int)


async def test_same_request_same_text(backend: LocalBackend) -> None:
    request = _request("Name three colours.", temperature=0.0, seed=7)
    first = await backend.complete(request)
    # a different request in between must not change the second reply (no state carried across calls)
    await backend.complete(_request("Count to five."))
    second = await backend.complete(request)
    assert first.text == second.text


async def test_same_seed_same_text_when_sampling(backend: LocalBackend) -> None:
    request = _request("Write a short line about the sea.", temperature=0.8, seed=123)
    first = await backend.complete(request)
    second = await backend.complete(request)
    assert first.text == second.text


async def test_tools_need_prompt_mode(backend: LocalBackend) -> None:
    tool = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}
    with pytest.raises(ConfigError, match="prompt mode"):
        await backend.complete(_request("Weather in Paris?", tools=[tool]))
    assert backend.native_tools is False
    assert backend.max_connections() == 1


async def test_identity_names_the_file_not_its_directory(backend: LocalBackend) -> None:
    identity = backend.identity()
    path = default_model_path()
    assert identity["kind"] == "local"
    assert identity["model_file"] == path.name
    assert identity["model_size"] == str(path.stat().st_size)
    values = [v for v in identity.values() if v is not None]
    assert not any(str(path.parent) in v or "/" in v or "\\" in v for v in values)
    assert Path(identity["model_file"] or "").name == identity["model_file"]


async def test_old_messages_are_dropped_to_fit_the_context(backend: LocalBackend) -> None:
    filler = "lorem ipsum dolor sit amet " * 60  # a few hundred tokens per message; n_ctx is 1024
    history: list[dict[str, Any]] = [{"role": "system", "content": "You are terse."}]
    for _ in range(4):
        history += [{"role": "user", "content": filler}, {"role": "assistant", "content": "ok"}]
    history.append({"role": "user", "content": "Say yes."})
    before = backend.truncated_messages
    completion = await backend.complete(ChatRequest(messages=history, max_tokens=8))
    assert completion.text is not None
    assert backend.truncated_messages > before
    assert completion.dropped_messages == backend.truncated_messages - before  # recorded where the run sees it
    assert completion.usage.prompt_tokens + 8 <= backend.n_ctx


async def test_a_prompt_that_cannot_fit_is_a_clear_error(backend: LocalBackend) -> None:
    huge = "lorem ipsum dolor sit amet " * 400
    with pytest.raises(PermanentBackendError, match="n_ctx"):
        await backend.complete(_request(huge, max_tokens=8))
    with pytest.raises(PermanentBackendError, match="max_tokens"):
        await backend.complete(_request("hi", max_tokens=4096))


async def test_an_aborted_generation_stops_at_the_next_token(backend: LocalBackend) -> None:
    """Issue 20: llama.cpp kept generating for abandoned requests. The abort flag is consulted by a per-token
    stopping criterion, so the generation ends at the next token (on any machine load: counted, not timed)."""
    import threading

    from toolwild.llm.backends.local import GenerationAborted

    class Flag(threading.Event):
        """Counts how often the flag is read once it is set."""

        reads_after_set = 0

        def is_set(self) -> bool:
            value = super().is_set()
            self.reads_after_set += value
            return value

    story = _request("Write a very long story about a lighthouse keeper, with many chapters.", max_tokens=900)
    await backend.load()
    abort = Flag()
    timer = threading.Timer(1.0, abort.set)
    timer.start()
    before = backend.generated_tokens
    with pytest.raises(GenerationAborted):
        await asyncio.to_thread(backend._locked, lambda: backend._complete_sync(story, abort))
    timer.join()
    # read once per token by the decoding loop, which stops at the first read after the flag is set; a loop that
    # checked only at the end would have read it after all 900 tokens
    assert abort.reads_after_set == 1
    assert backend.generated_tokens - before < 900
    reply = await backend.complete(_request("Say yes.", max_tokens=4))  # the model is free and unharmed
    assert reply.text


async def test_cancelling_the_caller_sets_the_abort_flag(backend: LocalBackend) -> None:
    story = _request("Write a very long story about a lighthouse keeper, with many chapters.", max_tokens=900)
    await backend.load()
    call = asyncio.create_task(backend.complete(story))
    await asyncio.sleep(1.0)
    assert not call.done()
    assert backend._abort is not None and not backend._abort.is_set()
    running = backend._abort
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert running.is_set()
    freed = await asyncio.to_thread(backend._thread_lock.acquire, True, 60.0)
    assert freed
    backend._thread_lock.release()
