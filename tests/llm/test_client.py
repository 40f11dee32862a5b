"""The LLM client: cache, replay, in-flight sharing, retries, timeouts, prompt mode, usage, structured output."""

from __future__ import annotations

import asyncio
import json

import pytest
from pydantic import BaseModel

from toolwild.errors import (
    CacheMissError,
    ConfigError,
    ModelOutputError,
    PermanentBackendError,
    ScriptExhaustedError,
    StructuredOutputError,
    TransientBackendError,
)
from toolwild.llm.backend import Backend
from toolwild.llm.backends.scripted import ScriptedBackend
from toolwild.llm.cache import CacheMode, ResponseCache
from toolwild.llm.client import LLM, RetryPolicy
from toolwild.llm.prompt_mode import from_prompt_reply, reply_schema, to_prompt_request
from toolwild.llm.structured import generate_structured
from toolwild.llm.types import ChatRequest, Completion, CompletionToolCall, Usage
from toolwild.llm.usage import Price, UsageTracker

NO_WAIT = RetryPolicy(base_delay_s=0.0, jitter=False)
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather of a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    }
]


@pytest.fixture
def anyio_backend():
    return "asyncio"


def req(text: str = "hi", **kw) -> ChatRequest:
    return ChatRequest(messages=[{"role": "user", "content": text}], **kw)


class Counting(Backend):
    """Answers with the request text after an optional delay; counts calls and the peak concurrency."""

    kind = "counting"

    def __init__(self, delay: float = 0.0, limit: int = 16) -> None:
        super().__init__(model="counting")
        self.delay = delay
        self.calls = 0
        self.running = 0
        self.peak = 0
        self.limit = limit

    def max_connections(self) -> int:
        return self.limit

    async def complete(self, request: ChatRequest) -> Completion:
        self.calls += 1
        self.running += 1
        self.peak = max(self.peak, self.running)
        try:
            await asyncio.sleep(self.delay)
            return Completion(text="echo: " + request.messages[-1]["content"], usage=Usage(prompt_tokens=3))
        finally:
            self.running -= 1


# ------------------------------------------------------------------ cache
@pytest.mark.anyio
async def test_second_identical_run_makes_zero_backend_calls_and_returns_identical_objects(tmp_path):
    db = tmp_path / "cache.sqlite"
    first_backend = Counting()
    llm = LLM(first_backend, cache=ResponseCache(db))
    first = [await llm.complete(req(f"q{i}")) for i in range(5)]
    await llm.aclose()
    replay_backend = Counting()
    replay = LLM(replay_backend, cache=ResponseCache(db, mode=CacheMode.READ_ONLY))
    second = [await replay.complete(req(f"q{i}")) for i in range(5)]
    assert replay_backend.calls == 0 and replay.backend_calls == 0
    assert second == first
    assert [c.model_dump_json() for c in second] == [c.model_dump_json() for c in first]
    assert replay.usage.total().cache_hits == 5


@pytest.mark.anyio
async def test_read_only_miss_raises(tmp_path):
    llm = LLM(Counting(), cache=ResponseCache(tmp_path / "c.sqlite", mode=CacheMode.READ_ONLY))
    with pytest.raises(CacheMissError):
        await llm.complete(req("never seen"))


@pytest.mark.anyio
async def test_cache_key_covers_every_parameter(tmp_path):
    backend = Counting()
    llm = LLM(backend, cache=ResponseCache(tmp_path / "c.sqlite"))
    variants = [req(), req(temperature=0.5), req(seed=1), req(max_tokens=5), req(tools=TOOLS), req("other")]
    for r in variants:
        await llm.complete(r)
    assert backend.calls == len(variants)
    for r in variants:
        await llm.complete(r)
    assert backend.calls == len(variants)


@pytest.mark.anyio
async def test_cache_off_always_calls(tmp_path):
    backend = Counting()
    llm = LLM(backend, cache=ResponseCache(tmp_path / "c.sqlite", mode=CacheMode.OFF))
    await llm.complete(req())
    await llm.complete(req())
    assert backend.calls == 2 and not (tmp_path / "c.sqlite").exists()


