"""Environment synthesis at scale: output independent of concurrency and completion order, a bounded number of calls
in flight, units logged as they finish, failed units kept apart and redone by a resume, bugs raised as themselves."""

from __future__ import annotations

import asyncio
import hashlib
import json

import pytest
from typer.testing import CliRunner

from toolwild.errors import DataError, TransientBackendError
from toolwild.llm.backends.scripted import ScriptedBackend
from toolwild.llm.cache import ResponseCache
from toolwild.llm.client import LLM, RetryPolicy
from toolwild.llm.types import ChatRequest
from toolwild.run import UnitLog, fingerprint
from toolwild.synth.envgen import JOB, SynthConfig, run_identity, synth_environments
from toolwild.synth.scripted import stage_responder

FIELDS = ["finance", "healthcare"]
CONFIG = SynthConfig(subdomains_per_field=2, families_per_subdomain=2, tools_per_family=3, audit_threshold=0.75)
NO_WAIT = RetryPolicy(max_attempts=2, base_delay_s=0)


@pytest.fixture
def anyio_backend():
    return "asyncio"


def _jitter(request: ChatRequest) -> float:
    """0-4 ms, a function of the request: calls come back in another order than they were sent."""
    return int(hashlib.sha256(request.model_dump_json().encode()).hexdigest()[:4], 16) % 5 / 1000


async def shuffled(request: ChatRequest) -> object:
    await asyncio.sleep(_jitter(request))
    return stage_responder(request)


def _llm(responder, **kw) -> LLM:
    return LLM(ScriptedBackend(responder, max_connections=1000), retry=NO_WAIT, **kw)


def _summary(result) -> dict:
    return {
        "environments": [e.model_dump(mode="json") for e in result.environments],
        "drops": result.drops,
        "counts": (result.generated, result.repaired, dict(result.dropped)),
        "failed_stages": result.failed_stages,
        "reliability": result.reliability,
        "empty": result.empty,
        "failed_units": result.failed_units,
    }


def _run_cli(tmp_path, monkeypatch, name: str, concurrency: int, responder=stage_responder) -> dict[str, bytes]:
    import toolwild.llm.registry as registry
    from toolwild.cli.main import app

    monkeypatch.setattr(registry, "create_backend", lambda spec, **kw: ScriptedBackend(responder, max_connections=1000))
    out = tmp_path / name
    args = ["synth", "envs", "--fields", ",".join(FIELDS), "--out", str(out), "--per-field", "2", "--families", "2"]
    args += ["--tools", "3", "--audit", "0.75", "--concurrency", str(concurrency)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return {p.name: p.read_bytes() for p in sorted(out.iterdir()) if p.suffix == ".json"}


def test_concurrency_1_and_64_write_byte_identical_files(tmp_path, monkeypatch):
    """Calls come back in a request-derived order (0-4 ms each); the files are the same bytes at 1 and 64, usage
    included (the scripted model reports no latency or tokens, and the calls made are the same)."""
    one = _run_cli(tmp_path, monkeypatch, "one", 1, shuffled)
    many = _run_cli(tmp_path, monkeypatch, "many", 64, shuffled)
    assert one == many
    assert len([n for n in one if n.endswith(".env.json")]) == 4
    summary = json.loads(one["summary.json"])
    assert summary["failed_units"] == [] and summary["tools_dropped"]["dedup"] > 0 and summary["tools_repaired"] > 0
    assert json.loads(one["drops.json"])  # drops are there to compare, in every check
    assert {d["check"] for d in json.loads(one["drops.json"])} == {"dedup", "audit"}


@pytest.mark.anyio
async def test_at_most_concurrency_calls_in_flight_and_really_concurrent():
    in_flight = peak = 0

    async def counting(request: ChatRequest) -> object:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.001)
        in_flight -= 1
        return stage_responder(request)

    config = SynthConfig(**{**CONFIG.identity(), "concurrency": 3})
    result = await synth_environments(_llm(counting), FIELDS, config)
    assert peak == 3 and len(result.environments) == 4


@pytest.mark.anyio
async def test_units_are_logged_as_they_finish_and_a_resume_redoes_none(tmp_path):
    llm = _llm(stage_responder)
    identity = run_identity(llm, FIELDS, CONFIG)
    log = UnitLog.start(tmp_path / "p.jsonl", job=JOB, fingerprint=fingerprint(identity), identity=identity)
    first = await synth_environments(llm, FIELDS, CONFIG, log=log)
    log.close()
    keys = [json.loads(line)["key"] for line in (tmp_path / "p.jsonl").read_text().splitlines()[1:]]
    assert len(keys) == len(set(keys)) == 2 + 4 + 4  # fields, subdomains, audits
    assert sorted(k.split(":")[0] for k in keys) == ["audit"] * 4 + ["field"] * 2 + ["subdomain"] * 4
    silent = ScriptedBackend([])  # any call would fail: everything comes from the log
    log = UnitLog.resume(tmp_path / "p.jsonl", job=JOB, fingerprint=fingerprint(identity), identity=identity)
    again = await synth_environments(LLM(silent), FIELDS, CONFIG, log=log)
    assert silent.requests == []
    assert _summary(again) == _summary(first)


def _failing_for(marker: str, *, titles: tuple[str, ...] = ()):
    """The stage model, except that every request whose prompt names ``marker`` (and, if given, of these stage
    titles) raises a provider error."""

    def respond(request: ChatRequest) -> object:
        text = request.messages[-1]["content"]
        title = (request.response_format or {}).get("title")
        if marker in text and (not titles or title in titles):
            return TransientBackendError("503 from the provider")
        return stage_responder(request)

    return respond


