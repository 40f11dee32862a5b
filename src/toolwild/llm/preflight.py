"""A preflight check before a run: one cheap call, so a wrong endpoint fails in seconds, not after the run.

Why: a run against an endpoint that cannot work (nothing listening, an unknown model, a refused key) used to spend
every session's retries and timeouts before saying anything, and then reported the sessions as provider errors.
The check makes one minimal request straight to the backend (no cache, no retries) and turns those three cases
into a :class:`~toolwild.errors.ConfigError` naming the endpoint (credentials redacted) and the cause. Everything
else (a busy server, a 5xx, a slow first reply) lets the run start: its own retries deal with those.

A ``toolwild model serve`` endpoint also says how many requests it runs at once; the client then keeps to that
(:meth:`LLM.follow_backend_limit`), so with ``--concurrency 8`` against the one-at-a-time embedded model, requests
wait their turn on the client, and the request timeout measures a request's own generation, not the queue.
"""

from __future__ import annotations

from toolwild.errors import ConfigError
from toolwild.llm.client import LLM

__all__ = ["PREFLIGHT_TIMEOUT_S", "preflight"]

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
