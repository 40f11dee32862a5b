"""A long command is never silent: with no terminal to draw a bar on, a progress line comes every few seconds."""

from __future__ import annotations

import time
from io import StringIO

from rich.console import Console

from toolwild.cli import _common


def test_without_a_terminal_progress_lines_are_printed(monkeypatch):
    monkeypatch.setattr(_common, "PLAIN_PROGRESS_EVERY_S", 0.05)
    out = StringIO()
    console = Console(file=out, force_terminal=False, width=120)
    with _common.progress_bar("sessions", status="status", to=console) as progress:
        bar = progress.add_task("run", total=10, status="")
        for done in range(1, 4):
            progress.update(bar, completed=done, status=f"tasks {4 * done}/40")
            time.sleep(0.15)
    lines = [line for line in out.getvalue().splitlines() if line.startswith("sessions ")]
    assert lines, out.getvalue()
    assert any("/10 tasks" in line and "elapsed" in line for line in lines)
    assert "3/10 tasks 12/40" in lines[-1]


def test_on_a_terminal_the_bar_is_drawn_and_estimates_the_time_left():
    console = Console(file=StringIO(), force_terminal=True, width=120)
    progress = _common.progress_bar("sessions", to=console)
    assert type(progress).__name__ == "Progress"
    assert any(type(c).__name__ == "TimeRemainingColumn" for c in progress.columns)
