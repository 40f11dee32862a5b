"""`synth envs` killed (SIGKILL, in a subprocess) at three points and resumed; failed units; bad input on resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from fake_openai import FakeOpenAI, HttpError, Reply, fake_backend, serve_in_thread
from typer.testing import CliRunner

from toolwild.errors import TransientBackendError
from toolwild.llm.backends.scripted import ScriptedBackend
from toolwild.llm.types import ChatRequest
from toolwild.synth.embedding import sentence_encoder_missing
from toolwild.synth.scripted import request_from_openai_body, stage_responder

TOOLWILD = [sys.executable, "-m", "toolwild.cli.main"]
OPTIONS = ["--fields", "finance,healthcare", "--per-field", "2", "--families", "2", "--tools", "2", "--audit", "0.75"]


class Server:
    """The stage model over HTTP; it kills the client (SIGKILL) when request number ``kill_at`` arrives."""

    def __init__(self) -> None:
        self.fake = FakeOpenAI(self._answer)
        self.kill_at: int | None = None
        self.pid: int | None = None

    def _answer(self, body: dict) -> Reply:
        if self.kill_at is not None and self.fake.calls == self.kill_at and self.pid is not None:
            os.kill(self.pid, signal.SIGKILL)
        return Reply(text=stage_responder(request_from_openai_body(body)))


@pytest.fixture(scope="module")
def server():
    srv = Server()
    with serve_in_thread(srv.fake) as url:
        yield srv, url


def _command(out: Path, url: str) -> list[str]:
    return [*TOOLWILD, "synth", "envs", *OPTIONS, "--out", str(out), "--model", "openai:x", "--base-url", url]


ENV = {**os.environ, "OPENAI_API_KEY": "", "COLUMNS": "150"}


def _run(srv: Server, command: list[str], *, kill_at: int | None = None) -> tuple[int, int]:
    """Run the command; returns (exit code, requests the server received)."""
    before = srv.fake.calls
    srv.kill_at = None if kill_at is None else before + kill_at
    proc = subprocess.Popen(command, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    srv.pid = proc.pid
    _, err = proc.communicate(timeout=120)
    srv.kill_at = srv.pid = None
    assert proc.returncode in (0, -signal.SIGKILL), err.decode()
    return proc.returncode, srv.fake.calls - before


def _files(out: Path) -> dict[str, object]:
    files: dict[str, object] = {p.name: p.read_bytes() for p in sorted(out.glob("*.env.json"))}
    files["drops.json"] = (out / "drops.json").read_bytes()
    summary = json.loads((out / "summary.json").read_text())
    summary.pop("usage")  # the calls of one invocation (a resumed run counts its own)
    files["summary.json"] = summary
    return files


def _units(out: Path) -> tuple[Counter[str], Counter[str]]:
    """Done records per key, and kinds of done units, in the progress log."""
    lines = [json.loads(x) for x in (out / "progress.jsonl").read_text().splitlines()[1:]]
    done = Counter(x["key"] for x in lines if x.get("status") == "done")
    return done, Counter(k.split(":")[0] for k in done)


def test_sigkill_at_three_points_then_resume_equals_an_uninterrupted_run(tmp_path, server):
    srv, url = server
    code, total = _run(srv, [*_command(tmp_path / "whole", url), "--concurrency", "1"])
    assert code == 0
    whole = _files(tmp_path / "whole")
    assert len([n for n in whole if n.endswith(".env.json")]) == 4
    if sentence_encoder_missing() is None:  # the semantic pass is on by default: the resumed runs redo it alike
        assert whole["summary.json"]["semantic_dedup"]["encoder"]["name"] == "minilm"
    # request 2: the second field's subdomains; 8: inside the subdomain units; total - 10: inside the audits
    for kill_at, phase in ((2, "field"), (8, "subdomain"), (total - 10, "audit")):
        out = tmp_path / f"killed_{kill_at}"
        command = [*_command(out, url), "--concurrency", "1"]
        code, before_kill = _run(srv, command, kill_at=kill_at)
        assert code == -signal.SIGKILL and before_kill == kill_at
        assert not (out / "summary.json").exists()
        _, kinds = _units(out)
        assert kinds[phase] < {"field": 2, "subdomain": 4, "audit": 4}[phase], (kill_at, kinds)
        plain = subprocess.run(command, env=ENV, capture_output=True, text=True, timeout=60)
        assert plain.returncode == 1 and "--resume" in plain.stderr  # an unfinished run is never replaced
        code, resumed = _run(srv, [*command, "--resume"])
        assert code == 0
        assert _files(out) == whole
        done, _ = _units(out)
        assert set(done.values()) == {1} and len(done) == 2 + 4 + 4  # no unit logged done twice
        assert before_kill + resumed == total + 1, (kill_at, before_kill, resumed, total)  # + the one in flight


def _failing_model(victim: str):
    def respond(request: ChatRequest) -> object:
        if victim in request.messages[-1]["content"]:
            return TransientBackendError("500 Internal Server Error")
        return stage_responder(request)

    return respond


@pytest.fixture
def fast_retries(monkeypatch):
    """The client's retries without back-off (the CLI builds its own client)."""
    import toolwild.llm.client as client

    real = client.RetryPolicy
    monkeypatch.setattr(client, "RetryPolicy", lambda *a, **kw: real(max_attempts=2, base_delay_s=0))


def _cli(monkeypatch, out: Path, responder, *extra: str):
    import toolwild.llm.registry as registry
    from toolwild.cli.main import app

    monkeypatch.setattr(registry, "create_backend", lambda spec, **kw: ScriptedBackend(responder))
    return CliRunner().invoke(app, ["synth", "envs", *OPTIONS, "--out", str(out), *extra], env={"COLUMNS": "200"})


