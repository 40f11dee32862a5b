"""A dropped task attempt that called nothing leaves the episode as it was: the generator skips the rebuild (a fresh
episode with every accepted call replayed), and the sessions are exactly those of a generator that always rebuilds."""

from __future__ import annotations

import asyncio

import toolwild.synth.sessions as sessions
from toolwild.synth.sessions import SessionsConfig, load_handle, synth_sessions


def _generate(monkeypatch, *, always_rebuild: bool) -> tuple[list[dict], int]:
    """Twelve inventory sessions, and how many episodes were started for them."""
    env = load_handle("inventory")
    started = 0
    reset = env.backend.reset

    def counted_reset(*, seed: int = 0):
        nonlocal started
        started += 1
        return reset(seed=seed)

    monkeypatch.setattr(env.backend, "reset", counted_reset)
    if always_rebuild:
        monkeypatch.setattr(sessions, "_calls_made", lambda state: None)
    result = asyncio.run(synth_sessions([env], SessionsConfig(n_sessions=12, concurrency=4)))
    monkeypatch.undo()
    return [s.model_dump(mode="json") for s in result.suite.sessions], started


def test_attempts_that_called_nothing_are_not_rebuilt_and_the_sessions_are_the_same(monkeypatch):
    always, always_started = _generate(monkeypatch, always_rebuild=True)
    skipping, skipping_started = _generate(monkeypatch, always_rebuild=False)
    assert skipping == always and len(skipping) == 12
    assert skipping_started < always_started / 2  # most drops happen before any call
