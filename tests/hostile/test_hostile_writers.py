"""One writer per output (issue #32): a second run started on an output another run is still writing (a synth
progress log, a ``synth envs`` folder, an eval run folder) is refused at once naming the holder's pid, and writes
nothing; the first finishes with the bytes of a run alone. A log with a damaged line in its middle is a clear error
naming the file and line, never a traceback, whether it is found when the log is opened or when it is read back.

The other process is real: a small Python child that holds the lock (or a unit log, or a whole ``synth sessions``
run blocked on its model server until the second run has been refused).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import pytest
from fake_openai import FakeOpenAI, Reply, serve_in_thread, writer_echo
from library_env import LIBRARY, library_model
from typer.testing import CliRunner

from toolwild.cli.main import app
from toolwild.core.formats.environment import write_environment
from toolwild.errors import ConfigError, DataError
from toolwild.llm.backends.scripted import ScriptedBackend
from toolwild.run import UnitLog, UnitRecord, UnitStatus
from toolwild.run.lock import OutputLock, lock_path
from toolwild.synth.scripted import stage_responder

TOOLWILD = [sys.executable, "-m", "toolwild.cli.main"]

HOLD_LOCK = """
import sys
from toolwild.run.lock import OutputLock
OutputLock(sys.argv[1]).acquire()
print("held", flush=True)
sys.stdin.read()
"""

TRY_LOCK = "import sys; from toolwild.run.lock import OutputLock; OutputLock(sys.argv[1]).acquire()"

HOLD_LOG = """
import sys
from toolwild.run import UnitLog, UnitRecord, UnitStatus
log = UnitLog.start(sys.argv[1], job="test", fingerprint="f", identity={})
log.append(UnitRecord(key="u0", order=0, status=UnitStatus.DONE, result=0))
log._handle.write(b'{"key":"u1","order":1,"sta')  # half a line: the writer is in the middle of a write
log._handle.flush()
print("held", flush=True)
sys.stdin.read()
"""


@contextmanager
def held_elsewhere(code: str, *args: str) -> Iterator[subprocess.Popen[str]]:
    """A child process running ``code`` (which prints ``held`` once it holds what it holds), until the block ends."""
    child = subprocess.Popen(
        [sys.executable, "-c", code, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "held"
        yield child
    finally:
        if child.stdin is not None:
            child.stdin.close()
        child.wait(timeout=30)


def run(*args: str):
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})


def _said(result) -> str:
    """The command's output as one line (free of the terminal's wrapping)."""
    return " ".join(result.output.split())


def _refused_by(result, holder: subprocess.Popen) -> None:
    """Refused with one clean error line naming the holder's pid, no traceback."""
    said = _said(result)
    assert result.exit_code == 1, result.output
    assert f"pid {holder.pid}" in said and "being written by another run" in said, said
    assert "Traceback" not in result.output and isinstance(result.exception, SystemExit | None)


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


# ------------------------------------------------------------------------------------------------ the lock itself
def test_a_second_process_is_refused_naming_the_holder_and_a_killed_holder_leaves_no_lock(tmp_path):
    out = tmp_path / "suite.jsonl"
    with held_elsewhere(HOLD_LOCK, str(out)) as holder:
        with pytest.raises(ConfigError) as refused:
            OutputLock(out).acquire()
        assert f"pid {holder.pid}" in str(refused.value) and str(out) in str(refused.value)
        holder.send_signal(signal.SIGKILL)  # killed: the kernel lets go of its lock; its file stays, with its pid
        holder.wait(timeout=30)
        assert lock_path(out).read_text().split()[0] == str(holder.pid)
        with OutputLock(out) as mine:
            assert mine.held and lock_path(out).read_text().split()[0] == str(os.getpid())
    assert not lock_path(out).exists()  # a clean release leaves nothing beside the output


def test_the_lock_is_reentrant_within_a_process_and_held_until_the_last_holder_lets_go(tmp_path):
    out = tmp_path / "run"
    outer = OutputLock(out).acquire()
    with OutputLock(out):  # the CLI holds the run folder and the runner takes it again
        pass
    probe = subprocess.run([sys.executable, "-c", TRY_LOCK, str(out)], capture_output=True, text=True)
    assert probe.returncode != 0 and f"pid {os.getpid()}" in probe.stderr
    outer.release()
    outer.release()  # twice is harmless
    assert not lock_path(out).exists()


