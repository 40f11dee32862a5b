"""Environment synthesis on a scripted model: exact outputs, the repair path, drops with reasons, cached re-runs."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from toolwild.core.formats.environment import load_environment
from toolwild.llm.backends.scripted import ScriptedBackend
from toolwild.llm.cache import CacheMode, ResponseCache
from toolwild.llm.client import LLM
from toolwild.llm.types import ChatRequest
from toolwild.synth.envgen import SynthConfig, synth_environments

OBJ = [{"name": "order_id", "type": "string", "description": "The order."}]
RET = [{"name": "status", "type": "string", "description": "Where it is.", "enum": ["open", "shipped"]}]
BAD_ARRAY = [{"name": "ids", "type": "array", "description": "Orders (no item type given)."}]


def tool(name: str, **over) -> dict:
    base = {
        "name": name,
        "description": f"{name} does its job.",
        "parameters": OBJ,
        "returns": RET,
        "preconditions": ["the order exists"],
        "postconditions": [],
        "error_modes": ["not found: unknown order id"],
        "effect": "read",
        "consumes": ["order"],
        "produces": [],
    }
    return {**base, **over}


class Designer:
    """A scripted model for the stages; records the repair requests it receives."""

    def __init__(self) -> None:
        self.repair_requests: list[str] = []

    def __call__(self, request: ChatRequest) -> str:
        title = request.response_format.get("title")
        text = request.messages[-1]["content"]
        if title == "SubdomainList":
            sub = {
                "name": "Order Tracking",
                "description": "Where orders are.",
                "stakeholders": ["buyer"],
                "entities": ["order"],
            }
            return json.dumps({"subdomains": [sub]})
        if title == "FamilyList":
            return json.dumps({"families": [{"name": "Status checks", "description": "Check an order."}]})
        if title == "SeedData":
            return json.dumps({"entities": {"order": [{"id": "O-1", "status": "open"}]}})
        assert title == "ToolDraftList"
        if "corrected tools only" in text:
            self.repair_requests.append(text)
            # cancel_order gets fixed; bad_array comes back as broken as before
            fixed = [
                tool("cancel_order", effect="write", postconditions=["the order is cancelled"]),
                tool("bad_array", parameters=BAD_ARRAY),
            ]
            return json.dumps({"tools": fixed})
        first = [
            tool("get_order"),
            tool("get_order_again", description="Looks an order up again."),
            tool("cancel_order", effect="write"),  # a write without a postcondition: contract problem
            tool("bad_array", parameters=BAD_ARRAY),  # an array without items: schema problem
            tool("track_parcel", consumes=["parcel"]),  # nothing produces parcels: dependency problem
        ]
        return json.dumps({"tools": first})


CONFIG = SynthConfig(subdomains_per_field=1, families_per_subdomain=1, tools_per_family=5, max_repairs=1)


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.mark.anyio
async def test_stages_checks_repair_and_drops():
    designer = Designer()
    result = await synth_environments(LLM(ScriptedBackend(designer)), ["ecommerce"], CONFIG)
    (env,) = result.environments
    assert env.id == "ecommerce__order_tracking" and env.backend.value == "llm"
    assert env.initial_state == {"order": [{"id": "O-1", "status": "open"}]}
    assert [t.name for t in env.tools] == ["get_order", "get_order_again", "cancel_order"]
    cancel = env.tools[2]
    assert cancel.effect.value == "write" and cancel.contract.postconditions == ["the order is cancelled"]
    assert env.tools[0].parameters == {
        "type": "object",
        "properties": {"order_id": {"type": "string", "description": "The order."}},
        "required": ["order_id"],
    }
    assert env.tools[0].returns["properties"]["status"]["enum"] == ["open", "shipped"]
    assert result.generated == 5 and result.repaired == 1 and result.kept == 3
    assert dict(result.dropped) == {"schema": 1, "dependency": 1}
    reasons = {d["tool"].split("__")[-1]: d for d in result.drops}
    assert "items" in " ".join(reasons["bad_array"]["reasons"])
    assert "parcel" in reasons["track_parcel"]["reasons"][0]
    # one repair round: the model saw both failing tools with their problems
    (repair,) = designer.repair_requests
    assert "cancel_order: contract: a write tool must state a postcondition" in repair
    assert "bad_array" in repair


@pytest.mark.anyio
async def test_second_run_from_the_cache_makes_no_call_and_gives_the_same_environments(tmp_path):
    first_llm = LLM(ScriptedBackend(Designer()), cache=ResponseCache(tmp_path / "c.sqlite"))
    first = await synth_environments(first_llm, ["ecommerce"], CONFIG)
    await first_llm.aclose()
    silent = ScriptedBackend([])
    second_llm = LLM(silent, cache=ResponseCache(tmp_path / "c.sqlite", mode=CacheMode.READ_ONLY))
    second = await synth_environments(second_llm, ["ecommerce"], CONFIG)
    assert silent.requests == [] and second_llm.backend_calls == 0
    assert [e.model_dump() for e in second.environments] == [e.model_dump() for e in first.environments]
    assert second.drops == first.drops


def test_cli_writes_schema_valid_files_and_a_summary(tmp_path, monkeypatch):
    import toolwild.llm.registry as registry
    from toolwild.cli.main import app

    monkeypatch.setattr(registry, "create_backend", lambda spec, **kw: ScriptedBackend(Designer()))
    args = ["synth", "envs", "--fields", "ecommerce", "--out", str(tmp_path)]
    args += ["--per-field", "1", "--families", "1", "--tools", "5"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    env = load_environment(tmp_path / "ecommerce__order_tracking.env.json")  # validates the file
    assert len(env.tools) == 3
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["tools_generated"] == 5 and summary["tools_kept"] == 3
    assert summary["tools_dropped"] == {"dependency": 1, "schema": 1}
    assert len(json.loads((tmp_path / "drops.json").read_text())) == 2
    again = CliRunner().invoke(app, args)  # cached: the same files, every call a hit
    assert again.exit_code == 0
    assert load_environment(tmp_path / "ecommerce__order_tracking.env.json") == env
    usage = json.loads((tmp_path / "summary.json").read_text())["usage"]["total"]
    assert usage["calls"] == 0 and usage["cache_hits"] > 0


@pytest.mark.anyio
async def test_a_stage_without_a_valid_reply_is_skipped_and_recorded():
    def model(request: ChatRequest) -> str:
        if request.response_format.get("title") == "ToolDraftList":
            return "not json at all"
        return Designer()(request)

    result = await synth_environments(LLM(ScriptedBackend(model)), ["ecommerce"], CONFIG)
    # a subdomain left without tools is no environment: named, not written
    assert result.environments == [] and result.empty == ["ecommerce__order_tracking"]
    assert result.generated == 0
    assert [f["stage"] for f in result.failed_stages] == ["tools: ecommerce / Order Tracking / Status checks"]


def _no_valid_tools(request: ChatRequest) -> str:
    """The stages above the tools answer; every tools reply is cut mid-string (as a token limit cuts it)."""
    if request.response_format.get("title") == "ToolDraftList":
        return '{"tools": [{"name": "get_order", "description": "Looks an or'
    return Designer()(request)


def test_cli_exits_1_when_no_environment_is_kept(tmp_path, monkeypatch):
    import toolwild.llm.registry as registry
    from toolwild.cli.main import app

    monkeypatch.setattr(registry, "create_backend", lambda spec, **kw: ScriptedBackend(_no_valid_tools))
    args = ["synth", "envs", "--fields", "ecommerce", "--out", str(tmp_path), "--per-field", "1", "--families", "1"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1, result.output
    assert "no environment kept" in result.output
    assert "tools: ecommerce / Order Tracking / Status checks" in " ".join(result.output.split())
    assert list(tmp_path.glob("*.env.json")) == []
    summary = json.loads((tmp_path / "summary.json").read_text())  # written all the same, to show why
    assert summary["environments"] == 0 and summary["environments_without_tools"] == ["ecommerce__order_tracking"]
    assert len(summary["failed_stages"]) == 1


@pytest.mark.anyio
async def test_audit_drops_tools_the_judge_rejects():
    designer = Designer()

    def model(request: ChatRequest) -> str:
        title = request.response_format.get("title")
        text = request.messages[-1]["content"]
        if title == "JudgeVerdict":  # the judge rejects every answer of get_order_again
            return json.dumps({"correct": '"name": "get_order_again"' not in text, "reason": "looked"})
        if title == "PreconditionVerdict":
            return json.dumps({"holds": True})
        if "Answer the call" in text:
            return json.dumps({"result": {"status": "open"}, "patch": []})
        return designer(request)

    config = SynthConfig(
        subdomains_per_field=1, families_per_subdomain=1, tools_per_family=5, max_repairs=1, audit_threshold=0.75
    )
    result = await synth_environments(LLM(ScriptedBackend(model)), ["ecommerce"], config)
    (env,) = result.environments
    assert [t.name for t in env.tools] == ["get_order", "cancel_order"]
    assert result.dropped["audit"] == 1
    assert result.reliability["ecommerce__order_tracking/get_order"] == 1.0
    assert result.reliability["ecommerce__order_tracking/get_order_again"] < 0.75


class _AxisPerTool:
    """A stand-in encoder: every tool its own direction, and t900 the direction of t5 (the real encoders are tested
    in test_embedding*.py; here only the wiring is)."""

    def __init__(self, *, corpus_fitted: bool = False) -> None:
        from toolwild.synth.embedding import EncoderInfo

        kind = "token" if corpus_fitted else "sentence"
        self.info = EncoderInfo(
            name="axes",
            model="one axis per tool",
            package="tests",
            kind=kind,
            dimensions=1000,
            corpus_fitted=corpus_fitted,
        )
        self.calls = 0

    def embed_corpus(self, texts, progress=None):
        import numpy as np

        self.calls += 1
        vectors = np.zeros((len(texts), 1000), dtype=np.float32)
        for row, text in enumerate(texts):
            index = int(text.split()[-1])
            vectors[row, 5 if index == 900 else index] = 1.0
        return vectors


def _numbered(i: int):
    from toolwild.core.tool import Tool

    return Tool(name=f"t{i}", description=f"tool {i}", extra={"source_id": f"f__s__t{i:03d}", "field": "f"})


def test_the_semantic_pass_removes_a_near_duplicate_naming_the_kept_tool_and_the_encoder():
    """A sentence encoder has no minimum: 11 tools are enough. The drop names the kept tool, the cosine and the
    encoder, and the result records which encoder ran, at which threshold, over how many tools."""
    from toolwild.core.environment import Environment
    from toolwild.synth.envgen import SemanticPass, _Run, _semantic_pass

    tools = [_numbered(i) for i in range(10)] + [_numbered(900)]
    run = _Run(LLM(ScriptedBackend([])), SynthConfig(tau=0.9), None)
    run.embedder = _AxisPerTool()
    envs = [Environment(id="e", tools=tools[:5]), Environment(id="g", tools=tools[5:])]
    _semantic_pass(run, envs)
    assert [d["tool"] for d in run.result.drops] == ["f__s__t900"]
    assert run.result.drops[0]["reasons"] == ["similar-in-field of f__s__t005 (cosine 1.0, axes)"]
    assert run.result.dropped["dedup"] == 1 and [t.name for t in envs[1].tools] == [f"t{i}" for i in range(5, 10)]
    assert run.result.semantic_dedup == SemanticPass(encoder=run.embedder.info, tau=0.9, tools=11, dropped=1)
    assert run.result.notes == []


def test_a_corpus_fitted_encoder_is_skipped_below_the_minimum_with_a_note_and_runs_above_it():
    from toolwild.core.environment import Environment
    from toolwild.synth.envgen import SEMANTIC_MIN, _Run, _semantic_pass

    tools = [_numbered(i) for i in range(SEMANTIC_MIN)] + [_numbered(900)]
    run = _Run(LLM(ScriptedBackend([])), SynthConfig(tau=0.9), None)
    run.embedder = _AxisPerTool(corpus_fitted=True)
    small = [Environment(id="e", tools=tools[:10])]
    _semantic_pass(run, small)
    assert len(small[0].tools) == 10 and run.embedder.calls == 0 and run.result.semantic_dedup is None
    (note,) = run.result.notes
    assert note.startswith("semantic dedup skipped: 10 tools") and "axes encoder" in note
    assert f"at least {SEMANTIC_MIN}" in note and "toolwild[dedup]" in note
    envs = [Environment(id="e", tools=tools[:100]), Environment(id="g", tools=tools[100:])]
    _semantic_pass(run, envs)
    assert [d["tool"] for d in run.result.drops] == ["f__s__t900"]
    assert run.result.dropped["dedup"] == 1 and len(envs[1].tools) == SEMANTIC_MIN - 100
    assert run.result.semantic_dedup is not None and run.result.semantic_dedup.dropped == 1


def test_a_small_run_on_the_token_encoder_is_skipped_without_loading_it(monkeypatch):
    """The token encoder reads the embedded model's GGUF (15-30 s): a run it would only skip must not load it."""
    import toolwild.synth.embedding as embedding
    from toolwild.core.environment import Environment
    from toolwild.synth.envgen import _Run, _semantic_pass

    def never(name="auto"):
        raise AssertionError(f"loaded {name}")

    monkeypatch.setattr(embedding, "load_embedder", never)
    run = _Run(LLM(ScriptedBackend([])), SynthConfig(tau=0.85, encoder="token"), None)
    envs = [Environment(id="e", tools=[_numbered(i) for i in range(3)])]
    _semantic_pass(run, envs)
    assert len(envs[0].tools) == 3 and run.result.semantic_dedup is None
    assert run.result.notes[0].startswith("semantic dedup skipped: 3 tools, and the token encoder")


