"""The local backend's plumbing without the model: aborting a generation, and recording context truncation.

A stand-in for ``llama_cpp.Llama`` plays the engine; the real model is exercised in ``test_local_backend.py``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from toolwild.llm.backends.local import LocalBackend, _CancellableFormatter
from toolwild.llm.types import ChatRequest

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class FakeLlama:
    """Generates for ``seconds`` unless the backend's abort check (its per-token stopping criterion) fires first."""

    def __init__(self, backend: LocalBackend, seconds: float = 0.0) -> None:
        self.backend = backend
        self.seconds = seconds
        self.prompts: list[list[dict[str, str]]] = []
        self.stopped_early = threading.Event()
        self.finished = threading.Event()

    def tokenize(self, data: bytes, add_bos: bool = False, special: bool = False) -> list[int]:
        return list(range(len(data) // 4 + 1))

    def reset(self) -> None:
        pass

    def create_chat_completion(self, **kwargs: Any) -> dict[str, Any]:
        self.prompts.append(kwargs["messages"])
        deadline = time.monotonic() + self.seconds
        while time.monotonic() < deadline:
            if self.backend._aborted():
                self.stopped_early.set()
                break
            time.sleep(0.005)
        self.finished.set()
        return {"choices": [{"message": {"content": "done"}, "finish_reason": "stop"}], "usage": {}}


def _backend(tmp_path: Path, seconds: float = 0.0, n_ctx: int = 4096) -> tuple[LocalBackend, FakeLlama]:
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    backend = LocalBackend(model_path=model, n_ctx=n_ctx)
    fake = FakeLlama(backend, seconds)
    backend._llm = fake  # type: ignore[assignment]  # loaded: _ensure_loaded returns it
    return backend, fake


async def test_cancelling_the_caller_stops_the_generation_and_frees_the_model(tmp_path: Path) -> None:
    """Issue 20: a served client that went away left llama.cpp generating for minutes; now the generation stops at
    its next token and the next request runs at once."""
    backend, fake = _backend(tmp_path, seconds=30.0)
    call = asyncio.create_task(backend.complete(ChatRequest(messages=[{"role": "user", "content": "long"}])))
    await asyncio.sleep(0.2)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert await asyncio.to_thread(fake.stopped_early.wait, 2.0)
    fake.seconds = 0.0
    started = time.monotonic()
    reply = await asyncio.wait_for(backend.complete(ChatRequest(messages=[{"role": "user", "content": "next"}])), 5)
    assert reply.text == "done" and time.monotonic() - started < 2


async def test_a_request_cancelled_while_waiting_never_generates(tmp_path: Path) -> None:
    backend, fake = _backend(tmp_path, seconds=0.5)
    first = asyncio.create_task(backend.complete(ChatRequest(messages=[{"role": "user", "content": "first"}])))
    await asyncio.sleep(0.05)
    second = asyncio.create_task(backend.complete(ChatRequest(messages=[{"role": "user", "content": "second"}])))
    await asyncio.sleep(0.05)
    second.cancel()
    assert (await first).text == "done"
    await asyncio.sleep(0.1)
    assert [p[-1]["content"] for p in fake.prompts] == ["first"]


async def test_dropped_messages_are_recorded_on_the_completion(tmp_path: Path) -> None:
    """Issue 20: fitting the context silently dropped the oldest messages; the completion now says how many."""
    backend, fake = _backend(tmp_path, n_ctx=120)
    filler = "x" * 200  # about 50 tokens per message with the stand-in tokenizer
    history = [{"role": "system", "content": "terse"}]
    for _ in range(3):
        history += [{"role": "user", "content": filler}, {"role": "assistant", "content": "ok"}]
    history.append({"role": "user", "content": "last"})
    reply = await backend.complete(ChatRequest(messages=history, max_tokens=8))
    kept = fake.prompts[-1]
    assert reply.dropped_messages == len(history) - len(kept) > 0
    assert kept[0]["role"] == "system" and kept[-1]["content"] == "last"
    assert backend.truncated_messages == reply.dropped_messages
    short = await backend.complete(ChatRequest(messages=[{"role": "user", "content": "hi"}], max_tokens=8))
    assert short.dropped_messages == 0


def test_the_abort_criterion_is_added_to_the_formatters_own() -> None:
    pytest.importorskip("llama_cpp")
    from llama_cpp.llama_chat_format import ChatFormatterResponse

    aborted = threading.Event()

    def inner(**kwargs: Any) -> ChatFormatterResponse:
        return ChatFormatterResponse(prompt="p", stop=["</s>"], stopping_criteria=None)

    result = _CancellableFormatter(inner, aborted.is_set)(messages=[])
    assert result.prompt == "p" and result.stopping_criteria is not None
    assert result.stopping_criteria([1, 2], [0.0]) is False
    aborted.set()
    assert result.stopping_criteria([1, 2], [0.0]) is True