# ------------------------------------------------------------------------------------------------ the unit log
def test_a_unit_log_another_process_is_writing_is_neither_resumed_nor_replaced(tmp_path):
    path = tmp_path / "k.jsonl.progress.jsonl"
    with held_elsewhere(HOLD_LOG, str(path)) as holder:
        before = path.read_bytes()
        assert before.endswith(b'"sta')  # the live writer's unfinished line
        with pytest.raises(ConfigError, match=f"pid {holder.pid}"):
            UnitLog.resume(path, job="test", fingerprint="f", identity={})
        with pytest.raises(ConfigError, match=f"pid {holder.pid}"):
            UnitLog.start(path, job="test", fingerprint="f", identity={})
        assert path.read_bytes() == before  # its half-written line was not cut off as a killed run's would be
    with UnitLog.resume(path, job="test", fingerprint="f", identity={}) as log:  # the writer gone: now it is torn
        assert log.done_keys() == {"u0"}


def _done(i: int) -> UnitRecord:
    return UnitRecord(key=f"u{i}", order=i, status=UnitStatus.DONE, result={"value": i})


@pytest.mark.parametrize(
    "written, says",
    [
        (b'{"key":"u9","order":9,"sta', "is damaged"),  # half a line of another writer in front of the record
        (b"", "now holds 'u2'"),  # another writer's whole line where the record was
    ],
    ids=["interleaved", "overwritten"],
)
def test_a_log_changed_behind_an_open_one_is_read_back_as_an_error_naming_file_and_line(tmp_path, written, says):
    path = tmp_path / "log.jsonl"
    with UnitLog.start(path, job="test", fingerprint="f", identity={}) as log:
        log.append(_done(0))
        log.append(_done(1))
        header, first, second = path.read_bytes().splitlines(keepends=True)
        other = json.dumps(_done(2).model_dump(mode="json"), separators=(",", ":")).encode() + b"\n"
        path.write_bytes(header + first + (written + second if written else other))
        with pytest.raises(DataError) as raised:
            list(log.records())
    assert (raised.value.file, raised.value.line) == (str(path), 3)
    assert says in raised.value.message and "u1" in raised.value.message


