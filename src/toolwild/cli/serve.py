"""``toolwild serve``: expose toolwild to other programs; ``serve mcp ENV`` serves an environment's tools over MCP.

ENV is whatever ``toolwild env`` accepts (a built-in, or an environment file, model-simulated ones answered by
``--model``), opened by the same library call (:func:`toolwild.envs.registry.open_environment`), so both commands
always agree on what an environment is.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import typer
from rich.markup import escape

from toolwild.cli._common import (
    AllowOutsideIncludesOption,
    BaseUrlOption,
    EnvArgument,
    SeedOption,
    SimulatorCacheOption,
    SimulatorOption,
    err_console,
    handled_errors,
)
from toolwild.envs.registry import open_environment
from toolwild.errors import ConfigError
from toolwild.run.loop import run_async

LedgerOption = Annotated[
    Path | None,
    typer.Option(
        "--ledger",
        dir_okay=False,
        help="With ENV ledger: your own Beancount file. Episodes start from a copy of it; it is written only with "
        "--write-through.",
    ),
]

serve_app = typer.Typer(help="Serve toolwild to other programs (MCP).", no_args_is_help=True)


@serve_app.callback()
def _serve() -> None:
    """Serve toolwild to other programs (MCP)."""


@serve_app.command("mcp")
def mcp(
    env: EnvArgument,
    transport: Annotated[
        str, typer.Option(help="stdio (one client: the program that starts this one) or http (streamable HTTP).")
    ] = "stdio",
    host: Annotated[
        str | None, typer.Option(help="HTTP: the address to listen on (default 127.0.0.1: this machine only).")
    ] = None,
    port: Annotated[int | None, typer.Option(help="HTTP: the port (default 8766; 0 picks a free one).")] = None,
    allow_remote: Annotated[
        bool, typer.Option("--allow-remote", help="HTTP: allow a --host other machines can reach (no auth!).")
    ] = False,
    seed: SeedOption = 0,
    model: SimulatorOption = "local",
    base_url: BaseUrlOption = None,
    cache: SimulatorCacheOption = None,
    ledger: LedgerOption = None,
    write_through: Annotated[
        bool,
        typer.Option("--write-through", help="With --ledger: accepted writes change your file (validated, atomic)."),
    ] = False,
    allow_outside_includes: AllowOutsideIncludesOption = False,
    record: Annotated[
        Path | None, typer.Option(dir_okay=False, help="Append one JSON line per tool call served.")
    ] = None,
) -> None:
    """Serve an environment's tools over MCP, one episode per MCP session.

    Tool errors come back as isError results whose text starts with the error kind.
    """
    from toolwild.serve.mcp_server import (
        DEFAULT_PORT,
        McpEnvironmentServer,
        check_host,
        http_url,
        log_to_stderr,
        require_mcp,
        run_http,
        run_stdio,
    )

    with handled_errors():
        require_mcp()
        kind = _transport(transport)
        if kind == "stdio" and (host is not None or port is not None or allow_remote):
            raise ConfigError("--host, --port and --allow-remote apply to --transport http only")
        bind = host or "127.0.0.1"
        remote_warning = check_host(bind, allow_remote=allow_remote) if kind == "http" else None
        backend, llm = open_environment(
            env,
            model=model,
            base_url=base_url,
            cache=cache,
            ledger=ledger,
            write_through=write_through,
            allow_outside_includes=allow_outside_includes,
        )
        server = McpEnvironmentServer(
            backend,
            seed=seed,
            transport=kind,
            record=record,
            on_close=llm.aclose if llm is not None else None,
        )
    log_to_stderr()
    if remote_warning:
        err_console.print(f"[bold yellow]warning:[/] {escape(remote_warning)}")
    if write_through and ledger is not None:
        err_console.print(
            f"[bold yellow]warning:[/] --write-through: every accepted write changes {escape(str(ledger))} in place "
            "(validated by beancount, written atomically; every MCP session works on this one file); refused writes "
            "leave it untouched"
        )
    if kind == "stdio":
        err_console.print(escape(f"serving {env} over MCP (stdio); {len(backend.tools)} tools"))
        try:
            run_async(run_stdio(server))
        except KeyboardInterrupt:
            pass
        return

    def announce(bound: int) -> None:
        err_console.print(escape(f"serving {env} over MCP (streamable HTTP); {len(backend.tools)} tools; connect to:"))
        print(http_url(bind, bound), flush=True)  # plain stdout, never wrapped: scripts read the URL from here

    run_http(server.http_app(host=bind), host=bind, port=DEFAULT_PORT if port is None else port, announce=announce)


def _transport(value: str) -> Literal["stdio", "http"]:
    if value == "stdio":
        return "stdio"
    if value == "http":
        return "http"
    raise ConfigError(f"--transport must be stdio or http, not {value!r}")
