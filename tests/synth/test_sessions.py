"""``synth sessions``: wild sessions over any environment, verified by replay, the oracle and the value-level
subtype check — on a Python domain, a model-simulated environment (scripted model) and a replay environment."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections import Counter
from pathlib import Path

import pytest
from library_env import LIBRARY, call_of, library_model

from toolwild.core.formats.environment import write_environment
from toolwild.core.formats.wtb import load_wtb_suite, session_to_wtb
from toolwild.core.formats.wtb_envs import environment_from_session
from toolwild.core.hidden_intent import mentions, scalar_values
from toolwild.core.patterns import ALL_PATTERNS
from toolwild.core.session import Suite
from toolwild.core.task import CoarseType, NodeKind, TaskType, TurnSubtype
from toolwild.eval.validate import validate_suite
from toolwild.llm.backends.scripted import ScriptedBackend
from toolwild.llm.cache import CacheMode, ResponseCache
from toolwild.llm.client import LLM
from toolwild.llm.types import ChatRequest
from toolwild.synth.sessions import SessionsConfig, SessionsResult, load_handle, synth_sessions
from toolwild.synth.utterances import Wording, wording_problems

FIXTURE = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures" / "wildtoolbench"


def generate(refs: list[str], simulator: LLM | None = None, **knobs) -> SessionsResult:
    handles = [load_handle(r, simulator=simulator) for r in refs]
    return asyncio.run(synth_sessions(handles, SessionsConfig(**knobs)))


def problems_of(suite: Suite, simulator: LLM | None = None, base_dir: Path | None = None) -> list[str]:
    found = validate_suite(suite, replay=True, subtypes=True, simulator=simulator, base_dir=base_dir)
    return [f"{p.where}: {p.message}" for p in found]


def wtb_lines(suite: Suite) -> list[str]:
    return [json.dumps(session_to_wtb(s), sort_keys=True) for s in suite.sessions]


@pytest.fixture(scope="module")
def published() -> SessionsResult:
    return generate(["inventory"], n_sessions=256, like_published=True)


def test_like_published_reproduces_the_published_design(published):
    suite = published.suite
    assert len(suite.sessions) == 256 and not published.failed_sessions
    coarse = Counter(t.coarse_type for s in suite.sessions for t in s.tasks)
    assert coarse == {c: 256 for c in CoarseType}
    orderings = {tuple(t.coarse_type for t in s.tasks) for s in suite.sessions}
    assert orderings == set(ALL_PATTERNS)
    assert Counter(s.transitions for s in suite.sessions) == {0: 4, 1: 36, 2: 108, 3: 108}
    kinds = Counter(t.type for s in suite.sessions for t in s.tasks)
    assert all(kinds[k] > 0 for k in (TaskType.PARALLEL, TaskType.SEQUENTIAL, TaskType.MIXED))
    subtypes = Counter(t.subtype for s in suite.sessions for t in s.tasks)
    assert subtypes[TurnSubtype.FIRST] == 256 and all(subtypes[k] > 0 for k in TurnSubtype)


def test_every_session_verifies_oracle_replay_and_subtypes(published):
    assert problems_of(published.suite) == []


def test_gold_dags_follow_the_data(published):
    """A dependent call's argument is a value its parent returned; every kept call succeeded."""
    for session in published.suite.sessions:
        for task in session.tasks:
            for node in task.call_nodes:
                assert node.observation["ok"] is True
                for dep in node.dependency_list:
                    parent = task.gold[dep]
                    if parent.kind is NodeKind.CALL:
                        shown = json.dumps(parent.observation["result"])
                        assert any(mentions(shown, v) for v in node.action.arguments.values()), (session.id, task)


def test_clarify_tasks_ask_for_withheld_values_and_vague_replies_force_a_second_ask(published):
    clarify = [t for s in published.suite.sessions for t in s.tasks if t.type is TaskType.CLARIFY]
    twice = 0
    for task in clarify:
        asks = [n for n in task.gold if n.kind is NodeKind.ASK]
        (call,) = task.call_nodes
        missing = asks[-1].action.arguments["tool_list"][0]["missing_required_parameters"][0]
        assert missing in call.action.arguments
        assert not mentions(task.utterance, call.action.arguments[missing])
        if len(asks) == 2:
            twice += 1
            assert not mentions(asks[0].user_input, call.action.arguments[missing])  # vague: leaves the choice
            assert asks[1].dependency_list == [asks[0].idx]
            assert mentions(asks[1].user_input, call.action.arguments[missing])
    assert 0.15 < twice / len(clarify) < 0.55


