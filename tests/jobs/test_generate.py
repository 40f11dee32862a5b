"""Generation as a library call: :func:`toolwild.jobs.sessions.generate_sessions` writes what ``toolwild synth
sessions`` writes (the same bytes), resumes a SIGKILLed run to the same suite, and refuses bad options with a
ConfigError, never a CLI exit."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from toolwild.cli.main import app
from toolwild.errors import ConfigError
from toolwild.jobs.environments import generate_environments
from toolwild.jobs.sessions import GeneratedSessions, generate_sessions

N = 64
FAST = {"verify": False, "encoder": "none"}
"""Verification and the semantic figure are the slow parts and change nothing of what is compared here."""


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> tuple[Path, GeneratedSessions, bytes, bytes]:
    """64 ledger sessions made from Python (template builder, template wording): the suite and report bytes."""
    out = tmp_path_factory.mktemp("library") / "ledger.jsonl"
    made = generate_sessions(["ledger"], out, n=N, **FAST)
    return out, made, out.read_bytes(), made.report_path.read_bytes()


def test_the_library_call_writes_the_bytes_the_command_writes(reference):
    out, made, suite, report = reference
    assert made.sessions == N and made.lost == 0 and made.errors == 0
    assert made.report["sessions"] == N and made.report["resumed"] is False
    # the command on the same OUT (the library's finished log is replaced): the same suite, the same report
    args = ["synth", "sessions", "--env", "ledger", "--n", str(N), "--out", str(out), "--no-verify"]
    result = CliRunner().invoke(app, [*args, "--encoder", "none"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert out.read_bytes() == suite
    assert made.report_path.read_bytes() == report


def test_a_killed_run_resumed_writes_the_suite_of_an_uninterrupted_one(reference, tmp_path):
    _, _, suite, _ = reference
    out = tmp_path / "ledger.jsonl"
    log = tmp_path / "ledger.jsonl.progress.jsonl"
    code = (
        "from toolwild.jobs.sessions import generate_sessions\n"
        f"generate_sessions(['ledger'], {str(out)!r}, n={N}, verify=False, encoder='none', concurrency=1)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", code], env={**os.environ, "PYTHONHASHSEED": "0"})
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and child.poll() is None:
            if log.exists() and len(log.read_bytes().splitlines()) > 6:  # the header and a few sessions
                break
            time.sleep(0.02)
        child.send_signal(signal.SIGKILL)
    finally:
        child.wait()
    assert child.returncode == -signal.SIGKILL, "the run ended before it could be killed"
    kept = len(log.read_bytes().splitlines()) - 1
    assert 0 < kept < N

    with pytest.raises(ConfigError, match="unfinished run"):  # not resumed: refused, nothing thrown away
        generate_sessions(["ledger"], out, n=N, **FAST)
    seen: list[tuple[int, int]] = []
    made = generate_sessions(["ledger"], out, n=N, resume=True, on_progress=lambda d, t: seen.append((d, t)), **FAST)
    assert made.report["resumed"] is True and made.sessions == N
    assert out.read_bytes() == suite
    assert seen[0] == (kept, N) and seen[-1] == (N, N)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"builder": "tree"}, "--builder 'tree': choose auto or graph"),
        ({"like_published": True, "transitions": 1}, "leave out --transitions"),
        ({"executor": "dask"}, "--executor 'dask': choose auto, local, process or ray"),
        ({"encoder": "bert"}, "--encoder 'bert'"),
        ({"n": 0}, "--n 0: at least 1"),
        ({"perturb_out": "x.jsonl"}, "--perturb-out needs --perturb"),
    ],
)
def test_a_bad_option_is_a_config_error_before_anything_is_written(tmp_path, options, message):
    out = tmp_path / "s.jsonl"
    with pytest.raises(ConfigError, match=re.escape(message)):
        generate_sessions(["ledger"], out, **options)
    assert not out.exists() and not (tmp_path / "s.jsonl.progress.jsonl").exists()


@pytest.mark.parametrize(
    ("fields", "options", "message"),
    [
        (" , ", {}, "--fields names no field"),
        (["finance", "finance"], {}, "--fields names a field twice"),
        ("finance", {"executor": "process"}, "--executor 'process': choose local or ray"),
        ("finance", {"resume": True}, "nothing to resume"),
    ],
)
def test_generate_environments_refuses_bad_options_with_a_config_error(tmp_path, fields, options, message):
    with pytest.raises(ConfigError, match=message):
        generate_environments(fields, tmp_path / "envs", **options)
    assert not (tmp_path / "envs").exists()
