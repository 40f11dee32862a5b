"""`synth envs` at scale: wall time, model calls and efficiency at concurrency 1, 16 and 64 (figures only).

Run: ``.venv/bin/python bench/synth_envs_scale.py`` (about 7 minutes, 6.5 of them the sequential run; add
``--skip-sequential`` to estimate it as calls x latency instead).

The model is :func:`toolwild.synth.scripted.stage_responder` behind ``ScriptedBackend(delay_s=0.2)``: every call
takes 200 ms, replies are valid and depend on the request only. The run is 4 fields x 4 subdomains x 4 families x
4 tools with the audit on (threshold 0.75), no cache, the client's connection pool as large as the concurrency.

Efficiency = ideal / actual wall time, ideal = max(critical-path depth x 0.2 s, calls x 0.2 s / concurrency):

- the depth is the longest chain of calls that must follow one another, counted from the calls made: the field's
  subdomain list, a subdomain's family list, a family's tools and its repair rounds (the longest family), the seed
  data, then (after the global dedup, which needs every subdomain) the longest audit chain: a precondition verdict,
  the simulated answer, the judge's verdict;
- calls x 0.2 s / concurrency is the time the calls take if the limit is always full.

That ideal lets audit calls fill the slots the generation leaves idle, which the design forbids: the exact dedup is
global, so no audit starts before every subdomain is in. The bound of that two-phase schedule is printed too:
max(generation depth x 0.2 s, generation calls x 0.2 s / concurrency) + max(audit depth x 0.2 s, audit calls x
0.2 s / concurrency), and the efficiency against it.

The event loop is uvloop's when installed, as in the CLI (:func:`toolwild.run.loop.run_async`).
"""

from __future__ import annotations

import sys
import time
from collections import Counter

from toolwild.llm.backends.scripted import ScriptedBackend
from toolwild.llm.client import LLM
from toolwild.run.loop import run_async
from toolwild.synth.envgen import SynthConfig, synth_environments
from toolwild.synth.scripted import stage_responder

FIELDS = ["finance", "healthcare", "logistics", "education"]
LATENCY_S = 0.2
_REPAIR = "These tools have problems"


_GENERATION = ("SubdomainList", "FamilyList", "ToolDraftList", "SeedData")


def phases(backend: ScriptedBackend) -> tuple[int, int, int, int]:
    """(generation depth, generation calls, audit depth, audit calls) of the run (see the module docstring)."""
    repairs = Counter(
        r.messages[-1]["content"].split(_REPAIR)[0]
        for r in backend.requests
        if (r.response_format or {}).get("title") == "ToolDraftList" and _REPAIR in r.messages[-1]["content"]
    )
    tools_chain = 1 + max(repairs.values(), default=0)
    simulated = any("Answer the call" in r.messages[-1]["content"] for r in backend.requests)
    generation = sum((r.response_format or {}).get("title") in _GENERATION for r in backend.requests)
    return 1 + 1 + tools_chain + 1, generation, 3 if simulated else 2, len(backend.requests) - generation


async def one_run(concurrency: int) -> dict[str, float]:
    backend = ScriptedBackend(stage_responder, delay_s=LATENCY_S, max_connections=concurrency)
    llm = LLM(backend)
    config = SynthConfig(
        subdomains_per_field=4,
        families_per_subdomain=4,
        tools_per_family=4,
        audit_threshold=0.75,
        concurrency=concurrency,
    )
    start, cpu_start = time.perf_counter(), time.process_time()
    result = await synth_environments(llm, FIELDS, config)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    calls = backend.finished
    gen_depth, gen_calls, audit_depth, audit_calls = phases(backend)
    depth = gen_depth + audit_depth
    ideal = max(depth * LATENCY_S, calls * LATENCY_S / concurrency)
    two_phase = max(gen_depth * LATENCY_S, gen_calls * LATENCY_S / concurrency) + max(
        audit_depth * LATENCY_S, audit_calls * LATENCY_S / concurrency
    )
    assert not result.failed_units and not result.failed_stages
    return {
        "concurrency": concurrency,
        "wall_s": wall,
        "calls": calls,
        "depth": depth,
        "ideal_s": ideal,
        "efficiency": ideal / wall,
        "two_phase_s": two_phase,
        "two_phase_efficiency": two_phase / wall,
        "harness_cpu_ms_per_call": cpu / calls * 1000,
        "environments": len(result.environments),
        "tools_kept": result.kept,
    }


def main(skip_sequential: bool | None = None) -> None:
    """The three runs (or 64 and 16 only, the sequential time estimated as calls x latency)."""
    if skip_sequential is None:
        skip_sequential = "--skip-sequential" in sys.argv
    rows = []
    for concurrency in (64, 16) if skip_sequential else (64, 16, 1):
        rows.append(run_async(one_run(concurrency)))
        row = rows[-1]
        print(
            f"concurrency {row['concurrency']:>3}: {row['wall_s']:7.2f} s wall, {row['calls']:,} calls, "
            f"depth {row['depth']}, ideal {row['ideal_s']:.2f} s, efficiency {row['efficiency']:.2f}; "
            f"two-phase bound {row['two_phase_s']:.2f} s, efficiency {row['two_phase_efficiency']:.2f}; "
            f"harness CPU {row['harness_cpu_ms_per_call']:.2f} ms/call "
            f"({row['environments']} environments, {row['tools_kept']} tools kept)",
            flush=True,
        )
    by = {int(r["concurrency"]): r for r in rows}
    sequential = by[1]["wall_s"] if 1 in by else by[64]["calls"] * LATENCY_S
    label = "measured" if 1 in by else "estimated as calls x 0.2 s"
    print(f"sequential wall time ({label}): {sequential:.1f} s")
    for concurrency in (16, 64):
        print(f"speed-up at {concurrency}: {sequential / by[concurrency]['wall_s']:.1f}x the sequential wall time")


if __name__ == "__main__":
    main()