@pytest.mark.anyio
async def test_200_concurrent_calls_share_one_database(tmp_path):
    db = tmp_path / "c.sqlite"
    backend = Counting(delay=0.001, limit=64)
    llm = LLM(backend, cache=ResponseCache(db))
    requests = [req(f"q{i % 50}") for i in range(200)]  # 50 distinct, each asked 4 times at once
    results = await asyncio.gather(*(llm.complete(r) for r in requests))
    assert backend.calls == 50  # identical in-flight requests share one call
    assert [c.text for c in results] == [f"echo: q{i % 50}" for i in range(200)]
    other = LLM(Counting(), cache=ResponseCache(db, mode=CacheMode.READ_ONLY))
    again = await asyncio.gather(*(other.complete(r) for r in requests))
    assert again == results
    assert len(ResponseCache(db)) == 50
    import sqlite3

    assert sqlite3.connect(db).execute("PRAGMA integrity_check").fetchone()[0] == "ok"


# ------------------------------------------------------------------ concurrency, retries, timeouts
@pytest.mark.anyio
async def test_concurrency_limit_is_respected():
    backend = Counting(delay=0.01, limit=3)
    llm = LLM(backend)
    await asyncio.gather(*(llm.complete(req(f"q{i}")) for i in range(20)))
    assert backend.peak == 3 and backend.calls == 20


@pytest.mark.anyio
async def test_transient_errors_are_retried_with_backoff_and_retry_after():
    waits: list[float] = []

    async def fake_sleep(s: float) -> None:
        waits.append(s)

    script = [
        TransientBackendError("rate limited", status=429, retry_after=2.0),
        TransientBackendError("server error", status=500),
        "finally",
    ]
    llm = LLM(ScriptedBackend(script), retry=RetryPolicy(base_delay_s=0.25, jitter=False), sleep=fake_sleep)
    result = await llm.complete(req())
    assert result.text == "finally"
    assert waits == [2.0, 0.5]  # retry-after wins; then 0.25 * 2 for the second attempt
    assert llm.usage.roles["agent"].retries == 2 and llm.usage.roles["agent"].calls == 1


@pytest.mark.anyio
async def test_retries_exhausted_raise_transient_error():
    script = [TransientBackendError("down", status=503)] * 3
    llm = LLM(ScriptedBackend(script), retry=RetryPolicy(max_attempts=3, base_delay_s=0.0))
    with pytest.raises(TransientBackendError) as info:
        await llm.complete(req())
    assert info.value.status == 503
    assert llm.usage.roles["agent"].failures == 1 and llm.backend_calls == 3


@pytest.mark.anyio
async def test_permanent_errors_are_not_retried():
    llm = LLM(ScriptedBackend([PermanentBackendError("bad request", status=400), "never"]), retry=NO_WAIT)
    with pytest.raises(PermanentBackendError):
        await llm.complete(req())
    assert llm.backend_calls == 1


@pytest.mark.anyio
async def test_timeout_becomes_a_retried_transient_error():
    backend = Counting(delay=5.0)
    llm = LLM(backend, timeout_s=0.05, retry=RetryPolicy(max_attempts=2, base_delay_s=0.0))
    with pytest.raises(TransientBackendError, match="timeout"):
        await asyncio.wait_for(llm.complete(req()), 2.0)
    assert backend.calls == 2


@pytest.mark.anyio
async def test_a_backend_that_cannot_be_abandoned_gets_no_per_attempt_timeout():
    class InProcess(Counting):
        @property
        def abandonable(self) -> bool:
            return False

    backend = InProcess(delay=0.2)
    llm = LLM(backend, timeout_s=0.05, retry=RetryPolicy(max_attempts=2, base_delay_s=0.0))
    assert (await asyncio.wait_for(llm.complete(req()), 2.0)).text is not None
    assert backend.calls == 1  # waited for the one attempt instead of stacking a retry behind it


@pytest.mark.anyio
async def test_failed_call_is_not_cached(tmp_path):
    script = [TransientBackendError("down", status=500), "ok"]
    llm = LLM(ScriptedBackend(script), cache=ResponseCache(tmp_path / "c.sqlite"), retry=RetryPolicy(max_attempts=1))
    with pytest.raises(TransientBackendError):
        await llm.complete(req())
    assert (await llm.complete(req())).text == "ok"


@pytest.mark.anyio
async def test_scripted_backend_fails_loudly_when_exhausted():
    llm = LLM(ScriptedBackend(["one"]))
    await llm.complete(req("a"))
    with pytest.raises(ScriptExhaustedError):
        await llm.complete(req("b"))


