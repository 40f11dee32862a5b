"""``synth sessions`` at scale: the same suite at any concurrency, a SIGKILLed run resumed to the very same files
with no model call made twice, a session lost to the provider recorded and made again on resume, and clear errors
for a progress log that belongs to another run or an environment that does not load."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest
from fake_openai import FakeOpenAI, HttpError, Reply, serve_in_thread, writer_echo
from library_env import LIBRARY, library_model
from typer.testing import CliRunner

from toolwild.cli.main import app
from toolwild.core.formats.environment import write_environment

TOOLWILD = [sys.executable, "-m", "toolwild.cli.main"]
N = 6


def run(*args: str):
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})


def _model(body: dict) -> Reply:
    """The simulator (library_model) and the writers (echo the brief's correct example, re-worded by a rule that
    depends on the request only, so replies never depend on the order calls arrive in)."""
    written = writer_echo(body, lambda example: f"Hello there. {example}" if len(example) % 2 else example)
    if written is not None:
        return Reply(text=written)
    return Reply(text=library_model(SimpleNamespace(messages=body["messages"])))


@pytest.fixture
def env_dir(tmp_path) -> Path:
    folder = tmp_path / "envs"
    folder.mkdir()
    write_environment(LIBRARY, folder / "library.env.json")
    return folder


def _args(env_dir: Path, out: Path, base_url: str, *extra: str) -> list[str]:
    return [
        "synth", "sessions", "--env", str(env_dir), "--env", "inventory", "--n", str(N), "--out", str(out),
        "--env-model", "openai:sim", "--model", "openai:writer", "--base-url", base_url, *extra,
    ]  # fmt: skip


def _outputs(out: Path) -> tuple[bytes, dict]:
    report = json.loads(out.with_name(out.name + ".report.json").read_text())
    kept = {k: report[k] for k in ("sessions", "tasks", "failed_sessions", "drops", "utterances", "problems")}
    return out.read_bytes(), kept


def test_the_suite_is_byte_identical_at_concurrency_1_and_64(tmp_path, env_dir):
    fake = FakeOpenAI(_model)
    files = {}
    with serve_in_thread(fake) as base_url:
        for c in ("1", "64"):
            out = tmp_path / c / "suite.jsonl"
            result = run(*_args(env_dir, out, base_url, "--concurrency", c))
            assert result.exit_code == 0, result.output
            files[c] = _outputs(out)
    assert files["1"] == files["64"]
    _suite, report = files["1"]
    assert report["sessions"] == N and report["utterances"].get("model", 0) > 0  # the writer really wrote some


def _uninterrupted(tmp_path: Path, env_dir: Path) -> tuple[tuple[bytes, dict], int]:
    fake = FakeOpenAI(_model)
    out = tmp_path / "whole" / "suite.jsonl"
    with serve_in_thread(fake) as base_url:
        result = run(*_args(env_dir, out, base_url, "--concurrency", "1"))
    assert result.exit_code == 0, result.output
    return _outputs(out), fake.calls


class _Killer:
    """A model that SIGKILLs the client process when it receives its k-th request (then answers as usual)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seen = 0
        self.kill_at: int | None = None
        self.pid: int | None = None

    def __call__(self, body: dict) -> Reply:
        with self.lock:
            self.seen += 1
            if self.seen == self.kill_at and self.pid is not None:
                os.kill(self.pid, signal.SIGKILL)
        return _model(body)


