"""``toolwild model serve`` under load: queueing, clients that go away, prompt shutdown (issue 20, item 6).

The model behind the server is a scripted backend with a delay and one slot, standing in for the embedded model
(one llama.cpp context); the clients are toolwild's own OpenAI backend or raw sockets.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest
from fake_openai import client_for, serve

from toolwild.errors import TransientBackendError
from toolwild.llm.backends.openai_compat import CONCURRENCY_HEADER, OpenAIBackend
from toolwild.llm.backends.scripted import ScriptedBackend
from toolwild.llm.client import LLM, RetryPolicy
from toolwild.llm.preflight import preflight
from toolwild.llm.types import ChatRequest, Completion
from toolwild.serve.openai_server import create_app

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def _no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def _slow_model(delay_s: float, slots: int = 1) -> ScriptedBackend:
    """One slot and a fixed generation time; answers with the last user message."""
    return ScriptedBackend(
        lambda r: Completion(text=f"re: {r.messages[-1]['content']}", latency_s=delay_s),
        delay_s=delay_s,
        max_connections=slots,
    )


def _ask(text: str) -> ChatRequest:
    return ChatRequest(messages=[{"role": "user", "content": text}], max_tokens=8)


async def test_the_server_says_how_many_requests_it_runs_and_the_client_keeps_to_it() -> None:
    app = create_app(LLM(_slow_model(0.0)))
    backend = OpenAIBackend(model="m", base_url="http://fake/v1", http_client=client_for(app))
    llm = LLM(backend)
    assert llm.max_connections == 16
    await preflight(llm)
    assert backend.server_concurrency == 1 and llm.max_connections == 1
    listing = await client_for(app).get("/v1/models")
    assert listing.headers[CONCURRENCY_HEADER] == "1"


async def test_eight_requests_to_a_one_slot_server_all_finish_within_a_short_request_timeout() -> None:
    """Issue 20: eval sent 8 requests to a server answering one at a time, and requests timed out while they
    waited in the server's queue. After the preflight they wait on the client, where the timeout does not run:
    each of the 8 has a 1 s limit although the last one finishes about 2.4 s after it was asked for."""
    model = _slow_model(0.3)
    app = create_app(LLM(model))
    backend = OpenAIBackend(model="m", base_url="http://fake/v1", http_client=client_for(app), timeout_s=1.0)
    llm = LLM(backend, retry=RetryPolicy(max_attempts=1))
    await preflight(llm)
    started = time.monotonic()
    replies = await asyncio.gather(*(llm.complete(_ask(f"q{i}")) for i in range(8)))
    assert [r.text for r in replies] == [f"re: q{i}" for i in range(8)]
    assert time.monotonic() - started >= 8 * 0.3 * 0.9
    assert llm.usage.total().failures == 0 and llm.usage.total().retries == 0
    await llm.aclose()


async def test_a_full_queue_answers_503_with_retry_after_at_once() -> None:
    app = create_app(LLM(_slow_model(0.5)), max_queue=2)
    client = openai.AsyncOpenAI(
        api_key="x", base_url="http://fake/v1", http_client=client_for(app), max_retries=0
    ).with_raw_response

    async def one(i: int) -> tuple[int, str | None, float]:
        started = time.monotonic()
        try:
            await client.chat.completions.create(model="m", messages=[{"role": "user", "content": f"q{i}"}])
        except openai.APIStatusError as exc:
            return exc.status_code, exc.response.headers.get("retry-after"), time.monotonic() - started
        return 200, None, time.monotonic() - started

    async def staggered(i: int) -> tuple[int, str | None, float]:
        await asyncio.sleep(0.02 * i)  # arrive in order: 1 runs, 2 wait, the rest find the queue full
        return await one(i)

    results = await asyncio.gather(*(staggered(i) for i in range(6)))
    assert [status for status, _, _ in results] == [200, 200, 200, 503, 503, 503]
    for _, retry_after, elapsed in results[3:]:
        assert retry_after is not None and int(retry_after) >= 1
        assert elapsed < 0.3  # refused at once, not after waiting


async def test_a_client_that_goes_away_frees_the_model_at_once() -> None:
    """Issue 20: the server kept generating for abandoned requests, so everyone behind them waited. A client
    disconnecting mid-generation, or while queued, now cancels its request."""
    model = _slow_model(5.0)
    app = create_app(LLM(model))
    async with serve(app) as base_url:
        port = int(base_url.split(":")[2].split("/")[0])
        body = b'{"model": "m", "messages": [{"role": "user", "content": "abandoned"}]}'
        head = (
            f"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\n\r\n"
        ).encode()
        gone = []
        for _ in range(2):  # the first is running, the second waits in the queue
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(head + body)
            await writer.drain()
            gone.append(writer)
        await asyncio.sleep(0.3)
        assert app.state.admission.admitted == 2
        for writer in gone:
            writer.close()
        await asyncio.sleep(0.3)
        assert app.state.admission.admitted == 0
        model.delay_s = 0.0
        started = time.monotonic()
        async with httpx2.AsyncClient() as http:
            reply = await http.post(
                f"{base_url}/chat/completions", json={"model": "m", "messages": [{"role": "user", "content": "next"}]}
            )
        assert reply.status_code == 200 and reply.json()["choices"][0]["message"]["content"] == "re: next"
        assert time.monotonic() - started < 2
    assert model.finished == 1  # only "next" ran to the end
    assert [r.messages[-1]["content"] for r in model.requests] == ["abandoned", "next"]  # the queued one never ran


_SERVER = textwrap.dedent(
    """
    import sys
    from toolwild.llm.backends.scripted import ScriptedBackend
    from toolwild.llm.client import LLM
    from toolwild.serve.openai_server import create_app, run_server

    backend = ScriptedBackend(lambda request: "late", delay_s=120.0, max_connections=1)
    run_server(create_app(LLM(backend)), host="127.0.0.1", port=int(sys.argv[1]))
    """
)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_listening(port: int, process: subprocess.Popen[Any]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert process.poll() is None, process.stderr.read() if process.stderr else ""
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError("the server did not start")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_the_server_exits_promptly_on_a_signal_mid_generation(sig: signal.Signals) -> None:
    """Issue 20: SIGTERM was ignored for over 40 s while a generation ran (uvicorn waited for it to finish)."""
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-c", _SERVER, str(port)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        _wait_listening(port, process)
        client = socket.create_connection(("127.0.0.1", port))
        body = b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}'
        client.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
            + f"content-length: {len(body)}\r\n\r\n".encode()
            + body
        )
        time.sleep(0.5)  # the request is generating
        started = time.monotonic()
        process.send_signal(sig)
        process.wait(10)
        assert time.monotonic() - started < 5
        client.close()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


async def test_a_client_timeout_cancels_the_work_on_the_server() -> None:
    """The path of issue 20's run: toolwild's own client times out, drops its connection, and the server stops
    working for it instead of generating for minutes."""
    model = _slow_model(30.0)
    app = create_app(LLM(model))
    async with serve(app) as base_url:
        backend = OpenAIBackend(model="m", base_url=base_url, timeout_s=0.5)
        llm = LLM(backend, retry=RetryPolicy(max_attempts=1))
        with pytest.raises(TransientBackendError, match="timeout"):
            await llm.complete(_ask("slow"))
        await llm.aclose()
        for _ in range(50):
            if app.state.admission.admitted == 0:
                break
            await asyncio.sleep(0.02)
        assert app.state.admission.admitted == 0
    assert model.requests and model.finished == 0
