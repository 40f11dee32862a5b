"""``synth sessions --executor ray`` on a local Ray instance: the very suite of the local executor over several
shards, and a resumed Ray run (verification on) that continues a half-finished ledger block exactly."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from toolwild.cli.main import app

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'toolwild[ray]')")


pytestmark = pytest.mark.usefixtures("local_ray")


def run(*args: str):
    return CliRunner().invoke(app, ["synth", "sessions", *args])


@pytest.fixture
def small_shards(monkeypatch):
    """Shards of 100 sessions instead of 256 (the ledger's balance block), so that a few hundred sessions make
    several shards: the tests below use template environments, whose sessions do not depend on each other."""
    from toolwild.synth import session_job

    monkeypatch.setattr(session_job, "SHARD", 100)


def test_ray_writes_the_suite_of_the_local_executor_over_several_shards(tmp_path, small_shards):
    local, remote = tmp_path / "local" / "s.jsonl", tmp_path / "ray" / "s.jsonl"  # one name: the ids come from it
    common = ("--env", "inventory", "--n", "300", "--no-verify")  # three shards
    assert run(*common, "--out", str(local)).exit_code == 0
    made = run(*common, "--out", str(remote), "--executor", "ray")
    assert made.exit_code == 0, made.output
    assert remote.read_bytes() == local.read_bytes()
    report = json.loads((tmp_path / "ray" / "s.jsonl.report.json").read_text())
    assert report["executor"] == "ray" and report["sessions"] == 300


def test_a_resumed_ray_run_continues_a_half_done_ledger_block_exactly(tmp_path):
    """Ledger sessions depend on the earlier ones of their block: the workers get the logged ones back."""
    local, remote = tmp_path / "local" / "s.jsonl", tmp_path / "ray" / "s.jsonl"
    common = ("--env", "ledger", "--env", "inventory", "--n", "40")
    assert run(*common, "--out", str(local)).exit_code == 0
    assert run(*common, "--out", str(remote), "--executor", "ray").exit_code == 0
    assert remote.read_bytes() == local.read_bytes()
    # as if killed: the header and 15 of the sessions, in a scrambled order
    log = tmp_path / "ray" / "s.jsonl.progress.jsonl"
    lines = log.read_text().splitlines()
    records = [json.loads(line) for line in lines[1:] if '"key"' in line]
    kept = sorted((r for r in records if r["order"] < 15), key=lambda r: -r["order"])
    log.write_text("\n".join([lines[0], *(json.dumps(r) for r in kept)]) + "\n")
    remote.unlink()
    resumed = run(*common, "--out", str(remote), "--executor", "ray", "--resume")
    assert resumed.exit_code == 0, resumed.output
    assert remote.read_bytes() == local.read_bytes()
    assert "40 of 40" in resumed.output


def test_an_unknown_executor_is_refused(tmp_path):
    result = run("--env", "inventory", "--n", "2", "--out", str(tmp_path / "s.jsonl"), "--executor", "dask")
    assert result.exit_code == 1 and "--executor 'dask'" in result.output


def test_a_second_ray_run_makes_no_model_call(tmp_path, small_shards):
    """The workers of a local instance share the run's response cache (one SQLite file, many processes)."""
    from fake_openai import FakeOpenAI, Reply, serve_in_thread, writer_echo

    def writer(body: dict) -> Reply:
        return Reply(text=writer_echo(body))

    fake = FakeOpenAI(writer)
    out = tmp_path / "s.jsonl"
    with serve_in_thread(fake) as base_url:
        args = ("--env", "inventory", "--n", "150", "--out", str(out), "--model", "openai:w", "--base-url", base_url)
        first = run(*args, "--executor", "ray", "--no-verify")
        assert first.exit_code == 0, first.output
        calls, suite = fake.calls, out.read_bytes()
        assert calls > 150
        second = run(*args, "--executor", "ray", "--no-verify")
        assert second.exit_code == 0, second.output
    assert fake.calls == calls and out.read_bytes() == suite
