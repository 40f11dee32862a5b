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