def test_the_encoder_is_part_of_the_identity_only_when_the_semantic_pass_runs():
    """Exact-only runs keep the identity (so the resume) they had before the encoder existed."""
    exact = SynthConfig().identity()
    assert "encoder" not in exact and exact["tau"] is None
    assert SynthConfig(encoder="e5").identity() == exact
    assert SynthConfig(tau=0.85).identity()["encoder"] == "auto"
    assert SynthConfig(tau=0.85, encoder="minilm").identity() != SynthConfig(tau=0.85, encoder="token").identity()


def _unbounded(schema, path="$"):
    """Paths of strings without maxLength (and without pattern/enum) and arrays without maxItems."""
    found = []
    if isinstance(schema, dict):
        if schema.get("type") == "string" and not {"maxLength", "pattern", "enum"} & set(schema):
            found.append(path)
        if schema.get("type") == "array" and "maxItems" not in schema:
            found.append(path)
        for key, value in schema.items():
            found += _unbounded(value, f"{path}.{key}")
    elif isinstance(schema, list):
        for i, value in enumerate(schema):
            found += _unbounded(value, f"{path}[{i}]")
    return found


@pytest.mark.anyio
async def test_every_stage_asks_for_bounded_json():
    """The schema is the embedded model's decoding grammar: an unbounded string let a repetition loop run until
    max_tokens cut the reply ("EOF while parsing a string"), so a whole field gave no environment."""
    seen: dict[str, dict] = {}
    designer = Designer()

    def model(request: ChatRequest) -> str:
        seen[request.response_format["title"]] = request.response_format
        return designer(request)

    config = SynthConfig(subdomains_per_field=1, families_per_subdomain=1, tools_per_family=3, max_repairs=1)
    await synth_environments(LLM(ScriptedBackend(model)), ["ecommerce"], config)
    assert set(seen) == {"SubdomainList", "FamilyList", "ToolDraftList", "SeedData"}
    for title, schema in seen.items():
        assert _unbounded(schema) == [], title
    # the main list is capped at the count asked for
    assert seen["SubdomainList"]["properties"]["subdomains"]["maxItems"] == 1
    assert seen["ToolDraftList"]["properties"]["tools"]["maxItems"] == 3
    # tools: the checks' structural rules hold by construction (scalar item types, every contract list given)
    draft = seen["ToolDraftList"]["$defs"]["ToolDraft"]
    assert {"preconditions", "postconditions", "error_modes"} <= set(draft["required"])
    for key in ("preconditions", "postconditions", "error_modes"):
        assert (draft["properties"][key]["minItems"], draft["properties"][key]["maxItems"]) == (1, 2)
    field = seen["ToolDraftList"]["$defs"]["FieldSpec"]
    assert "items" in field["required"] and field["properties"]["items"]["enum"] == [
        "string",
        "integer",
        "number",
        "boolean",
    ]
    # seed records: one list per entity type, each record a closed object with an id and the tools' scalar fields
    entities = seen["SeedData"]["properties"]["entities"]
    assert entities["required"] == ["order"] and entities["additionalProperties"] is False
    record = entities["properties"]["order"]["items"]
    assert record["required"] == ["id"] and record["additionalProperties"] is False
    assert set(record["properties"]) == {"id", "status", "order_id"}


