"""Conventions every command keeps: ``-h`` as well as ``--help``, ``-o`` wherever ``--out``, ``--version``, and a help
that fits 80 columns with no flag name cut."""

from __future__ import annotations

import re
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from toolwild import __version__
from toolwild.cli.main import app


def _commands(command: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    out = [(path, command)]
    if hasattr(command, "commands"):  # a group (typer may bring its own click: no isinstance)
        for name, sub in sorted(command.commands.items()):
            out += _commands(sub, (*path, name))
    return out


COMMANDS = _commands(typer.main.get_command(app))


def test_every_command_is_reached():
    names = {" ".join(path) for path, _ in COMMANDS}
    assert {"eval", "score", "validate", "show", "synth sessions", "suite ledger", "env shell"} <= names


@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=[" ".join(p) or "toolwild" for p, _ in COMMANDS])
def test_short_help_and_short_out(path, command):
    result = CliRunner().invoke(app, [*path, "-h"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.output
    lines = result.output.splitlines()
    assert max(len(line) for line in lines) <= 80
    cut = [line for line in lines if re.search(r"--[\w-]*…", line)]
    assert cut == [], f"flag names cut at 80 columns: {cut}"
    for param in command.params:
        if "--out" in getattr(param, "opts", []):
            assert "-o" in param.opts, f"{' '.join(path)}: --out without -o"


def test_version():
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output.strip() == f"toolwild {__version__}"


VERB_BODY_LINES = 60
"""Most lines of a command's body (after its signature and docstring): a verb parses, calls the library, prints."""


def _body_lines(callback: Any) -> int:
    import ast
    import inspect
    import textwrap

    node = ast.parse(textwrap.dedent(inspect.getsource(callback))).body[0]
    assert isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    body = node.body
    if len(body) > 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring is not the body
    return body[-1].end_lineno - body[0].lineno + 1  # type: ignore[operator]


def test_no_command_body_is_over_sixty_lines():
    """Issue #30: a verb that grows a job (eval was 207 lines) is a library function the CLI lacks."""
    long = {}
    for path, command in COMMANDS:
        callback = getattr(command, "callback", None)
        if callback is None or hasattr(command, "commands"):
            continue
        lines = _body_lines(callback)
        if lines > VERB_BODY_LINES:
            long[" ".join(path)] = lines
    assert long == {}, f"command bodies over {VERB_BODY_LINES} lines: {long}"


def test_the_body_count_sees_a_long_body():
    def verb() -> None:
        """A docstring is not counted."""
        x = 0
        x += 1
        x += 2

    assert _body_lines(verb) == 3