# ------------------------------------------------------------------------------------------------ the commands
def test_synth_sessions_resume_with_a_damaged_middle_line_names_it_and_the_hint_recovers_the_suite(tmp_path):
    out = tmp_path / "k.jsonl"
    args = ["synth", "sessions", "--env", "inventory", "--n", "4", "--out", str(out)]
    assert run(*args).exit_code == 0
    suite = out.read_bytes()
    log = out.with_name(out.name + ".progress.jsonl")
    header, *records, _end = log.read_bytes().splitlines(keepends=True)  # as if killed before the end line
    torn = records[1][: len(records[1]) // 2]  # a write cut by another writer's, on the same line
    log.write_bytes(header + records[0] + torn + records[2] + records[3])
    out.unlink()
    result = run(*args, "--resume")
    said = _said(result)
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert f"{log}, line 3" in said and "delete that line to redo its unit" in said, said
    lines = log.read_bytes().splitlines(keepends=True)
    log.write_bytes(b"".join(lines[:2] + lines[3:]))  # as the error says: that unit is made again
    resumed = run(*args, "--resume")
    assert resumed.exit_code == 0, resumed.output
    assert out.read_bytes() == suite
    assert not lock_path(out).exists() and not lock_path(log).exists()


def test_synth_sessions_resume_is_refused_while_another_process_holds_the_suite(tmp_path):
    out = tmp_path / "k.jsonl"
    args = ["synth", "sessions", "--env", "inventory", "--n", "2", "--out", str(out)]
    assert run(*args).exit_code == 0
    before = _tree(tmp_path)
    with held_elsewhere(HOLD_LOCK, str(out)) as holder:
        _refused_by(run(*args, "--resume"), holder)
        _refused_by(run(*args), holder)
        assert {k: v for k, v in _tree(tmp_path).items() if not k.endswith(".lock")} == before


def test_synth_envs_resume_is_refused_while_another_process_holds_the_folder(tmp_path, monkeypatch):
    import toolwild.llm.registry as registry

    monkeypatch.setattr(registry, "create_backend", lambda spec, **kw: ScriptedBackend(stage_responder))
    out = tmp_path / "envs"
    args = ["synth", "envs", "--fields", "finance", "--per-field", "1", "--families", "1", "--tools", "2"]
    first = run(*args, "--out", str(out))
    assert first.exit_code == 0, first.output
    before = _tree(out)
    with held_elsewhere(HOLD_LOCK, str(out)) as holder:
        _refused_by(run(*args, "--out", str(out), "--resume"), holder)
    assert _tree(out) == before
    assert run(*args, "--out", str(out), "--resume").exit_code == 0  # the holder gone, the run goes on


def test_eval_resume_is_refused_while_another_process_holds_the_run_folder(tmp_path):
    suite = tmp_path / "s.jsonl"
    assert run("synth", "sessions", "--env", "inventory", "--n", "2", "--out", str(suite)).exit_code == 0
    runs = tmp_path / "runs"
    common = ["eval", "--suite", str(suite), "--agent", "oracle", "--runs-dir", str(runs)]
    first = run(*common, "--name", "t")  # the command and the runner both take the folder's lock: re-entrant
    assert first.exit_code == 0, first.output
    folder = runs / "t"
    assert not lock_path(folder).exists()  # let go at the end (the command's hold and the runner's)
    before = _tree(folder)
    with held_elsewhere(HOLD_LOCK, str(folder)) as holder:
        _refused_by(run("eval", "--resume", str(folder)), holder)
    assert _tree(folder) == before
    starting = runs / "u"  # two new runs given one --name: the second is refused before it writes anything
    with held_elsewhere(HOLD_LOCK, str(starting)) as holder:
        _refused_by(run(*common, "--name", "u"), holder)
    assert not starting.exists()


# ------------------------------------------------------------------------------------------------ two real runs
def _model(body: dict) -> Reply:
    """The simulator and the writers (as in tests/cli/test_synth_sessions_resume.py): replies depend on the request
    only."""
    written = writer_echo(body, lambda example: f"Hello there. {example}" if len(example) % 2 else example)
    if written is not None:
        return Reply(text=written)
    return Reply(text=library_model(SimpleNamespace(messages=body["messages"])))


def test_a_second_run_is_refused_while_the_first_is_alive_and_the_first_writes_what_it_writes_alone(tmp_path):
    envs = tmp_path / "envs"
    envs.mkdir()
    write_environment(LIBRARY, envs / "library.env.json")
    arrived, go = threading.Event(), threading.Event()
    go.set()

    def gated(body: dict) -> Reply:
        arrived.set()
        assert go.wait(timeout=60)  # the first run waits on its model until the second has been refused
        return _model(body)

    def args(out: Path) -> list[str]:
        return [
            "synth", "sessions", "--env", str(envs), "--n", "4", "--out", str(out), "--concurrency", "1",
            "--env-model", "openai:sim", "--model", "openai:writer", "--base-url", base_url,
        ]  # fmt: skip

    def outputs(out: Path) -> tuple[bytes, bytes, dict]:
        report = json.loads(out.with_name(out.name + ".report.json").read_text())
        kept = {k: report[k] for k in ("sessions", "tasks", "failed_sessions", "drops", "utterances", "problems")}
        return out.read_bytes(), out.with_name(out.name + ".progress.jsonl").read_bytes(), kept

    with serve_in_thread(FakeOpenAI(gated)) as base_url:  # one endpoint for both (it is part of the run's identity)
        alone = tmp_path / "alone" / "suite.jsonl"
        assert run(*args(alone)).exit_code == 0
        out = tmp_path / "both" / "suite.jsonl"
        go.clear()
        arrived.clear()
        first = subprocess.Popen([*TOOLWILD, *args(out)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            assert arrived.wait(timeout=60) and first.poll() is None  # alive, and holding OUT
            files = {p: p.read_bytes() for p in out.parent.iterdir() if p.is_file()}
            second = run(*args(out), "--resume")
            files_after = {p: p.read_bytes() for p in out.parent.iterdir() if p.is_file()}
        finally:
            go.set()
            _, err = first.communicate(timeout=120)
    _refused_by(second, first)
    assert files_after == files  # the second wrote nothing
    assert first.returncode == 0, err.decode()
    assert outputs(out) == outputs(alone)
    assert not lock_path(out).exists()
