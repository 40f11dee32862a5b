"""Generation never words a reference that more than one earlier value answers: it names the source, or drops."""

from __future__ import annotations

import asyncio
import random
from datetime import date

import pytest

from toolwild.core.references import Pointer, ambiguous_references
from toolwild.core.task import Action, GoldNode, Task, TaskType, TurnSubtype, answer_node
from toolwild.synth.sessions import SessionsConfig, load_handle, synth_sessions
from toolwild.synth.tasks import AMBIGUOUS, Dropped, SessionState, _pointer
from toolwild.synth.values import Fact


def state_after(*calls: tuple[str, dict, object]) -> SessionState:
    """A session on ``inventory`` whose first task made ``calls`` (with these results)."""
    env = load_handle("inventory")
    nodes = [
        GoldNode(idx=i, action=Action(name=name, arguments=args), observation={"ok": True, "result": result})
        for i, (name, args, result) in enumerate(calls)
    ]
    nodes.append(answer_node(nodes, "Done."))
    kind = TaskType.SINGLE if len(calls) == 1 else TaskType.PARALLEL
    task = Task(utterance="Please do it.", type=kind, subtype=TurnSubtype.FIRST, gold=nodes)
    return SessionState(
        env=env,
        seed=0,
        rng=random.Random(0),
        today=date(2024, 7, 11),
        episode=env.backend.reset(seed=0),
        pool=[],
        tasks=[task],
    )


def test_the_issue_case_names_what_the_user_asked_for_or_what_came_back():
    """restock(apple, 3) answered {units: 19}: "the same units" alone could be 3 or 19."""
    state = state_after(("restock", {"item": "apple", "units": 3}, {"item": "apple", "units": 19}))
    asked = _pointer(state, "coref", Fact(0, "units", 3, "arg", "restock"), "units")
    came_back = _pointer(state, "coref", Fact(0, "units", 19, "result", "restock"), "units")
    assert asked == Pointer("coref", source="arg")
    assert came_back == Pointer("coref", source="result")
    # the item is the same value in the arguments and the result: one value, no qualification needed
    assert _pointer(state, "coref", Fact(0, "item", "apple", "arg", "restock"), "item") == Pointer("coref")


def test_a_value_among_a_listed_set_is_dropped_as_ambiguous():
    state = state_after(("list_items", {}, ["apple", "coffee", "flour"]))
    with pytest.raises(Dropped) as dropped:
        _pointer(state, "coref", Fact(0, "item", "coffee", "result", "list_items"), "item")
    assert dropped.value.reason == AMBIGUOUS


def test_two_calls_of_different_tools_are_told_apart_by_the_tool():
    state = state_after(
        ("place_order", {"item": "tea", "units": 2}, {"order_id": "ord-0001", "item": "tea", "units": 2}),
        ("restock", {"item": "flour", "units": 5}, {"item": "flour", "units": 12}),
    )
    pointer = _pointer(state, "coref", Fact(0, "units", 2, "arg", "place_order"), "units")
    assert pointer.tool == "place_order"


@pytest.fixture(scope="module")
def inventory_suite():
    config = SessionsConfig(n_sessions=256, like_published=True, concurrency=8)
    return asyncio.run(synth_sessions([load_handle("inventory")], config, name="inv"))


def test_no_generated_session_holds_an_ambiguous_reference(inventory_suite):
    sessions = inventory_suite.suite.sessions
    assert len(sessions) == 256
    assert [f for s in sessions for f in ambiguous_references(s)] == []
    assert inventory_suite.drops[AMBIGUOUS] > 0  # the rule did bite: these attempts were dropped, not kept


def test_generated_ids_are_the_suite_s_own(inventory_suite):
    ids = [s.id for s in inventory_suite.suite.sessions]
    assert ids[:2] == ["synth_0", "synth_1"]
    assert not any(i.startswith("wild_tool_bench_") for i in ids)
