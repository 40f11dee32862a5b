"""``toolwild import ...``: bring tool lists published in other formats into toolwild's JSONL.

Each command reads a foreign format, writes one `Tool` per line, and prints what it read, what it skipped and
what the schema lint found, so the defects of a source are visible at import time rather than discovered later
when a simulator or an agent trips over them. ``import mcp`` asks a live MCP server for its tools and writes one
environment file. The lead CLI mounts :data:`import_app` as ``toolwild import``.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from toolwild.cli._common import OutputConsole, progress_bar
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


def _print_skipped(console: Console, skipped: list[SkippedFile]) -> None:
    """The first :data:`SKIPPED_SHOWN` skipped files with the reason each was rejected, one line each: a path in a
    table column would be folded at the terminal's width (and off a terminal at 80 columns), so neither ``grep`` nor
    a reader could find the file by its name."""
    console.print(f"Skipped files (first {min(len(skipped), SKIPPED_SHOWN)} of {len(skipped)}):")
    for item in skipped[:SKIPPED_SHOWN]:
        console.print(f"  {escape(item.file)}: {escape(item.reason)}", highlight=False)


@dataclass(frozen=True)
class LeftOut:
    """A tool (or, when none of its tools was left, a whole environment) an import did not write, and why."""

    environment: str
    """The id of the environment it belonged to."""
    where: str
    """Where it came from in the source (``line 176``, ``session 'wild_tool_bench_3'``, ``spec 12``); may be empty."""
    tool: str | None
    """The tool's name; None when the whole environment was left out."""
    field: str
    """The field of the tool that would not load (``parameters.required[0]``); empty for a whole environment."""
    reason: str


def _source_place(environment: Environment) -> str:
    """Where an environment came from, in the words of its ``source`` (the input line, session or spec)."""
    source = environment.source
    for key in ("line", "session", "spec"):
        if source.get(key) is not None:
            value = source[key]
            return f"{key} {value}" if isinstance(value, int) else f"{key} {value!r}"
    return ""


def _leave_out_unloadable_tools(environment: Environment) -> tuple[Environment | None, list[LeftOut]]:
    """The environment without the tools whose schemas would make its file fail to load, and what was left out.

    Why per tool and not per environment: since environment files refuse, say, a ``required`` naming no declared
    property, one published tool with that defect (WildToolBench's ``createMod``) made the whole import fail and
    write nothing. Each tool is checked alone by :func:`check_environment` itself (the check every load runs, so the
    two never disagree); a tool it refuses is left out and named, the other tools are kept. The provenance of the
    written file lists what was left out (``source.left_out``), so the file never silently differs from its source.
    An environment none of whose tools is left is left out whole (a file needs a tool).

    Raises:
        DataError: a problem of the environment itself rather than of one tool (its id, no tools at all, two tools
            of one name), with the environment's id and the field.
    """
    kept: list[Tool] = []
    left_out: list[LeftOut] = []
    where = _source_place(environment)
    for tool in environment.tools:
        try:
            check_environment(environment.model_copy(update={"tools": [tool]}))
        except DataError as exc:
            if not (exc.field or "").startswith("tools[0]"):  # the id: every tool would fail, so it is not the tool's
                raise DataError(f"environment {environment.id!r}: {exc.message}", field=exc.field) from None
            reason = exc.message.removeprefix(f"tool {tool.name!r}: ")
            if used := sum(r.name == tool.name for r in environment.recordings):
                reason += f" ({used} recorded call{'s' if used != 1 else ''} to it cannot be replayed)"
            field = exc.field.removeprefix("tools[0]").removeprefix(".") if exc.field else ""
            left_out.append(LeftOut(environment.id, where, tool.name, field, reason))
        else:
            kept.append(tool)
    if left_out and not kept:
        whole = LeftOut(environment.id, where, None, "", "none of its tools would load (each listed above)")
        return None, [*left_out, whole]
    if left_out:
        noted = [{"tool": item.tool, "field": item.field, "reason": item.reason} for item in left_out]
        source = {**environment.source, "left_out": noted}
        environment = environment.model_copy(update={"tools": kept, "source": source})
    try:
        check_environment(environment)
    except DataError as exc:
        raise DataError(f"environment {environment.id!r}: {exc.message}", field=exc.field) from None
    return environment, left_out


def _write_environments(environments: list[Environment], directory: Path) -> tuple[int, list[LeftOut]]:
    """Write environment files into ``directory``, each checked first and named safely from its id; returns how many
    were written and the tools (or environments) left out because their files would not load.

    Why the checks here: ids come from the input (session ids, spec names), so a name is made safe and kept inside
    the folder (:func:`write_environment_in`); a tool whose schema would make the file fail to load is left out and
    reported (:func:`_leave_out_unloadable_tools`), so one defective published tool costs that tool, not the import,
    and no file is written that would then fail to load; two environments that would share a file are refused
    instead of one silently replacing the other. Everything is checked before the first file is written, so a refused
    import writes nothing.

    Raises:
        DataError: an environment is unusable (its id and field named) or two land on one file name.
    """
    names: dict[str, str] = {}
    written: list[Environment] = []
    left_out: list[LeftOut] = []
    for environment in environments:
        usable, dropped = _leave_out_unloadable_tools(environment)
        left_out.extend(dropped)
        if usable is None:
            continue
        name = safe_filename(usable.id)
        if name in names:
            raise DataError(f"environments {names[name]!r} and {usable.id!r} would both be written to {name}")
        names[name] = usable.id
        written.append(usable)
    for environment in written:
        write_environment_in(directory, environment)
    return len(written), left_out


