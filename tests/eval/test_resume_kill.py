"""A run killed with SIGKILL mid-way and resumed ends with exactly the sessions and metrics of an uninterrupted run."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import uvicorn
from fake_openai import Delay, FakeOpenAI
from gold_responder import gold_responder

from toolwild.core.formats.wtb import load_wtb_suite, write_wtb_suite

FIXTURE = Path(__file__).resolve().parents[2].parent / "shared/fixtures/wildtoolbench/sessions_0_4.reconstructed.jsonl"
pytestmark = pytest.mark.skipif(not FIXTURE.exists(), reason=f"fixture not found: {FIXTURE}")
TOOLWILD = [sys.executable, "-m", "toolwild.cli.main"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def suite_file(tmp_path) -> Path:
    suite, _ = load_wtb_suite(FIXTURE)
    sessions = []
    for copy in range(4):  # 20 sessions; task 0 made unique so the fake model can tell them apart
        for s in suite.sessions:
            clone = s.model_copy(deep=True)
            clone.id = f"{s.id}_copy{copy}"
            clone.tasks[0].utterance += f" (copy {copy})"
            sessions.append(clone)
    suite.sessions = sessions
    path = tmp_path / "suite.jsonl"
    write_wtb_suite(suite, path)
    return path


@pytest.fixture
def server(suite_file):
    suite, _ = load_wtb_suite(suite_file)
    respond = gold_responder(suite)
    fake = FakeOpenAI(lambda body: Delay(0.03, respond(body)))
    port = _free_port()
    config = uvicorn.Config(fake, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    srv = uvicorn.Server(config)
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    while not srv.started:
        time.sleep(0.01)
    yield f"http://127.0.0.1:{port}/v1"
    srv.should_exit = True
    thread.join(5)


def _eval(*args: str) -> list[str]:
    return [*TOOLWILD, "eval", *args]


def _metrics(run_dir: Path) -> dict:
    metrics = json.loads((run_dir / "metrics.json").read_text())
    metrics["extensions"].pop("usage", None)
    return metrics


def test_sigkill_then_resume_equals_an_uninterrupted_run(tmp_path, suite_file, server):
    env = {**os.environ, "OPENAI_API_KEY": "", "COLUMNS": "120"}
    common = [
        "--suite",
        str(suite_file),
        "--agent",
        "model",
        "--model",
        "openai:fake-model",
        "--base-url",
        server,
        "--runs-dir",
        str(tmp_path),
        "--concurrency",
        "2",
    ]
    subprocess.run(_eval(*common, "--name", "whole"), check=True, env=env, capture_output=True, timeout=300)

    proc = subprocess.Popen(
        _eval(*common, "--name", "killed"), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    lines = tmp_path / "killed" / "trajectories.jsonl"
    deadline = time.time() + 120
    while time.time() < deadline:
        if lines.exists() and len(lines.read_text().splitlines()) >= 6:
            break
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    finished_before = len(lines.read_text().splitlines())
    assert 6 <= finished_before < 20, "the kill must land mid-run"
    assert not (tmp_path / "killed" / "metrics.json").exists()

    done = subprocess.run(
        _eval("--resume", str(tmp_path / "killed")), env=env, capture_output=True, timeout=300, text=True
    )
    assert done.returncode == 0, done.stderr
    ids = [json.loads(line)["session_id"] for line in lines.read_text().splitlines()]
    assert len(ids) == len(set(ids)) == 20
    assert _metrics(tmp_path / "killed") == _metrics(tmp_path / "whole")
    assert _metrics(tmp_path / "whole")["total_info"]["session"]["accuracy"] == 1.0
