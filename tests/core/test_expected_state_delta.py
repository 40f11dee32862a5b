"""Expected states stored as a digest and a change (issue #34): exact checks, exact rebuilds, old files as before."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolwild.core.formats.wtb import load_wtb_suite, session_to_wtb, write_wtb_suite
from toolwild.core.session import Session, Suite
from toolwild.core.state_change import apply_change, change_problem, expectation, expected_state_at, state_change
from toolwild.core.task import Task, TaskType, answer_node
from toolwild.core.trajectory import state_digest
from toolwild.errors import DataError


def _task(**expected) -> Task:
    return Task(utterance="Hi.", type=TaskType.CHAT, gold=[answer_node([], "Hello.")], **expected)


def _txn(i: int, amount: str = "10.00") -> dict:
    return {"id": f"txn-{i:04d}", "date": f"2024-01-{i % 28 + 1:02d}", "postings": [{"amount": amount}]}


# ---------------------------------------------------------------------------------------------- changes
def test_one_transaction_inserted_into_a_sorted_ledger_is_stored_alone():
    before = {"ledger": [_txn(i) for i in range(200)]}
    after = {"ledger": [*before["ledger"][:57], _txn(999, "42.17"), *before["ledger"][57:]]}
    frozen = json.dumps(before)
    change = state_change(before, after)
    assert change == {"keys": {"ledger": {"splice": [[57, 0, [_txn(999, "42.17")]]]}}}
    assert apply_change(before, change) == after
    assert json.dumps(before) == frozen  # neither input is changed


def test_amend_and_delete_are_splices_of_the_list_before():
    ledger = [_txn(i) for i in range(10)]
    after = [*ledger[:3], _txn(3, "11.00"), *ledger[4:7], *ledger[8:]]
    change = state_change({"ledger": ledger}, {"ledger": after})
    assert change["keys"]["ledger"]["splice"] == [[3, 1, [_txn(3, "11.00")]], [7, 1, []]]
    assert apply_change({"ledger": ledger}, change) == {"ledger": after}


def test_dicts_of_dicts_and_scalars_use_the_same_form():
    before = {"stock": {"tea": 4, "jam": 2}, "orders": [], "open": True}
    after = {"stock": {"tea": 7, "honey": 1}, "orders": [{"item": "tea", "n": 3}], "note": "x"}
    change = state_change(before, after)
    assert change == {
        "keys": {
            "stock": {"keys": {"tea": {"set": 7}, "honey": {"set": 1}}, "drop": ["jam"]},
            "orders": {"splice": [[0, 0, [{"item": "tea", "n": 3}]]]},
            "note": {"set": "x"},
        },
        "drop": ["open"],
    }
    assert apply_change(before, change) == after
    assert state_change(3, 4) == {"set": 4} and apply_change(3, {"set": 4}) == 4
    assert state_change(before, json.loads(json.dumps(before))) == {}


def test_values_python_takes_for_equal_but_the_digest_does_not_are_changes():
    before = {"stock": {"tea": 1}, "ledger": [{"n": 1}, {"n": 2}]}
    after = {"stock": {"tea": 1.0}, "ledger": [{"n": True}, {"n": 2}]}
    change = state_change(before, after)
    assert change and state_digest(apply_change(before, change)) == state_digest(after)


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.sampled_from([0.5, 1.0, -0.0]) | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=2), inner, max_size=4),
    max_leaves=25,
)


@settings(max_examples=300, deadline=None)
@given(_json, _json)
def test_any_change_rebuilds_the_state_it_was_made_from(before, after):
    change = state_change(before, after)
    assert change_problem(change) is None
    assert state_digest(apply_change(before, change)) == state_digest(after)
    assert json.loads(json.dumps(change)) == change  # plain JSON, as a suite stores it


def test_malformed_changes_are_named():
    assert change_problem({"set": 1, "splice": []}) is not None
    assert change_problem({"splice": [[3, 1, []], [2, 0, []]]}) is not None
    assert change_problem({"splice": [[0, -1, []]]}) is not None
    assert (
        change_problem({"keys": {"a": {"swap": 1}}})
        == "the change.keys.a has keys ['swap'], not one of set / keys and drop / splice"
    )
    assert change_problem([]) is not None and change_problem({}) is None
    with pytest.raises(ValueError, match="does not fit"):
        apply_change([1, 2], {"splice": [[2, 1, []]]})


# ---------------------------------------------------------------------------------------------- tasks and suites
def _session(states: list[dict], start: dict) -> Session:
    tasks, before = [], start
    for state in states:
        tasks.append(_task(**expectation(before, state)))
        before = state
    return Session(id="s1", env_info="2024-05-01", tools=[], tasks=tasks, environment="inventory")


def test_the_chain_rebuilds_every_task_from_the_start_state():
    start = {"stock": {"tea": 1}}
    states = [{"stock": {"tea": 1}}, {"stock": {"tea": 4}}, {"stock": {"tea": 4, "jam": 2}}]
    session = _session(states, start)
    assert session.tasks[0].expected_state_change == {}
    for i, state in enumerate(states):
        assert session.tasks[i].expected_digest == state_digest(state)
        assert expected_state_at(session.tasks, i, start) == state
    # a whole state (as old files hold) is taken as it is; a digest alone checks but cannot be rebuilt
    session.tasks[1] = _task(expected_state={"stock": {"tea": 4}})
    assert expected_state_at(session.tasks, 2, start) == states[2]
    session.tasks[0] = session.tasks[0].model_copy(update={"expected_state_change": None})
    assert expected_state_at(session.tasks, 0, start) is None and session.tasks[0].checks_state
    assert expected_state_at(session.tasks, 2, start) == states[2]
    assert expected_state_at(session.tasks, 1, {"other": []}) == states[1]
    assert expected_state_at([_task()], 0, start) is None


def test_a_task_without_the_new_fields_dumps_as_before():
    """The suite fingerprint a run records is the sessions' dump: a suite without digests keeps its fingerprint."""
    assert set(_task(expected_state={"a": 1}).model_dump(mode="json")) == {
        "utterance",
        "type",
        "subtype",
        "gold",
        "expected_state",
    }
    with pytest.raises(ValueError, match="without expected_state_digest"):
        _task(expected_state_change={})


