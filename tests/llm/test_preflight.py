"""The preflight check: one cheap call that fails fast and clearly when a run cannot work (issue 20, item 6)."""

from __future__ import annotations

import socket
import time
from typing import Any

import pytest
from fake_openai import FAKE_BASE_URL, Delay, FakeOpenAI, HttpError, Reply, client_for

from toolwild.errors import ConfigError
from toolwild.llm.backends.openai_compat import OpenAIBackend
from toolwild.llm.backends.scripted import ScriptedBackend
from toolwild.llm.client import LLM
from toolwild.llm.preflight import preflight

pytestmark = pytest.mark.anyio

KEY = "sk-preflight-DISTINCTIVE-0123456789"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def _closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _llm(fake: FakeOpenAI, **kw: Any) -> LLM:
    backend = OpenAIBackend(model="m", base_url=FAKE_BASE_URL, http_client=client_for(fake), **kw)
    return LLM(backend)


async def test_unreachable_endpoint_fails_in_seconds_with_the_url_redacted() -> None:
    url = f"http://alice:hunter2pw@127.0.0.1:{_closed_port()}/v1"
    llm = LLM(OpenAIBackend(model="m", base_url=url))
    started = time.monotonic()
    with pytest.raises(ConfigError) as info:
        await preflight(llm)
    assert time.monotonic() - started < 5
    message = str(info.value)
    assert message.startswith("cannot reach http://***@127.0.0.1:") and message.endswith("/v1: connection refused")
    assert "hunter2pw" not in message and "alice" not in message
    assert llm.backend_calls == 0 and llm.usage.total().retries == 0  # straight to the backend, never retried
    await llm.aclose()


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (
            HttpError(404, "The model `m` does not exist or you do not have access to it.", headers={}),
            r"does not serve model 'm' \(HTTP 404\)",
        ),
        (HttpError(400, 'model "m" not found, try pulling it first'), r"does not serve model 'm' \(HTTP 400\)"),
        (HttpError(404, "Not Found"), r"HTTP 404 .*not the API root \(it usually ends in /v1\)"),
        (HttpError(401, f"Incorrect API key provided: {KEY}"), r"refused the API key from OPENAI_API_KEY \(HTTP 401\)"),
        (HttpError(403, "forbidden"), r"refused the API key .*HTTP 403"),
    ],
    ids=["model-404", "model-400-ollama", "bare-404", "key-401", "key-403"],
)
async def test_unknown_model_or_refused_key_is_a_config_error(error: HttpError, expected: str) -> None:
    fake = FakeOpenAI([error])
    with pytest.raises(ConfigError, match=expected) as info:
        await preflight(_llm(fake))
    assert KEY not in str(info.value)
    assert fake.calls == 1
    sent = fake.last_request
    assert sent["max_tokens"] == 1 and sent["model"] == "m"  # one token: the check costs next to nothing


@pytest.mark.parametrize(
    "action",
    [Reply(text="p"), HttpError(500, "overloaded"), HttpError(429, "slow down"), HttpError(400, "max_tokens too low")],
    ids=["ok", "500", "429", "unrelated-400"],
)
async def test_a_server_that_answers_lets_the_run_start(action: Any) -> None:
    fake = FakeOpenAI([action, Reply(text="never")])
    await preflight(_llm(fake))
    assert fake.calls == 1  # no retries: the run's own retries deal with a busy or failing provider


async def test_a_slow_reply_lets_the_run_start_quickly() -> None:
    fake = FakeOpenAI([Delay(5.0)])
    started = time.monotonic()
    await preflight(_llm(fake), timeout_s=0.2)
    assert time.monotonic() - started < 2


async def test_cache_is_bypassed(tmp_path: Any) -> None:
    """A cached answer would prove nothing about the endpoint."""
    from toolwild.llm.cache import ResponseCache

    fake = FakeOpenAI([HttpError(401, "no"), HttpError(401, "no")])
    backend = OpenAIBackend(model="m", base_url=FAKE_BASE_URL, http_client=client_for(fake))
    llm = LLM(backend, cache=ResponseCache(tmp_path / "c.sqlite"))
    for _ in range(2):
        with pytest.raises(ConfigError):
            await preflight(llm)
    assert fake.calls == 2


async def test_in_process_backends_pass_without_a_call() -> None:
    backend = ScriptedBackend([])  # any call would raise ScriptExhaustedError
    await preflight(LLM(backend))
    assert backend.requests == []


async def test_timeout_must_be_positive() -> None:
    with pytest.raises(ConfigError):
        await preflight(LLM(ScriptedBackend([])), timeout_s=0)