def test_a_killed_run_resumed_writes_the_same_files_and_makes_no_call_twice(tmp_path, env_dir):
    expected, total = _uninterrupted(tmp_path, env_dir)
    for point in (3, total // 2, total - 5):
        out = tmp_path / f"killed{point}" / "suite.jsonl"
        killer = _Killer()
        killer.kill_at = point
        fake = FakeOpenAI(killer)
        with serve_in_thread(fake) as base_url:  # one endpoint for both runs (it is part of the cache key)
            args = [*TOOLWILD, *_args(env_dir, out, base_url, "--concurrency", "1")]
            child = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            killer.pid = child.pid
            child.wait(timeout=120)
            assert child.returncode == -signal.SIGKILL
            before = fake.calls
            assert not out.exists()  # nothing half-written in place of the suite
            log = out.with_name(out.name + ".progress.jsonl")
            kept = [json.loads(line) for line in log.read_text().splitlines()[1:] if line.endswith("}")]
            resumed = run(*_args(env_dir, out, base_url, "--concurrency", "1", "--resume"))
        assert resumed.exit_code == 0, resumed.output
        assert _outputs(out) == expected
        # the one request in flight at the kill is the only call made twice; every other answer came from the cache
        assert fake.calls == total + 1, (point, before, fake.calls, total)
        assert before == point
        records = [json.loads(line) for line in log.read_text().splitlines()[1:]]
        keys = [r["key"] for r in records if r.get("status") == "done"]
        assert len(keys) == len(set(keys)) == N
        assert 0 < len(kept) < N or point == 3  # killed mid-run, not before or after it
        assert records[: len(kept)] == kept  # what the killed run had finished was kept as it was


def test_a_session_lost_to_the_provider_is_recorded_the_run_goes_on_and_resume_makes_it(tmp_path, env_dir):
    expected, _ = _uninterrupted(tmp_path, env_dir)
    lost = 3  # the writer's requests of session 3 carry seeds 30000..30003 (env seed * 100 + task)

    down = True

    def flaky(body: dict):
        if down and body.get("seed", 0) // 100 == lost:
            return HttpError(503, "overloaded", headers={"retry-after": "0"})
        return _model(body)

    out = tmp_path / "flaky" / "suite.jsonl"
    with serve_in_thread(FakeOpenAI(flaky)) as base_url:
        result = run(*_args(env_dir, out, base_url, "--concurrency", "4"))
        assert result.exit_code == 4, result.output
        assert "resume to retry" in result.output
        report = json.loads(out.with_name(out.name + ".report.json").read_text())
        assert [u["index"] for u in report["failed_units"]] == [lost] and report["sessions"] == N - 1
        down = False
        healed = run(*_args(env_dir, out, base_url, "--resume"))
    assert healed.exit_code == 0, healed.output
    assert _outputs(out) == expected


def test_a_progress_log_of_another_run_is_refused_and_kept(tmp_path):
    out = tmp_path / "suite.jsonl"
    first = run("synth", "sessions", "--env", "inventory", "--n", "4", "--out", str(out))
    assert first.exit_code == 0, first.output
    log = out.with_name(out.name + ".progress.jsonl")
    before = log.read_bytes(), out.read_bytes()
    other = run("synth", "sessions", "--env", "inventory", "--n", "4", "--seed", "7", "--out", str(out), "--resume")
    assert other.exit_code == 1 and "seed: 0 in the log, 7 now" in " ".join(other.output.split())
    assert (log.read_bytes(), out.read_bytes()) == before


def test_an_unfinished_run_is_not_overwritten_without_resume(tmp_path):
    out = tmp_path / "suite.jsonl"
    assert run("synth", "sessions", "--env", "inventory", "--n", "4", "--out", str(out)).exit_code == 0
    log = out.with_name(out.name + ".progress.jsonl")
    lines = log.read_text().splitlines()
    log.write_text("\n".join(lines[:3]) + "\n")  # as if killed after two sessions
    again = run("synth", "sessions", "--env", "inventory", "--n", "4", "--out", str(out))
    assert again.exit_code == 1 and "unfinished run" in again.output and "--resume" in again.output
    resumed = run("synth", "sessions", "--env", "inventory", "--n", "4", "--out", str(out), "--resume")
    assert resumed.exit_code == 0 and "4 of 4" in resumed.output


def test_an_environment_file_that_does_not_load_is_named(tmp_path):
    broken = tmp_path / "broken.env.json"
    broken.write_text('{"id": "x", "tools": [')
    result = run("synth", "sessions", "--env", str(broken), "--out", str(tmp_path / "s.jsonl"))
    assert result.exit_code == 1 and "broken.env.json" in result.output
    assert not (tmp_path / "s.jsonl").exists() and not (tmp_path / "s.jsonl.progress.jsonl").exists()
