"""A long command is never silent: with no terminal to draw a bar on, a progress line comes every few seconds."""

from __future__ import annotations

import re
import socket
import time
from io import StringIO
from pathlib import Path

import pytest
from fake_openai import Delay, FakeOpenAI, serve_in_thread
from gold_responder import gold_responder
from rich.console import Console
from typer.testing import CliRunner

from toolwild.cli import _common
from toolwild.cli.eval import progress_status
from toolwild.cli.main import app
from toolwild.core.formats.wtb import load_wtb_suite
from toolwild.eval import runner
from toolwild.eval.runner import RunProgress


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


# ------------------------------------------------------------------ eval: model calls and tasks as they happen
FIXTURE = Path(__file__).resolve().parents[2].parent / "shared/fixtures/wildtoolbench/sessions_0_4.reconstructed.jsonl"
needs_fixture = pytest.mark.skipif(not FIXTURE.exists(), reason=f"fixture not found: {FIXTURE}")


def _closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _eval(base_url: str, runs: Path, *extra: str):
    args = ["eval", "--suite", str(FIXTURE), "--model", "openai:fake-model", "--base-url", base_url]
    return CliRunner().invoke(app, [*args, "--runs-dir", str(runs), "--name", "r", *extra], env={"NO_COLOR": "1"})


def test_the_status_says_sessions_model_calls_and_accuracy():
    progress = RunProgress(total=4, done=1, total_tasks=16, tasks_done=6, calls=23, tasks=4, tasks_correct=3)
    status = progress_status(progress)
    assert status.startswith("sessions 1/4 · model calls 23 · task acc 75.0%")
    assert "steps 23" in progress_status(progress, calls="steps")
    progress.provider_errors = 2
    assert "provider errors 2" in progress_status(progress)


@needs_fixture
def test_eval_progress_moves_with_model_calls_before_any_session_ends(tmp_path, monkeypatch):
    """Sessions of the embedded model take minutes each: the progress counts tasks and model calls as they happen
    (the bar's count is task-runs; a plain line comes every few seconds off a terminal, here every 50 ms)."""
    monkeypatch.setattr(_common, "PLAIN_PROGRESS_EVERY_S", 0.05)
    monkeypatch.setattr(runner, "LIVE_EVERY_S", 0.0)
    suite, _ = load_wtb_suite(FIXTURE)
    gold = gold_responder(suite)
    fake = FakeOpenAI(lambda body: Delay(0.15, gold(body)))
    with serve_in_thread(fake) as url:
        result = _eval(url, tmp_path, "--no-preflight")
    assert result.exit_code == 0, result.output
    total = sum(len(s.tasks) for s in suite.sessions)
    lines = [line for line in result.output.splitlines() if line.startswith("tasks ")]
    live = [line for line in lines if f"sessions 0/{len(suite.sessions)}" in line]
    assert any(not re.search(r"model calls 0\b", line) for line in live), lines  # calls seen before any end
    counts = [int(re.match(r"tasks (\d+)/(\d+)", line).group(1)) for line in lines]
    assert all(re.match(rf"tasks \d+/{total}\b", line) for line in lines)
    assert counts == sorted(counts) and any(0 < c < total for c in counts)


@needs_fixture
def test_a_failing_preflight_stops_eval_loudly_and_leaves_nothing_to_resume(tmp_path):
    """The check runs alongside the run's set-up now; a wrong endpoint still ends the command with the check's
    message before any model call, and the same run name can be started again once the endpoint is right."""
    closed = f"http://127.0.0.1:{_closed_port()}/v1"
    failed = _eval(closed, tmp_path)
    assert failed.exit_code == 1
    assert "cannot reach http://127.0.0.1:" in failed.output and "connection refused" in failed.output
    trajectories = tmp_path / "r" / "trajectories.jsonl"
    assert not trajectories.exists() or not trajectories.read_text()
    suite, _ = load_wtb_suite(FIXTURE)
    with serve_in_thread(FakeOpenAI(gold_responder(suite))) as url:
        again = _eval(url, tmp_path)
    assert again.exit_code == 0, again.output
    assert len(trajectories.read_text().splitlines()) == len(suite.sessions)