@pytest.mark.anyio
async def test_a_failing_unit_is_recorded_the_others_finish_and_a_resume_completes_it(tmp_path):
    whole = await synth_environments(_llm(stage_responder), FIELDS, CONFIG)
    victim = whole.environments[1].subdomain  # its families stage answers, then its tools stage keeps failing
    cache = tmp_path / "cache.sqlite"
    llm = _llm(_failing_for(victim, titles=("ToolDraftList",)), cache=ResponseCache(cache))
    identity = run_identity(llm, FIELDS, CONFIG)
    log = UnitLog.start(tmp_path / "p.jsonl", job=JOB, fingerprint=fingerprint(identity), identity=identity)
    partial = await synth_environments(llm, FIELDS, CONFIG, log=log)
    log.close()
    await llm.aclose()
    ((failed),) = [partial.failed_units]
    assert [f["unit"] for f in failed] == [f"subdomain:0:1:finance/{victim}"]
    assert "503 from the provider" in failed[0]["error"]
    others = [e.subdomain for e in whole.environments if e.subdomain != victim]
    assert [e.subdomain for e in partial.environments] == others
    lines = [json.loads(x) for x in (tmp_path / "p.jsonl").read_text().splitlines()[1:]]
    assert [x["status"] for x in lines if x["key"] == failed[0]["unit"]] == ["failed"]

    healthy = ScriptedBackend(stage_responder)
    llm = LLM(healthy, cache=ResponseCache(cache))
    log = UnitLog.resume(tmp_path / "p.jsonl", job=JOB, fingerprint=fingerprint(identity), identity=identity)
    done = await synth_environments(llm, FIELDS, CONFIG, log=log)
    assert _summary(done) == _summary(whole)
    # only the failed unit's calls were made (its families stage came from the cache) and its audit: every prompt
    # names the victim (the scripted tools' descriptions name their subdomain)
    prompts = [r.messages[-1]["content"] for r in healthy.requests]
    titles = {r.response_format.get("title") for r in healthy.requests}
    assert prompts and all(victim in p for p in prompts)
    assert "FamilyList" not in titles and "SubdomainList" not in titles and "JudgeVerdict" in titles


@pytest.mark.anyio
async def test_a_failing_audit_leaves_its_environment_out_until_resumed(tmp_path):
    whole = await synth_environments(_llm(stage_responder), FIELDS, CONFIG)
    victim = whole.environments[2].id
    llm = _llm(_failing_for(f"Service: {victim}"))
    identity = run_identity(llm, FIELDS, CONFIG)
    log = UnitLog.start(tmp_path / "p.jsonl", job=JOB, fingerprint=fingerprint(identity), identity=identity)
    partial = await synth_environments(llm, FIELDS, CONFIG, log=log)
    log.close()
    assert [f["unit"].rsplit(":", 1)[0] for f in partial.failed_units] == [f"audit:1:0:{victim}"]
    assert victim not in [e.id for e in partial.environments] and len(partial.environments) == 3
    log = UnitLog.resume(tmp_path / "p.jsonl", job=JOB, fingerprint=fingerprint(identity), identity=identity)
    done = await synth_environments(_llm(stage_responder), FIELDS, CONFIG, log=log)
    assert _summary(done) == _summary(whole)


@pytest.mark.anyio
async def test_a_bug_ends_the_run_as_itself_with_finished_units_logged(tmp_path):
    def buggy(request: ChatRequest) -> object:
        if (request.response_format or {}).get("title") == "SeedData":
            raise KeyError("a bug in the stage")
        return stage_responder(request)

    llm = _llm(buggy)
    identity = run_identity(llm, FIELDS, CONFIG)
    log = UnitLog.start(tmp_path / "p.jsonl", job=JOB, fingerprint=fingerprint(identity), identity=identity)
    with pytest.raises(KeyError, match="a bug in the stage"):
        await synth_environments(llm, FIELDS, CONFIG, log=log)
    log.close()
    keys = [json.loads(x)["key"] for x in (tmp_path / "p.jsonl").read_text().splitlines()[1:]]
    assert sorted(keys) == ["field:0:finance", "field:1:healthcare"]  # seed data ends every subdomain unit


@pytest.mark.anyio
async def test_a_logged_result_with_an_unknown_field_is_named_with_file_line_and_field(tmp_path):
    llm = _llm(stage_responder)
    config = SynthConfig(subdomains_per_field=1, families_per_subdomain=1, tools_per_family=2)
    identity = run_identity(llm, ["finance"], config)
    path = tmp_path / "p.jsonl"
    log = UnitLog.start(path, job=JOB, fingerprint=fingerprint(identity), identity=identity)
    await synth_environments(llm, ["finance"], config, log=log)
    log.close()
    lines = path.read_text().splitlines()
    record = json.loads(lines[2])
    record["result"]["environment"]["colour"] = "blue"
    lines[2] = json.dumps(record)
    path.write_text("\n".join(lines) + "\n")
    log = UnitLog.resume(path, job=JOB, fingerprint=fingerprint(identity), identity=identity)
    with pytest.raises(DataError) as raised:
        await synth_environments(llm, ["finance"], config, log=log)
    assert (raised.value.file, raised.value.line, raised.value.field) == (str(path), 3, "result.environment.colour")
