"""``toolwild env``: call an environment's tools by hand, once or in an interactive loop."""

from __future__ import annotations

import json
import shlex
from typing import Annotated, Any

import typer
from rich.table import Table

from toolwild.cli._common import console, handled_errors
from toolwild.envs.base import Episode, Observation
from toolwild.envs.registry import ENVIRONMENTS, get_environment
from toolwild.errors import ConfigError

env_app = typer.Typer(help="Try an environment's tools by hand.", no_args_is_help=True)

EnvArgument = Annotated[str, typer.Argument(metavar="ENV", help=f"Environment id: {', '.join(sorted(ENVIRONMENTS))}.")]
SeedOption = Annotated[int, typer.Option(help="Episode seed (the seed data depends on it).")]


def _parse_args(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text or "{}")
    except json.JSONDecodeError as exc:
        raise ConfigError(f"--args is not JSON: {exc.msg} (column {exc.colno})") from None
    if not isinstance(value, dict):
        raise ConfigError("--args must be a JSON object")
    return value


def _show(observation: Observation) -> None:
    console.print_json(observation.model_dump_json(exclude_none=True))


@env_app.command("tools")
def tools(env: EnvArgument) -> None:
    """List an environment's tools with their effect and parameters."""
    with handled_errors():
        backend = get_environment(env)
    table = Table(title=f"{env} tools", title_justify="left")
    table.add_column("tool", style="bold")
    table.add_column("effect")
    table.add_column("parameters")
    table.add_column("description")
    for t in backend.tools:
        params = ", ".join(f"{p}{'' if p in t.required else '?'}" for p in t.properties)
        table.add_row(t.name, t.effect.value if t.effect else "", params, t.description)
    console.print(table)


@env_app.command("call")
def call(
    env: EnvArgument,
    tool_name: Annotated[str, typer.Argument(metavar="TOOL", help="The tool to call.")],
    args: Annotated[
        str, typer.Option("--args", help='Arguments as a JSON object, e.g. \'{"item": "coffee"}\'.')
    ] = "{}",
    seed: SeedOption = 0,
) -> None:
    """Make one call on a fresh episode and print the observation."""
    with handled_errors():
        episode = get_environment(env).reset(seed=seed)
        try:
            _show(episode.call(tool_name, _parse_args(args)))
        finally:
            episode.close()


def _shell_step(episode: Episode, line: str) -> bool:
    """One command of the shell; False to quit."""
    words = shlex.split(line)
    if not words:
        return True
    if words[0] in ("quit", "exit"):
        return False
    if words[0] == "state":
        console.print_json(json.dumps(episode.state(), default=str))
        return True
    name, rest = words[0], line.strip()[len(words[0]) :].strip()
    try:
        _show(episode.call(name, _parse_args(rest)))
    except ConfigError as exc:
        console.print(f"[red]{exc}[/]")
    return True


@env_app.command("shell")
def shell(env: EnvArgument, seed: SeedOption = 0) -> None:
    """An interactive loop on one episode: `TOOL {json args}`, `state`, `quit`."""
    with handled_errors():
        backend = get_environment(env)
        episode = backend.reset(seed=seed)
    console.print(f"{env} (seed {seed}); tools: {', '.join(t.name for t in backend.tools)}")
    console.print('type: TOOL {"arg": value} · state · quit')
    try:
        while True:
            try:
                line = input(f"{env}> ")
            except EOFError:
                break
            if not _shell_step(episode, line):
                break
    finally:
        episode.close()
