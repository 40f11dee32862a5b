"""`LLM`: the one way toolwild calls a model.

It wraps a :class:`Backend` with what every caller needs and no backend should re-implement: the content-addressed
cache, sharing of identical in-flight requests, a concurrency limit, timeouts, retries with backoff on
infrastructure errors (honouring ``retry-after``), prompt mode for models without native tools, and usage
accounting per role. Infrastructure failures surface as :class:`TransientBackendError` after the last retry, so
callers can tell "the provider failed" from "the model answered wrongly"; a :class:`ModelOutputError` (the model's
own unusable output) is never retried: the model would likely write it again, and it is the model's failure.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from toolwild.errors import (
    CacheMissError,
    ModelOutputError,
    PermanentBackendError,
    TransientBackendError,
)
from toolwild.llm.backend import Backend
from toolwild.llm.cache import CacheMode, ResponseCache, cache_key
from toolwild.llm.prompt_mode import from_prompt_reply, to_prompt_request
from toolwild.llm.types import ChatRequest, Completion
from toolwild.llm.usage import UsageTracker

__all__ = ["LLM", "RetryPolicy"]

_BACKSTOP_MARGIN_S = 5.0
"""How much longer than a backend's own deadline the client's per-attempt limit is: the backend's deadline fires
first and says what timed out; the client's only catches a backend that does not keep its own."""


@dataclass(frozen=True)
class RetryPolicy:
    """Retries of infrastructure errors: exponential backoff with jitter, capped, ``retry-after`` wins.

    ``RetryPolicy(max_attempts=1)`` turns retries off; tests set ``base_delay_s=0`` to run instantly.
    """

    max_attempts: int = 6
    base_delay_s: float = 0.5
    max_delay_s: float = 30.0
    jitter: bool = True

    def delay(self, attempt: int, retry_after: float | None, rng: random.Random) -> float:
        """Seconds to wait before attempt ``attempt + 1`` (``attempt`` counts from 1)."""
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_delay_s)
        base = min(self.base_delay_s * (2 ** (attempt - 1)), self.max_delay_s)
        return base * (0.5 + rng.random() / 2) if self.jitter else base


