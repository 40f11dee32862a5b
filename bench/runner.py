"""Runner throughput: 256 sessions against a fake OpenAI server with 200 ms latency per call.

Run: ``.venv/bin/python bench/runner.py`` (about 1–2 minutes). The fake server runs in its own process (uvicorn,
so it adds no delay of its own); the harness runs here, through the real ``openai`` SDK over loopback.

Prints, per concurrency: wall time, efficiency = ideal / actual (ideal = sum over sessions of their sequential
step latencies / concurrency) and the harness CPU time per model call. Concurrency 1 runs the first 32 sessions
only (the full 256 would take ~8 minutes of pure waiting); its efficiency is computed on those.

``--http-client`` picks what carries the SDK's requests, so the case for toolwild's own transport can be
re-checked whenever the SDK changes: ``lean`` (default: :mod:`toolwild.llm.backends.transport`, what toolwild
uses), ``httpx2`` (the SDK's stock client) or ``aiohttp`` (the SDK's ``DefaultAioHttpClient``; needs
``pip install 'openai[aiohttp]'``, which toolwild does not depend on). ``--concurrency 64`` runs one level only,
e.g. ``bench/runner.py --http-client httpx2 --concurrency 64``.

``--command`` also runs the whole ``toolwild eval`` command at each level, as a user does (its own process: start-up
and imports, the preflight, the scoring, ``metrics.json``, ``verdicts.jsonl`` and ``report.html``, the exit), and
prints its wall efficiency (ideal / launch to exit), its span efficiency (ideal / first request received to last
response sent, both seen by the fake server), the time before the first request and after the last response, and
its CPU per model call (user + system, start-up included). The published harness is not part of this bench: its
figures in the README were measured apart.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "tests" / "helpers")]

LATENCY_S = 0.2
HTTP_CLIENTS = ("lean", "httpx2", "aiohttp")


def _serve(suite_path: str, port: int, latency: float) -> None:
    """A lean ASGI fake (no framework): the server shares the 2 cores with the harness, so its own CPU per request
    must stay small, or the benchmark measures the server instead of the harness."""
    import asyncio
    import json
    import time

    import uvicorn
    from gold_responder import gold_responder

    from toolwild.core.formats.wtb import load_wtb_suite

    suite, _ = load_wtb_suite(suite_path)
    respond = gold_responder(suite)
    span = {"first": None, "last": None, "calls": 0}
    """Wall-clock times (``time.time()``, comparable across processes) of the first request received and the last
    response sent since the last ``GET /stats``, and the chat requests in between: the command's span."""

    async def stats(send) -> None:
        body = json.dumps(span).encode()
        span.update(first=None, last=None, calls=0)
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"%d" % len(body))]})
        await send({"type": "http.response.body", "body": body})

    async def app(scope, receive, send):
        if scope["type"] != "http":
            return
        if scope["method"] == "GET":
            await stats(send)
            return
        span["first"] = span["first"] or time.time()
        span["calls"] += 1
        chunks = []
        more = True
        while more:
            event = await receive()
            chunks.append(event.get("body", b""))
            more = event.get("more_body", False)
        reply = respond(json.loads(b"".join(chunks)))
        message = {"role": "assistant", "content": reply.text}
        if reply.tool_calls:
            message["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in reply.tool_calls
            ]
        body = json.dumps(
            {
                "id": "x",
                "object": "chat.completion",
                "created": 0,
                "model": "fake-model",
                "choices": [
                    {"index": 0, "message": message, "finish_reason": "tool_calls" if reply.tool_calls else "stop"}
                ],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
            }
        ).encode()
        if latency:
            await asyncio.sleep(latency)
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})
        span["last"] = time.time()

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off", access_log=False)


@contextlib.contextmanager
def fake_server(suite_path: Path, latency_s: float = LATENCY_S) -> Iterator[str]:
    """The fake server of :func:`_serve` in its own process, answering every call with the suite's gold after
    ``latency_s``; yields its ``/v1`` base URL once it accepts connections (also used by bench/distributed.py)."""
    port = _port()
    server = subprocess.Popen([sys.executable, __file__, "--serve", str(suite_path), str(port), str(latency_s)])
    try:
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.terminate()
        server.wait(10)


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _http_client(kind: str, max_connections: int):
    """The ``httpx2.AsyncClient`` for ``--http-client`` (None: the backend's default, toolwild's lean transport)."""
    if kind == "lean":
        return None
    import httpx2
    import openai

    timeout = httpx2.Timeout(60.0, connect=10.0)
    limits = httpx2.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
    if kind == "httpx2":
        return openai.DefaultAsyncHttpx2Client(timeout=timeout, limits=limits)
    return openai.DefaultAioHttpClient(timeout=timeout, limits=limits)


def _check_http_client(kind: str) -> None:
    """Fail before any work when the chosen client cannot be built (aiohttp is not a toolwild dependency)."""
    if kind != "aiohttp":
        return
    try:
        import aiohttp  # noqa: F401
        from openai._vendor.httpx_aiohttp import Httpx2AiohttpClient  # noqa: F401
    except ImportError as exc:
        raise SystemExit(
            f"--http-client aiohttp needs the SDK's aiohttp extra ({exc}); install it into this venv with: "
            ".venv/bin/pip install 'openai[aiohttp]'  (toolwild itself does not depend on it)"
        ) from None


