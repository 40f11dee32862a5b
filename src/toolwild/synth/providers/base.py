"""The seam between the session pipeline and the ways sessions are made.

``toolwild synth sessions`` schedules one unit per session; a :class:`SessionProvider` makes the session of a given
index for its environment. Two kinds exist: the generic builder (any environment: tasks built bottom-up from its
tool graph, :mod:`toolwild.synth.sessions`) and domain template providers (the Beancount ledger's hand-written
scenarios, :mod:`toolwild.synth.providers.ledger`).

Why an index and not a shared random stream: the output must not depend on the concurrency or on the order units
finish in, so everything a session needs is derived from the suite seed and its index.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Protocol

from toolwild.core.session import Session

__all__ = ["SessionOutcome", "SessionProvider"]


@dataclass
class SessionOutcome:
    """What making one session gave: the session, or why it could not be built, and what was dropped on the way."""

    session: Session | None
    reasons: list[str] = field(default_factory=list)
    """Why the session could not be built (one line per restart), when ``session`` is None."""
    drops: Counter[str] = field(default_factory=Counter)
    """Task attempts dropped, by reason."""
    drop_examples: dict[str, str] = field(default_factory=dict)
    """One example per drop reason (the first met in this session)."""
    given_up: str | None = None
    """Set when this session found the environment unusable (its simulator cannot answer): later sessions on the
    same environment are not built (see :mod:`toolwild.synth.pipeline`)."""

    def to_json(self) -> dict[str, Any]:
        """The outcome as logged (the session in WildToolBench form is added by the pipeline)."""
        return {
            "reasons": self.reasons,
            "drops": dict(self.drops),
            "drop_examples": self.drop_examples,
            "given_up": self.given_up,
        }


class SessionProvider(Protocol):
    """Makes the sessions of one environment."""

    name: str
    """Recorded in the suite report (``graph``, ``ledger-templates``)."""

    async def make(self, index: int) -> SessionOutcome:
        """Session ``index`` of the suite (deterministic for the suite's seed and ``index``)."""
        ...

    def restore(self, index: int, session: Session | None) -> None:
        """A resumed run hands over each session this provider made before the kill, in index order, before any
        :meth:`make`; providers whose choices depend on earlier sessions rebuild that state here (others ignore
        it)."""
        ...