class LLM:
    """A backend with cache, retries, concurrency limit, prompt mode and usage accounting.

    Args:
        backend: the provider.
        cache: response cache (None: no caching).
        prompt_mode: describe tools in the prompt instead of passing them; None = when the backend lacks tools.
        retry: retry policy for infrastructure errors.
        timeout_s: per-attempt timeout (None: the backend's own); never shorter than the backend's own deadline
            (:attr:`Backend.request_timeout`) plus a margin, so ``--request-timeout`` is the one that counts; not
            applied to a backend whose attempts cannot be abandoned (the in-process model).
        max_connections: concurrent calls (default: the backend's hook).
        usage: where usage is accounted (a fresh tracker by default).
        sleep: the sleep used between retries (tests inject a fake clock).
    """

    def __init__(
        self,
        backend: Backend,
        *,
        cache: ResponseCache | None = None,
        prompt_mode: bool | None = None,
        retry: RetryPolicy | None = None,
        timeout_s: float | None = 120.0,
        max_connections: int | None = None,
        usage: UsageTracker | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        seed: int = 0,
    ) -> None:
        self.backend = backend
        self.cache = cache
        self.prompt_mode = (not backend.native_tools) if prompt_mode is None else prompt_mode
        self.retry = retry or RetryPolicy()
        self.timeout_s = _attempt_timeout(timeout_s, backend)
        self.usage = usage or UsageTracker()
        self.max_connections = max_connections or backend.max_connections()
        """Calls sent to the backend at once; more wait their turn here (first come, first served)."""
        self._limit = asyncio.Semaphore(self.max_connections)
        self._inflight: dict[str, asyncio.Future[Completion]] = {}
        self._sleep = sleep
        self._rng = random.Random(seed)
        self.backend_calls = 0
        """Attempts sent to the backend (tests use it to prove a replay made no call)."""

    def _transform(self, request: ChatRequest) -> tuple[ChatRequest, dict[str, object]]:
        if self.prompt_mode and request.tools:
            return to_prompt_request(request), {"prompt_mode": True}
        return request, {}

    async def complete(self, request: ChatRequest, *, role: str = "agent") -> Completion:
        """Run (or replay) one completion.

        Raises:
            TransientBackendError: the provider kept failing through every retry (an infrastructure error).
            PermanentBackendError: the provider refused the request.
            CacheMissError: the cache is read-only and the request is not in it.
        """
        sent, transform = self._transform(request)
        if self.cache is None or not self.cache.readable:
            # no cache, no content address: hashing a long conversation per call is not free
            return await self._call(sent, role, transform)
        key = cache_key(self.backend.identity(), request, transform)
        if self.cache.readable:
            hit = self.cache.get(key)
            if hit is not None:
                self.usage.record_hit(role)
                return hit
            if self.cache.mode is CacheMode.READ_ONLY:
                raise CacheMissError(f"read-only cache has no response for request {key[:12]}")
        pending = self._inflight.get(key)
        if pending is not None:
            self.usage.record_hit(role)
            try:
                return await asyncio.shield(pending)
            except asyncio.CancelledError:
                if not pending.cancelled() or _being_cancelled():
                    raise
                # the caller that owned the shared call went away (a served client disconnected): make it ourselves
                return await self.complete(request, role=role)
        future: asyncio.Future[Completion] = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        try:
            completion = await self._call(sent, role, transform)
        except asyncio.CancelledError:
            future.cancel()  # waiters see a cancelled shared call and make their own, instead of being cancelled
            raise
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # mark retrieved: waiters re-raise it, nobody else needs to
            raise
        else:
            future.set_result(completion)
            self.cache.put(key, completion)
            return completion
        finally:
            del self._inflight[key]

    async def _call(self, request: ChatRequest, role: str, transform: dict[str, object]) -> Completion:
        attempt = 0
        while True:
            attempt += 1
            try:
                async with self._limit:
                    self.backend_calls += 1
                    # a timeout context, not wait_for: no extra task per call
                    async with asyncio.timeout(self.timeout_s):
                        completion = await self.backend.complete(request)
            except (ModelOutputError, PermanentBackendError):
                self.usage.record_failure(role)  # failed for good on the first attempt: retrying cannot help
                raise
            except (TransientBackendError, TimeoutError) as exc:
                error = (
                    exc
                    if isinstance(exc, TransientBackendError)
                    else TransientBackendError(f"timeout: no reply within {self.timeout_s:g} s")
                )
                if attempt >= self.retry.max_attempts:
                    self.usage.record_failure(role)
                    raise error from None
                self.usage.record_retry(role)
                await self._sleep(self.retry.delay(attempt, error.retry_after, self._rng))
                continue
            self.usage.record_call(role, completion, model=self.backend.price_key)
            return from_prompt_reply(completion) if transform.get("prompt_mode") else completion

    def follow_backend_limit(self) -> None:
        """Lower the concurrency limit to the backend's current one (it may have learnt, from a toolwild server,
        that the server runs fewer requests at once).

        Why: the request timeout runs from the moment a request is sent, so a request queued on the server can
        time out before its generation starts; waiting here instead costs no timeout. Meant to be called before a
        run (the preflight does); calls already in flight keep their places.
        """
        limit = self.backend.max_connections()
        if limit < self.max_connections:
            self.max_connections = limit
            self._limit = asyncio.Semaphore(limit)

    async def aclose(self) -> None:
        """Close the backend and the cache."""
        await self.backend.aclose()
        if self.cache is not None:
            self.cache.close()


def _attempt_timeout(timeout_s: float | None, backend: Backend) -> float | None:
    """The client's per-attempt limit: none for a backend that cannot be abandoned, else ``timeout_s`` but never
    shorter than the backend's own deadline plus a margin (an explicit ``--request-timeout`` of 300 s must not be
    cut at the client's default 120 s)."""
    if not backend.abandonable or timeout_s is None:
        return None
    own = backend.request_timeout
    return timeout_s if own is None else max(timeout_s, own + _BACKSTOP_MARGIN_S)


def _being_cancelled() -> bool:
    """Whether the current task itself has been asked to stop (as opposed to something it awaited)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0