def test_a_failing_unit_exits_4_with_the_others_written_and_a_resume_completes_it(tmp_path, monkeypatch, fast_retries):
    whole = _cli(monkeypatch, tmp_path / "whole", stage_responder)
    assert whole.exit_code == 0, whole.output
    victim = "Healthcare Logistics"
    out = tmp_path / "run"
    failed = _cli(monkeypatch, out, _failing_model(victim))
    assert failed.exit_code == 4, failed.output
    assert "1 unit(s) failed" in failed.output and "--resume" in failed.output
    summary = json.loads((out / "summary.json").read_text())
    assert [u["unit"] for u in summary["failed_units"]] == [f"subdomain:1:1:healthcare/{victim}"]
    assert "500 Internal Server Error" in summary["failed_units"][0]["error"]
    assert len(list(out.glob("*.env.json"))) == 3  # the other units' environments are written
    assert "failed unit" in " ".join(failed.output.split())
    done = _cli(monkeypatch, out, stage_responder, "--resume")
    assert done.exit_code == 0, done.output
    assert _files(out) == _files(tmp_path / "whole")


def test_resume_with_other_options_is_refused_naming_them_and_nothing_is_deleted(tmp_path, monkeypatch, fast_retries):
    out = tmp_path / "run"
    assert _cli(monkeypatch, out, _failing_model("Healthcare Logistics")).exit_code == 4
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    other = _cli(monkeypatch, out, stage_responder, "--resume", "--tools", "3")
    assert other.exit_code == 1
    message = " ".join(other.output.split())
    assert "belongs to another run" in message and "tools_per_family: 2 in the log, 3 now" in message
    fields = _cli(monkeypatch, out, stage_responder, "--resume", "--fields", "finance")
    assert fields.exit_code == 1 and "fields: ['finance', 'healthcare'] in the log, ['finance'] now" in " ".join(
        fields.output.split()
    )
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_a_progress_line_with_an_unknown_field_names_file_line_and_field(tmp_path, monkeypatch, fast_retries):
    out = tmp_path / "run"
    assert _cli(monkeypatch, out, _failing_model("Healthcare Logistics")).exit_code == 4
    log = out / "progress.jsonl"
    lines = log.read_text().splitlines()
    record = json.loads(lines[1])
    record["priority"] = "high"
    lines[1] = json.dumps(record)
    log.write_text("\n".join(lines) + "\n")
    result = _cli(monkeypatch, out, stage_responder, "--resume")
    assert result.exit_code == 1
    message = " ".join(result.output.split())
    assert str(log) in message and "line 2" in message and "priority" in message


@pytest.mark.parametrize("fields", ["", " , ,"])
def test_an_empty_field_list_is_an_error(tmp_path, monkeypatch, fields):
    from toolwild.cli.main import app

    result = CliRunner().invoke(app, ["synth", "envs", "--fields", fields, "--out", str(tmp_path / "o")])
    assert result.exit_code == 1 and "--fields names no field" in result.output
    assert not (tmp_path / "o").exists()


def test_resume_without_a_run_is_an_error(tmp_path, monkeypatch):
    result = _cli(monkeypatch, tmp_path / "none", stage_responder, "--resume")
    assert result.exit_code == 1 and "nothing to resume" in " ".join(result.output.split())


def test_an_http_500_on_one_subdomain_fails_only_that_unit(tmp_path, monkeypatch, fast_retries):
    """Through the OpenAI backend (the fake server in-process): 500s on one subdomain's prompts are retried by the
    client, then that unit fails; the run goes on and exits 4."""
    import toolwild.llm.registry as registry
    from toolwild.cli.main import app

    victim = "Finance Claims"

    def answer(body: dict):
        request = request_from_openai_body(body)
        if victim in request.messages[-1]["content"]:
            return HttpError(500, "boom")
        return Reply(text=stage_responder(request))

    fake = FakeOpenAI(answer)
    monkeypatch.setattr(registry, "create_backend", lambda spec, **kw: fake_backend(fake))
    out = tmp_path / "run"
    args = ["synth", "envs", "--fields", "finance", "--per-field", "2", "--families", "1", "--tools", "2"]
    result = CliRunner().invoke(app, [*args, "--out", str(out)], env={"COLUMNS": "200"})
    assert result.exit_code == 4, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert [u["unit"] for u in summary["failed_units"]] == [f"subdomain:0:1:finance/{victim}"]
    assert summary["environments"] == 1
    victim_requests = [b for b in fake.requests if victim in b["messages"][-1]["content"]]
    assert len(victim_requests) == 2  # the families stage, tried twice (the fast retry policy), then the unit failed


def test_a_resumed_write_removes_only_the_files_its_own_earlier_write_listed(tmp_path, monkeypatch, fast_retries):
    """A resumed run's dedup can keep other tools than the partial run's did (a failed unit's tools were missing),
    so an environment file written before may no longer belong to the output: it is removed, if the run's own
    summary listed it; a file the run never wrote is left alone."""
    out = tmp_path / "run"
    assert _cli(monkeypatch, out, _failing_model("Healthcare Logistics")).exit_code == 4
    summary = json.loads((out / "summary.json").read_text())
    summary["files"].append("gone.env.json")
    (out / "summary.json").write_text(json.dumps(summary))
    (out / "gone.env.json").write_text("{}")
    (out / "mine.env.json").write_text("{}")
    assert _cli(monkeypatch, out, stage_responder, "--resume").exit_code == 0
    assert not (out / "gone.env.json").exists() and (out / "mine.env.json").exists()
    assert len(json.loads((out / "summary.json").read_text())["files"]) == 4
