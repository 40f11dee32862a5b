"""The audit: test calls per tool on the llm backend, judged; reliability and threshold; judge calibration."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from toolwild.core.environment import BackendKind, Environment
from toolwild.core.formats.environment import load_environment, write_environment
from toolwild.core.tool import Contract, Effect, Tool
from toolwild.llm.backends.scripted import ScriptedBackend
from toolwild.llm.client import LLM
from toolwild.llm.types import ChatRequest
from toolwild.synth.audit import LabelRow, audit_calls, audit_environment, calibrate

GET = Tool(
    name="get_order",
    description="Look an order up.",
    parameters={
        "type": "object",
        "properties": {"order_id": {"type": "string"}, "limit": {"type": "integer", "minimum": 1, "maximum": 50}},
        "required": ["order_id", "limit"],
    },
    returns={"type": "object", "properties": {"status": {"type": "string"}}, "required": ["status"]},
    contract=Contract(preconditions=["the order exists"], error_modes=["not found"]),
    effect=Effect.READ,
    consumes=["order"],
)
PING = Tool(name="ping", description="Is the service up?", effect=Effect.READ)
ENV = Environment(
    id="shop", tools=[GET, PING], initial_state={"orders": {"x1": {"status": "open"}}}, backend=BackendKind.LLM
)


def test_test_calls_follow_the_schema_and_contract():
    calls = {c.kind: c.arguments for c in audit_calls(GET)}
    assert set(calls) == {"valid", "schema_invalid", "precondition", "edge"}
    assert calls["valid"] == {"order_id": "x1", "limit": 1}
    assert "order_id" not in calls["schema_invalid"]
    assert calls["precondition"]["order_id"] == "does-not-exist-404"
    assert calls["edge"]["limit"] == 50
    assert [c.kind for c in audit_calls(PING)] == ["valid"]  # a schema that accepts anything has no invalid call
    strict = PING.model_copy(update={"parameters": {"type": "object", "properties": {}, "additionalProperties": False}})
    assert audit_calls(strict)[1].arguments == {"_unexpected_argument": 1}
    typed = PING.model_copy(update={"parameters": {"type": "object", "properties": {"n": {"type": "integer"}}}})
    assert audit_calls(typed)[1].arguments == {"n": "not-a-number"}


def honest_shop(request: ChatRequest) -> str:
    """Simulates from the state in the prompt, and judges: correct iff an error was expected and given, or a result
    was expected and given; it rejects every answer of ``ping``."""
    text = request.messages[-1]["content"]
    title = request.response_format.get("title")
    if title == "PreconditionVerdict":
        call = json.loads(re.search(r"^Call: (.*)$", text, flags=re.M).group(1))
        exists = call["arguments"].get("order_id") == "x1"
        return json.dumps({"holds": exists} if exists else {"holds": False, "kind": "not_found", "message": "no"})
    if title == "JudgeVerdict":
        response = json.loads(re.search(r"^Simulated response: (.*)$", text, flags=re.M).group(1))
        expected = re.search(r"^Expected: (.*)$", text, flags=re.M).group(1)
        expected_error = expected.startswith(("a typed error", "an invalid_arguments"))
        tool_name = json.loads(re.search(r"^Tool: (.*)$", text, flags=re.M).group(1))["name"]
        correct = (not response["ok"]) == expected_error and tool_name != "ping"
        return json.dumps({"correct": correct, "reason": "checked"})
    return json.dumps({"result": {"status": "open"}})


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.mark.anyio
async def test_reliability_and_threshold():
    backend = ScriptedBackend(honest_shop)
    kept, audits = await audit_environment(ENV, LLM(backend), threshold=0.75)
    by_tool = {a.tool: a for a in audits}
    get = by_tool["get_order"]
    assert [c["kind"] for c in get.calls] == ["valid", "schema_invalid", "precondition", "edge"]
    assert [c["correct"] for c in get.calls] == [True, True, True, True]
    assert [c["judged_by"] for c in get.calls] == ["model", "code", "model", "model"]
    assert get.calls[1]["reason"] == "rejected by schema validation"
    assert (get.judged, get.judged_correct, get.schema_check) == (3, 3, True)
    assert get.calls[2]["observation"]["error"]["kind"] == "not_found"
    # ping: its one (valid) call the judge rejects
    assert by_tool["ping"].reliability == 0.0
    assert [t.name for t in kept.tools] == ["get_order"]
    # the schema-invalid call never reached a model: no request carries its arguments
    call = {"name": "get_order", "arguments": get.calls[1]["arguments"]}
    invalid_call = "Call: " + json.dumps(call, sort_keys=True, separators=(",", ":"))  # as the simulator writes it
    valid_call = "Call: " + json.dumps(
        {**call, "arguments": get.calls[0]["arguments"]}, sort_keys=True, separators=(",", ":")
    )
    assert any(valid_call in r.messages[-1]["content"] for r in backend.requests)  # the form is right
    assert not any(invalid_call in r.messages[-1]["content"] for r in backend.requests)


def judge_rejecting_edges(request: ChatRequest) -> str:
    """The honest shop, except that the judge finds the edge-value answer wrong."""
    text = request.messages[-1]["content"]
    if request.response_format.get("title") == "JudgeVerdict" and "values at the edge" in text:
        return json.dumps({"correct": False, "reason": "the edge answer is wrong"})
    return honest_shop(request)


@pytest.mark.anyio
async def test_the_code_checked_call_does_not_count_towards_reliability():
    """Finding: the schema-invalid call passes by construction (code refuses it before any model sees it), so
    counting it made 2 right answers of 3 model-judged calls reach 3/4 = 0.75 and keep the tool. Reliability is now
    over the model-judged calls only: 2/3, under the threshold."""
    _, audits = await audit_environment(ENV, LLM(ScriptedBackend(judge_rejecting_edges)), threshold=0.75)
    get = next(a for a in audits if a.tool == "get_order")
    assert [c["correct"] for c in get.calls] == [True, True, True, False]
    assert get.reliability == pytest.approx(2 / 3)
    assert get.schema_check is True  # reported apart
    assert not get.passes(0.75) and get.passes(0.6)


@pytest.mark.anyio
async def test_a_schema_that_lets_a_bad_call_through_fails_the_audit(monkeypatch):
    """The code check can fail: if the backend answers the schema-invalid call instead of refusing it, the tool is
    not kept, whatever the judge said about the other calls."""
    import toolwild.envs.simulated as simulated
    from toolwild.envs.base import Observation

    real = simulated.precheck

    def lenient(tool, name, arguments):
        checked = real(tool, name, arguments)
        return tool if isinstance(checked, Observation) and tool is not None else checked

    monkeypatch.setattr(simulated, "precheck", lenient)
    kept, audits = await audit_environment(ENV, LLM(ScriptedBackend(honest_shop)), threshold=0.75)
    get = next(a for a in audits if a.tool == "get_order")
    assert get.schema_check is False and get.reliability == 1.0
    assert get.calls[1]["reason"] == "an invalid call was not rejected"
    assert [t.name for t in kept.tools] == []


@pytest.mark.anyio
async def test_calibration_counts_against_labels():
    def judge(request: ChatRequest) -> str:  # says "correct" whenever the response has a status
        response = re.search(r"^Simulated response: (.*)$", request.messages[-1]["content"], flags=re.M).group(1)
        return json.dumps({"correct": '"status"' in response, "reason": ""})

    rows = [
        LabelRow(tool=GET, arguments={"order_id": "x1"}, response={"status": "open"}, correct=True),  # TP
        LabelRow(tool=GET, arguments={"order_id": "zz"}, response={"status": "open"}, correct=False),  # FP
        LabelRow(tool=GET, arguments={"order_id": "zz"}, response={"error": "no"}, correct=False),  # TN
        LabelRow(tool=GET, arguments={"order_id": "x1"}, response={"error": "no"}, correct=True),  # FN
        LabelRow(tool=GET, arguments={"order_id": "x2"}, response={"status": "x"}, correct=True),  # TP
    ]
    result = await calibrate(LLM(ScriptedBackend(judge)), rows)
    assert (result.tp, result.fp, result.tn, result.fn) == (2, 1, 1, 1)
    assert result.precision == pytest.approx(2 / 3) and result.recall == pytest.approx(2 / 3)
    assert result.false_positive_rate == 0.5


def test_cli_run_and_calibrate(tmp_path, monkeypatch):
    import toolwild.llm.registry as registry
    from toolwild.cli.main import app

    monkeypatch.setattr(registry, "create_backend", lambda spec, **kw: ScriptedBackend(honest_shop))
    env_file = write_environment(ENV, tmp_path / "shop.env.json")
    result = CliRunner().invoke(
        app,
        ["audit", "run", str(env_file), "--out", str(tmp_path / "kept.env.json"), "--report", str(tmp_path / "a.json")],
        env={"COLUMNS": "200"},
    )
    assert result.exit_code == 0, result.output
    assert "kept 1 of 2 tools" in result.output
    assert [t.name for t in load_environment(tmp_path / "kept.env.json").tools] == ["get_order"]
    rows = {r["tool"]: r for r in json.loads((tmp_path / "a.json").read_text())}
    assert {name: r["reliability"] for name, r in rows.items()} == {"get_order": 1.0, "ping": 0.0}
    assert (rows["get_order"]["judged"], rows["get_order"]["schema_check"], rows["get_order"]["kept"]) == (
        3,
        True,
        True,
    )
    assert (rows["ping"]["judged"], rows["ping"]["schema_check"], rows["ping"]["kept"]) == (1, None, False)
    assert "refused" in result.output  # the schema column
    labels = tmp_path / "labels.jsonl"
    row = {"tool": GET.model_dump(), "arguments": {"order_id": "x1"}, "response": {"status": "open"}, "correct": True}
    labels.write_text(json.dumps(row) + "\n" + '{"tool": {"name": "t"}, "correct": "maybe"}\n')
    bad = CliRunner().invoke(app, ["audit", "calibrate", str(labels)], env={"COLUMNS": "200"})
    assert bad.exit_code == 1 and "line 2" in bad.output and "correct" in bad.output
    labels.write_text(json.dumps(row) + "\n")
    verdict = json.dumps({"correct": True, "reason": ""})
    monkeypatch.setattr(registry, "create_backend", lambda spec, **kw: ScriptedBackend(lambda request: verdict))
    ok = CliRunner().invoke(app, ["audit", "calibrate", str(labels)], env={"COLUMNS": "200"})
    assert ok.exit_code == 0, ok.output
    assert "precision" in ok.output and "1 / 0 / 0 / 0" in ok.output


@pytest.mark.anyio
async def test_audit_results_do_not_depend_on_the_concurrency_or_completion_order():
    """All test calls run at once; whatever order the answers come back in, the audits are the same, in order."""
    import asyncio
    import hashlib

    from toolwild.synth.audit import RankedLimit

    async def slow_shop(request: ChatRequest) -> str:  # 0-4 ms, derived from the request
        await asyncio.sleep(int(hashlib.sha256(request.model_dump_json().encode()).hexdigest()[:4], 16) % 5 / 1000)
        return honest_shop(request)

    many = Environment(
        id="shop", tools=[GET.model_copy(update={"name": f"get_order_{i}"}) for i in range(6)] + [PING], backend="llm"
    )
    many = many.model_copy(update={"initial_state": ENV.initial_state})
    one_at_a_time = await audit_environment(many, LLM(ScriptedBackend(slow_shop)), concurrency=1)
    at_once = await audit_environment(many, LLM(ScriptedBackend(slow_shop, max_connections=64)), concurrency=64)
    shared = await audit_environment(many, LLM(ScriptedBackend(slow_shop)), limit=RankedLimit(5))
    assert one_at_a_time[0] == at_once[0] == shared[0]
    assert [a.__dict__ for a in one_at_a_time[1]] == [a.__dict__ for a in at_once[1]] == [a.__dict__ for a in shared[1]]
    assert [a.tool for a in at_once[1]] == [t.name for t in many.tools]


@pytest.mark.anyio
async def test_the_ranked_limit_lets_lower_ranks_in_first_and_survives_cancelled_waiters():
    import asyncio

    from toolwild.synth.audit import RankedLimit

    limit = RankedLimit(1)
    order: list[str] = []
    gate = asyncio.Event()

    async def hold() -> None:
        async with limit.slot():
            await gate.wait()

    async def wait(name: str, rank: int) -> None:
        async with limit.slot(rank):
            order.append(name)

    holder = asyncio.create_task(hold())
    await asyncio.sleep(0)
    tasks = [asyncio.create_task(wait(n, r)) for n, r in (("late-2", 2), ("first-0", 0), ("gone", 0), ("then-1", 1))]
    await asyncio.sleep(0)
    tasks[2].cancel()  # a waiter that gives up is skipped, its place not lost
    gate.set()
    await asyncio.gather(holder, *[t for i, t in enumerate(tasks) if i != 2])
    assert order == ["first-0", "then-1", "late-2"]
    async with limit.slot():  # every place came back
        pass


@pytest.mark.anyio
async def test_in_order_raises_a_bug_over_a_provider_failure_unwrapped():
    import asyncio

    from toolwild.errors import TransientBackendError
    from toolwild.synth.audit import in_order

    async def value(v: int) -> int:
        await asyncio.sleep(0.001 * (3 - v))
        return v

    assert await in_order(value(v) for v in range(3)) == [0, 1, 2]  # given order, not completion order

    async def fail(exc: BaseException) -> None:
        raise exc

    with pytest.raises(TransientBackendError):
        await in_order([fail(TransientBackendError("503")), value(1)])
    with pytest.raises(KeyError):
        await in_order([fail(TransientBackendError("503")), fail(KeyError("bug"))])


def test_cli_report_is_the_same_at_any_concurrency(tmp_path, monkeypatch):
    import toolwild.llm.registry as registry
    from toolwild.cli.main import app

    seen: list[int] = []

    def create(spec, **kw):
        seen.append(kw["max_connections"])  # the client's pool follows --concurrency
        return ScriptedBackend(honest_shop, max_connections=kw["max_connections"])

    monkeypatch.setattr(registry, "create_backend", create)
    env_file = write_environment(ENV, tmp_path / "shop.env.json")
    reports = []
    for concurrency in ("1", "16"):
        report = tmp_path / f"a{concurrency}.json"
        args = ["audit", "run", str(env_file), "--report", str(report), "--concurrency", concurrency]
        assert CliRunner().invoke(app, args, env={"COLUMNS": "200"}).exit_code == 0
        reports.append(report.read_bytes())
    assert reports[0] == reports[1] and seen == [1, 16]
