"""Generation at scale: ``synth envs`` and ``synth sessions`` efficiency with a slow model, and template sessions by
the hundred thousand. Prints figures only (no assertion): the README quotes them.

Run: ``.venv/bin/python bench/synth_scale.py [--part envs|sessions|templates] [--quick]`` (all parts: about 20
minutes on 2 cores, most of it the 100,000 template sessions and the sequential environment run; ``--quick``
scales every part down for a smoke run).

- ``envs``: bench/synth_envs_scale.py: a 4-field x 4-subdomain x 4-family x 4-tool run with the audit on, against a
  scripted model that answers every call after 200 ms with a valid stage reply
  (``toolwild.synth.scripted.stage_responder``), at concurrency 64, 16 and 1 (``--quick``: the sequential time
  estimated as calls x latency); its docstring says how the ideal and the two-phase bound are computed.
- ``sessions``: ``synth sessions`` as the command runs it (unit log, per-session verification, in-order assembly) on
  an LLM-simulated environment with a model writer, both answering after 200 ms: 1,024 sessions at concurrency 64.
  Efficiency = ideal / actual, ideal = model calls x 200 ms / 64 (a lower bound: it assumes the calls spread evenly
  over the 64 slots, true when sessions far outnumber slots). Harness CPU per model call = this process's CPU
  time / calls.
- ``templates``: ``toolwild synth sessions --env inventory --n N`` (template wording, verification on) as a
  subprocess at N = 10,000, 30,000 and 100,000: wall time and peak resident memory of the process against N, then
  the built-in ledger (its scenario templates, every write validated by beancount) at N = 1,000 for its rate.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "tests" / "helpers")]

LATENCY_S = 0.2
TOOLWILD = [sys.executable, "-m", "toolwild.cli.main"]


def _writer(request) -> str:
    """The utterance writer: echoes the brief's correct example (it keeps the wording rules)."""
    brief = json.loads(request.messages[-1]["content"])
    return json.dumps({"utterance": brief["a correct example"]})


def bench_sessions(n: int, concurrency: int = 64) -> None:
    from library_env import LIBRARY, library_model

    from toolwild.core.formats.environment import write_environment
    from toolwild.eval.validate import avalidate_session
    from toolwild.llm.backends.scripted import ScriptedBackend
    from toolwild.llm.cache import ResponseCache
    from toolwild.llm.client import LLM
    from toolwild.run import LocalExecutor, UnitLog
    from toolwild.synth.pipeline import SessionJob
    from toolwild.synth.sessions import SessionsConfig, load_handle, session_providers

    with tempfile.TemporaryDirectory() as tmp:
        env_file = Path(tmp) / "library.env.json"
        write_environment(LIBRARY, env_file)
        cache = ResponseCache(Path(tmp) / "cache.sqlite")
        sim_backend = ScriptedBackend(library_model, delay_s=LATENCY_S, max_connections=concurrency)
        writer_backend = ScriptedBackend(_writer, delay_s=LATENCY_S, max_connections=concurrency)
        simulator, writer = LLM(sim_backend, cache=cache), LLM(writer_backend, cache=cache)
        config = SessionsConfig(n_sessions=n, concurrency=concurrency)
        handles = [load_handle(str(env_file), simulator=simulator)]
        providers = session_providers(handles, config, writer=writer)

        async def verify(session, _provider):
            problems = await avalidate_session(session, base_dir=Path(tmp), simulator=simulator)
            return [{"severity": p.severity.value, "where": p.where, "message": p.message} for p in problems]

        job = SessionJob(providers, [h.ref for h in handles], n, verify=verify)
        log = UnitLog.start(Path(tmp) / "progress.jsonl", job="bench", fingerprint="x", identity={})
        cpu0, start = time.process_time(), time.perf_counter()
        asyncio.run(job.run(LocalExecutor(concurrency), record=log.append))
        made = []
        job.assemble(log.records(), write=made.append)
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu0
        log.close()
        calls = len(sim_backend.requests) + len(writer_backend.requests)
        ideal = calls * LATENCY_S / concurrency
        print(
            f"synth sessions, simulated environment + model writer, concurrency {concurrency}: {len(made)} of {n} "
            f"sessions, {calls:,} model calls ({len(sim_backend.requests):,} simulator, "
            f"{len(writer_backend.requests):,} writer) in {wall:.1f} s = {len(made) / wall:.1f} sessions/s; "
            f"ideal {ideal:.1f} s, efficiency {ideal / wall:.2f}; harness CPU {1000 * cpu / calls:.2f} ms per "
            "model call"
        )


def _template_run(env: str, n: int, tmp: Path) -> tuple[float, float, int]:
    """One ``synth sessions`` subprocess: wall seconds, peak RSS (MiB) of that process, sessions written."""
    out = tmp / f"{env}-{n}.jsonl"
    script = (
        "import resource, subprocess, sys, time, json\n"
        "t = time.perf_counter()\n"
        "p = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL)\n"
        "w = time.perf_counter() - t\n"
        "print(json.dumps([w, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, p.returncode]))\n"
    )
    args = [*TOOLWILD, "synth", "sessions", "--env", env, "--n", str(n), "--out", str(out)]
    wall, rss, code = json.loads(
        subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, check=True).stdout
    )
    if code != 0:
        raise SystemExit(f"synth sessions --env {env} --n {n} exited {code}")
    written = sum(1 for _ in out.open("rb"))
    for path in tmp.glob(f"{env}-{n}.jsonl*"):
        path.unlink()
    return wall, rss, written


def bench_templates(sizes: list[int], ledger: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            wall, rss, written = _template_run("inventory", n, Path(tmp))
            print(
                f"template sessions (inventory, verified): {written:,} of {n:,} in {wall:.0f} s "
                f"({wall / 60:.1f} min, {written / wall:,.0f} sessions/s), peak RSS {rss:.0f} MiB"
            )
        wall, rss, written = _template_run("ledger", ledger, Path(tmp))
        print(
            f"template sessions (ledger scenarios on beancount, verified): {written:,} of {ledger:,} in {wall:.0f} s "
            f"({written / wall:,.1f} sessions/s), peak RSS {rss:.0f} MiB"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--part", choices=("envs", "sessions", "templates"), action="append")
    parser.add_argument("--quick", action="store_true", help="everything scaled down (a smoke run)")
    args = parser.parse_args()
    parts = args.part or ["envs", "sessions", "templates"]
    print(
        f"{LATENCY_S * 1000:.0f} ms per model call; peak RSS of this process so far: "
        f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB"
    )
    if "envs" in parts:
        from synth_envs_scale import main as envs_main

        envs_main(skip_sequential=args.quick)
    if "sessions" in parts:
        bench_sessions(64 if args.quick else 1024)
    if "templates" in parts:
        bench_templates([1_000, 3_000] if args.quick else [10_000, 30_000, 100_000], 50 if args.quick else 1_000)


if __name__ == "__main__":
    main()
