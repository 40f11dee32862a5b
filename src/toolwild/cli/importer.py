"""``toolwild import ...``: bring tool lists published in other formats into toolwild's JSONL.

Each command reads a foreign format, writes one `Tool` per line, and prints what it read, what it skipped and
what the schema lint found, so the defects of a source are visible at import time rather than discovered later
when a simulator or an agent trips over them. ``import mcp`` asks a live MCP server for its tools and writes one
environment file. The lead CLI mounts :data:`import_app` as ``toolwild import``.
"""

from __future__ import annotations

import json
from collections import Counter
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from toolwild.cli._common import progress_bar
from toolwild.core.environment import DEFAULT_MCP_TIMEOUT_S, BackendKind, Environment, McpServer
from toolwild.core.files import safe_filename
from toolwild.core.formats.environment import ENV_SUFFIX, check_environment, write_environment, write_environment_in
from toolwild.core.formats.mcp import SkippedTool, environment_from_mcp
from toolwild.core.formats.synthtools import (
    LintCode,
    LintFinding,
    SkippedFile,
    load_synthtools_dir,
    write_tools_jsonl,
)
from toolwild.core.formats.synthtools_envs import environments_from_synthtools, load_synthtools_meta
from toolwild.core.formats.wtb_envs import environment_from_session, environments_from_tool_lists
from toolwild.core.jsonl import read_jsonl
from toolwild.core.tool import Effect, Tool
from toolwild.errors import ConfigError, DataError

__all__ = ["import_app"]

SKIPPED_SHOWN = 10
"""How many skipped files are listed by name; the rest are only counted (a broken release skips thousands)."""

import_app = typer.Typer(
    help="Import tools published in other formats (SynthTools, WildToolBench, MCP servers) into toolwild files.",
    no_args_is_help=True,
    add_completion=False,
)


@import_app.callback()
def _import_group() -> None:
    """Import tools published in other formats into toolwild JSONL.

    Why an explicit callback: without it Typer collapses a one-command app into that command, and
    ``toolwild import synthtools ...`` would stop working the day it is mounted.
    """


def _lint_table(findings: list[LintFinding]) -> Table:
    """Count findings per code, listing every code (zeros too) so runs over different sources compare."""
    counts = Counter(f.code for f in findings)
    table = Table(title="Parameter schema lint", title_justify="left")
    table.add_column("code")
    table.add_column("count", justify="right")
    for code in LintCode:
        table.add_row(code.value, f"{counts.get(code, 0):,}")
    table.add_row("total", f"{len(findings):,}", style="bold")
    return table


def _skipped_table(skipped: list[SkippedFile]) -> Table:
    """The first :data:`SKIPPED_SHOWN` skipped files with the reason each was rejected."""
    table = Table(title=f"Skipped files (first {min(len(skipped), SKIPPED_SHOWN)})", title_justify="left")
    table.add_column("file", overflow="fold")
    table.add_column("reason", overflow="fold")
    for item in skipped[:SKIPPED_SHOWN]:
        table.add_row(escape(item.file), escape(item.reason))
    return table


def _write_environments(environments: list[Environment], directory: Path) -> int:
    """Write environment files into ``directory``, each checked first and named safely from its id.

    Why the checks here: ids come from the input (session ids, spec names), so a name is made safe and kept inside
    the folder (:func:`write_environment_in`); an environment that would not load back (no tools, a bad schema) is
    refused before anything is written; two environments that would share a file are refused instead of one
    silently replacing the other.

    Raises:
        DataError: an environment is unusable (its id and field named) or two land on one file name.
    """
    names: dict[str, str] = {}
    for environment in environments:
        try:
            check_environment(environment)
        except DataError as exc:
            raise DataError(f"environment {environment.id!r}: {exc.message}", field=exc.field) from None
        name = safe_filename(environment.id)
        if name in names:
            raise DataError(f"environments {names[name]!r} and {environment.id!r} would both be written to {name}")
        names[name] = environment.id
    for environment in environments:
        write_environment_in(directory, environment)
    return len(environments)