# ------------------------------------------------------------------ usage
@pytest.mark.anyio
async def test_usage_per_role_with_cost_from_an_extended_price_table():
    tracker = UsageTracker()
    tracker.prices["scripted"] = Price(input_per_mtok=1_000_000.0, output_per_mtok=2_000_000.0)
    done = Completion(text="x", usage=Usage(prompt_tokens=3, completion_tokens=2), latency_s=0.5)
    llm = LLM(ScriptedBackend([done, done]), usage=tracker, cache=ResponseCache(None))
    await llm.complete(req("a"), role="agent")
    await llm.complete(req("b"), role="judge")
    await llm.complete(req("b"), role="judge")  # served from the cache
    totals = tracker.as_dict()
    assert totals["roles"]["agent"]["cost_usd"] == pytest.approx(3 + 4)
    assert totals["roles"]["judge"]["calls"] == 1 and totals["roles"]["judge"]["cache_hits"] == 1
    assert totals["total"]["prompt_tokens"] == 6 and totals["total"]["latency_s"] == pytest.approx(1.0)


@pytest.mark.anyio
async def test_unpriced_models_are_counted_not_costed_as_zero():
    tracker = UsageTracker(prices={})
    llm = LLM(ScriptedBackend(["x"]), usage=tracker)
    await llm.complete(req())
    assert tracker.roles["agent"].unpriced_calls == 1 and tracker.roles["agent"].cost_usd == 0


# ------------------------------------------------------------------ prompt mode
def test_prompt_request_moves_tools_into_the_prompt_and_constrains_the_reply():
    history = [
        {"role": "system", "content": "Current Date: 2024-07-11"},
        {"role": "user", "content": "weather in Paris?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": '{"temp": 21}'},
    ]
    out = to_prompt_request(ChatRequest(messages=history, tools=TOOLS, tool_choice="auto"))
    assert out.tools is None
    assert "get_weather" in out.messages[0]["content"] and out.messages[0]["content"].startswith("Current Date")
    assert json.loads(out.messages[2]["content"]) == {
        "tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]
    }
    assert out.messages[3] == {"role": "user", "content": 'Result of get_weather: {"temp": 21}'}
    assert "anyOf" in out.response_format


def test_reply_schema_follows_tool_choice():
    required = reply_schema(TOOLS, "required")
    assert required["required"] == ["tool_calls"]
    assert reply_schema(TOOLS, "none")["required"] == ["content"]
    named = reply_schema([*TOOLS, {"type": "function", "function": {"name": "other", "parameters": {}}}], "other")
    assert named["properties"]["tool_calls"]["items"]["properties"]["name"]["enum"] == ["other"]
    floaty = reply_schema(
        [
            {
                "type": "function",
                "function": {"name": "f", "parameters": {"type": "object", "properties": {"x": {"type": "float"}}}},
            }
        ],
        "required",
    )
    assert floaty["properties"]["tool_calls"]["items"]["properties"]["arguments"]["properties"]["x"]["type"] == "number"


def test_prompt_reply_parsing():
    calls = from_prompt_reply(
        Completion(text='{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Rome"}}]}')
    )
    assert calls.text is None and calls.tool_calls[0].arguments == {"city": "Rome"}
    assert calls.finish_reason == "tool_calls"
    assert from_prompt_reply(Completion(text='{"content": "Hello"}')).text == "Hello"
    assert from_prompt_reply(Completion(text="not json")).text == "not json"
    bad = from_prompt_reply(Completion(text='{"tool_calls": [{"name": "f", "arguments": "{oops"}]}'))
    assert bad.tool_calls[0].error is not None and bad.tool_calls[0].arguments is None


@pytest.mark.anyio
async def test_llm_uses_prompt_mode_for_backends_without_native_tools():
    backend = ScriptedBackend(
        ['{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}}]}'], native_tools=False
    )
    llm = LLM(backend)
    result = await llm.complete(req("weather in Oslo", tools=TOOLS, tool_choice="required"))
    assert result.tool_calls == [
        CompletionToolCall(id="call_0", name="get_weather", raw='{"city": "Oslo"}', arguments={"city": "Oslo"})
    ]
    sent = backend.requests[0]
    assert sent.tools is None and sent.response_format["required"] == ["tool_calls"]


# ------------------------------------------------------------------ structured output
class City(BaseModel):
    name: str
    population: int


@pytest.mark.anyio
async def test_structured_output_retries_with_the_error_fed_back():
    backend = ScriptedBackend(['{"name": "Oslo"}', '{"name": "Oslo", "population": 709000}'])
    city = await generate_structured(LLM(backend), [{"role": "user", "content": "a city"}], City)
    assert city == City(name="Oslo", population=709000)
    second = backend.requests[1]
    assert second.response_format == City.model_json_schema()
    assert "population" in second.messages[-1]["content"] and second.messages[-2]["content"] == '{"name": "Oslo"}'


