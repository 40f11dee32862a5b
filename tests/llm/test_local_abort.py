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

from toolwild.llm.backends.local import GenerationAborted, LocalBackend
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


class FakeEngine:
    """The llama.cpp calls the decoding loop makes: a vocabulary where token 0 ends generation, pieces "t<n>"."""

    def __init__(self) -> None:
        self.evaluated: list[int] = []
        self.model = object()

    def llama_model_get_vocab(self, model: object) -> object:
        return model

    def llama_vocab_is_eog(self, vocab: object, token: int) -> bool:
        return token == 0

    def detokenize(self, tokens: list[int]) -> bytes:
        return b"".join(f"t{t}".encode() for t in tokens)

    def eval(self, tokens: list[int]) -> None:
        self.evaluated.extend(tokens)


class ScriptedSampler:
    """Plays a fixed token sequence; sets the abort flag after ``abort_after`` tokens."""

    def __init__(self, tokens: list[int], abort: threading.Event | None = None, abort_after: int = -1) -> None:
        self.tokens, self.abort, self.abort_after, self.drawn = list(tokens), abort, abort_after, 0

    def sample(self) -> int:
        self.drawn += 1
        if self.abort is not None and self.drawn == self.abort_after:
            self.abort.set()
        return self.tokens.pop(0)

    def close(self) -> None:
        pass


def _decode(tmp_path: Path, tokens: list[int], *, max_tokens: int = 10, stop: bytes = b"", **kwargs: Any) -> Any:
    backend, _ = _backend(tmp_path)
    backend._stop = stop
    engine = FakeEngine()
    abort = kwargs.pop("abort", threading.Event())
    decoded = backend._decode(engine, engine, ScriptedSampler(tokens, abort, **kwargs), max_tokens, abort)  # type: ignore[arg-type]
    return decoded, engine, backend


def test_decoding_stops_at_the_next_token_once_aborted(tmp_path: Path) -> None:
    """Issue 20: a served client that went away left llama.cpp generating; the loop checks the flag per token."""
    abort = threading.Event()
    with pytest.raises(GenerationAborted):
        _decode(tmp_path, [5, 6, 7, 8, 9], abort=abort, abort_after=2)
    assert abort.is_set()


def test_decoding_ends_at_end_of_generation_the_stop_text_or_max_tokens(tmp_path: Path) -> None:
    decoded, engine, backend = _decode(tmp_path, [5, 6, 0, 7])
    assert (decoded.text, decoded.finish, decoded.tokens) == ("t5t6", "stop", [5, 6])
    assert engine.evaluated == [5, 6] and backend.generated_tokens == 2
    decoded, engine, _ = _decode(tmp_path, [5, 6, 7, 8], max_tokens=3)
    assert (decoded.text, decoded.finish) == ("t5t6t7", "length")
    assert engine.evaluated == [5, 6]  # the last token is never fed back: nothing would read its logits
    decoded, _, _ = _decode(tmp_path, [5, 6, 7, 8], stop=b"6t7")
    assert (decoded.text, decoded.finish, decoded.tokens) == ("t5t", "stop", [5, 6, 7])


def test_prompts_are_evaluated_without_one_token_batches() -> None:
    """llama.cpp computes a one-token batch with other kernels (its logits differ); batch boundaries otherwise do
    not matter, so a prompt is cut into batches of at most n_batch tokens and never one alone."""
    from toolwild.llm.backends.local import _batch_sizes

    assert _batch_sizes(1025, 512) == [512, 511, 2]
    assert _batch_sizes(1024, 512) == [512, 512]
    assert _batch_sizes(700, 512) == [512, 188]
    assert _batch_sizes(2, 512) == [2]
    assert _batch_sizes(0, 512) == []
    for n in range(2, 1600, 7):
        sizes = _batch_sizes(n, 512)
        assert sum(sizes) == n and all(2 <= size <= 512 for size in sizes)


def test_thread_counts_come_from_arguments_then_the_environment_then_half_the_cpus(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from toolwild.errors import ConfigError
    from toolwild.llm.backends.local import THREADS_ENV, thread_counts

    monkeypatch.delenv(THREADS_ENV, raising=False)
    assert thread_counts(cpu_count=2) == (1, 1)  # one busy core must not stall the model (issue 34)
    assert thread_counts(cpu_count=16) == (8, 8)
    assert thread_counts(cpu_count=1) == (1, 1)
    assert thread_counts(3, cpu_count=2) == (3, 1)
    monkeypatch.setenv(THREADS_ENV, "2")
    assert thread_counts(cpu_count=2) == (2, 2)
    monkeypatch.setenv(THREADS_ENV, "1,2")
    assert thread_counts(cpu_count=2) == (1, 2)
    assert thread_counts(None, 4, cpu_count=2) == (1, 4)
    for bad in ("0", "two", "1,2,3", "-1"):
        monkeypatch.setenv(THREADS_ENV, bad)
        with pytest.raises(ConfigError, match=THREADS_ENV):
            thread_counts(cpu_count=2)
    monkeypatch.delenv(THREADS_ENV)
    with pytest.raises(ConfigError, match="n_threads"):
        thread_counts(0)


def test_bounded_replies_are_on_unless_switched_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from toolwild.llm.backends.local import BOUNDED_REPLIES_ENV

    monkeypatch.delenv(BOUNDED_REPLIES_ENV, raising=False)
    on, _ = _backend(tmp_path)
    assert on.bounded_replies and on.identity()["reply_bounds"]
    monkeypatch.setenv(BOUNDED_REPLIES_ENV, "0")
    off, _ = _backend(tmp_path)
    assert not off.bounded_replies and "reply_bounds" not in off.identity()  # the identity replies had before
    explicit = LocalBackend(model_path=off.model_path, bounded_replies=True)
    assert explicit.bounded_replies