def test_bounds_are_never_looser_than_the_model():
    from toolwild.synth.envgen import bounded_schema
    from toolwild.synth.models import SubdomainList, ToolDraftList

    tools = bounded_schema(ToolDraftList.model_json_schema(), top=("tools", 2))
    draft = tools["$defs"]["ToolDraft"]["properties"]
    assert draft["description"]["maxLength"] == 120  # the model allows 400
    assert draft["name"] == ToolDraftList.model_json_schema()["$defs"]["ToolDraft"]["properties"]["name"]  # pattern
    assert draft["parameters"]["maxItems"] == 4 and tools["properties"]["tools"]["maxItems"] == 2
    field = tools["$defs"]["FieldSpec"]["properties"]
    assert field["enum"]["items"]["maxLength"] == 40 and field["type"]["enum"][0] == "string"
    subdomains = bounded_schema(SubdomainList.model_json_schema())
    assert subdomains["$defs"]["Subdomain"]["properties"]["name"]["maxLength"] == 80  # the model's own, tighter


@pytest.mark.anyio
async def test_a_repeated_field_name_is_kept_once_not_sent_to_repair():
    """A small model repeats field names; JSON Schema forbids a name twice in ``required``, so the tool used to
    fail the schema check and go to repair for plain duplication."""
    designer = Designer()

    def model(request: ChatRequest) -> str:
        if request.response_format.get("title") == "ToolDraftList":
            twice = [*OBJ, {**OBJ[0], "description": "The order, again."}]
            return json.dumps({"tools": [tool("get_order", parameters=twice)]})
        return designer(request)

    config = SynthConfig(subdomains_per_field=1, families_per_subdomain=1, tools_per_family=1, max_repairs=1)
    result = await synth_environments(LLM(ScriptedBackend(model)), ["ecommerce"], config)
    ((only,),) = [e.tools for e in result.environments]
    assert only.parameters["required"] == ["order_id"]
    assert only.parameters["properties"]["order_id"]["description"] == "The order."  # the first one
    assert result.repaired == 0 and designer.repair_requests == [] and not result.dropped