def _left_out_lines(source: Path, left_out: list[LeftOut]) -> list[str]:
    """One line (rich markup, input escaped) per tool or environment left out: the input and where in it, the
    tool and its environment, the field and why."""
    lines = []
    for item in left_out:
        place = f"{source}, {item.where}" if item.where else str(source)
        what = (
            f"tool {item.tool!r} of environment {item.environment!r}"
            if item.tool
            else f"environment {item.environment!r}"
        )
        field = f" ({item.field})" if item.field else ""
        lines.append(f"{escape(place)}: left out {escape(what)}{escape(field)}: {escape(item.reason)}")
    return lines


def _warn_left_out(err: Console, source: Path, left_out: list[LeftOut]) -> None:
    """A warning on stderr per tool or environment left out (see :func:`_left_out_lines`)."""
    for line in _left_out_lines(source, left_out):
        err.print(f"[yellow]warning:[/] {line}", highlight=False)


def _print_left_out(console: Console, source: Path, left_out: list[LeftOut]) -> None:
    """The summary's list of what was left out, one line each (a table would squeeze the reasons into a column a
    few words wide)."""
    if left_out:
        console.print("left out (their environment files would not load):", highlight=False)
    for line in _left_out_lines(source, left_out):
        console.print(f"  - {line}", highlight=False)


def _left_out_summary(left_out: list[LeftOut]) -> str:
    """``; 3 tools left out`` (and environments, when whole ones were): the count the summary line ends with."""
    tools = sum(item.tool is not None for item in left_out)
    environments = len(left_out) - tools
    parts = [f"{tools} tool{'s' if tools != 1 else ''}"] if tools else []
    parts += [f"{environments} environment{'s' if environments != 1 else ''}"] if environments else []
    return f"; {' and '.join(parts)} left out" if parts else ""


def _write_synthtools_envs(source: Path, tools: list[Tool], directory: Path) -> tuple[int, list[LeftOut]]:
    """One environment file per SynthTools spec; returns how many were written and what was left out."""
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
    console = OutputConsole()
    err = OutputConsole(stderr=True)
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
        environments, left_out = _write_synthtools_envs(source, tools, envs_out) if envs_out is not None else (0, [])
    except OSError as exc:
        err.print(f"[bold red]error:[/] cannot write: {escape(str(exc))}", highlight=False)
        raise typer.Exit(1) from None
    except DataError as exc:
        err.print(f"[bold red]error:[/] {escape(str(exc))}", markup=True, highlight=False, soft_wrap=True)
        raise typer.Exit(1) from None
    _warn_left_out(err, source, left_out)
    if left_out and not environments:
        err.print("[bold red]error:[/] no environment written: every one was left out (see the warnings)")
        raise typer.Exit(1)

    console.print(f"files read:    {files_read:,}")
    if out is not None:
        console.print(f"tools written: {written:,} -> {escape(str(out))}", highlight=False)
    if envs_out is not None:
        console.print(
            f"environments:  {environments:,} -> {escape(str(envs_out))}{_left_out_summary(left_out)}", highlight=False
        )
    console.print(f"files skipped: {len(skipped):,}")
    if skipped:
        _print_skipped(console, skipped)
    _print_left_out(console, source, left_out)
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
    """Turn WildToolBench sessions or tool lists into environment files (one per session or line).

    A tool whose schema would make its file fail to load (a `required`
    property its `properties` do not declare, an invalid schema) is left
    out, named in a warning and in the summary, and the rest is written
    (exit 0). Exit 1, writing nothing, when the input is unusable or no
    environment is left.
    """
    err = OutputConsole(stderr=True)
    try:
        if backend is BackendKind.PYTHON:
            raise DataError("a WildToolBench tool list has no code: choose --backend replay or llm")
        if backend is BackendKind.MCP:  # an mcp environment must name its server, and WildToolBench has none
            raise DataError("a WildToolBench file names no MCP server to call: choose --backend replay or llm")
        if isinstance(_first_value(source), list):
            if backend is BackendKind.REPLAY:
                raise DataError("a tool-list file has no recorded observations to replay: use --backend llm")
            environments = environments_from_tool_lists(source)
        else:
            from toolwild.core.formats.wtb import load_wtb_suite

            suite, _ = load_wtb_suite(source)
            environments = [environment_from_session(s, backend) for s in suite.sessions]
        written, left_out = _write_environments(environments, out)
    except DataError as exc:
        err.print(f"[bold red]error:[/] {escape(str(exc))}", markup=True, highlight=False)
        raise typer.Exit(1) from None
    except OSError as exc:
        err.print(f"[bold red]error:[/] cannot write: {escape(str(exc))}", highlight=False)
        raise typer.Exit(1) from None
    _warn_left_out(err, source, left_out)
    if left_out and not written:
        err.print(
            f"[bold red]error:[/] no environment written: all {len(environments):,} were left out (see the warnings)"
        )
        raise typer.Exit(1)
    console = OutputConsole()
    console.print(
        f"environments: {written:,} ({backend.value}) -> {escape(str(out))}{_left_out_summary(left_out)}",
        highlight=False,
    )
    _print_left_out(console, source, left_out)


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

    err = OutputConsole(stderr=True)
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
    console = OutputConsole()
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
