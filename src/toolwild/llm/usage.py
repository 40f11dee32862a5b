"""Usage accounting: calls, cache hits, retries, tokens, latency and cost, per role.

Roles are the parts of toolwild that talk to models (``agent``, ``simulator``, ``judge``, ``generator``); keeping
them apart answers "what did the evaluation cost" separately from "what did generating the suite cost".
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from toolwild.llm.types import Completion

__all__ = ["DEFAULT_PRICES", "Price", "RoleUsage", "UsageTracker"]


@dataclass(frozen=True)
class Price:
    """USD per million tokens."""

    input_per_mtok: float
    output_per_mtok: float


DEFAULT_PRICES: dict[str, Price] = {
    "local": Price(0.0, 0.0),
    "smollm2-135m-instruct": Price(0.0, 0.0),
    "scripted": Price(0.0, 0.0),
}
"""Known prices; users extend this table through :class:`UsageTracker` (``prices=``)."""


@dataclass
class RoleUsage:
    """Totals for one role."""

    calls: int = 0
    """Backend calls actually made (cache hits excluded)."""
    cache_hits: int = 0
    retries: int = 0
    failures: int = 0
    """Calls that failed for good (after retries)."""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    cost_usd: float = 0.0
    unpriced_calls: int = 0
    """Calls to a model missing from the price table (their cost is unknown, not zero)."""


@dataclass
class UsageTracker:
    """Accumulates usage per role; safe to share between concurrent tasks of one event loop."""

    prices: dict[str, Price] = field(default_factory=lambda: dict(DEFAULT_PRICES))
    roles: dict[str, RoleUsage] = field(default_factory=dict)

    def _role(self, role: str) -> RoleUsage:
        return self.roles.setdefault(role, RoleUsage())

    def record_call(self, role: str, completion: Completion, *, model: str) -> None:
        """Count a completed backend call."""
        usage = self._role(role)
        usage.calls += 1
        usage.prompt_tokens += completion.usage.prompt_tokens
        usage.completion_tokens += completion.usage.completion_tokens
        usage.latency_s += completion.latency_s
        price = self.prices.get(model) or (self.prices.get(completion.model) if completion.model else None)
        if price is None:
            usage.unpriced_calls += 1
        else:
            usage.cost_usd += (
                completion.usage.prompt_tokens * price.input_per_mtok
                + completion.usage.completion_tokens * price.output_per_mtok
            ) / 1_000_000

    def record_hit(self, role: str) -> None:
        """Count a cache hit."""
        self._role(role).cache_hits += 1

    def record_retry(self, role: str) -> None:
        """Count a retried attempt."""
        self._role(role).retries += 1

    def record_failure(self, role: str) -> None:
        """Count a call that failed after all retries."""
        self._role(role).failures += 1

    def total(self) -> RoleUsage:
        """All roles added up."""
        out = RoleUsage()
        for usage in self.roles.values():
            for name, value in asdict(usage).items():
                setattr(out, name, getattr(out, name) + value)
        return out

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready totals per role and overall."""
        return {"roles": {k: asdict(v) for k, v in self.roles.items()}, "total": asdict(self.total())}
