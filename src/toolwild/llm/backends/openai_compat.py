"""A backend for OpenAI and every server that speaks its chat-completions API (vLLM, llama.cpp, Ollama, ...).

The ``openai`` package is optional: it is imported when a backend is built, so toolwild works without it for
scripted or cached runs. The SDK's own retries are off (``max_retries=0``) because retries, with their budget and
accounting, belong to the client layer; this file only maps a request out and a reply (or a failure) back in, with
typed errors the client layer can tell apart: transient (retry), permanent (give up), malformed (retry).

Secrets: the API key is read from an environment variable once, handed to the SDK, and kept here only behind
:class:`_Secret` so it cannot leak through ``repr``, :meth:`OpenAIBackend.identity`, logs or error messages (any
server text quoted in an error is scrubbed of it).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import ssl
import time
import urllib.parse
import urllib.request
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any, Literal

from toolwild.errors import (
    ConfigError,
    MalformedResponseError,
    MissingDependencyError,
    PermanentBackendError,
    TransientBackendError,
)
from toolwild.llm.backend import DEFAULT_REQUEST_TIMEOUT_S, Backend
from toolwild.llm.redact import redact_url
from toolwild.llm.types import ChatRequest, Completion, CompletionToolCall, Usage

if TYPE_CHECKING:
    import httpx2
    from openai import AsyncOpenAI

__all__ = ["CONCURRENCY_HEADER", "OpenAIBackend"]

log = logging.getLogger(__name__)

_DUMMY_KEY = "not-needed"
_TRANSIENT_STATUSES = frozenset({408, 409, 429})
_FINISH_REASONS: frozenset[str] = frozenset({"stop", "length", "tool_calls", "content_filter"})
_MAX_SERVER_TEXT = 300
CONCURRENCY_HEADER = "x-toolwild-concurrency"
"""Response header in which ``toolwild model serve`` says how many requests it runs at once. The preflight reads
it and the client then sends no more than that: extra requests wait on the client, where the request timeout does
not run yet, instead of in the server's queue, where it does."""
_MAX_ADVERTISED = 1024
_NAMELESS_CALL = "tool call without a function name"
_AUTH_STATUSES = frozenset({401, 403})
_MODEL_MISSING_WORDS = ("model_not_found", "does not exist", "not found", "unknown model", "no such model")

# How ``response_format`` is sent, from most to least demanding. A server that rejects one level (HTTP 400 naming
# the feature) is asked again one level down, and the backend remembers the level for later calls.
_RF_STRICT, _RF_SCHEMA, _RF_JSON_OBJECT = 0, 1, 2
_RF_TRIGGERS: dict[int, tuple[str, ...]] = {
    _RF_STRICT: ("strict", "json_schema"),
    _RF_SCHEMA: ("json_schema", "response_format"),
}