def test_chat_tasks_make_no_call(published):
    for session in published.suite.sessions:
        for task in session.tasks:
            if task.type is TaskType.CHAT:
                assert [n.kind for n in task.gold] == [NodeKind.ANSWER]


def test_generation_is_deterministic_and_transitions_can_be_fixed():
    a = generate(["inventory"], n_sessions=12, seed=5)
    b = generate(["inventory"], n_sessions=12, seed=5)
    assert wtb_lines(a.suite) == wtb_lines(b.suite)
    assert wtb_lines(generate(["inventory"], n_sessions=12, seed=6).suite) != wtb_lines(a.suite)
    for k in range(4):
        fixed = generate(["inventory"], n_sessions=8, transitions=k)
        assert {s.transitions for s in fixed.suite.sessions} == {k}


def test_failing_gold_calls_are_dropped_with_their_reason(published):
    assert published.drops["gold call failed (precondition_failed)"] > 0  # selling more than the stock
    assert "only" in published.drop_examples["gold call failed (precondition_failed)"]


def test_a_model_simulated_environment_generates_and_replays_from_the_cache(tmp_path):
    path = tmp_path / "library.env.json"
    write_environment(LIBRARY, path)
    cache = tmp_path / "cache.sqlite"
    backend = ScriptedBackend(library_model)
    result = generate([str(path)], simulator=LLM(backend, cache=ResponseCache(cache)), n_sessions=12)
    assert len(result.suite.sessions) == 12 and backend.requests
    kinds = Counter(t.type for s in result.suite.sessions for t in s.tasks)
    assert kinds[TaskType.SEQUENTIAL] + kinds[TaskType.MIXED] > 0  # chains from the declared entities
    lends = [n for s in result.suite.sessions for t in s.tasks for n in t.call_nodes if n.name == "lend_book"]
    assert lends and all(t.checks_state for s in result.suite.sessions for t in s.tasks)
    # the verifier replays every gold call through the simulator: all from the cache, identical, no model call
    silent = ScriptedBackend([])
    replayer = LLM(silent, cache=ResponseCache(cache, mode=CacheMode.READ_ONLY))
    assert problems_of(result.suite, simulator=replayer) == []
    assert silent.requests == []
    # and a second generation from the cache alone writes the same suite
    again = generate([str(path)], simulator=LLM(ScriptedBackend([]), cache=ResponseCache(cache)), n_sessions=12)
    assert wtb_lines(again.suite) == wtb_lines(result.suite)


def test_a_parent_result_without_the_value_drops_the_chain(tmp_path):
    """The simulator answers list_books with no ids: chains from it cannot be fed and are dropped, with reason."""

    def forgetful(request: ChatRequest) -> str:
        reply = json.loads(library_model(request))
        if call_of(request)["name"] == "list_books":
            reply["result"] = []
        return json.dumps(reply)

    path = tmp_path / "library.env.json"
    write_environment(LIBRARY, path)
    result = generate([str(path)], simulator=LLM(ScriptedBackend(forgetful)), n_sessions=12)
    assert result.drops["the parent's result does not hold the value"] > 0
    for session in result.suite.sessions:
        for task in session.tasks:
            for node in task.call_nodes:
                if node.name == "list_books":
                    assert not any(node.idx in n.dependency_list for n in task.call_nodes if n.idx != node.idx)


def test_a_replay_environment_only_makes_recorded_calls(tmp_path):
    suite, _ = load_wtb_suite(FIXTURE / "sessions_0_4.reconstructed.jsonl")
    source = suite.sessions[4]
    env = environment_from_session(source)
    path = tmp_path / "replay.env.json"
    write_environment(env, path)
    result = generate([str(path)], n_sessions=3)
    recorded = {(r.name, json.dumps(r.arguments, sort_keys=True)) for r in env.recordings}
    made = [n for s in result.suite.sessions for t in s.tasks for n in t.call_nodes]
    assert made and all((n.name, json.dumps(n.action.arguments, sort_keys=True)) in recorded for n in made)
    assert problems_of(result.suite) == []


