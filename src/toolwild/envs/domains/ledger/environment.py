"""The ledger environment: a fresh, isolated copy of a seeded Beancount ledger per episode."""

from __future__ import annotations

from toolwild.envs.domains.ledger.tools import LedgerEpisode
from toolwild.envs.python import PythonEnvironment

__all__ = ["ledger_environment"]


def ledger_environment(seed: int = 0) -> PythonEnvironment:
    """The ``ledger`` environment: ``reset(seed=s)`` starts an episode on the ledger generated from ``seed + s``.

    A suite stores each session's ledger seed (``Session.extra["ledger_seed"]``), so with the default ``seed=0``
    ``reset(seed=session.extra["ledger_seed"])`` recreates exactly the ledger the session's gold was recorded on.

    Args:
        seed: an offset added to every reset seed.
    """
    return PythonEnvironment("ledger", LedgerEpisode, factory=lambda s: LedgerEpisode(seed=seed + s))
