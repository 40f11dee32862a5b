"""``--perturb``'s code kinds (:mod:`toolwild.core.perturb`): what each changes, what follows, and what is recorded.

The oracle must still score 100% on every perturbed copy (here scored from the gold path in both modes; the live
loop in both history modes is tests/eval/test_perturb_eval.py), and the same seed must give the same copy.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from toolwild.core.formats.wtb import load_wtb_suite
from toolwild.core.perturb import (
    PERTURBATION,
    Rename,
    identifier_like,
    parse_kinds,
    perturb_suite,
    perturbation_of,
    suite_perturbation,
)
from toolwild.core.session import Session, Suite
from toolwild.core.task import Action, GoldNode, Task, TaskType, answer_node, ask_node
from toolwild.core.tool import Effect, Tool
from toolwild.core.verdict import ScoringMode
from toolwild.errors import ConfigError, DataError
from toolwild.eval.agents.oracle import oracle_trajectory
from toolwild.eval.scoring.session import score_session

FIXTURE = Path(__file__).resolve().parents[2].parent / "shared/fixtures/wildtoolbench/sessions_0_4.reconstructed.jsonl"
needs_fixture = pytest.mark.skipif(not FIXTURE.exists(), reason=f"fixture not found: {FIXTURE}")
KINDS = ["distractors:3", "terse", "terse:0", "rename", "shuffle", "distractors:2,terse,rename,shuffle"]


@pytest.fixture(scope="module")
def fixture_suite() -> Suite:
    if not FIXTURE.exists():
        pytest.skip(f"fixture not found: {FIXTURE}")
    return load_wtb_suite(FIXTURE)[0]


def _tool(name: str, params: dict, description: str = "", effect: Effect | None = None) -> Tool:
    schema = {"type": "object", "properties": params, "required": list(params)}
    return Tool(name=name, description=description, parameters=schema, effect=effect)


def _shop() -> Suite:
    """One session of two tasks: a call whose observation names a tool, and a clarification."""
    tools = [
        _tool(
            "get_stock",
            {"item_name": {"type": "string", "description": "the item; see list_items for names"}},
            "How many units of an item are in stock. Call list_items first when unsure.",
        ),
        _tool("list_items", {}, "All items the shop stocks."),
        _tool(
            "restock",
            {"item_name": {"type": "string"}, "units": {"type": "integer", "description": "at least 1"}},
            "Add units of an item to the stock.",
            Effect.WRITE,
        ),
    ]
    call = GoldNode(
        idx=0,
        action=Action(name="get_stock", arguments={"item_name": "coffee"}),
        observation={"ok": True, "result": {"units": 4, "hint": "restock soon; see list_items"}},
    )
    first = Task(utterance="How much coffee is left?", type=TaskType.SINGLE, gold=[call, answer_node([call], "4.")])
    ask = ask_node(0, "restock", ["units"], "How many units?", "Six.", [])
    write = GoldNode(
        idx=1,
        action=Action(name="restock", arguments={"item_name": "coffee", "units": 6}),
        observation={"ok": True, "result": {"units": 10}},
        dependency_list=[0],
    )
    second = Task(
        utterance="Please restock the coffee (get_stock said it is low).",
        type=TaskType.CLARIFY,
        subtype="Coreferential Reference",
        gold=[ask, write, answer_node([ask, write], "Done, 10 now.")],
    )
    session = Session(id="shop-0", env_info="2024-07-11 10:00:00 Thursday", tools=tools, tasks=[first, second])
    return Suite(name="shop", sessions=[session])


def _oracle_is_perfect(suite: Suite) -> None:
    for session in suite.sessions:
        for mode in ScoringMode:
            verdict = score_session(session, oracle_trajectory(session), mode=mode)
            wrong = [(t.task_index, t.error_reason) for t in verdict.tasks if t.label != "correct"]
            assert wrong == [], f"{session.id} in {mode.value}: {wrong}"


def _text_without_record(session: Session) -> str:
    data = session.model_dump(mode="json")
    data["extra"].pop(PERTURBATION, None)
    return json.dumps(data)


# ---------------------------------------------------------------------------------------------- the value
@pytest.mark.parametrize(
    ("spec", "parsed"),
    [
        ("rename", ["rename"]),
        ("distractors:5, terse", ["distractors:5", "terse:8"]),
        ("terse:0,shuffle,paraphrase", ["terse:0", "shuffle", "paraphrase"]),
    ],
)
def test_a_perturb_value_is_read_into_kinds(spec, parsed):
    assert [str(k) for k in parse_kinds(spec)] == parsed


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("scramble", "unknown kind 'scramble'"),
        ("distractors", "say how many distractors"),
        ("distractors:0", "at least 1"),
        ("terse:x", "whole number"),
        ("rename:2", "takes no number"),
        ("rename,rename", "given twice"),
        ("", "unknown kind ''"),
    ],
)
def test_a_bad_perturb_value_is_refused_with_the_kinds(spec, says):
    with pytest.raises(ConfigError, match=re.escape(says)):
        parse_kinds(spec)


# ---------------------------------------------------------------------------------------------- rename
def test_rename_changes_every_name_and_the_gold_follows():
    base = _shop()
    session = perturb_suite(base, "rename", seed=1).sessions[0]
    record = perturbation_of(session)
    assert record is not None and record.rename is not None
    names = record.rename.tools
    assert set(names) == {"get_stock", "list_items", "restock"}
    assert all(re.fullmatch(r"tool_[0-9a-f]{6,}", n) for n in names.values())
    assert [t.name for t in session.tools] == [names[t.name] for t in base.sessions[0].tools]
    first, second = session.tasks
    call = first.gold[0]
    item = record.rename.parameters["get_stock"]["item_name"]
    assert call.name == names["get_stock"] and call.action.arguments == {item: "coffee"}
    assert session.tools[0].required == [item]
    ask = second.gold[0].action.arguments["tool_list"][0]
    assert ask == {
        "tool_name": names["restock"],
        "missing_required_parameters": [record.rename.parameters["restock"]["units"]],
    }
    # identifier-like names are replaced in every text; a name that is an English word stays a word in a sentence
    assert call.observation["result"]["hint"] == f"restock soon; see {names['list_items']}"
    assert second.utterance == f"Please restock the coffee ({names['get_stock']} said it is low)."
    assert session.tools[0].description == (
        f"How many units of an item are in stock. Call {names['list_items']} first when unsure."
    )
    assert session.tools[0].properties[item]["description"] == f"the item; see {names['list_items']} for names"
    # descriptions are kept otherwise, values and expected answers untouched
    assert session.tools[2].description == "Add units of an item to the stock."
    assert second.gold[1].action.arguments[record.rename.parameters["restock"]["units"]] == 6
    assert second.gold[2].observation == "Done, 10 now."


def test_rename_leaves_no_identifier_like_original_name_in_a_published_session(fixture_suite):
    perturbed = perturb_suite(fixture_suite, "rename", seed=0)
    for before, after in zip(fixture_suite.sessions, perturbed.sessions, strict=True):
        text = _text_without_record(after)
        for tool in before.tools:
            assert identifier_like(tool.name)
            assert not re.search(rf"(?<![A-Za-z0-9_]){re.escape(tool.name)}(?![A-Za-z0-9_])", text), tool.name
        # the other-language gold DAGs (kept for the progress metric) follow too
        raw_names = {n["action"]["name"] for dag in after.extra["answer_list"] for n in dag}
        assert raw_names <= {t.name for t in after.tools} | {"prepare_to_answer", "ask_user_for_required_parameters"}


def test_rename_keeps_the_write_tools_under_their_new_names():
    session = perturb_suite(_shop(), "rename", seed=0).sessions[0]
    rename = perturbation_of(session).rename
    assert session.extra["write_tools"] == [rename.tool("restock")]


def test_renamed_error_messages_name_the_new_parameters():
    rename = Rename(
        tools={"get_stock": "tool_aa"}, parameters={"get_stock": {"item_name": "arg_01", "units": "arg_02"}}
    )
    observed = {"ok": False, "error": {"kind": "invalid_arguments", "message": "item_name: Field required; units: x"}}
    assert rename.observation(observed, "get_stock")["error"]["message"] == "arg_01: Field required; arg_02: x"
    # an English word that is also a parameter is left alone in a sentence
    plain = Rename(tools={"restock": "tool_bb"}, parameters={"restock": {"units": "arg_03"}})
    said = {"ok": False, "error": {"kind": "precondition_failed", "message": "only 3 units of tea in stock"}}
    assert plain.observation(said, "restock") == said


# ---------------------------------------------------------------------------------------------- the other kinds
def test_terse_cuts_descriptions_and_keeps_a_parameter_named_description():
    suite = _shop()
    suite.sessions[0].tools.append(
        _tool("add_note", {"description": {"type": "string", "description": "the note's text"}}, "Add a note. Long.")
    )
    session = perturb_suite(suite, "terse:3", seed=0).sessions[0]
    by_name = {t.name: t for t in session.tools}
    assert by_name["get_stock"].description == "How many units"
    assert by_name["add_note"].description == "Add a note."
    assert by_name["add_note"].properties == {"description": {"type": "string"}}
    assert all("description" not in schema for t in session.tools for schema in t.properties.values())
    removed = perturb_suite(_shop(), "terse:0", seed=0).sessions[0]
    assert all(t.description == "" for t in removed.tools)


def test_shuffle_reorders_tools_and_parameters_and_keeps_them_all(fixture_suite):
    perturbed = perturb_suite(fixture_suite, "shuffle", seed=3)
    moved = 0
    for before, after in zip(fixture_suite.sessions, perturbed.sessions, strict=True):
        assert sorted(t.name for t in after.tools) == sorted(t.name for t in before.tools)
        moved += [t.name for t in after.tools] != [t.name for t in before.tools]
        for tool in after.tools:
            original = before.tool(tool.name)
            assert tool.properties == original.properties and sorted(tool.required) == sorted(original.required)
    assert moved >= 3


def test_distractors_come_from_other_sessions_and_the_pool_then_near_synonyms(fixture_suite):
    pool = [_tool("get_stock", {"item": {"type": "string"}}, "Stock of an item.")]
    perturbed = perturb_suite(fixture_suite, "distractors:4", seed=0, pool=pool)
    everyone = {t.name for s in fixture_suite.sessions for t in s.tools} | {"get_stock"}
    for before, after in zip(fixture_suite.sessions, perturbed.sessions, strict=True):
        added = perturbation_of(after).distractors
        assert len(added) == 4 and len(set(added)) == 4
        assert [t.name for t in after.tools] == [t.name for t in before.tools] + added
        assert set(added) <= everyone - {t.name for t in before.tools}
    # a pool too small for N: deprecated look-alikes of the gold tools fill the rest, never a name in use
    short = perturb_suite(_shop(), "distractors:2", seed=0).sessions[0]
    added = [t for t in short.tools if t.name in perturbation_of(short).distractors]
    assert [t.name for t in added] == ["fetch_stock", "replenish"]
    assert all(t.description.startswith("Deprecated: an older version of") for t in added)


@pytest.mark.parametrize("kinds", KINDS)
def test_the_oracle_still_scores_100_percent_in_both_modes(fixture_suite, kinds):
    _oracle_is_perfect(perturb_suite(_shop(), kinds, seed=5))
    _oracle_is_perfect(perturb_suite(fixture_suite, kinds, seed=5))


# ---------------------------------------------------------------------------------------------- determinism, record
@pytest.mark.parametrize("kinds", KINDS)
def test_the_same_seed_gives_the_same_suite_and_another_seed_another(fixture_suite, kinds):
    one = perturb_suite(fixture_suite, kinds, seed=7)
    again = perturb_suite(fixture_suite.model_copy(deep=True), kinds, seed=7)
    assert one.model_dump(mode="json") == again.model_dump(mode="json")
    other = perturb_suite(fixture_suite, kinds, seed=8)
    if not kinds.startswith("terse"):  # terse draws nothing: every seed cuts alike
        assert other.fingerprint() != one.fingerprint()


def test_every_session_records_the_base_the_kinds_and_the_seed(fixture_suite):
    perturbed = perturb_suite(fixture_suite, "rename,terse:4", seed=2)
    record = suite_perturbation(perturbed)
    assert (record.base, record.kinds, record.seed) == (fixture_suite.fingerprint(), ["rename", "terse:4"], 2)
    assert perturbed.name == f"{fixture_suite.name}+rename,terse:4"
    assert fixture_suite.fingerprint() != perturbed.fingerprint()
    assert suite_perturbation(fixture_suite) is None
    with pytest.raises(ConfigError, match="already perturbed"):
        perturb_suite(perturbed, "shuffle")


def test_mixed_or_broken_records_are_data_errors(fixture_suite):
    perturbed = perturb_suite(fixture_suite, "shuffle", seed=0)
    mixed = perturbed.model_copy(update={"sessions": [perturbed.sessions[0], fixture_suite.sessions[1]]})
    with pytest.raises(DataError, match="perturbed differently"):
        suite_perturbation(mixed)
    broken = perturbed.sessions[0].model_copy(update={"extra": {PERTURBATION: {"kinds": "x"}}})
    with pytest.raises(DataError, match="not a perturbation record"):
        perturbation_of(broken)


def test_paraphrase_needs_a_model():
    with pytest.raises(ConfigError, match="needs a model"):
        perturb_suite(_shop(), "rename,paraphrase")
