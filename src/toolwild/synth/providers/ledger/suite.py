"""The built-in ledger suite in one call: the provider run over indices ``0..n-1`` in order, with no model.

``toolwild eval`` (its default suite), ``toolwild suite ledger`` and the tests use this; ``toolwild synth sessions
--env ledger`` runs the same provider through the session pipeline (concurrent, streamed, resumable) and writes
the same sessions.
"""

from __future__ import annotations

from pathlib import Path

from toolwild.core.formats.wtb import write_wtb_suite
from toolwild.core.session import Suite
from toolwild.synth.providers.ledger.provider import LedgerTemplates
from toolwild.synth.providers.ledger.scenario import GenerationError

__all__ = ["build_ledger_suite", "write_ledger_suite"]


def build_ledger_suite(
    n_sessions: int = 64,
    *,
    seed: int = 0,
    like_published: bool = False,
    ledger: Path | None = None,
    ledger_ref: str | None = None,
) -> Suite:
    """Generate ``n_sessions`` four-task sessions over seeded ledgers, or over a user's own ledger (deterministic for
    a given ``seed`` and ledger).

    Args:
        n_sessions: how many sessions.
        seed: the suite seed; session ``i`` uses the ledger of seed ``seed * 10000 + i`` (without ``ledger``) and
            its own random stream.
        like_published: use every ordering of the four coarse types once per 256 sessions (the published design,
            see :func:`toolwild.core.patterns.published_patterns`) instead of the default transition-bucket cycle.
        ledger: a user's own Beancount file every session starts from (see :class:`.provider.LedgerTemplates`).
        ledger_ref: how the sessions name that file (default: ``ledger`` as given).

    Raises:
        GenerationError: a session could not be built (a template bug: the suite must be whole).
        ConfigError: ``ledger`` is missing or does not load cleanly.
    """
    provider = LedgerTemplates(seed, like_published, ledger=ledger, ledger_ref=ledger_ref)
    sessions = []
    for index in range(n_sessions):
        outcome = provider.build(index)
        if outcome.session is None:
            raise GenerationError(f"session {index} could not be built: {'; '.join(outcome.reasons)}")
        sessions.append(outcome.session)
    return Suite(name="ledger", version="1", source=f"toolwild.synth.providers.ledger seed={seed}", sessions=sessions)


def write_ledger_suite(path: str | Path, n_sessions: int = 64, seed: int = 0, like_published: bool = False) -> Suite:
    """Generate the suite and write it as WildToolBench JSONL; returns the suite.

    Args:
        path: the JSONL file to write.
        n_sessions: how many sessions.
        seed: the suite seed.
        like_published: the published design of type orderings (see :func:`build_ledger_suite`).
    """
    suite = build_ledger_suite(n_sessions, seed=seed, like_published=like_published)
    write_wtb_suite(suite, path)
    return suite
