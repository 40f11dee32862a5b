"""The client over the real openai SDK and a fake server: every failure ends in a result or a typed error, fast."""

from __future__ import annotations

import asyncio

import pytest
from fake_openai import Delay, FakeOpenAI, FakeToolCall, HttpError, RawBody, Reply, fake_backend

from toolwild.errors import MalformedResponseError, PermanentBackendError, TransientBackendError
from toolwild.llm.client import LLM, RetryPolicy
from toolwild.llm.types import ChatRequest

FAST = RetryPolicy(base_delay_s=0.0, max_attempts=3)


@pytest.fixture
def anyio_backend():
    return "asyncio"


def llm_for(fake: FakeOpenAI, **kw) -> LLM:
    return LLM(fake_backend(fake, timeout_s=0.3), retry=kw.pop("retry", FAST), **kw)


REQ = ChatRequest(messages=[{"role": "user", "content": "hi"}])


async def bounded(coro):
    return await asyncio.wait_for(coro, 10)


@pytest.mark.anyio
async def test_429_then_success():
    fake = FakeOpenAI([HttpError(429, "slow down", headers={"retry-after": "0"}), Reply(text="done")])
    llm = llm_for(fake)
    assert (await bounded(llm.complete(REQ))).text == "done"
    assert fake.calls == 2 and llm.usage.roles["agent"].retries == 1


@pytest.mark.anyio
async def test_500_then_success():
    fake = FakeOpenAI([HttpError(500, "oops"), Reply(text="done")])
    assert (await bounded(llm_for(fake).complete(REQ))).text == "done"


@pytest.mark.anyio
async def test_timeout_then_success_and_timeouts_forever():
    fake = FakeOpenAI([Delay(2.0), Reply(text="done")])
    assert (await bounded(llm_for(fake).complete(REQ))).text == "done"
    stuck = FakeOpenAI(lambda body: Delay(2.0))
    with pytest.raises(TransientBackendError, match="timeout"):
        await bounded(llm_for(stuck).complete(REQ))
    assert stuck.calls == 3


@pytest.mark.anyio
async def test_tool_call_with_invalid_json_arguments_is_a_typed_outcome():
    fake = FakeOpenAI([Reply(text=None, tool_calls=(FakeToolCall("get_weather", '{"city": "Par'),))])
    result = await bounded(llm_for(fake).complete(REQ))
    call = result.tool_calls[0]
    assert call.name == "get_weather" and call.arguments is None and "not valid JSON" in call.error
    assert call.raw == '{"city": "Par'


@pytest.mark.anyio
async def test_response_missing_fields_is_retried_then_a_typed_error():
    fake = FakeOpenAI(lambda body: RawBody({"id": "x", "object": "chat.completion"}))
    with pytest.raises(MalformedResponseError):
        await bounded(llm_for(fake).complete(REQ))
    assert fake.calls == 3


@pytest.mark.anyio
async def test_bad_request_is_not_retried():
    fake = FakeOpenAI(lambda body: HttpError(400, "bad request"))
    with pytest.raises(PermanentBackendError):
        await bounded(llm_for(fake).complete(REQ))
    assert fake.calls == 1