def _write_synthtools_envs(source: Path, tools: list[Tool], directory: Path) -> int:
    """One environment file per SynthTools spec; returns how many were written."""
    return _write_environments(environments_from_synthtools(tools, load_synthtools_meta(source)), directory)


@import_app.command("synthtools")
def synthtools(
    source: Annotated[
        Path,
        typer.Argument(
            metavar="DIR",
            exists=True,
            readable=True,
            help="SynthTools release: the unpacked tool_content/ directory, its tool_json/ directory, "
            "or tool_content.tar.gz itself (read without extracting).",
        ),
    ],
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            dir_okay=False,
            help="Destination JSONL file, one Tool per line (replaced atomically; its directory must exist).",
        ),
    ] = None,
    envs_out: Annotated[
        Path | None,
        typer.Option(
            "--envs-out",
            file_okay=False,
            help="Also write one model-simulated environment per spec here (<spec>.env.json, seed data included "
            "where the release has it), for `toolwild env` and free-running evaluation.",
        ),
    ] = None,
    skip_invalid: Annotated[
        bool,
        typer.Option(
            "--skip-invalid",
            help="Skip malformed tool files and report them, instead of stopping at the first one.",
        ),
    ] = False,
) -> None:
    """Import SynthTools tool_json/*.json specs and lint their parameter schemas.

    Tools are converted as published (defects are reported, not repaired) and written in sorted file order.
    Exits with status 1 and a one-line reason if the source or, without --skip-invalid, any file is malformed.
    """
    console = Console()
    err = Console(stderr=True)
    if out is None and envs_out is None:
        err.print("[bold red]error:[/] give --out (tools JSONL), --envs-out (environment files) or both")
        raise typer.Exit(1)
    if out is not None and not out.parent.is_dir():  # fail before reading thousands of files, not after
        err.print(f"[bold red]error:[/] output directory {escape(str(out.parent))} does not exist", highlight=False)
        raise typer.Exit(1)
    progress = progress_bar("reading tool specs", to=err)
    try:
        with progress:
            task = progress.add_task("read", total=None)

            def advance(done: int, total: int) -> None:
                progress.update(task, completed=done, total=total)

            tools, findings, skipped = load_synthtools_dir(source, skip_invalid=skip_invalid, progress=advance)
    except DataError as exc:
        err.print(f"[bold red]error:[/] {escape(str(exc))}", markup=True, highlight=False, soft_wrap=True)
        raise typer.Exit(1) from None

    files_read = len(tools) + len(skipped)
    if not tools:
        err.print(f"[bold red]error:[/] no valid tool specs in {escape(str(source))} ({len(skipped):,} files skipped)")
        raise typer.Exit(1)
    try:
        written = write_tools_jsonl(tools, out) if out is not None else 0
        environments = _write_synthtools_envs(source, tools, envs_out) if envs_out is not None else 0
    except OSError as exc:
        err.print(f"[bold red]error:[/] cannot write: {escape(str(exc))}", highlight=False)
        raise typer.Exit(1) from None
    except DataError as exc:
        err.print(f"[bold red]error:[/] {escape(str(exc))}", markup=True, highlight=False, soft_wrap=True)
        raise typer.Exit(1) from None

    console.print(f"files read:    {files_read:,}")
    if out is not None:
        console.print(f"tools written: {written:,} -> {escape(str(out))}", highlight=False, soft_wrap=True)
    if envs_out is not None:
        console.print(f"environments:  {environments:,} -> {escape(str(envs_out))}", highlight=False, soft_wrap=True)
    console.print(f"files skipped: {len(skipped):,}")
    if skipped:
        console.print(_skipped_table(skipped))
    console.print(_lint_table(findings))


def _first_value(path: Path) -> object:
    """The first JSON line of a file, to tell a suite (objects) from a tool-list file (arrays)."""
    for _number, value in read_jsonl(path):
        if isinstance(value, DataError):
            raise value
        return value
    raise DataError("empty file", file=path)