def test_distractor_tools_come_from_other_environments_and_are_never_gold(tmp_path):
    path = tmp_path / "library.env.json"
    write_environment(LIBRARY, path)
    simulator = LLM(ScriptedBackend(library_model))
    result = generate(["inventory", str(path)], simulator=simulator, n_sessions=6, distractors=2)
    for session in result.suite.sessions:
        own = {"inventory": {"get_stock", "list_items", "restock", "place_order"}}.get(
            session.environment or "", {t.name for t in LIBRARY.tools}
        )
        extra = set(session.extra["distractors"])
        assert len(extra) == 2 and not extra & own
        assert {t.name for t in session.tools} == own | extra
        assert all(n.name in own for t in session.tasks for n in t.call_nodes)


def test_model_written_utterances_are_checked_and_fall_back_to_templates():
    """The writer states every value when it can; a reply that gives away a hidden value is refused."""
    calls: list[ChatRequest] = []

    def writer(request: ChatRequest) -> str:
        calls.append(request)
        brief = json.loads(request.messages[1]["content"])
        if "tool calls and results" in brief:  # the answer writer: one value of each result; JSON for a list
            results = [c["result"] for c in brief["tool calls and results"]]
            if any(isinstance(r, list) for r in results):
                return json.dumps({"answer": json.dumps(results)})
            values = [next(iter(scalar_values(r)), "done") for r in results]
            return json.dumps({"answer": "Model says: " + "; ".join(map(str, values)) + "."})
        said = [v for c in brief["the request asks for"] if isinstance(c, dict) for v in c["say"].values()]
        hidden = brief["do not say"]
        if hidden:  # a careless writer: names the referenced value outright
            return json.dumps({"utterance": f"Please handle {' and '.join(map(str, said + hidden))}."})
        return json.dumps({"utterance": f"Hey, could you sort this out for me: {', '.join(map(str, said))}?"})

    handles = [load_handle("inventory")]
    result = asyncio.run(synth_sessions(handles, SessionsConfig(n_sessions=8), writer=LLM(ScriptedBackend(writer))))
    assert result.utterances["model"] > 0 and result.utterances["template-fallback"] > 0
    assert sum(result.utterances.values()) == 32
    assert result.answers["model"] > 0 and result.answers["template-fallback"] > 0  # raw JSON is refused
    for session in result.suite.sessions:
        for task, source in zip(session.tasks, session.extra["utterance_sources"], strict=True):
            assert task.utterance.startswith("Hey, could you sort this out") == (source == "model")
        tool_tasks = [t for t in session.tasks if t.call_nodes]
        for task, source in zip(tool_tasks, session.extra["answer_sources"], strict=True):
            assert task.gold[-1].observation.startswith("Model says") == (source == "model")
    assert problems_of(result.suite) == []


def test_wording_rules():
    wording = Wording(kind="single", hidden=["O-1001"])
    assert wording_problems("Cancel O-1001 please", wording) == [
        "- utterance: must not state 'O-1001' (the assistant must infer it)"
    ]
    assert wording_problems("Cancel that order please", wording) == []
    assert wording_problems("", wording)


def test_orderings_cover_every_pattern_once_per_256():
    assert len(ALL_PATTERNS) == 256 == len(set(ALL_PATTERNS))
    assert sum(1 for p in ALL_PATTERNS if all(a == b for a, b in itertools.pairwise(p))) == 4


def test_an_environment_its_simulator_cannot_answer_is_given_up_early(tmp_path):
    """A simulator that never writes a valid reply: after a few failed gold calls in a row the environment is given
    up for the run, every session is reported with the reason, and the model is not called again."""
    path = tmp_path / "library.env.json"
    write_environment(LIBRARY, path)
    backend = ScriptedBackend(lambda request: "not json at all")
    result = generate([str(path)], simulator=LLM(backend), n_sessions=5, concurrency=1)
    assert result.suite.sessions == []
    assert list(result.given_up) == [str(path)] and "simulation_failed" in result.given_up[str(path)]
    assert [f["index"] for f in result.failed_sessions] == [0, 1, 2, 3, 4]
    assert result.drops["gold call failed (simulation_failed)"] == SessionsConfig().simulator_patience
    calls_for_one_session = len(backend.requests)
    assert calls_for_one_session < 100
