"""``synth sessions --executor process``: the very files of the local executor from worker processes over several
shards, a SIGKILLed run (its workers gone with it) resumed to the very same suite, and what ``auto`` picks."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

import toolwild.jobs.sessions as command
import toolwild.run.process_executor as processes
import toolwild.synth.session_job as session_job
from toolwild.cli.main import app

TOOLWILD = [sys.executable, "-m", "toolwild.cli.main"]


def run(*args: str):
    return CliRunner().invoke(app, ["synth", "sessions", *args])


def _report(out: Path) -> dict:
    return json.loads(out.with_name(out.name + ".report.json").read_text())


def test_process_writes_the_files_of_the_local_executor_over_several_shards(tmp_path, monkeypatch):
    monkeypatch.setattr(session_job, "SHARD", 8)  # three shards of inventory sessions (they depend on nothing before)
    local, pooled = tmp_path / "local" / "s.jsonl", tmp_path / "process" / "s.jsonl"  # one name: ids come from it
    common = ("--env", "inventory", "--n", "24", "--encoder", "none")
    assert run(*common, "--out", str(local), "--executor", "local").exit_code == 0
    made = run(*common, "--out", str(pooled), "--executor", "process")
    assert made.exit_code == 0, made.output
    assert pooled.read_bytes() == local.read_bytes()
    first, second = _report(local), _report(pooled)
    assert second.pop("executor") == "process" and first.pop("executor") == "local"
    assert {k: v for k, v in second.items() if k != "suite"} == {k: v for k, v in first.items() if k != "suite"}
    assert second["sessions"] == 24 and second["usage"] == {}  # no model: nothing the workers kept


def _children(pid: int) -> set[int]:
    """Processes whose parent is ``pid`` (Linux /proc)."""
    out = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.add(int(stat.parent.name))
    return out


def _gone(pids: set[int], within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if not any(Path(f"/proc/{p}").exists() for p in pids):
            return True
        time.sleep(0.1)
    return False


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc to find the worker processes")
def test_a_killed_process_run_resumed_writes_the_suite_of_the_local_executor(tmp_path):
    """Ledger sessions depend on the earlier ones of their block: the resumed workers get the logged ones back."""
    common = ("--env", "ledger", "--env", "inventory", "--n", "30", "--encoder", "none")
    local, pooled = tmp_path / "local" / "s.jsonl", tmp_path / "process" / "s.jsonl"
    assert run(*common, "--out", str(local), "--executor", "local").exit_code == 0
    log = pooled.with_name(pooled.name + ".progress.jsonl")
    child = subprocess.Popen(
        [*TOOLWILD, "synth", "sessions", *common, "--out", str(pooled), "--executor", "process"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    workers: set[int] = set()
    while child.poll() is None:
        workers |= _children(child.pid)
        if log.exists() and log.read_text().count('"status":"done"') >= 10:
            break
        time.sleep(0.05)
    assert child.poll() is None, "the run ended before it could be killed"
    os.kill(child.pid, signal.SIGKILL)
    child.wait(timeout=60)
    assert workers and _gone(workers, 10)  # the workers noticed at once that their caller died, and stopped
    assert not pooled.exists()  # nothing half-written in place of the suite
    kept = [json.loads(line) for line in log.read_text().splitlines()[1:] if line.endswith("}")]
    assert 10 <= len(kept) < 30
    resumed = run(*common, "--out", str(pooled), "--executor", "process", "--resume")
    assert resumed.exit_code == 0, resumed.output
    assert pooled.read_bytes() == local.read_bytes()
    records = [json.loads(line) for line in log.read_text().splitlines()[1:]]
    keys = [r["key"] for r in records if r.get("status") == "done"]
    assert len(keys) == len(set(keys)) == 30 and records[: len(kept)] == kept


def test_auto_takes_processes_for_a_large_model_free_run_only(monkeypatch):
    monkeypatch.setattr(processes, "available_cpus", lambda: 2)
    assert command._executor_for("auto", command.AUTO_PROCESS_FROM, "template", None) == "process"
    assert command._executor_for("auto", command.AUTO_PROCESS_FROM - 1, "template", None) == "local"
    assert command._executor_for("auto", 10**6, "openai:gpt-4o-mini", None) == "local"
    assert command._executor_for("auto", 10**6, "template", "local") == "local"
    assert command._executor_for("ray", 4, "template", None) == "ray"


def test_auto_on_one_cpu_stays_local(monkeypatch):
    monkeypatch.setattr(processes, "available_cpus", lambda: 1)
    assert command._executor_for("auto", 10**6, "template", None) == "local"


def test_an_unknown_executor_names_the_choices(tmp_path):
    result = run("--env", "inventory", "--n", "2", "--out", str(tmp_path / "s.jsonl"), "--executor", "dask")
    assert result.exit_code == 1
    assert "--executor 'dask': choose auto, local, process or ray" in " ".join(result.output.split())
