"""Generation at scale: ``synth envs`` and ``synth sessions`` efficiency with a slow model, and template sessions by
the hundred thousand. Prints figures only (no assertion): the README quotes them.

Run: ``.venv/bin/python bench/synth_scale.py [--part envs|sessions|ledger|templates] [--quick]`` (all parts: about
an hour on 2 cores, most of it the 10,000 ledger sessions and the 100,000 template sessions; ``--quick`` scales
every part down for a smoke run, about 15 minutes).

- ``envs``: bench/synth_envs_scale.py: a 4-field x 4-subdomain x 4-family x 4-tool run with the audit on, against a
  scripted model that answers every call after 200 ms with a valid stage reply
  (``toolwild.synth.scripted.stage_responder``), at concurrency 64, 16 and 1 (``--quick``: the sequential time
  estimated as calls x latency); its docstring says how the ideal and the two-phase bound are computed.
- ``sessions``: ``synth sessions`` as the command runs it (unit log, per-session verification, in-order assembly) on
  an LLM-simulated environment with a model writer, both answering after 200 ms: 1,024 sessions at concurrency 64.
  Efficiency = ideal / actual, ideal = model calls x 200 ms / 64 (a lower bound: it assumes the calls spread evenly
  over the 64 slots, true when sessions far outnumber slots). Harness CPU per model call = this process's CPU
  time / calls.
- ``ledger``: the built-in ledger's scenario templates (every write validated by beancount) as a subprocess:
  ``suite ledger --sessions N`` verified and not, with ``--executor local`` and ``--executor process`` side by side
  (two interleaved rounds at N = 1,000; quick: one round at 512, verified only), the rate of each and their ratio;
  then rate and peak resident memory at two N with the default executor (1,000 and 10,000; quick: 256 and 512),
  without the semantic diversity figure (``--encoder none``: what generation itself holds), and once with it (its
  sentence encoder is loaded once, at the end, whatever N). Memory is given for the largest process (the command
  or one of its workers) and for all of them together (sampled every 0.2 s).
- ``--before SRC`` (with ``--part ledger``): the same verified ledger command run by the code in ``SRC`` (a copy of
  ``src`` from before a change, put first on ``PYTHONPATH``) and by this tree, interleaved (``--rounds``, at
  ``--sessions``, the default executor, ``--encoder none``): rate, CPU per session (the command and its workers,
  the figure to read on a shared machine), peak memory, the ratio of each, and whether the two suites are byte for
  byte the same. Nothing else runs with ``--before``.
- ``templates``: ``toolwild synth sessions --env inventory --n N`` (template wording, verification on, the default
  executor: worker processes on every core from 512 sessions) as a subprocess at N = 10,000 and 100,000 (quick:
  2,000 and 6,000): wall time, rate and peak resident memory against N.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
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
    from toolwild.synth.session_job import SessionJob
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


@dataclass
class Figures:
    """One generation command, measured from outside."""

    wall: float
    """Seconds."""
    largest: float
    """Peak resident memory of the largest process of the run (MiB): the command's own or one of its workers'."""
    tree: float
    """Peak resident memory of the command and its workers together (MiB, sampled every 0.2 s)."""
    written: int
    """Sessions in the suite."""
    cpu: float = 0.0
    """CPU seconds (user and system) of the command and of the workers it waited for."""
    digest: str = ""
    """SHA-256 of the suite written."""

    @property
    def rate(self) -> float:
        return self.written / self.wall


def _tree_rss_mib(root: int) -> float:
    """Resident memory of ``root`` and every process below it (Linux /proc; 0 where it cannot be read)."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    tree, grew = {root}, True
    while grew:
        below = {pid for pid, parent in parents.items() if parent in tree} - tree
        tree |= below
        grew = bool(below)
    pages = 0
    for pid in tree:
        try:
            pages += int(Path(f"/proc/{pid}/statm").read_text().split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return pages * resource.getpagesize() / 2**20


def _generate(args: list[str], out: Path, *, code: Path | None = None) -> Figures:
    """One ``toolwild`` generation command as a subprocess (its outputs removed after): see :class:`Figures`.
    ``code``: a ``src`` folder to run instead of this tree's (put first on ``PYTHONPATH``)."""
    env = None
    if code is not None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(code), os.environ.get("PYTHONPATH")]))}
    start = time.perf_counter()
    child = subprocess.Popen(
        [*TOOLWILD, *args, "--out", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env
    )
    peak = 0.0
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not stop.wait(0.2):
            peak = max(peak, _tree_rss_mib(child.pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _pid, status, usage = os.wait4(child.pid, 0)  # the usage of the command and of the workers it waited for
    wall = time.perf_counter() - start
    stop.set()
    sampler.join()
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"toolwild {' '.join(args)} exited {child.returncode}: {child.stderr.read().decode()[-2000:]}")
    written = sum(1 for _ in out.open("rb"))
    digest = hashlib.sha256(out.read_bytes()).hexdigest()
    for path in out.parent.glob(f"{out.name}*"):
        path.unlink()
    cpu = usage.ru_utime + usage.ru_stime
    return Figures(wall, usage.ru_maxrss / 1024, max(peak, usage.ru_maxrss / 1024), written, cpu, digest)


def _line(what: str, f: Figures) -> str:
    return (
        f"{what}: {f.written:,} sessions in {f.wall:.0f} s ({f.rate:,.1f} sessions/s), peak RSS {f.largest:.0f} MiB "
        f"(largest process), {f.tree:.0f} MiB (all processes)"
    )


def bench_inventory(sizes: list[int], tmp: Path) -> None:
    """``synth sessions --env inventory --n N`` (template wording, verified, the default executor) at each N."""
    for n in sizes:
        f = _generate(["synth", "sessions", "--env", "inventory", "--n", str(n)], tmp / f"inventory-{n}.jsonl")
        print(_line(f"inventory, verified, n={n:,}", f) + f" = {f.wall / 60:.1f} min")


def bench_ledger(sizes: list[int], side_by_side: int, rounds: int, verify_modes: list[str], tmp: Path) -> None:
    """The ledger's scenario templates (every write validated by beancount), see the module docstring."""
    measured: dict[tuple[str, ...], Figures] = {}

    def ledger(*args: str) -> Figures:
        if args not in measured:
            measured[args] = _generate(["suite", "ledger", *args], tmp / "ledger.jsonl")
        return measured[args]

    for verify in verify_modes:
        rates: dict[str, list[float]] = {"local": [], "process": []}
        for round_ in range(rounds):
            for executor in rates:
                args = ("--sessions", str(side_by_side), verify, "--executor", executor, "--encoder", "none")
                f = _generate(["suite", "ledger", *args], tmp / "ledger.jsonl")
                measured.setdefault(args, f)
                rates[executor].append(f.rate)
                print(_line(f"ledger {verify[2:]}, --executor {executor}, n={side_by_side:,} (round {round_ + 1})", f))
        local, process = statistics.mean(rates["local"]), statistics.mean(rates["process"])
        print(
            f"ledger {verify[2:]}: local {local:.1f}, process {process:.1f} sessions/s (mean of {rounds}, "
            f"interleaved): process/local {process / local:.2f}x"
        )
    for n in sizes:  # the default executor (auto: processes from 512 sessions)
        f = ledger("--sessions", str(n), "--verify", "--encoder", "none")
        print(_line(f"ledger verified, n={n:,}, default executor, --encoder none", f))
    f = ledger("--sessions", str(sizes[0]), "--verify")
    print(_line(f"ledger verified, n={sizes[0]:,}, default executor, with the semantic figure (MiniLM)", f))


def bench_before_after(before: Path, n: int, rounds: int, tmp: Path) -> None:
    """The verified ledger command by the code in ``before`` and by this tree, interleaved (see the docstring)."""
    args = ["suite", "ledger", "--sessions", str(n), "--verify", "--encoder", "none"]
    runs: dict[str, list[Figures]] = {"before": [], "after": []}
    for round_ in range(rounds):
        for which in runs:
            f = _generate(args, tmp / "ledger.jsonl", code=before if which == "before" else None)
            runs[which].append(f)
            print(_line(f"{which}: ledger verified, n={n:,} (round {round_ + 1})", f) + f", CPU {f.cpu:.1f} s")
    b, a = runs["before"], runs["after"]
    rate_b, rate_a = statistics.mean(f.rate for f in b), statistics.mean(f.rate for f in a)
    cpu_b = statistics.mean(1000 * f.cpu / f.written for f in b)
    cpu_a = statistics.mean(1000 * f.cpu / f.written for f in a)
    same = len({f.digest for f in [*b, *a]}) == 1
    print(
        f"before {rate_b:.1f} sessions/s, {cpu_b:.0f} ms CPU per session, largest process "
        f"{max(f.largest for f in b):.0f} MiB, all {max(f.tree for f in b):.0f} MiB; after {rate_a:.1f} sessions/s, "
        f"{cpu_a:.0f} ms CPU per session, largest {max(f.largest for f in a):.0f} MiB, all "
        f"{max(f.tree for f in a):.0f} MiB; rate after/before {rate_a / rate_b:.2f}x, CPU per session "
        f"before/after {cpu_b / cpu_a:.2f}x; suites byte-identical: {'yes' if same else 'NO'}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--part", choices=("envs", "sessions", "templates", "ledger"), action="append")
    parser.add_argument("--quick", action="store_true", help="everything scaled down (a smoke run)")
    parser.add_argument("--before", type=Path, help="a src folder to compare with (ledger, verified; see above)")
    parser.add_argument("--sessions", type=int, default=1_000, help="sessions per run with --before")
    parser.add_argument("--rounds", type=int, default=2, help="interleaved rounds with --before")
    args = parser.parse_args()
    if args.before is not None:
        with tempfile.TemporaryDirectory() as tmp:
            bench_before_after(args.before.resolve(), args.sessions, args.rounds, Path(tmp))
        return
    parts = args.part or ["envs", "sessions", "ledger", "templates"]
    print(
        f"{LATENCY_S * 1000:.0f} ms per model call; peak RSS of this process so far: "
        f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB"
    )
    if "envs" in parts:
        from synth_envs_scale import main as envs_main

        envs_main(skip_sequential=args.quick)
    if "sessions" in parts:
        bench_sessions(64 if args.quick else 1024)
    if "templates" in parts or "ledger" in parts:
        with tempfile.TemporaryDirectory() as tmp:
            if "ledger" in parts:
                if args.quick:
                    bench_ledger([256, 512], 512, 1, ["--verify"], Path(tmp))
                else:
                    bench_ledger([1_000, 10_000], 1_000, 2, ["--verify", "--no-verify"], Path(tmp))
            if "templates" in parts:
                bench_inventory([2_000, 6_000] if args.quick else [10_000, 100_000], Path(tmp))


if __name__ == "__main__":
    main()
