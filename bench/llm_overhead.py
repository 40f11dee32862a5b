"""Overhead of the LLM layer, and call throughput at several concurrency levels.

Run: ``.venv/bin/python bench/llm_overhead.py`` (under a minute).

1. Per-call time against a fake OpenAI server with zero latency, in process (no sockets): the bare backend, the
   full client on a cache miss (key, cache write, limits, usage) and on a cache hit.
2. Wall time of 256 distinct calls at concurrency 1, 16 and 64 against a fake server with 100 ms latency, served by
   uvicorn in its own process over loopback (ideal: 25.6 s, 1.6 s, 0.4 s).
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "helpers"))

from fake_openai import Delay, FakeOpenAI, Reply, fake_backend

from toolwild.llm.backends.openai_compat import OpenAIBackend
from toolwild.llm.cache import ResponseCache
from toolwild.llm.client import LLM
from toolwild.llm.types import ChatRequest

N = 400


def _request(i: int) -> ChatRequest:
    return ChatRequest(
        messages=[{"role": "system", "content": "Current Date: 2024-07-11"}, {"role": "user", "content": f"q{i}"}]
    )


async def overhead() -> None:
    backend = fake_backend(FakeOpenAI(lambda body: Reply(text="ok")))
    for i in range(20):  # warm up
        await backend.complete(_request(-i - 1))
    t0 = time.perf_counter()
    for i in range(N):
        await backend.complete(_request(i))
    bare = (time.perf_counter() - t0) / N
    with tempfile.TemporaryDirectory() as tmp:
        llm = LLM(fake_backend(FakeOpenAI(lambda body: Reply(text="ok"))), cache=ResponseCache(Path(tmp) / "c.sqlite"))
        t0 = time.perf_counter()
        for i in range(N):
            await llm.complete(_request(i))
        miss = (time.perf_counter() - t0) / N
        t0 = time.perf_counter()
        for i in range(N):
            await llm.complete(_request(i))
        hit = (time.perf_counter() - t0) / N
        await llm.aclose()
    await backend.aclose()
    print(f"bare backend call (in-process fake, zero latency): {bare * 1000:6.3f} ms")
    print(
        f"client, cache miss:                                {miss * 1000:6.3f} ms"
        f"  (layer overhead {(miss - bare) * 1000:+.3f} ms)"
    )
    print(f"client, cache hit:                                 {hit * 1000:6.3f} ms")


def _serve(port: int) -> None:
    import uvicorn

    app = FakeOpenAI(lambda body: Delay(0.1, Reply(text="ok")))
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off", access_log=False)


async def throughput(base_url: str, concurrency: int, calls: int = 256) -> float:
    backend = OpenAIBackend(model="fake", base_url=base_url, max_connections=max(concurrency, 1))
    llm = LLM(backend, max_connections=concurrency)
    t0 = time.perf_counter()
    await asyncio.gather(*(llm.complete(_request(10_000 * concurrency + i)) for i in range(calls)))
    wall = time.perf_counter() - t0
    await llm.aclose()
    return wall


def main() -> None:
    asyncio.run(overhead())
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, __file__, "--serve", str(port)])
    try:
        for _ in range(300):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        for concurrency in (1, 16, 64):
            wall = asyncio.run(throughput(f"http://127.0.0.1:{port}/v1", concurrency))
            ideal = 256 * 0.1 / concurrency
            print(f"256 calls, 100 ms each, concurrency {concurrency:2d}: {wall:6.2f} s (ideal {ideal:5.2f} s)")
    finally:
        server.terminate()
        server.wait(10)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--serve":
        _serve(int(sys.argv[2]))
    else:
        main()