def test_round_trip_keeps_the_suite(tmp_path):
    start = {"stock": {"tea": 1}}
    session = _session([{"stock": {"tea": 3}}, {"stock": {"tea": 3}}, {"stock": {}}], start)
    first = tmp_path / "a.jsonl"
    write_wtb_suite(Suite(name="a", sessions=[session]), first)
    record = json.loads(first.read_text())
    assert "expected_states" not in record
    assert record["expected_state_digests"] == [t.expected_state_digest for t in session.tasks]
    assert record["expected_state_changes"][1] == {}
    loaded, _ = load_wtb_suite(first)
    assert loaded.sessions[0].tasks == session.tasks
    second = tmp_path / "b.jsonl"
    write_wtb_suite(loaded, second)
    assert second.read_bytes() == first.read_bytes()
    assert load_wtb_suite(second)[0].fingerprint() == loaded.fingerprint()


def test_old_files_with_whole_states_load_and_write_as_before(tmp_path):
    old = tmp_path / "old.jsonl"
    session = Session(
        id="s1",
        env_info="2024-05-01",
        tools=[],
        tasks=[_task(expected_state={"stock": {"tea": i}}) for i in range(2)],
        environment="inventory",
    )
    write_wtb_suite(Suite(name="old", sessions=[session]), old)
    record = json.loads(old.read_text())
    assert record["expected_states"] == [{"stock": {"tea": 0}}, {"stock": {"tea": 1}}]
    assert not {"expected_state_digests", "expected_state_changes"} & set(record)
    loaded, _ = load_wtb_suite(old)
    assert [t.expected_digest for t in loaded.sessions[0].tasks] == [
        state_digest({"stock": {"tea": i}}) for i in (0, 1)
    ]
    again = tmp_path / "again.jsonl"
    write_wtb_suite(loaded, again)
    assert again.read_bytes() == old.read_bytes()


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("expected_state_digests", ["abc", None], "SHA-256"),
        ("expected_state_digests", ["0" * 64], "per task"),
        ("expected_state_changes", [{}, None], "without the digest"),
        ("expected_state_changes", [{"splice": 3}, None], "splice is not a list"),
    ],
)
def test_bad_expected_fields_are_named(tmp_path, key, value, message):
    record = session_to_wtb(Session(id="s1", env_info="d", tools=[], tasks=[_task(), _task()], environment="inventory"))
    if key == "expected_state_changes" and "without" not in message:
        record["expected_state_digests"] = ["0" * 64, None]
    record[key] = value
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(record) + "\n")
    with pytest.raises(DataError, match=message) as caught:
        load_wtb_suite(path)
    assert key in str(caught.value)