class _Secret:
    """Holds a credential; every printable form is redacted so it cannot leak by accident."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def scrub(self, text: str) -> str:
        """Return ``text`` with every occurrence of the secret replaced (servers sometimes echo the key back)."""
        return text.replace(self._value, "***") if len(self._value) >= 4 else text

    def __repr__(self) -> str:
        return "_Secret(***)"

    __str__ = __repr__


class OpenAIBackend(Backend):
    """Chat completions through the official ``openai`` SDK (``AsyncOpenAI``).

    Args:
        model: the model name sent with every request.
        base_url: the ``/v1`` endpoint of a compatible server; None means api.openai.com.
        api_key_env: the environment variable holding the key, read once at construction. Local servers
            (``base_url`` set) usually need none, so a dummy key is used when the variable is unset.
        timeout_s: the deadline of one call, end to end (connection, queueing on the server, reading the reply);
            default :data:`~toolwild.llm.backend.DEFAULT_REQUEST_TIMEOUT_S`.
        http_client: an ``httpx2.AsyncClient`` to send through (tests use an in-process ASGI transport); by
            default one is made with a pool of ``max_connections``.
        max_connections: how many calls may run at once against this backend (pool size and the client layer's
            concurrency limit).

    Raises:
        MissingDependencyError: the ``openai`` package is not installed.
        ConfigError: no key in ``api_key_env`` and no ``base_url``, or a non-positive timeout or pool size.
    """

    kind = "openai"

    def __init__(
        self,
        *,
        model: str,
        base_url: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
        http_client: httpx2.AsyncClient | None = None,
        max_connections: int = 16,
    ) -> None:
        super().__init__(model=model, base_url=base_url)
        try:
            import openai
        except ImportError as exc:
            raise MissingDependencyError("the 'openai' backend needs the openai package: pip install openai") from exc
        if not timeout_s > 0:
            raise ConfigError(f"timeout_s must be positive, got {timeout_s}")
        if max_connections < 1:
            raise ConfigError(f"max_connections must be at least 1, got {max_connections}")

        key = os.environ.get(api_key_env) or None
        if key is None:
            if base_url is None:
                raise ConfigError(
                    f"no API key: set the environment variable {api_key_env} (or give a base_url for a local server)"
                )
            key = _DUMMY_KEY
        self._secret = _Secret(key)
        self.api_key_env = api_key_env
        self.timeout_s = float(timeout_s)
        self._max_connections = max_connections
        self.server_concurrency: int | None = None
        """How many requests the server runs at once, when it said so (:data:`CONCURRENCY_HEADER`)."""
        self._rf_level = _RF_STRICT
        self._openai = openai

        if http_client is None:
            http_client = _default_http_client(base_url, self.timeout_s, max_connections)
        self._client: AsyncOpenAI = openai.AsyncOpenAI(
            api_key=key, base_url=base_url, timeout=self.timeout_s, max_retries=0, http_client=http_client
        )
        # The endpoint as the SDK itself joins it (its base URL always ends in "/"), computed once: a relative path
        # would be parsed and joined to the base URL again on every call.
        root = self._client.base_url
        self._endpoint = str(root.copy_with(raw_path=root.raw_path + b"chat/completions"))

    def __repr__(self) -> str:
        return (
            f"OpenAIBackend(model={self.model!r}, base_url={redact_url(self.base_url)!r}, "
            f"api_key_env={self.api_key_env!r})"
        )

    @property
    def where(self) -> str:
        """The endpoint as it may be shown: credentials in the URL redacted."""
        return redact_url(self.base_url) or "https://api.openai.com/v1"

    @property
    def request_timeout(self) -> float:
        """The deadline of one call (the constructor's ``timeout_s``)."""
        return self.timeout_s

    def identity(self) -> dict[str, str | None]:
        """Kind, model and endpoint for the cache key; the endpoint without credentials (cache files get shared)."""
        return {"kind": self.kind, "model": self.model, "base_url": redact_url(self.base_url)}

    def max_connections(self) -> int:
        """How many calls may run at once: the constructor's ``max_connections``, or fewer when the server said it
        runs fewer at once (learnt by :meth:`probe`)."""
        return min(self._max_connections, self.server_concurrency or self._max_connections)

    async def aclose(self) -> None:
        """Close the SDK client and its HTTP connection pool (an injected ``http_client`` too)."""
        await self._client.close()

    async def complete(self, request: ChatRequest) -> Completion:
        """Run one chat completion.

        When the request asks for a JSON Schema reply and the server refuses strict mode (or JSON Schema), the call
        is repeated once per step down (non-strict schema, then plain JSON object) and the step is remembered, so
        later calls go straight to what the server accepts. The caller validates the reply against the schema
        whatever mode was used.

        Raises:
            TransientBackendError: timeout, connection failure, HTTP 408/409/429/5xx (with ``retry_after`` when
                the server sent a hint).
            MalformedResponseError: a 2xx answer that is not a usable completion.
            PermanentBackendError: any other HTTP 4xx.
        """
        while True:
            level = self._rf_level
            params = self._params(request, level)
            # Errors are raised after the ``try``, not inside ``except``, so the SDK exception (whose text may quote
            # the server, and the server may echo the key) is not even kept as ``__context__``.
            error: Exception | None = None
            started = time.perf_counter()
            try:
                async with asyncio.timeout(self.timeout_s):
                    # The SDK's ``chat.completions.create`` walks every message through a TypedDict transform and
                    # builds pydantic objects for the reply (milliseconds per call on long conversations); our params
                    # are already plain JSON, so they go to the SDK's ``post`` (same HTTP handling and error classes).
                    # The reply comes back as raw bytes (``cast_to=dict`` would walk the parsed JSON once more) and is
                    # parsed and checked by ``_completion``.
                    raw = await self._client.post(self._endpoint, body=params, cast_to=bytes)
            except TimeoutError:
                error = TransientBackendError(f"timeout: no reply within {self.timeout_s:g} s")
            except self._openai.APIStatusError as exc:
                if self._downgrade_response_format(request, level, exc):
                    continue
                error = self._status_error(exc)
            except self._openai.APITimeoutError:
                error = TransientBackendError(f"timeout: no reply within {self.timeout_s:g} s")
            except self._openai.APIConnectionError as exc:
                error = TransientBackendError(self._connection_message(exc))
            except self._openai.APIResponseValidationError:
                error = MalformedResponseError("the server's reply does not fit a chat completion")
            if error is not None:
                raise error
            latency = time.perf_counter() - started
            try:
                response = json.loads(raw)
            except ValueError:
                raise MalformedResponseError("the server's reply is not JSON") from None
            return self._completion(response, latency)

    # -- request ------------------------------------------------------------------------------------------------

    def _params(self, request: ChatRequest, rf_level: int) -> dict[str, Any]:
        params: dict[str, Any] = {
            "model": self.model,
            "messages": request.messages,
            "temperature": request.temperature,
        }
        if request.tools:
            params["tools"] = request.tools
            params["tool_choice"] = _tool_choice(request.tool_choice)
        if request.response_format is not None:
            params["response_format"] = _response_format(request.response_format, rf_level)
        if request.seed is not None:
            params["seed"] = request.seed
        if request.max_tokens is not None:
            params["max_tokens"] = request.max_tokens
        return params

    def _downgrade_response_format(self, request: ChatRequest, level: int, exc: Any) -> bool:
        """Step ``response_format`` down one level if a 400 blames it; True when the call should be repeated."""
        if request.response_format is None or exc.status_code != 400 or level not in _RF_TRIGGERS:
            return False
        text = f"{exc.message} {_server_message(exc.body)}".lower()
        if not any(word in text for word in _RF_TRIGGERS[level]):
            return False
        self._rf_level = max(self._rf_level, level + 1)
        log.info(
            "%s (%s) rejected response_format at level %d; retrying with %s",
            self.model,
            self.where,
            level,
            "a non-strict json_schema" if level == _RF_STRICT else "json_object",
        )
        return True

    # -- response -----------------------------------------------------------------------------------------------

    def _completion(self, response: Any, latency: float) -> Completion:
        """Map the reply (parsed JSON: the SDK is asked not to build its pydantic objects) to a Completion."""
        choices = _field(response, "choices")
        if not isinstance(choices, list) or not choices:
            raise MalformedResponseError("the server's reply has no choices")
        choice = choices[0]
        message = _field(choice, "message")
        if not isinstance(message, dict):
            raise MalformedResponseError("the server's reply has a choice without a message")

        calls = [_tool_call(raw_call) for raw_call in _field(message, "tool_calls") or []]

        content = _field(message, "content")
        usage = _field(response, "usage")
        model = _field(response, "model")
        return Completion(
            text=content if isinstance(content, str) and content else None,
            tool_calls=calls,
            finish_reason=_finish_reason(_field(choice, "finish_reason")),
            usage=Usage(
                prompt_tokens=_int(_field(usage, "prompt_tokens")),
                completion_tokens=_int(_field(usage, "completion_tokens")),
            ),
            latency_s=latency,
            reasoning=_reasoning(message),
            model=model if isinstance(model, str) and model else None,
            dropped_messages=_int(_field(_field(response, "toolwild"), "dropped_messages")),
        )

    # -- errors -------------------------------------------------------------------------------------------------

    def _status_error(self, exc: Any) -> TransientBackendError | PermanentBackendError:
        status = int(exc.status_code)
        detail = self._secret.scrub(_server_message(exc.body) or exc.message or "")[:_MAX_SERVER_TEXT]
        text = f"HTTP {status} from {self.where} for model {self.model!r}: {detail}".rstrip(": ")
        if status in _TRANSIENT_STATUSES or status >= 500:
            return TransientBackendError(text, status=status, retry_after=_retry_after(exc.response.headers))
        return PermanentBackendError(text, status=status)

    def _connection_message(self, exc: Any) -> str:
        return self._secret.scrub(f"cannot reach {self.where}: {_unreachable_reason(exc)}")

    # -- preflight ----------------------------------------------------------------------------------------------

    async def probe(self, timeout_s: float) -> None:
        """Send one minimal chat completion (one token) and fail fast with a clear :class:`ConfigError`.

        Fails when the endpoint cannot be reached (refused, unknown host, TLS, no connection within ``timeout_s``),
        the key is refused (401/403) or the model is unknown (404, or a 400 naming a missing model). Anything else
        means the endpoint is there and answering for the model, so the run may start: a 429/5xx or a slow reply
        is the run's retries' business, and a 400 about this tiny request may not apply to the real ones. It
        bypasses the cache and the retries on purpose: a cached or retried check proves nothing, quickly.
        """
        import httpx2

        request = ChatRequest(messages=[{"role": "user", "content": "ping"}], max_tokens=1, temperature=0.0)
        params = self._params(request, self._rf_level)
        try:
            async with asyncio.timeout(timeout_s):
                response = await self._client.post(self._endpoint, body=params, cast_to=httpx2.Response)
            self.server_concurrency = _advertised(response.headers.get(CONCURRENCY_HEADER))
        except TimeoutError:
            log.warning("%s did not answer a one-token request within %g s; starting anyway", self.where, timeout_s)
        except self._openai.APIStatusError as exc:
            problem = self._refusal(exc)
            if problem is not None:
                raise ConfigError(problem) from None
            log.warning("%s answered the preflight request with HTTP %d; starting anyway", self.where, exc.status_code)
        except self._openai.APITimeoutError as exc:
            if _is_connect_timeout(exc):
                raise ConfigError(f"cannot reach {self.where}: no connection within {timeout_s:g} s") from None
            log.warning("%s did not answer a one-token request within %g s; starting anyway", self.where, timeout_s)
        except self._openai.APIConnectionError as exc:
            raise ConfigError(self._connection_message(exc)) from None

    def _refusal(self, exc: Any) -> str | None:
        """Why a preflight error status means the run cannot work (None: it may)."""
        status = int(exc.status_code)
        detail = self._secret.scrub(_server_message(exc.body) or exc.message or "")[:_MAX_SERVER_TEXT]
        if status in _AUTH_STATUSES:
            return f"{self.where} refused the API key from {self.api_key_env} (HTTP {status}): {detail}"
        lowered = f"{detail} {_error_code(exc.body)}".lower()
        names_model = "model" in lowered and any(word in lowered for word in _MODEL_MISSING_WORDS)
        if status in (400, 404) and names_model:
            return f"{self.where} does not serve model {self.model!r} (HTTP {status}): {detail}"
        if status == 404:
            return (
                f"{self.where} answered HTTP 404 for chat/completions with model {self.model!r}: either the model "
                f"is unknown or the URL is not the API root (it usually ends in /v1){': ' + detail if detail else ''}"
            )
        return None


def _tool_call(raw_call: Any) -> CompletionToolCall:
    """One tool call of the reply. A call without a function name is the model's bad output, not the provider's:
    it is kept, with an empty name and ``error`` set, so the agent's step fails as the model's (it names no tool)
    instead of the whole call being retried and the session dropped as a provider error."""
    function = _field(raw_call, "function")
    name = _field(function, "name")
    call_id = _field(raw_call, "id")
    call = CompletionToolCall.parse(
        name if isinstance(name, str) else "",
        _field(function, "arguments"),
        id=call_id if isinstance(call_id, str) else None,
    )
    if not call.name:
        call.error = _NAMELESS_CALL
    return call


def _advertised(value: str | None) -> int | None:
    """A server's concurrency header as a count, or None when absent or not a sane positive integer."""
    if value is None or not value.strip().isdigit():
        return None
    count = int(value)
    return count if 1 <= count <= _MAX_ADVERTISED else None


def _unreachable_reason(exc: BaseException) -> str:
    """A short human reason for a failed connection ("connection refused"), from the exception's causes."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ConnectionRefusedError):
            return "connection refused"
        if isinstance(seen, socket.gaierror):
            return "host name not found"
        if isinstance(seen, ssl.SSLError):
            return f"TLS error: {seen.reason or seen}"
        if isinstance(seen, ConnectionResetError):
            return "connection reset by the server"
        if isinstance(seen, OSError) and seen.strerror:
            return seen.strerror.lower()
        seen = seen.__cause__ or seen.__context__
    cause = exc.__cause__
    return f"{type(cause).__name__}: {cause}" if cause is not None else str(exc)


def _is_connect_timeout(exc: BaseException) -> bool:
    """Whether a timeout happened while connecting (the endpoint is unreachable), not while waiting for a reply."""
    import httpx2

    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, httpx2.ConnectTimeout):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _default_http_client(base_url: str | None, timeout_s: float, max_connections: int) -> httpx2.AsyncClient:
    """The SDK's default client (its redirect and timeout defaults) over toolwild's lean keep-alive transport.

    The stock httpx2 transport costs more CPU per call than the rest of the harness at high concurrency (see
    :mod:`toolwild.llm.backends.transport`). It is kept only when the environment names a proxy for the endpoint,
    since only httpx2's own transport honours ``HTTP(S)_PROXY``/``NO_PROXY``.
    """
    import httpx2
    import openai

    from toolwild.llm.backends.transport import PooledTransport

    timeout = httpx2.Timeout(timeout_s, connect=min(timeout_s, 10.0))
    limits = httpx2.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
    if _proxied(base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"):
        return openai.DefaultAsyncHttpx2Client(timeout=timeout, limits=limits)
    return openai.DefaultAsyncHttpx2Client(timeout=timeout, transport=PooledTransport(max_connections=max_connections))


def _proxied(url: str) -> bool:
    """Whether the environment routes ``url`` through a proxy (``HTTP(S)_PROXY``/``ALL_PROXY`` minus ``NO_PROXY``)."""
    proxies = urllib.request.getproxies()
    split = urllib.parse.urlsplit(url)
    if not (proxies.get(split.scheme) or proxies.get("all")):
        return False
    return not urllib.request.proxy_bypass_environment(split.hostname or "", proxies)


def _tool_choice(choice: str) -> str | dict[str, Any]:
    if choice in ("auto", "required", "none"):
        return choice
    return {"type": "function", "function": {"name": choice}}


def _response_format(schema: dict[str, Any], level: int) -> dict[str, Any]:
    if level >= _RF_JSON_OBJECT:
        return {"type": "json_object"}
    json_schema: dict[str, Any] = {"name": "reply", "schema": schema}
    if level == _RF_STRICT:
        json_schema["strict"] = True
    return {"type": "json_schema", "json_schema": json_schema}


def _finish_reason(value: Any) -> Literal["stop", "length", "tool_calls", "content_filter", "other"]:
    return value if isinstance(value, str) and value in _FINISH_REASONS else "other"  # type: ignore[return-value]


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _field(obj: Any, name: str) -> Any:
    """A field of a JSON object, or None when ``obj`` is not an object (malformed replies are checked by callers)."""
    return obj.get(name) if isinstance(obj, dict) else None


def _reasoning(message: dict[str, Any]) -> str | None:
    """The reasoning text servers put in extra message fields (``reasoning_content``: vLLM, DeepSeek; ``reasoning``)."""
    for key in ("reasoning_content", "reasoning"):
        value = message.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def _error_code(body: Any) -> str:
    """The ``code`` of an error body (``model_not_found`` ...), or ""."""
    inner = body.get("error", body) if isinstance(body, dict) else None
    code = inner.get("code") if isinstance(inner, dict) else None
    return code if isinstance(code, str) else ""


def _server_message(body: Any) -> str:
    """The short human message of an error body (the SDK already unwraps the ``error`` envelope)."""
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict):
            message = inner.get("message") or inner.get("detail")
            return str(message) if message is not None else ""
        return str(inner)
    return str(body) if body is not None else ""


def _retry_after(headers: Any) -> float | None:
    """Seconds to wait from ``retry-after-ms``, or ``retry-after`` as seconds or an HTTP date; None if absent/bad."""
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(float(millis) / 1000.0, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max((when - datetime.now(UTC)).total_seconds(), 0.0)
