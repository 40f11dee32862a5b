"""Session providers: who makes session ``i`` of a suite for an environment (see :mod:`.base`)."""

from toolwild.synth.providers.base import SessionOutcome, SessionProvider

__all__ = ["SessionOutcome", "SessionProvider"]
