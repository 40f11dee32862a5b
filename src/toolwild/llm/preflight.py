"""A preflight check before a run: one cheap call, so a wrong endpoint fails in seconds, not after the run.

Why: a run against an endpoint that cannot work (nothing listening, an unknown model, a refused key) used to spend
every session's retries and timeouts before saying anything, and then reported the sessions as provider errors.
The check makes one minimal request straight to the backend (no cache, no retries) and turns those three cases
into a :class:`~toolwild.errors.ConfigError` naming the endpoint (credentials redacted) and the cause. Everything
else (a busy server, a 5xx, a slow first reply) lets the run start: its own retries deal with those.

A ``toolwild model serve`` endpoint also says how many requests it runs at once; the client then keeps to that
(:meth:`LLM.follow_backend_limit`), so with ``--concurrency 8`` against the one-at-a-time embedded model, requests
wait their turn on the client, and the request timeout measures a request's own generation, not the queue.

A run does not wait for the check before it starts (:func:`preflight_alongside`): it sets up and starts its sessions
while the check runs, and only the model calls wait for it. The check used to cost a serial round trip before any
session, and against a remote endpoint the set-up it now overlaps (suite fingerprint, environments, the sessions'
first messages) takes about as long.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import TypeVar

from toolwild.errors import ConfigError
from toolwild.llm.client import LLM

__all__ = ["PREFLIGHT_TIMEOUT_S", "preflight", "preflight_all", "preflight_alongside"]

T = TypeVar("T")

PREFLIGHT_TIMEOUT_S = 15.0
"""How long the check waits for the endpoint. Long enough for a cold local server to answer a one-token request,
short enough that a run that cannot work fails before the user looks away."""


async def preflight(llm: LLM, *, timeout_s: float = PREFLIGHT_TIMEOUT_S) -> None:
    """Check that ``llm``'s backend answers before a run; in-process backends (local, scripted) pass at once.

    Raises:
        ConfigError: the endpoint cannot be reached ("cannot reach http://127.0.0.1:9/v1: connection refused"),
            the model is unknown (HTTP 404 or a model-not-found error) or the API key is refused (HTTP 401/403).
    """
    if not timeout_s > 0:
        raise ConfigError(f"the preflight timeout must be positive, got {timeout_s}")
    await llm.backend.probe(timeout_s)
    llm.follow_backend_limit()


async def preflight_all(*clients: LLM | None, timeout_s: float = PREFLIGHT_TIMEOUT_S) -> None:
    """:func:`preflight` of every distinct client (the agent's, a simulator's, a simulated user's), at once."""
    distinct = {id(c): c for c in clients if c is not None}.values()
    checks = [asyncio.ensure_future(preflight(c, timeout_s=timeout_s)) for c in distinct]
    try:
        await asyncio.gather(*checks)
    finally:
        for check in checks:  # the first failure is the run's answer: the others need not finish
            check.cancel()


async def preflight_alongside(
    clients: tuple[LLM | None, ...], work: Callable[[asyncio.Future[None]], Awaitable[T]]
) -> T:
    """Run ``work`` while the clients are checked (:func:`preflight_all`), not after.

    ``work`` gets the future its model calls must wait on (the runner's ``ready``): it is resolved once every check
    has passed, so nothing is asked of a model before then, and a toolwild server's advertised limit is known before
    the first call. When a check fails, ``work`` is cancelled (it has made no model call, so it has no result to
    keep) and the check's :class:`ConfigError` is raised: the run stops with the message it stopped with when the
    check ran first.
    """
    ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    job = asyncio.ensure_future(work(ready))
    try:
        await preflight_all(*clients)
    except BaseException:
        job.cancel()
        with contextlib.suppress(BaseException):
            await job
        raise
    ready.set_result(None)
    return await job