@pytest.mark.anyio
async def test_the_same_tool_from_two_families_is_kept_once():
    """Two families that get the same tools (a small model answers alike) give each tool twice under one source id:
    the duplicate is dropped and the first kept (removing by key used to drop both, leaving no environment)."""
    designer = Designer()

    def model(request: ChatRequest) -> str:
        if request.response_format.get("title") == "FamilyList":
            same = {"name": "Status checks", "description": "Check an order."}
            return json.dumps({"families": [same, {**same, "name": "Order checks"}]})
        if request.response_format.get("title") == "ToolDraftList":
            return json.dumps({"tools": [tool("get_order"), tool("get_order_again")]})
        return designer(request)

    config = SynthConfig(subdomains_per_field=1, families_per_subdomain=2, tools_per_family=2, max_repairs=1)
    result = await synth_environments(LLM(ScriptedBackend(model)), ["ecommerce"], config)
    (env,) = result.environments
    assert [t.name for t in env.tools] == ["get_order", "get_order_again"]
    assert [t.extra["family"] for t in env.tools] == ["Status checks", "Status checks"]
    assert result.generated == 4 and dict(result.dropped) == {"dedup": 2}
    assert all(d["reasons"][0].startswith("same-name-in-field of ") for d in result.drops)


def test_two_subdomains_named_alike_are_two_environments_not_one_file(tmp_path, monkeypatch):
    """A model named two subdomains of a field alike: both were written to one file, the second over the first."""
    from typer.testing import CliRunner

    import toolwild.llm.registry as registry
    from toolwild.cli.main import app
    from toolwild.synth.scripted import stage_responder

    def twins(request: ChatRequest) -> object:
        if (request.response_format or {}).get("title") == "SubdomainList":
            sub = {"description": "Bills.", "stakeholders": ["clerk"], "entities": ["invoice"]}
            return json.dumps({"subdomains": [{"name": "Billing Ops", **sub}, {"name": "billing ops!", **sub}]})
        return stage_responder(request)

    monkeypatch.setattr(registry, "create_backend", lambda spec, **kw: ScriptedBackend(twins, max_connections=64))
    out = tmp_path / "envs"
    args = ["synth", "envs", "--fields", "finance", "--out", str(out), "--families", "1", "--tools", "2"]
    # --exact-only: the twins' tools differ only in the subdomain's spelling, so the semantic pass rightly drops
    # one twin's tools as near-duplicates of the other's (and its file with them); this test is about the file names
    result = CliRunner().invoke(app, [*args, "--exact-only"])
    assert result.exit_code == 0, result.output
    files = sorted(p.name for p in out.glob("*.env.json"))
    assert files == ["finance__billing_ops.env.json", "finance__billing_ops_2.env.json"]
    second = load_environment(out / files[1])
    assert second.id == "finance__billing_ops_2"
    assert all(t.extra["source_id"].startswith("finance__billing_ops_2__") for t in second.tools)
