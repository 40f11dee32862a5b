"""``synth envs`` and ``audit run`` with ``--executor ray`` on a local Ray instance, against the scripted stage model
behind the fake OpenAI server (the workers reach it over HTTP, as they would a real provider): the very files of
the local executor, a resumed Ray run, a second Ray run served by the shared cache, and the audit's report.

summary.json is compared without ``usage``: with Ray the calls are made by the workers' clients, not the driver's
(the summary says so instead of counting zero)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from fake_openai import FakeOpenAI, HttpError, Reply, serve_in_thread
from typer.testing import CliRunner

from toolwild.cli.main import app
from toolwild.synth.scripted import request_from_openai_body, stage_responder

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'toolwild[ray]')")

OPTIONS = ["--fields", "finance,healthcare", "--per-field", "2", "--families", "2", "--tools", "2", "--audit", "0.75"]


pytestmark = pytest.mark.usefixtures("local_ray")


FAILING: set[str] = set()
"""Prompts containing one of these get HTTP 500 (retry-after 0, so the client's retries take no time)."""


def answer(body: dict) -> Reply | HttpError:
    request = request_from_openai_body(body)
    if any(victim in request.messages[-1]["content"] for victim in FAILING):
        return HttpError(500, "boom", headers={"retry-after": "0"})
    return Reply(text=stage_responder(request))


@pytest.fixture(scope="module")
def server():
    fake = FakeOpenAI(answer)
    with serve_in_thread(fake) as url:
        yield fake, url


def envs(out: Path, url: str, *extra: str):
    args = ["synth", "envs", *OPTIONS, "--out", str(out), "--model", "openai:x", "--base-url", url, *extra]
    return CliRunner().invoke(app, args, env={"COLUMNS": "200", "OPENAI_API_KEY": ""})


def files(out: Path) -> dict[str, object]:
    found: dict[str, object] = {p.name: p.read_bytes() for p in sorted(out.glob("*.env.json"))}
    found["drops.json"] = (out / "drops.json").read_bytes()
    summary = json.loads((out / "summary.json").read_text())
    summary.pop("usage")
    found["summary.json"] = summary
    return found


@pytest.fixture(scope="module")
def runs(server, tmp_path_factory):
    """One local run and one Ray run of the same command (each in its own folder, so each its own cache). In the
    Ray run this process cannot make a stage call: every one is made by the workers."""
    import toolwild.synth.envgen as envgen

    _fake, url = server
    root = tmp_path_factory.mktemp("envs")
    local = envs(root / "local", url)
    assert local.exit_code == 0, local.output

    def not_here(*_args, **_kwargs):
        raise AssertionError("a stage call in the driver")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(envgen, "generate_checked", not_here)
        remote = envs(root / "ray", url, "--executor", "ray")
    assert remote.exit_code == 0, remote.output
    assert "made in the Ray workers" in remote.output
    return root / "local", root / "ray"


def test_ray_writes_the_files_of_the_local_executor(runs):
    local, remote = runs
    expected = files(local)
    assert len([n for n in expected if n.endswith(".env.json")]) == 4  # enough for two shards a phase
    assert files(remote) == expected
    assert json.loads((remote / "summary.json").read_text())["usage"] == {
        "note": "made and counted in the Ray workers (not collected)"
    }


def test_a_second_ray_run_makes_no_model_call(runs, server):
    """The workers of a local instance share OUT/cache.sqlite (one SQLite file, many processes)."""
    fake, url = server
    _local, remote = runs
    before, written = fake.calls, files(remote)
    again = envs(remote, url, "--executor", "ray")
    assert again.exit_code == 0, again.output
    assert fake.calls == before and files(remote) == written


def test_a_resumed_ray_run_whose_log_was_cut_completes_to_the_same_files(runs, server, tmp_path):
    fake, url = server
    local, remote = runs
    out = tmp_path / "cut"
    out.mkdir()
    log = (remote / "progress.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in log[1:]]
    done = [r for r in records if r.get("status") == "done"]
    assert {r["key"].split(":")[0] for r in done} == {"field", "subdomain", "audit"}
    # as if killed in the subdomain phase: the header, the fields, one subdomain, and a torn line; no cache, no files
    subdomains = [r for r in done if r["key"].startswith("subdomain:")]
    kept = [r for r in done if r["key"].startswith("field:")] + subdomains[:1]
    torn = json.dumps(done[-1])[:40]
    (out / "progress.jsonl").write_text("\n".join([log[0], *(json.dumps(r) for r in kept), torn]))
    before = fake.calls
    resumed = envs(out, url, "--executor", "ray", "--resume")
    assert resumed.exit_code == 0, resumed.output
    assert files(out) == files(local)
    assert fake.calls > before  # the units left were made again, by the workers
    lines = [json.loads(x) for x in (out / "progress.jsonl").read_text().splitlines()[1:]]
    keys = [x["key"] for x in lines if x.get("status") == "done"]
    assert len(keys) == len(set(keys)) == len(done)  # every unit once: none redone, none lost


def test_a_unit_failed_in_a_worker_exits_4_with_the_others_written_and_a_ray_resume_completes_it(
    runs, server, tmp_path
):
    _fake, url = server
    local, _remote = runs
    victim = "Healthcare Logistics"
    out = tmp_path / "run"
    FAILING.add(victim)
    try:
        failed = envs(out, url, "--executor", "ray")
    finally:
        FAILING.clear()
    assert failed.exit_code == 4, failed.output
    assert "1 unit(s) failed" in failed.output and "--resume" in failed.output
    summary = json.loads((out / "summary.json").read_text())
    assert [u["unit"] for u in summary["failed_units"]] == [f"subdomain:1:1:healthcare/{victim}"]
    assert "500" in summary["failed_units"][0]["error"]
    assert len(list(out.glob("*.env.json"))) == 3  # the other units' environments are written
    resumed = envs(out, url, "--executor", "ray", "--resume")
    assert resumed.exit_code == 0, resumed.output
    assert files(out) == files(local)


def test_audit_run_on_ray_gives_the_report_of_the_local_executor(runs, server, tmp_path):
    _fake, url = server
    local, _remote = runs
    env_file = sorted(local.glob("*.env.json"))[0]
    tools = len(json.loads(env_file.read_text())["tools"])
    assert tools >= 2  # at least two shards on two CPUs
    shutil.copy(env_file, tmp_path / env_file.name)
    reports = {}
    for executor in ("local", "ray"):
        report, kept = tmp_path / f"{executor}.json", tmp_path / f"{executor}.env.json"
        args = ["audit", "run", str(tmp_path / env_file.name), "--model", "openai:x", "--base-url", url]
        args += ["--report", str(report), "--out", str(kept), "--executor", executor]
        result = CliRunner().invoke(app, args, env={"COLUMNS": "200", "OPENAI_API_KEY": ""})
        assert result.exit_code == 0, result.output
        reports[executor] = (report.read_bytes(), kept.read_bytes(), result.output)
    assert reports["ray"][:2] == reports["local"][:2]
    assert len(json.loads(reports["ray"][0])) == tools
    assert "kept" in reports["ray"][2]


def test_an_unknown_executor_is_refused(tmp_path):
    result = envs(tmp_path / "o", "http://127.0.0.1:9", "--executor", "dask")
    assert result.exit_code == 1 and "--executor 'dask'" in result.output
    assert not (tmp_path / "o").exists()


def test_without_ray_installed_the_commands_say_what_to_install(runs, tmp_path, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails as if not installed
    made = envs(tmp_path / "o", "http://127.0.0.1:9", "--executor", "ray")
    assert made.exit_code == 1 and "pip install 'toolwild[ray]'" in " ".join(made.output.split())
    assert not (tmp_path / "o").exists()
    env_file = sorted(runs[0].glob("*.env.json"))[0]
    audited = CliRunner().invoke(app, ["audit", "run", str(env_file), "--executor", "ray"], env={"COLUMNS": "200"})
    assert audited.exit_code == 1 and "pip install 'toolwild[ray]'" in " ".join(audited.output.split())
