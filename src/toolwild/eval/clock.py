"""Whose time a session spent: the provider's (failed attempts, retry back-off, queueing, a call still hanging) or
the agent's own (its successful model calls, its code, its steps).

Why: a session that hits its wall-clock limit is a provider error when the provider ate the time (left out of
accuracy and listed) and a model failure when the agent did (a model that loops until the limit must not gain
accuracy by being dropped). The runner installs one :class:`ProviderClock` per session; agents charge it.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass

__all__ = ["ProviderClock", "charge_provider", "current_clock"]


@dataclass
class ProviderClock:
    """Seconds of one session spent waiting on the provider."""

    waited_s: float = 0.0


current_clock: ContextVar[ProviderClock | None] = ContextVar("toolwild_provider_clock", default=None)


def charge_provider(seconds: float) -> None:
    """Add ``seconds`` of provider waiting to the running session's clock (a no-op outside a session)."""
    clock = current_clock.get()
    if clock is not None and seconds > 0:
        clock.waited_s += seconds
