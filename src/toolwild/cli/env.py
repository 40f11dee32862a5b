"""``toolwild env``: call an environment's tools by hand, once or in an interactive loop.

ENV is a built-in id or an environment file (``*.env.json``, e.g. from ``toolwild import synthtools --envs-out``).
A model-simulated (``llm``) environment is answered by ``--model``; with ``--cache FILE`` its answers are kept, so
trying the same calls again is instant and gives the same observations.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from toolwild.cli._common import (
    AllowOutsideIncludesOption,
    BaseUrlOption,
    EnvArgument,
    SeedOption,
    SimulatorCacheOption,
    SimulatorOption,
    console,
    handled_errors,
)
from toolwild.envs.base import Episode, Observation
from toolwild.envs.registry import open_environment, own_ledger
from toolwild.errors import ConfigError, ToolwildError
from toolwild.llm.client import LLM
from toolwild.run.loop import run_async

env_app = typer.Typer(help="Try an environment's tools by hand.", no_args_is_help=True)

LedgerOption = Annotated[
    Path | None,
    typer.Option(
        "--ledger",
        dir_okay=False,
        help="With ENV ledger: your own Beancount file. Episodes start from a copy of it (and of its includes); "
        "your file is never written.",
    ),
]


MAX_LINE = 1_000_000
"""Characters a shell line may have: a longer one is refused with a message (a paste gone wrong, not a call)."""


def _parse_args(text: str, *, what: str = "--args") -> dict[str, Any]:
    """The arguments of a call as a JSON object; anything else is a ConfigError naming ``what`` (never a traceback:
    JSON nested deeper than Python's recursion limit raises RecursionError, not a decode error)."""
    try:
        value = json.loads(text or "{}")
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{what} is not JSON: {exc.msg} (column {exc.colno})") from None
    except RecursionError:
        raise ConfigError(f"{what} is nested too deeply") from None
    if not isinstance(value, dict):
        raise ConfigError(f"{what} must be a JSON object")
    return value


def _show(observation: Observation) -> None:
    console.print_json(observation.model_dump_json(exclude_none=True))


async def _close(episode: Episode, llm: LLM | None) -> None:
    episode.close()
    if llm is not None:
        await llm.aclose()


@env_app.command("tools")
def tools(
    env: EnvArgument, ledger: LedgerOption = None, allow_outside_includes: AllowOutsideIncludesOption = False
) -> None:
    """List an environment's tools with their effect and parameters."""
    from toolwild.envs.registry import environment_tools

    with handled_errors():
        books = own_ledger(
            env, ledger, allow_outside_includes=allow_outside_includes
        )  # loads the file: a ledger that does not load is named here
        specs = books.tools if books is not None else environment_tools(env)
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
    model: SimulatorOption = "local",
    base_url: BaseUrlOption = None,
    cache: SimulatorCacheOption = None,
    ledger: LedgerOption = None,
    allow_outside_includes: AllowOutsideIncludesOption = False,
) -> None:
    """Make one call on a fresh episode and print the observation (exit 1 when the tool answers with an error)."""
    with handled_errors():
        arguments = _parse_args(args)
        backend, llm = open_environment(
            env,
            model=model,
            base_url=base_url,
            cache=cache,
            ledger=ledger,
            allow_outside_includes=allow_outside_includes,
        )
        episode = backend.reset(seed=seed)

        async def once() -> Observation:
            try:
                return await episode.acall(tool_name, arguments)
            finally:
                await _close(episode, llm)

        observation = run_async(once())
    _show(observation)
    if not observation.ok:  # the observation is the answer, but the call failed: scripts must be able to tell
        raise typer.Exit(1)


def _read_line(prompt: str) -> str:
    """One line typed at the shell (a seam for tests: EOF and Ctrl-C come from here)."""
    return input(prompt)


def _split(line: str) -> tuple[str, str]:
    """The command word and the rest of the line. Whitespace, not shell quoting, separates them: the rest is JSON,
    and a quote it leaves open must be a JSON error, not a quoting error."""
    words = line.strip().split(maxsplit=1)
    if not words:
        return "", ""
    return words[0], words[1] if len(words) > 1 else ""


async def _shell_step(episode: Episode, line: str) -> bool:
    """One command of the shell; False to quit. Whatever the line holds, it is answered with a message and the
    episode is kept: losing an episode's state to a typo is the one thing an interactive shell must not do."""
    if len(line) > MAX_LINE:
        console.print(f"[red]line too long ({len(line):,} characters; at most {MAX_LINE:,})[/]")
        return True
    name, rest = _split(line)
    if not name:
        return True
    if name in ("quit", "exit"):
        return False
    try:
        if name == "state":
            console.print_json(json.dumps(episode.state(), default=str))
        else:
            _show(await episode.acall(name, _parse_args(rest, what="the arguments")))
    except ToolwildError as exc:
        console.print(f"[red]{escape(str(exc))}[/]")  # escaped: a message quoting "[/x]" is not markup
    except Exception as exc:  # an environment bug must not end the shell and lose the episode's state
        problem = escape(f"{type(exc).__name__}: {exc}")
        console.print(f"[red]the environment failed on this call ({problem}); the episode is kept[/]")
    return True


def _event_loop() -> asyncio.Runner:
    """One event loop for the whole shell (uvloop when installed, as :func:`run_async`): a simulator's client is
    bound to its loop, and between calls the default Ctrl-C handling is back, so a Ctrl-C at the prompt arrives as
    KeyboardInterrupt."""
    try:
        import uvloop
    except ImportError:
        return asyncio.Runner()
    return asyncio.Runner(loop_factory=uvloop.new_event_loop)


def _repl(runner: asyncio.Runner, prompt: str, episode: Episode) -> None:
    """Read, run, print until quit or EOF. Ctrl-C abandons the line (or the call in flight), never the episode."""
    while True:
        try:
            line = _read_line(prompt)
        except EOFError:
            console.print()
            return
        except KeyboardInterrupt:
            console.print("\n[yellow]interrupted; the episode is kept (quit or Ctrl-D to leave)[/]")
            continue
        except UnicodeDecodeError:
            console.print("[red]the line is not UTF-8 text[/]")
            continue
        try:
            if not runner.run(_shell_step(episode, line)):
                return
        except KeyboardInterrupt:
            console.print("\n[yellow]call interrupted; the episode is kept (`state` shows it)[/]")


@env_app.command("shell")
def shell(
    env: EnvArgument,
    seed: SeedOption = 0,
    model: SimulatorOption = "local",
    base_url: BaseUrlOption = None,
    cache: SimulatorCacheOption = None,
    ledger: LedgerOption = None,
    allow_outside_includes: AllowOutsideIncludesOption = False,
) -> None:
    """An interactive loop on one episode: `TOOL {json args}`, `state`, `quit`."""
    with handled_errors():
        backend, llm = open_environment(
            env,
            model=model,
            base_url=base_url,
            cache=cache,
            ledger=ledger,
            allow_outside_includes=allow_outside_includes,
        )
        episode = backend.reset(seed=seed)
    where = f"a copy of {ledger}; your file is not written" if ledger is not None else f"seed {seed}"
    console.print(escape(f"{env} ({where}); tools: {', '.join(t.name for t in backend.tools)}"))
    console.print('type: TOOL {"arg": value} · state · quit')
    with _event_loop() as runner:
        try:
            _repl(runner, f"{backend.id}> ", episode)
        finally:
            runner.run(_close(episode, llm))
