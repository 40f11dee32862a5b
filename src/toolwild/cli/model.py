"""``toolwild model``: check that a model answers (text and a forced tool call), or serve one over HTTP."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from toolwild.cli._common import BaseUrlOption, console, handled_errors
from toolwild.llm.backend import DEFAULT_REQUEST_TIMEOUT_S
from toolwild.llm.cache import CacheMode, ResponseCache
from toolwild.llm.client import LLM
from toolwild.llm.preflight import preflight
from toolwild.llm.redact import redact_url
from toolwild.llm.registry import create_backend, describe_backends
from toolwild.llm.types import ChatRequest
from toolwild.run.loop import run_async

model_app = typer.Typer(help="Check or serve a model.", no_args_is_help=True)

ModelOption = Annotated[str, typer.Option("--model", help=f"Model: {'; '.join(describe_backends())}.")]
RequestTimeoutOption = Annotated[
    float | None,
    typer.Option(
        help="Seconds one call to a remote model may take, queueing on its server included "
        f"(default {DEFAULT_REQUEST_TIMEOUT_S:g}).",
        min=0.001,
    ),
]
PromptModeOption = Annotated[
    bool | None,
    typer.Option("--prompt-mode/--native-tools", help="Describe tools in the prompt (default: when not native)."),
]

_CHECK_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather of a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


async def _check(llm: LLM) -> list[tuple[str, str, float]]:
    await preflight(llm)  # an unreachable endpoint, unknown model or refused key: a clear error in seconds
    rows = []
    plain = ChatRequest(messages=[{"role": "user", "content": "Say hello in five words."}], max_tokens=48)
    t0 = time.perf_counter()
    reply = await llm.complete(plain, role="check")
    rows.append(("plain reply", repr(reply.text), time.perf_counter() - t0))
    forced = ChatRequest(
        messages=[{"role": "user", "content": "What is the weather in Paris?"}],
        tools=[_CHECK_TOOL],
        tool_choice="get_weather",
        max_tokens=64,
    )
    t0 = time.perf_counter()
    reply = await llm.complete(forced, role="check")
    calls = ", ".join(f"{c.name}({c.raw})" + (f" [{c.error}]" if c.error else "") for c in reply.tool_calls)
    rows.append(("forced tool call", calls or f"no call; text={reply.text!r}", time.perf_counter() - t0))
    return rows


@model_app.command("check")
def check(
    model: ModelOption = "local",
    base_url: BaseUrlOption = None,
    prompt_mode: PromptModeOption = None,
    request_timeout: RequestTimeoutOption = None,
) -> None:
    """Make one plain call and one forced tool call, and print what came back and how long it took."""
    with handled_errors():
        backend = create_backend(model, base_url=base_url, request_timeout=request_timeout)
        llm = LLM(backend, prompt_mode=prompt_mode)

        async def run() -> list[tuple[str, str, float]]:
            try:
                return await _check(llm)
            finally:
                await llm.aclose()

        rows = run_async(run())
    table = Table(title=f"{model} ({'prompt mode' if llm.prompt_mode else 'native tools'})", title_justify="left")
    table.add_column("call")
    table.add_column("result")
    table.add_column("seconds", justify="right")
    for name, result, seconds in rows:
        table.add_row(name, result, f"{seconds:.2f}")
    console.print(table)


@model_app.command("serve")
def serve(
    model: ModelOption = "local",
    base_url: BaseUrlOption = None,
    prompt_mode: PromptModeOption = None,
    host: Annotated[str, typer.Option(help="Interface to listen on (loopback by default).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8765,
    cache: Annotated[Path | None, typer.Option(help="SQLite response cache (default: none).")] = None,
    max_queue: Annotated[
        int, typer.Option(min=0, help="Requests that may wait for the model; more get 503 with Retry-After.")
    ] = 64,
    request_timeout: RequestTimeoutOption = None,
) -> None:
    """Expose a model as an OpenAI-compatible server (``POST /v1/chat/completions``).

    Requests beyond what the model runs at once (one for the embedded model) wait their turn; a client that goes
    away has its request cancelled (a running generation stops); SIGINT/SIGTERM stop the server within seconds.
    """
    with handled_errors():
        from toolwild.serve.openai_server import create_app, run_server

        backend = create_backend(model, base_url=base_url, request_timeout=request_timeout)
        response_cache = ResponseCache(cache, mode=CacheMode.READ_WRITE) if cache else None
        app = create_app(LLM(backend, prompt_mode=prompt_mode, cache=response_cache), max_queue=max_queue)
    upstream = f" (from {redact_url(backend.base_url)})" if backend.base_url else ""
    console.print(f"serving {backend.model}{upstream} at http://{host}:{port}/v1 (Ctrl-C to stop)")
    run_server(app, host=host, port=port)