@import_app.command("wtb-envs")
def wtb_envs(
    source: Annotated[
        Path,
        typer.Argument(
            metavar="FILE",
            exists=True,
            dir_okay=False,
            help="A WildToolBench-format suite (one session per line) or a tool-list file (tools_en.jsonl: one "
            "JSON array of tools per line).",
        ),
    ],
    out: Annotated[Path, typer.Option("--out", "-o", file_okay=False, help="Directory for the *.env.json files.")],
    backend: Annotated[
        BackendKind,
        typer.Option(help="replay = answer with the recorded observations (suites only); llm = model-simulated."),
    ] = BackendKind.REPLAY,
) -> None:
    """Turn WildToolBench sessions or tool lists into environment files (one per session or line)."""
    err = Console(stderr=True)
    try:
        if backend is BackendKind.PYTHON:
            raise DataError("a WildToolBench tool list has no code: choose --backend replay or llm")
        if isinstance(_first_value(source), list):
            if backend is BackendKind.REPLAY:
                raise DataError("a tool-list file has no recorded observations to replay: use --backend llm")
            environments = environments_from_tool_lists(source)
        else:
            from toolwild.core.formats.wtb import load_wtb_suite

            suite, _ = load_wtb_suite(source)
            environments = [environment_from_session(s, backend) for s in suite.sessions]
        _write_environments(environments, out)
    except DataError as exc:
        err.print(f"[bold red]error:[/] {escape(str(exc))}", markup=True, highlight=False, soft_wrap=True)
        raise typer.Exit(1) from None
    except OSError as exc:
        err.print(f"[bold red]error:[/] cannot write: {escape(str(exc))}", highlight=False)
        raise typer.Exit(1) from None
    Console().print(f"environments: {len(environments):,} ({backend.value}) -> {escape(str(out))}", highlight=False)


class ImportBackend(StrEnum):
    """The backends an imported MCP listing can run on (it has no code for ``python``, no recordings for
    ``replay``)."""

    MCP = "mcp"
    LLM = "llm"


def _mcp_server(
    command: list[str] | None, url: str | None, env: list[str], cwd: Path | None, timeout: float
) -> McpServer:
    """The connection to record, from the options: exactly one of a command and a URL, never a secret.

    Raises:
        DataError: neither or both given, an ``--env NAME=VALUE`` (a value would be stored), a URL with credentials.
    """
    from pydantic import ValidationError

    from toolwild.core.jsonl import validation_to_data_error

    if bool(command) == (url is not None):
        raise DataError("give the server as `-- COMMAND ARGS...` (stdio) or as --url URL (streamable HTTP), not both")
    if any("=" in name for name in env):
        raise DataError("--env takes a variable's NAME only: its value is read when the server starts, never stored")
    try:
        if url is not None:
            return McpServer(url=url, timeout_s=timeout)
        return McpServer(command=command, env=env, cwd=str((cwd or Path.cwd()).resolve()), timeout_s=timeout)
    except ValidationError as exc:
        raise validation_to_data_error(exc, prefix="mcp") from None


def _default_id(out: Path) -> str:
    """The id a file gets when --id is not given: its name without ``.env.json`` (``notes.env.json`` -> ``notes``)."""
    name = out.name
    return name[: -len(ENV_SUFFIX)] if name.endswith(ENV_SUFFIX) and len(name) > len(ENV_SUFFIX) else out.stem


def _mcp_table(environment: Environment) -> Table:
    """The imported tools: name, effect and the annotations they came from."""
    table = Table(title=f"{environment.id} tools", title_justify="left")
    table.add_column("tool", style="bold", overflow="fold")
    table.add_column("effect")
    table.add_column("output schema")
    table.add_column("annotations", overflow="fold")
    for tool in environment.tools:
        hints = tool.extra.get("mcp", {}).get("annotations") or {}
        shown = ", ".join(f"{k}={json.dumps(v)}" for k, v in hints.items() if k.endswith("Hint"))
        effect = tool.effect.value if tool.effect is not None else Effect.WRITE.value
        table.add_row(escape(tool.name), effect, "yes" if tool.returns else "no", escape(shown or "(none)"))
    return table