@pytest.mark.anyio
async def test_structured_output_gives_up_clearly():
    backend = ScriptedBackend(["nope", "still nope"])
    with pytest.raises(StructuredOutputError) as info:
        await generate_structured(LLM(backend), [{"role": "user", "content": "a city"}], City, max_attempts=2)
    assert info.value.attempts == 2 and info.value.last_reply == "still nope"
    assert "City" in str(info.value)


def test_prompt_reply_with_raw_newlines_in_strings_is_still_the_protocol():
    parsed = from_prompt_reply(Completion(text='{"tool_calls": [{"name": "f", "arguments": {"q": "a\nb"}}]}'))
    assert parsed.tool_calls[0].name == "f" and parsed.tool_calls[0].arguments == {"q": "a\nb"}


@pytest.mark.anyio
async def test_structured_output_tolerates_raw_control_characters():
    city = await generate_structured(LLM(ScriptedBackend(['{"name": "Os\nlo", "population": 1}'])), [], City)
    assert city.name == "Os\nlo"


# ------------------------------------------------------------------ issue 20: timeouts, model output, truncation
def test_request_timeout_reaches_the_openai_backend_and_the_client_does_not_cut_it(monkeypatch):
    from toolwild.llm.backend import DEFAULT_REQUEST_TIMEOUT_S
    from toolwild.llm.registry import create_backend

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    backend = create_backend("openai:m", base_url="http://127.0.0.1:9/v1", request_timeout=300)
    assert backend.timeout_s == 300 and backend.request_timeout == 300
    assert LLM(backend).timeout_s == 305  # the client's own 120 s backstop would cut a 300 s request
    default = create_backend("openai:m", base_url="http://127.0.0.1:9/v1")
    assert default.request_timeout == DEFAULT_REQUEST_TIMEOUT_S
    with pytest.raises(ConfigError):
        create_backend("openai:m", base_url="http://127.0.0.1:9/v1", request_timeout=0)


@pytest.mark.anyio
async def test_model_output_errors_are_never_retried_and_are_counted():
    backend = ScriptedBackend([ModelOutputError("a tool call without a name"), "never"])
    llm = LLM(backend, retry=NO_WAIT)
    with pytest.raises(ModelOutputError):
        await llm.complete(req(), role="agent")
    assert llm.backend_calls == 1
    usage = llm.usage.roles["agent"]
    assert (usage.failures, usage.retries) == (1, 0)


@pytest.mark.anyio
async def test_a_waiter_on_a_shared_call_is_not_cancelled_with_its_owner(tmp_path):
    """Identical requests in flight share one call; when the owner is cancelled (a served client went away), the
    others must still get their answer instead of a CancelledError they never asked for."""
    backend = Counting(delay=0.2)
    llm = LLM(backend, cache=ResponseCache(tmp_path / "c.sqlite"))
    owner = asyncio.create_task(llm.complete(req("same")))
    await asyncio.sleep(0.05)
    waiter = asyncio.create_task(llm.complete(req("same")))
    await asyncio.sleep(0.05)
    owner.cancel()
    completion = await asyncio.wait_for(waiter, 2.0)
    assert completion.text == "echo: same"
    assert owner.cancelled()


@pytest.mark.anyio
async def test_dropped_messages_survive_the_cache_and_prompt_mode(tmp_path):
    db = tmp_path / "c.sqlite"
    reply = Completion(text='{"content": "short"}', dropped_messages=3)
    llm = LLM(ScriptedBackend([reply], native_tools=False), cache=ResponseCache(db))
    first = await llm.complete(req(tools=TOOLS))
    await llm.aclose()
    replay = LLM(ScriptedBackend([], native_tools=False), cache=ResponseCache(db, mode=CacheMode.READ_ONLY))
    second = await replay.complete(req(tools=TOOLS))
    assert first.text == second.text == "short"
    assert first.dropped_messages == second.dropped_messages == 3


@pytest.mark.anyio
async def test_unparseable_prompt_mode_output_stays_the_models_reply():
    """A prompt-mode reply cut off mid-JSON is what the model wrote: returned as its text (scored as its answer),
    never retried or turned into a provider error."""
    cut = Completion(text='{"tool_calls": [{"name": "get_wea', finish_reason="length")
    llm = LLM(ScriptedBackend([cut, "never"], native_tools=False), retry=NO_WAIT)
    completion = await llm.complete(req(tools=TOOLS))
    assert completion.text == cut.text and completion.tool_calls == [] and completion.finish_reason == "length"
    assert llm.backend_calls == 1 and llm.usage.total().failures == 0