async def _run(suite, base_url: str, concurrency: int, run_dir: Path, http: str) -> tuple[float, float, int]:
    from toolwild.eval.agents.model import ModelAgent
    from toolwild.eval.run_config import RunConfig
    from toolwild.eval.runner import run_suite
    from toolwild.llm.backends.openai_compat import OpenAIBackend
    from toolwild.llm.client import LLM

    pool = max(16, concurrency)
    backend = OpenAIBackend(
        model="fake-model", base_url=base_url, max_connections=pool, http_client=_http_client(http, pool)
    )
    llm = LLM(backend)
    config = RunConfig(suite="bench", agent="model", concurrency=concurrency)
    cpu0, t0 = time.process_time(), time.perf_counter()
    verdicts = await run_suite(suite, ModelAgent(llm), config, run_dir)
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    await llm.aclose()
    assert all(v.correct for v in verdicts), "the gold model must score 100%"
    return wall, cpu, llm.backend_calls


def _span(base_url: str) -> dict:
    """The fake server's span since the last call (first request, last response, chat requests), and a reset."""
    import json
    import urllib.request

    with urllib.request.urlopen(base_url + "/stats", timeout=10) as reply:
        return json.loads(reply.read())


def _command(suite_path: Path, base_url: str, concurrency: int, sessions: int, runs_dir: Path) -> dict[str, float]:
    """The whole ``toolwild eval`` command, as a user runs it (its own process, preflight, scoring, report):
    launch-to-exit wall time, the span from the first request received to the last response sent (both seen by
    the fake server), and the command's CPU time (user + system, from the kernel's accounting of the child)."""
    import os
    import resource

    _span(base_url)  # reset
    args = ["eval", "--suite", str(suite_path), "--model", "openai:fake-model", "--base-url", base_url]
    args += ["--concurrency", str(concurrency), "--limit", str(sessions), "--runs-dir", str(runs_dir)]
    args += ["--name", f"command{concurrency}"]
    env = {**os.environ, "OPENAI_API_KEY": "bench", "NO_COLOR": "1"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.time()
    subprocess.run(
        [str(Path(sys.executable).parent / "toolwild"), *args], check=True, env=env, stdout=subprocess.DEVNULL
    )
    end = time.time()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    span = _span(base_url)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {
        "wall": end - start,
        "span": span["last"] - span["first"],
        "before": span["first"] - start,
        "after": end - span["last"],
        "cpu": cpu,
    }


def _loop_factory():
    """uvloop when installed (what ``toolwild eval`` uses), else the default event loop."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--http-client", choices=HTTP_CLIENTS, default="lean", help="what carries the SDK's requests")
    parser.add_argument(
        "--concurrency", type=int, action="append", help="sessions at once (repeatable; default: 1, 16 and 64)"
    )
    parser.add_argument(
        "--command",
        action="store_true",
        help="also run the whole `toolwild eval` command at each level (its own process: start-up, preflight, "
        "scoring and report included) and print its wall and span efficiency",
    )
    return parser.parse_args()


def main() -> None:
    from scoring import synthetic_suite

    args = _arguments()
    _check_http_client(args.http_client)
    levels = args.concurrency or [1, 16, 64]

    from toolwild.core.formats.wtb import write_wtb_suite

    suite = synthetic_suite()
    tmp = Path(tempfile.mkdtemp(prefix="toolwild-bench-"))
    suite_path = tmp / "suite.jsonl"
    write_wtb_suite(suite, suite_path)
    with fake_server(suite_path) as base_url:
        from toolwild.core.session import Suite
        from toolwild.eval.agents.oracle import oracle_steps

        steps = {s.id: sum(len(oracle_steps(t)) for t in s.tasks) for s in suite.sessions}
        print(
            f"{len(suite.sessions)} sessions, {sum(steps.values())} model calls, {LATENCY_S * 1000:.0f} ms per call,"
            f" HTTP client: {args.http_client}"
        )
        for concurrency in levels:
            part = suite if concurrency > 1 else Suite(name="part", sessions=suite.sessions[:32])
            ideal = sum(steps[s.id] for s in part.sessions) * LATENCY_S / concurrency
            with asyncio.Runner(loop_factory=_loop_factory()) as runner:
                wall, cpu, calls = runner.run(
                    _run(part, base_url, concurrency, tmp / f"run{concurrency}", args.http_client)
                )
            print(
                f"concurrency {concurrency:3d} ({len(part.sessions):3d} sessions): wall {wall:7.2f} s,"
                f" ideal {ideal:7.2f} s, efficiency {ideal / wall:5.2f},"
                f" harness CPU {cpu / calls * 1000:5.2f} ms per call"
            )
            if args.command:
                got = _command(suite_path, base_url, concurrency, len(part.sessions), tmp / "commands")
                print(
                    f"  the whole command: wall {got['wall']:6.2f} s (efficiency {ideal / got['wall']:4.2f}),"
                    f" span {got['span']:6.2f} s (efficiency {ideal / got['span']:4.2f}),"
                    f" {got['before']:4.2f} s before the first request, {got['after']:4.2f} s after the last"
                    f" response, CPU {got['cpu'] / calls * 1000:5.2f} ms per call"
                )


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--serve":
        _serve(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
    else:
        main()
