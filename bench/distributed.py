"""The Ray executor against the local one on this machine: a CPU-heavy job, a latency-bound job, and Ray's cost per
unit. Figures only (no assertion): the README quotes them.

Run: ``.venv/bin/python bench/distributed.py [--quick]`` (about 6 minutes; needs ``pip install 'toolwild[ray]'``).
Every run is a fresh ``toolwild`` process, so the Ray runs include starting a local Ray instance (2 CPUs, the
machine's) and its workers.

- CPU-heavy: ``toolwild synth sessions --env inventory --n 20000`` (template sessions, each verified: oracle in both
  modes, gold calls replayed), ``--executor local`` (one process) against ``--executor ray`` (shards of 256 sessions
  on 2 workers); the files must be identical.
- latency-bound: ``toolwild eval`` of the model agent on the 256 synthetic sessions of ``bench/runner.py`` (2,232
  calls) against a fake OpenAI server in its own process that answers every call after 200 ms, concurrency 64,
  local against Ray (shards of 64 sessions, each running them 64 at once).
- Ray's cost per unit: 20,000 units that do nothing, through ``RayExecutor`` (shards of 256) against
  ``LocalExecutor``, in one process with Ray already started: (Ray wall - local wall) / units.

What cannot be measured here: several hosts. On a cluster the shards spread over every worker CPU, the driver still
writes every result (one JSON line per unit), and each worker host needs toolwild, the environment files and the
response cache at the same paths (shared storage), or its calls miss the cache (see the README).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "tests" / "helpers")]
TOOLWILD = [sys.executable, "-m", "toolwild.cli.main"]


def _timed(args: list[str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args[2:])} exited {done.returncode}: {done.stderr[-500:]}")
    return time.perf_counter() - start


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:12]


def bench_cpu(tmp: Path, n: int) -> None:
    walls, digests = {}, {}
    for executor in ("local", "ray"):
        out = tmp / f"cpu-{executor}.jsonl"
        walls[executor] = _timed(
            [*TOOLWILD, "synth", "sessions", "--env", "inventory", "--n", str(n), "--out", str(out), "--executor",
             executor]
        )  # fmt: skip
        digests[executor] = _digest(out)
    same = "identical files" if digests["local"] == digests["ray"] else "FILES DIFFER"
    print(
        f"CPU-heavy, {n:,} verified template sessions: local {walls['local']:.1f} s, Ray (2 workers) "
        f"{walls['ray']:.1f} s: speed-up {walls['local'] / walls['ray']:.2f}x ({same})"
    )


def bench_latency(tmp: Path) -> None:
    from runner import fake_server
    from scoring import synthetic_suite

    from toolwild.core.formats.wtb import write_wtb_suite

    suite_path = tmp / "suite.jsonl"
    write_wtb_suite(synthetic_suite(), suite_path)
    with fake_server(suite_path) as base_url:
        walls = {}
        for executor in ("local", "ray"):
            walls[executor] = _timed(
                [*TOOLWILD, "eval", "--suite", str(suite_path), "--model", "openai:fake-model", "--base-url",
                 base_url, "--concurrency", "64", "--runs-dir", str(tmp), "--name",
                 f"eval-{executor}", "--no-preflight", "--executor", executor]
            )  # fmt: skip
        same = _figures(tmp / "eval-local") == _figures(tmp / "eval-ray")
        print(
            f"latency-bound, eval of 256 sessions (2,232 calls of 200 ms) at concurrency 64: local "
            f"{walls['local']:.1f} s, Ray {walls['ray']:.1f} s ({'same metrics' if same else 'METRICS DIFFER'}; "
            "usage blocks aside: a Ray run counts them in its workers)"
        )


def _figures(run_dir: Path) -> dict:
    """A run's metrics without the usage blocks (a Ray run's calls are counted in its workers)."""
    import json

    metrics = json.loads((run_dir / "metrics.json").read_text())
    for key in ("usage", "simulator_usage"):
        metrics.get("extensions", {}).pop(key, None)
    return metrics


class _Nothing:
    async def __call__(self, unit):
        return None


def bench_overhead(n: int) -> None:
    import ray

    from toolwild.run import LocalExecutor, Unit
    from toolwild.run.ray_executor import RayExecutor

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        walls = {}
        for name, executor in (("local", LocalExecutor(32)), ("ray", RayExecutor(32, shard_size=256))):
            units = (Unit(key=str(i), order=i, payload=i) for i in range(n))
            start = time.perf_counter()
            asyncio.run(executor.map(units, _Nothing(), on_done=lambda u, r: None))
            walls[name] = time.perf_counter() - start
        extra = walls["ray"] - walls["local"]
        print(
            f"Ray's cost per unit ({n:,} units that do nothing, shards of 256): {1e6 * extra / n:.0f} µs "
            f"({1000 * extra / (n / 256):.1f} ms per shard; local {walls['local']:.2f} s, Ray {walls['ray']:.2f} s)"
        )
    finally:
        ray.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="2,000 sessions for the CPU-heavy part")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        bench_overhead(20_000)
        bench_cpu(Path(tmp), 2_000 if args.quick else 20_000)
        bench_latency(Path(tmp))


if __name__ == "__main__":
    main()
