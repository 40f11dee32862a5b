"""Session generation throughput: ``synth sessions`` on a Python domain and on a model-simulated environment.

Run: ``.venv/bin/python bench/sessions.py`` (about half a minute).

- ``inventory``: 256 ``--like-published`` sessions on the built-in domain, then the verifier (oracle in both modes,
  replay of every gold call and state, value-level subtype check), timed apart.
- ``simulated``: 64 sessions on a four-tool library environment answered by a scripted model that reads the state
  from its prompt (an instant model: what is timed is the pipeline, prompt building, cache and validation), first
  with the model, then again from the cache alone (no model call).
"""

from __future__ import annotations

import asyncio
import resource
import sys
import tempfile
import time
from pathlib import Path

from toolwild.core.formats.environment import write_environment
from toolwild.eval.validate import validate_suite
from toolwild.llm.backends.scripted import ScriptedBackend
from toolwild.llm.cache import CacheMode, ResponseCache
from toolwild.llm.client import LLM
from toolwild.synth.sessions import SessionsConfig, load_handle, synth_sessions

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "helpers"))
from library_env import LIBRARY, library_model


def bench_inventory() -> None:
    start = time.perf_counter()
    result = asyncio.run(
        synth_sessions([load_handle("inventory")], SessionsConfig(n_sessions=256, like_published=True))
    )
    built = time.perf_counter() - start
    start = time.perf_counter()
    problems = validate_suite(result.suite, replay=True, subtypes=True)
    checked = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    tasks = sum(len(s.tasks) for s in result.suite.sessions)
    attempts = tasks + sum(result.drops.values())
    print(
        f"inventory: {len(result.suite.sessions)} sessions ({tasks} tasks, {attempts} task attempts) in {built:.2f} s "
        f"= {len(result.suite.sessions) / built:,.0f} sessions/s; verification {checked:.2f} s "
        f"({len(problems)} problems); peak resident memory {peak:.0f} MiB"
    )


def bench_simulated(n: int = 64) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "library.env.json"
        write_environment(LIBRARY, path)
        cache = Path(tmp) / "cache.sqlite"
        backend = ScriptedBackend(library_model)
        start = time.perf_counter()
        simulator = LLM(backend, cache=ResponseCache(cache))
        first = asyncio.run(synth_sessions([load_handle(str(path), simulator=simulator)], SessionsConfig(n_sessions=n)))
        cold = time.perf_counter() - start
        start = time.perf_counter()
        replayer = LLM(ScriptedBackend([]), cache=ResponseCache(cache, mode=CacheMode.READ_ONLY))
        asyncio.run(synth_sessions([load_handle(str(path), simulator=replayer)], SessionsConfig(n_sessions=n)))
        warm = time.perf_counter() - start
        calls = len(backend.requests)
        print(
            f"simulated: {len(first.suite.sessions)} sessions, {calls:,} simulator calls: {cold:.2f} s with an "
            f"instant model ({calls / cold:,.0f} calls/s), {warm:.2f} s again from the cache alone"
        )


if __name__ == "__main__":
    bench_inventory()
    bench_simulated()
