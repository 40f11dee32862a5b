"""``toolwild env``: call an environment's tools by hand, once or in an interactive loop.

ENV is a built-in id or an environment file (``*.env.json``, e.g. from ``toolwild import synthtools --envs-out``).
A model-simulated (``llm``) environment is answered by ``--model``; with ``--cache FILE`` its answers are kept, so
trying the same calls again is instant and gives the same observations.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from toolwild.cli._common import console, handled_errors, make_llm, run_async
from toolwild.core.environment import BackendKind
from toolwild.envs.base import EnvironmentBackend, Episode, Observation
from toolwild.envs.registry import ENVIRONMENTS, describe_environment, get_environment
from toolwild.errors import ConfigError
from toolwild.llm.client import LLM
from toolwild.llm.registry import describe_backends

env_app = typer.Typer(help="Try an environment's tools by hand.", no_args_is_help=True)

EnvArgument = Annotated[
    str,
    typer.Argument(metavar="ENV", help=f"A built-in ({', '.join(sorted(ENVIRONMENTS))}) or an environment file."),
]
SeedOption = Annotated[int, typer.Option(help="Episode seed (the seed data depends on it).")]
ModelOption = Annotated[
    str, typer.Option(help=f"Simulator for model-simulated environments: {'; '.join(describe_backends())}.")
]
BaseUrlOption = Annotated[str | None, typer.Option(help="Base URL of an OpenAI-compatible server.")]
CacheOption = Annotated[Path | None, typer.Option(help="SQLite file caching the simulator's answers.")]


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


def _open(env: str, model: str, base_url: str | None, cache: Path | None) -> tuple[EnvironmentBackend, LLM | None]:
    """The environment and, when it needs one, its simulator (built only then: loading a model takes time)."""
    description = describe_environment(env)
    if description is None or description.backend is not BackendKind.LLM:
        return get_environment(env), None
    llm = make_llm(model, base_url=base_url, cache=cache)
    return get_environment(env, simulator=llm), llm


async def _close(episode: Episode, llm: LLM | None) -> None:
    episode.close()
    if llm is not None:
        await llm.aclose()


@env_app.command("tools")
def tools(env: EnvArgument) -> None:
    """List an environment's tools with their effect and parameters."""
    from toolwild.envs.registry import environment_tools

    with handled_errors():
        specs = environment_tools(env)
    table = Table(title=f"{env} tools", title_justify="left")
    table.add_column("tool", style="bold")
    table.add_column("effect")
    table.add_column("parameters")
    table.add_column("description")
    for t in specs:
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
    model: ModelOption = "local",
    base_url: BaseUrlOption = None,
    cache: CacheOption = None,
) -> None:
    """Make one call on a fresh episode and print the observation."""
    with handled_errors():
        arguments = _parse_args(args)
        backend, llm = _open(env, model, base_url, cache)
        episode = backend.reset(seed=seed)

        async def once() -> Observation:
            try:
                return await episode.acall(tool_name, arguments)
            finally:
                await _close(episode, llm)

        _show(run_async(once()))


async def _shell_step(episode: Episode, line: str) -> bool:
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
        _show(await episode.acall(name, _parse_args(rest)))
    except ConfigError as exc:
        console.print(f"[red]{exc}[/]")
    return True


@env_app.command("shell")
def shell(
    env: EnvArgument,
    seed: SeedOption = 0,
    model: ModelOption = "local",
    base_url: BaseUrlOption = None,
    cache: CacheOption = None,
) -> None:
    """An interactive loop on one episode: `TOOL {json args}`, `state`, `quit`."""
    with handled_errors():
        backend, llm = _open(env, model, base_url, cache)
        episode = backend.reset(seed=seed)
    console.print(f"{env} (seed {seed}); tools: {', '.join(t.name for t in backend.tools)}")
    console.print('type: TOOL {"arg": value} · state · quit')

    async def loop() -> None:
        try:
            while True:
                try:
                    line = input(f"{backend.id}> ")
                except EOFError:
                    break
                if not await _shell_step(episode, line):
                    break
        finally:
            await _close(episode, llm)

    run_async(loop())