def _report_skipped(err: Console, skipped: list[SkippedTool]) -> None:
    for item in skipped:
        err.print(
            f"[yellow]warning:[/] skipped tool {escape(item.name)!s} ({escape(item.field)}): {escape(item.reason)}",
            highlight=False,
            soft_wrap=True,
        )


@import_app.command("mcp", context_settings={"allow_interspersed_args": False, "help_option_names": ["-h", "--help"]})
def mcp(
    out: Annotated[
        Path,
        typer.Option("--out", "-o", dir_okay=False, help="The environment file to write (ENV.env.json)."),
    ],
    command: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="-- COMMAND ARGS",
            show_default=False,
            help="The server's command line (stdio), after `--`.",
        ),
    ] = None,
    url: Annotated[
        str | None, typer.Option(help="The server's streamable-HTTP endpoint (http://host:port/mcp).")
    ] = None,
    env_id: Annotated[
        str | None, typer.Option("--id", help="The environment id (default: the file name before .env.json).")
    ] = None,
    backend: Annotated[
        ImportBackend,
        typer.Option(help="mcp = calls go to the live server; llm = a model simulates the tools (safe generation)."),
    ] = ImportBackend.MCP,
    env: Annotated[
        list[str] | None,
        typer.Option(
            "--env",
            metavar="NAME",
            help="A variable the server needs, passed from your environment when it starts (repeatable; the "
            "name is stored, never the value).",
        ),
    ] = None,
    cwd: Annotated[
        Path | None,
        typer.Option(file_okay=False, exists=True, help="The command's working directory (default: here)."),
    ] = None,
    timeout: Annotated[
        float,
        typer.Option(min=0.1, help="Seconds the server may take to start or to answer a call (stored in the file)."),
    ] = DEFAULT_MCP_TIMEOUT_S,
    skip_invalid: Annotated[
        bool,
        typer.Option(
            "--skip-invalid", help="Skip tools whose schemas are unusable (each named in a warning) instead of failing."
        ),
    ] = False,
) -> None:
    """Record an MCP server's tools as an environment file.

    Starts (or reaches) the server once with the official MCP client and reads
    every page of its tool list: names, descriptions, input and output schemas,
    annotations (readOnlyHint true -> read, anything else -> write).
    The file keeps how to reach the server (command and folder, or URL; the
    names of --env variables, never their values, nor any header): the `mcp`
    backend starts it again, one server session per episode.
    Exit 1, naming the tool and field, when a schema is unusable.
    """
    from toolwild.envs.mcp import list_server_tools

    err = Console(stderr=True)
    try:
        server = _mcp_server(command, url, env or [], cwd, timeout)
        listing = list_server_tools(server)
        name = listing.server_name or ""
        source = {
            key: value
            for key, value in {
                "server_name": listing.server_name,
                "server_version": listing.server_version,
                "protocol_version": listing.protocol_version,
            }.items()
            if value
        }
        environment, skipped = environment_from_mcp(
            listing.tools,
            env_id=env_id or _default_id(out),
            server=server,
            backend=BackendKind(backend.value),
            description=(listing.instructions or (f"The tools of the MCP server {name}." if name else "")).strip(),
            source=source,
            skip_invalid=skip_invalid,
        )
        check_environment(environment)
        write_environment(environment, out)
    except (DataError, ConfigError) as exc:
        err.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        raise typer.Exit(1) from None
    except OSError as exc:
        err.print(f"[bold red]error:[/] cannot write: {escape(str(exc))}", highlight=False)
        raise typer.Exit(1) from None
    _report_skipped(err, skipped)
    console = Console()
    reads = sum(t.effect is Effect.READ for t in environment.tools)
    where = f"{name} {listing.server_version or ''}".strip() or server.describe()
    console.print(
        f"tools: {len(environment.tools):,} ({reads} read, {len(environment.tools) - reads} write) from "
        f"{escape(where)} ({listing.pages} page{'s' if listing.pages != 1 else ''}, protocol "
        f"{listing.protocol_version}); {len(skipped)} skipped",
        highlight=False,
        soft_wrap=True,
    )
    console.print(_mcp_table(environment))
    console.print(f"environment: {escape(environment.id)} ({backend.value}) -> {escape(str(out))}", highlight=False)
