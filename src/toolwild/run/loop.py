"""The event loop a synchronous entry point runs its coroutine on.

Why here: a job called from plain Python (:func:`toolwild.evaluate`, the CLI) needs one way to run the async core,
and uvloop, when installed, costs less CPU per model call than asyncio's own loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["run_async"]

T = TypeVar("T")


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine on uvloop when it is installed (less CPU per model call), else on asyncio's own loop."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(coro)
