"""The realistic scripted generator model: valid replies for every stage, derived from the request only."""

from __future__ import annotations

import json
import random

import pytest
from fake_openai import FakeOpenAI, Reply, fake_backend

from toolwild.core.tool import Tool
from toolwild.envs.simulated import SimulatedEnvironment
from toolwild.llm.backends.scripted import ScriptedBackend
from toolwild.llm.client import LLM
from toolwild.llm.types import ChatRequest
from toolwild.synth.envgen import SynthConfig, synth_environments
from toolwild.synth.scripted import request_from_openai_body, stage_responder
from toolwild.synth.utterances import Phrase, Wording, template_utterance, write_utterance

CONFIG = SynthConfig(subdomains_per_field=2, families_per_subdomain=3, tools_per_family=4, audit_threshold=0.75)


@pytest.fixture
def anyio_backend():
    return "asyncio"


class Recording:
    """The stage model, keeping every (request, reply) pair."""

    def __init__(self) -> None:
        self.pairs: list[tuple[ChatRequest, object]] = []

    def __call__(self, request: ChatRequest) -> object:
        reply = stage_responder(request)
        self.pairs.append((request, reply))
        return reply


@pytest.mark.anyio
async def test_every_stage_gets_a_valid_reply_and_every_path_of_the_pipeline_runs():
    recording = Recording()
    result = await synth_environments(LLM(ScriptedBackend(recording)), ["finance", "healthcare"], CONFIG)
    assert result.failed_stages == [] and result.failed_units == [] and result.empty == []
    assert len(result.environments) == 4
    # the realistic defects: a repaired tool, repeated helpers dropped by dedup, a few tools the judge rejects
    assert result.generated == 2 * 2 * 3 * 4 and result.repaired >= 1
    assert result.dropped["dedup"] == 2 * 2 * 2  # the helper of families 2 and 3 in every subdomain
    assert 1 <= result.dropped["audit"] <= 6 and set(result.dropped) == {"dedup", "audit"}
    for env in result.environments:
        names = [t.name for t in env.tools]
        assert len(set(names)) == len(names)
        consumed = {c for t in env.tools for c in t.consumes}
        assert consumed <= set(env.initial_state), env.id  # seed data for everything consumed
        for records in env.initial_state.values():
            assert len({r["id"] for r in records}) == len(records) == 3
    stages = {r.response_format.get("title") for r, _ in recording.pairs if r.response_format}
    assert {"SubdomainList", "FamilyList", "ToolDraftList", "SeedData", "PreconditionVerdict", "JudgeVerdict"} <= stages
    assert any("Answer the call" in r.messages[-1]["content"] for r, _ in recording.pairs)


@pytest.mark.anyio
async def test_replies_depend_on_the_request_only():
    recording = Recording()
    await synth_environments(LLM(ScriptedBackend(recording)), ["finance"], CONFIG)
    pairs = list(recording.pairs)
    random.Random(7).shuffle(pairs)  # asked again, in another order, the same request gets the same reply
    assert all(stage_responder(request) == reply for request, reply in pairs)


@pytest.mark.anyio
async def test_the_same_replies_over_the_fake_openai_server():
    """``request_from_openai_body`` turns what the server receives back into the request: same environments."""
    fake = FakeOpenAI(lambda body: Reply(text=stage_responder(request_from_openai_body(body))))
    over_http = await synth_environments(LLM(fake_backend(fake)), ["finance"], CONFIG)
    in_process = await synth_environments(LLM(ScriptedBackend(stage_responder)), ["finance"], CONFIG)
    assert fake.calls > 50
    assert [e.model_dump() for e in over_http.environments] == [e.model_dump() for e in in_process.environments]
    assert over_http.drops == in_process.drops


async def _environment():
    config = SynthConfig(subdomains_per_field=1, families_per_subdomain=2, tools_per_family=4)
    result = await synth_environments(LLM(ScriptedBackend(stage_responder)), ["retail"], config)
    return result.environments[0]


@pytest.mark.anyio
async def test_the_simulator_keeps_state_consistent_with_the_calls():
    """What sessions need of a simulated environment: a created record is returned with its new id and stored, a
    reader finds it by that id, an unknown id is not found, an update changes the stored record."""
    env = await _environment()
    episode = SimulatedEnvironment(env, LLM(ScriptedBackend(stage_responder))).reset()
    create = next(t for t in env.tools if t.name.startswith("create_"))
    (entity,) = create.produces
    reader = next(t for t in env.tools if t.name.startswith("get_") and t.consumes == [entity])
    updater = next(t for t in env.tools if t.name.startswith("update_"))
    (updated,) = updater.consumes
    before = len(episode.state()[entity])
    made = await episode.acall(create.name, {"name": "Ada", "amount": 250.0})
    assert made.ok
    new_id = made.result[f"{entity}_id"]
    records = episode.state()[entity]
    assert len(records) == before + 1 and records[-1]["id"] == new_id and records[-1]["name"] == "Ada"
    found = await episode.acall(reader.name, {f"{entity}_id": new_id})
    assert found.ok and found.result[f"{entity}_id"] == new_id and found.result["status"] == "pending"
    assert found.result["amount"] == 250.0  # read back from the stored record
    missing = await episode.acall(reader.name, {f"{entity}_id": "NOPE-1"})
    assert not missing.ok and missing.error.kind.value == "not_found"
    seeded = env.initial_state[updated][1]
    assert seeded["status"] != "closed"
    changed = await episode.acall(updater.name, {f"{updated}_id": seeded["id"], "status": "closed"})
    assert changed.ok and changed.result["status"] == "closed"
    assert episode.state()[updated][1]["status"] == "closed"


@pytest.mark.anyio
async def test_the_utterance_writer_gets_the_correct_example_back():
    tool = Tool(name="get_order", description="Look an order up.", parameters={"type": "object", "properties": {}})
    wording = Wording(kind="single", phrases=[Phrase(tool=tool, stated={"order_id": "ORD-7"})])
    template = template_utterance(wording, random.Random(0))
    text, by_model = await write_utterance(LLM(ScriptedBackend(stage_responder)), wording, [], template)
    assert (text, by_model) == (template, True)


def test_an_unknown_structured_request_gets_a_schema_valid_reply():
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 3}}, "required": ["n"]}
    request = ChatRequest(messages=[{"role": "user", "content": "?"}], response_format=schema)
    assert json.loads(stage_responder(request)) == {"n": 3}
    assert stage_responder(ChatRequest(messages=[{"role": "user", "content": "hi"}])) == "OK."
