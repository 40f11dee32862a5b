"""``toolwild synth sessions`` end to end: files written, verification, a re-run, a simulated environment served by
an OpenAI-compatible server, and clear errors on bad input."""

from __future__ import annotations

import json
from types import SimpleNamespace

from fake_openai import FakeOpenAI, Reply, serve_in_thread
from library_env import LIBRARY, library_model
from typer.testing import CliRunner

from toolwild.cli.main import app
from toolwild.core.formats.environment import write_environment
from toolwild.core.formats.wtb import load_wtb_suite


def run(*args: str):
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})


def test_sessions_on_a_builtin_are_written_verified_and_reproducible(tmp_path):
    out = tmp_path / "suite.jsonl"
    published = tmp_path / "published.jsonl"
    args = ("synth", "sessions", "--env", "inventory", "--n", "16", "--out", str(out), "--published", str(published))
    result = run(*args)
    assert result.exit_code == 0, result.output
    assert "verification" in result.output and "passed" in result.output
    report = json.loads((tmp_path / "suite.jsonl.report.json").read_text())
    assert report["sessions"] == 16 and report["tasks"] == 64 and report["problems"] == []
    assert report["utterances"] == {"template": 64}
    assert sum(report["transitions"].values()) == 16

    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert all(r["environment"] == "inventory" and "expected_state_digests" in r for r in records)
    bare = [json.loads(line) for line in published.read_text().splitlines()]
    assert all("environment" not in r and "expected_state_digests" not in r and "env_seed" not in r for r in bare)
    assert [r["english_tasks"] for r in bare] == [r["english_tasks"] for r in records]

    checked = run("validate", str(out), "--replay", "--subtypes")
    assert checked.exit_code == 0, checked.output
    before = out.read_bytes()
    assert run(*args).exit_code == 0 and out.read_bytes() == before


def test_sessions_on_a_simulated_environment_through_an_openai_compatible_server(tmp_path):
    envs = tmp_path / "envs"
    envs.mkdir()
    write_environment(LIBRARY, envs / "library.env.json")
    fake = FakeOpenAI(lambda body: Reply(text=library_model(SimpleNamespace(messages=body["messages"]))))
    out = tmp_path / "suites" / "library.jsonl"
    with serve_in_thread(fake) as base_url:
        result = run(
            "synth", "sessions", "--env", str(envs), "--n", "6", "--out", str(out),
            "--env-model", "openai:sim", "--base-url", base_url,
        )  # fmt: skip
        assert result.exit_code == 0, result.output
        calls = fake.calls
        assert calls > 0
        suite, _ = load_wtb_suite(out)
        assert {s.environment for s in suite.sessions} == {"../envs/library.env.json"}  # relative to the suite
        # the verifier replays every gold call through the simulator: all from the run's cache, none to the server
        replay = run(
            "validate", str(out), "--replay", "--subtypes", "--env-model", "openai:sim",
            "--base-url", base_url, "--cache", str(out) + ".cache.sqlite",
        )  # fmt: skip
        assert replay.exit_code == 0, replay.output
        assert fake.calls == calls


def test_bad_input_is_reported_clearly(tmp_path):
    missing = run("synth", "sessions", "--env", str(tmp_path / "nope.env.json"), "--out", str(tmp_path / "s.jsonl"))
    assert missing.exit_code != 0 and "nope.env.json" in missing.output
    empty = run("synth", "sessions", "--env", str(tmp_path), "--out", str(tmp_path / "s.jsonl"))
    assert empty.exit_code != 0 and "holds no" in empty.output
    both = run(
        "synth", "sessions", "--env", "inventory", "--like-published", "--transitions", "2",
        "--out", str(tmp_path / "s.jsonl"),
    )  # fmt: skip
    assert both.exit_code != 0 and "--transitions" in both.output
    simulated = tmp_path / "lib.env.json"
    write_environment(LIBRARY, simulated)
    no_model = run("synth", "sessions", "--env", str(simulated), "--out", str(tmp_path / "s.jsonl"))
    assert no_model.exit_code != 0 and "--env-model" in no_model.output
    assert not (tmp_path / "s.jsonl").exists()


def test_an_environment_nobody_can_simulate_ends_the_command_with_an_error(tmp_path):
    write_environment(LIBRARY, tmp_path / "library.env.json")
    fake = FakeOpenAI(lambda body: Reply(text="I am not JSON"))
    out = tmp_path / "s.jsonl"
    with serve_in_thread(fake) as base_url:
        result = run(
            "synth", "sessions", "--env", str(tmp_path / "library.env.json"), "--n", "3", "--out", str(out),
            "--env-model", "openai:sim", "--base-url", base_url,
        )  # fmt: skip
    assert result.exit_code == 1 and "no session could be built" in result.output
    report = json.loads((tmp_path / "s.jsonl.report.json").read_text())
    assert report["sessions"] == 0 and len(report["failed_sessions"]) == 3
    assert "simulation_failed" in next(iter(report["environments_given_up"].values()))
