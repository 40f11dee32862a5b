"""The ``llm`` environment backend with a scripted model: schema first, preconditions, patches, reads, replay."""

from __future__ import annotations

import asyncio
import json

import pytest
from library_env import prompt_value

from toolwild.core.environment import BackendKind, Environment
from toolwild.core.tool import Contract, Effect, Tool
from toolwild.envs.base import ToolErrorKind
from toolwild.envs.simulated import SimulatedEnvironment
from toolwild.errors import CacheMissError, ConfigError
from toolwild.llm.backends.scripted import ScriptedBackend
from toolwild.llm.cache import CacheMode, ResponseCache
from toolwild.llm.client import LLM
from toolwild.llm.types import ChatRequest

ADD = Tool(
    name="add_customer",
    description="Register a customer.",
    parameters={
        "type": "object",
        "properties": {"id": {"type": "string", "pattern": "^C-[0-9]+$"}, "name": {"type": "string"}},
        "required": ["id", "name"],
        "additionalProperties": False,
    },
    returns={"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
    effect=Effect.WRITE,
)
GET = Tool(
    name="get_customer",
    description="Look a customer up.",
    parameters={"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
    returns={"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
    contract=Contract(preconditions=["the customer exists"], error_modes=["not found: unknown id"]),
    effect=Effect.READ,
)
PAY = Tool(
    name="credit",
    description="Add to a customer's balance.",
    parameters={
        "type": "object",
        "properties": {"id": {"type": "string"}, "amount": {"type": "number"}},
        "required": ["id", "amount"],
    },
    effect=Effect.WRITE,
)
ENV = Environment(
    id="crm",
    description="A tiny CRM.",
    tools=[ADD, GET, PAY],
    initial_state={"customers": {"C-1": {"name": "Ada", "balance": 10.5}}},
    backend=BackendKind.LLM,
)


def crm_model(request: ChatRequest) -> str:
    """A model that behaves: it reads the state and the call from the prompt and answers from them."""
    state = prompt_value(request, "Current state")
    call = prompt_value(request, "Call")
    args = call["arguments"]
    props = request.response_format["properties"]
    if "holds" in props:
        exists = args["id"] in state["customers"]
        return json.dumps({"holds": exists} if exists else {"holds": False, "kind": "not_found", "message": "no such"})
    if call["name"] == "add_customer":
        patch = [{"op": "add", "path": f"/customers/{args['id']}", "value": {"name": args["name"], "balance": 0}}]
        return json.dumps({"result": {"id": args["id"]}, "patch": patch})
    if call["name"] == "credit":
        patch = [{"op": "increment", "path": f"/customers/{args['id']}/balance", "value": args["amount"]}]
        return json.dumps({"result": {"ok": True}, "patch": patch})
    return json.dumps({"result": {"name": state["customers"][args["id"]]["name"]}})


def make(backend: ScriptedBackend, cache: ResponseCache | None = None) -> SimulatedEnvironment:
    return SimulatedEnvironment(ENV, LLM(backend, cache=cache))


def test_invalid_arguments_never_reach_the_model_and_every_error_is_reported():
    backend = ScriptedBackend([])  # any model call would raise ScriptExhaustedError
    episode = make(backend).reset(seed=0)
    obs = asyncio.run(episode.acall("add_customer", {"id": "X9", "nickname": "a"}))
    assert not obs.ok and obs.error.kind is ToolErrorKind.INVALID_ARGUMENTS
    message = obs.error.message
    assert "'name' is a required property" in message
    assert "does not match" in message  # the id pattern
    assert "nickname" in message  # additional property
    assert backend.requests == []
    unknown = asyncio.run(episode.acall("delete_everything", {}))
    assert unknown.error.kind is ToolErrorKind.UNKNOWN_TOOL and backend.requests == []


def test_a_later_read_sees_an_earlier_write_and_arithmetic_is_done_by_code():
    backend = ScriptedBackend(crm_model)
    episode = make(backend).reset(seed=3)

    async def run():
        added = await episode.acall("add_customer", {"id": "C-2", "name": "Grace"})
        read = await episode.acall("get_customer", {"id": "C-2"})
        credited = [await episode.acall("credit", {"id": "C-1", "amount": a}) for a in (0.1, 0.2)]
        return added, read, credited

    added, read, credited = asyncio.run(run())
    assert added.ok and added.result == {"id": "C-2"}
    assert read.ok and read.result == {"name": "Grace"}
    assert all(o.ok for o in credited)
    state = episode.state()
    assert state["customers"]["C-2"] == {"name": "Grace", "balance": 0}
    assert state["customers"]["C-1"]["balance"] == 10.8  # 10.5 + 0.1 + 0.2, exactly
    # the read's prompt carried the state written by the add; every request used the episode's seed
    read_requests = [r for r in backend.requests if prompt_value(r, "Call")["name"] == "get_customer"]
    assert "C-2" in prompt_value(read_requests[0], "Current state")["customers"]
    assert {r.seed for r in backend.requests} == {3}


def test_precondition_failure_is_a_typed_error_and_skips_the_response():
    backend = ScriptedBackend(crm_model)
    episode = make(backend).reset()
    obs = asyncio.run(episode.acall("get_customer", {"id": "C-404"}))
    assert not obs.ok and obs.error.kind is ToolErrorKind.NOT_FOUND and obs.error.message == "no such"
    assert len(backend.requests) == 1  # the precondition check only


def test_a_patch_that_does_not_apply_is_rejected_and_retried_with_the_reason():
    bad = {"result": {"ok": True}, "patch": [{"op": "replace", "path": "/customers/C-9/balance", "value": 1}]}
    good = {"result": {"ok": True}, "patch": [{"op": "increment", "path": "/customers/C-1/balance", "value": 1}]}
    backend = ScriptedBackend([json.dumps(bad), json.dumps(good)])
    episode = make(backend).reset()
    obs = asyncio.run(episode.acall("credit", {"id": "C-1", "amount": 1}))
    assert obs.ok and episode.state()["customers"]["C-1"]["balance"] == 11.5
    feedback = backend.requests[1].messages[-1]["content"]
    assert "does not apply" in feedback and "C-9" in feedback


def test_a_patch_that_never_applies_leaves_the_state_unchanged():
    bad = {"result": {"ok": True}, "patch": [{"op": "remove", "path": "/customers/C-9"}]}
    backend = ScriptedBackend([json.dumps(bad)] * 3)
    episode = make(backend).reset()
    before = episode.state()
    obs = asyncio.run(episode.acall("credit", {"id": "C-1", "amount": 1}))
    assert not obs.ok and obs.error.kind is ToolErrorKind.SIMULATION_FAILED
    assert episode.state() == before and len(backend.requests) == 3


def test_a_read_may_not_write_and_results_must_match_the_output_schema():
    holds = json.dumps({"holds": True})
    writes = json.dumps({"result": {"name": "Ada"}, "patch": [{"op": "remove", "path": "/customers/C-1"}]})
    wrong_type = json.dumps({"result": {"name": 42}})
    fine = json.dumps({"result": {"name": "Ada"}})
    backend = ScriptedBackend([holds, writes, wrong_type, fine])
    episode = make(backend).reset()
    obs = asyncio.run(episode.acall("get_customer", {"id": "C-1"}))
    assert obs.ok and obs.result == {"name": "Ada"} and "C-1" in episode.state()["customers"]
    assert "only reads" in backend.requests[2].messages[-1]["content"]
    assert "42 is not of type 'string'" in backend.requests[3].messages[-1]["content"]
    # the reply schema of a read tool has no patch at all
    assert "patch" not in backend.requests[1].response_format["properties"]


def test_episodes_are_isolated():
    env = make(ScriptedBackend(crm_model))
    one, two = env.reset(), env.reset()

    async def run():
        await asyncio.gather(
            one.acall("add_customer", {"id": "C-7", "name": "Lin"}),
            two.acall("credit", {"id": "C-1", "amount": 5}),
        )

    asyncio.run(run())
    assert "C-7" in one.state()["customers"] and "C-7" not in two.state()["customers"]
    assert one.state()["customers"]["C-1"]["balance"] == 10.5
    assert two.state()["customers"]["C-1"]["balance"] == 15.5


def test_the_same_episode_replayed_from_cache_is_identical_and_free(tmp_path):
    calls = [
        ("add_customer", {"id": "C-2", "name": "Grace"}),
        ("get_customer", {"id": "C-2"}),
        ("credit", {"id": "C-2", "amount": 2.5}),
        ("get_customer", {"id": "C-404"}),
    ]

    async def play(backend, mode):
        cache = ResponseCache(tmp_path / "sim.sqlite", mode=mode)
        llm = LLM(backend, cache=cache)
        episode = SimulatedEnvironment(ENV, llm).reset(seed=1)
        observations = [(await episode.acall(n, a)).model_dump() for n, a in calls]
        await llm.aclose()
        return observations, episode.state()

    first = asyncio.run(play(ScriptedBackend(crm_model), CacheMode.READ_WRITE))
    silent = ScriptedBackend([])  # a call would raise: replay must come from the cache alone
    second = asyncio.run(play(silent, CacheMode.READ_ONLY))
    assert second == first and silent.requests == []
    assert first[0][3]["error"]["kind"] == "not_found"
    # a different call is a miss, and read-only says so
    with pytest.raises(CacheMissError):

        async def miss():
            llm = LLM(ScriptedBackend([]), cache=ResponseCache(tmp_path / "sim.sqlite", mode=CacheMode.READ_ONLY))
            await SimulatedEnvironment(ENV, llm).reset(seed=1).acall("get_customer", {"id": "C-1"})

        asyncio.run(miss())


def test_sync_call_is_refused_with_a_clear_message():
    episode = make(ScriptedBackend([])).reset()
    with pytest.raises(ConfigError, match="acall"):
        episode.call("get_customer", {"id": "C-1"})
