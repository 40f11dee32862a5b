"""Issue #29: how the checkers read the wild behaviours: picks from a list, a date given in parts, a fragment after
an aside, and the per-task record of behaviours."""

from __future__ import annotations

import pytest

from toolwild.core.hidden_intent import carries_request, states
from toolwild.core.references import ambiguous_references, picked
from toolwild.core.session import Session
from toolwild.core.task import Action, GoldNode, Task, TaskType, TurnSubtype, answer_node
from toolwild.core.tool import Tool
from toolwild.core.wild import WILD_KEY, Wild, wild_behaviours
from toolwild.errors import DataError

FIND = Tool(
    name="find_transactions",
    description="Transactions of a payee.",
    parameters={"type": "object", "properties": {"payee": {"type": "string"}}, "required": ["payee"]},
)
AMEND = Tool(
    name="amend_transaction",
    description="Change a transaction.",
    parameters={
        "type": "object",
        "properties": {"transaction_id": {"type": "string"}, "amount": {"type": "number"}},
        "required": ["transaction_id"],
    },
)
BALANCE = Tool(
    name="get_balance",
    description="An account's balance.",
    parameters={
        "type": "object",
        "properties": {"account": {"type": "string"}, "date": {"type": "string"}},
        "required": ["account"],
    },
)
CONTEXT = "2024-04-10 10:00:00 Wednesday\nLedger accounts: Assets:Bank:Checking, Assets:Bank:Savings"


def _task(utterance: str, calls: list[tuple[str, dict, object]], subtype: TurnSubtype) -> Task:
    nodes = [
        GoldNode(idx=i, action=Action(name=name, arguments=args), observation={"ok": True, "result": result})
        for i, (name, args, result) in enumerate(calls)
    ]
    nodes.append(answer_node(nodes, "Done."))
    kind = TaskType.SINGLE if len(calls) == 1 else TaskType.PARALLEL
    return Task(utterance=utterance, type=kind, subtype=subtype, gold=nodes)


def _found() -> Task:
    rows = [{"id": f"txn-000{k}", "payee": "Uber", "amount": f"{10 + k}.50"} for k in (1, 2, 3)]
    return _task(
        "Show me my Uber rides.", [("find_transactions", {"payee": "Uber"}, {"transactions": rows})], TurnSubtype.FIRST
    )


def _amend(utterance: str, txn: str) -> Task:
    call = ("amend_transaction", {"transaction_id": txn, "amount": 45.1}, {"id": txn})
    return _task(utterance, [call], TurnSubtype.COREFERENTIAL)


def _session(*tasks: Task) -> Session:
    return Session(id="s", env_info=CONTEXT, tools=[FIND, AMEND, BALANCE], tasks=list(tasks))


@pytest.mark.parametrize(
    ("words", "txn"),
    [
        ("The second one among those three should be 45.10.", "txn-0002"),
        ("The first of those is wrong: make it 45.10.", "txn-0001"),
        ("Of those three, the last is off. It should be 45.10.", "txn-0003"),
    ],
)
def test_an_ordinal_pick_names_the_element_of_the_list_the_tool_returned(words, txn):
    assert ambiguous_references(_session(_found(), _amend(words, txn))) == []
    wrong = "txn-0001" if txn != "txn-0001" else "txn-0002"
    findings = ambiguous_references(_session(_found(), _amend(words, wrong)))
    assert len(findings) == 1 and "the gold uses" in findings[0].message


def test_a_reference_to_a_list_without_a_pick_stays_ambiguous():
    findings = ambiguous_references(_session(_found(), _amend("One of those should be 45.10.", "txn-0002")))
    assert len(findings) == 1 and "3 distinct values" in findings[0].message


def _two_balances() -> Task:
    calls = [
        ("get_balance", {"account": "Assets:Bank:Checking"}, {"balances": {"USD": "2100.00"}}),
        ("get_balance", {"account": "Assets:Bank:Savings"}, {"balances": {"USD": "5300.00"}}),
    ]
    return _task("What are checking and savings at?", calls, TurnSubtype.FIRST)


def _as_of(words: str, account: str) -> Task:
    call = ("get_balance", {"account": account, "date": "2024-03-31"}, {"balances": {"USD": "1.00"}})
    return _task(words, [call], TurnSubtype.COREFERENTIAL)


@pytest.mark.parametrize(
    ("words", "account"),
    [
        ("The bigger of the two: where was it at the end of March?", "Assets:Bank:Savings"),
        ("And the one with less in it, what about the end of March?", "Assets:Bank:Checking"),
        ("The second one I mentioned: where did it stand at the end of March?", "Assets:Bank:Savings"),
        ("The first of the two, please: what was it at the end of March?", "Assets:Bank:Checking"),
    ],
)
def test_a_size_or_mention_order_pick_names_one_of_two_calls(words, account):
    assert ambiguous_references(_session(_two_balances(), _as_of(words, account))) == []
    other = "Assets:Bank:Checking" if account.endswith("Savings") else "Assets:Bank:Savings"
    assert ambiguous_references(_session(_two_balances(), _as_of(words, other)))


def test_picked_is_empty_when_the_words_pick_nothing():
    pool_task = _two_balances()
    from toolwild.core.references import candidates

    pool = candidates(pool_task, 0, {"get_balance": BALANCE})
    assert picked(pool, "What was it at the end of March?") == []
    assert picked(pool, "the first thing I asked") == []  # "first" of a marker phrase is no pick


def test_a_date_given_in_parts_is_stated_by_its_ordinal_day_and_its_month():
    assert states("It says the 14th, but the month is smudged.\nFound it: March.", "2024-03-14", CONTEXT)
    assert not states("It says the 14th, but the month is smudged.", "2024-03-14", CONTEXT)
    assert not states("Found it: March.", "2024-03-14", CONTEXT)
    assert not states("the 13th ... March", "2024-03-14", CONTEXT)


def test_a_fragment_after_an_aside_still_carries_the_request():
    before = _task("What's in checking?", [("get_balance", {"account": "Assets:Bank:Checking"}, {})], TurnSubtype.FIRST)
    after = _task(
        "The landlord wants the deposit soon. And savings?",
        [("get_balance", {"account": "Assets:Bank:Savings"}, {})],
        TurnSubtype.PARTIAL,
    )
    assert carries_request(after, [before])
    long = after.model_copy(update={"utterance": "And savings, and then tell me all about my other accounts please?"})
    assert not carries_request(long, [before])


def test_the_wild_record_is_read_per_task_and_a_bad_one_names_the_session():
    assert wild_behaviours({}, 2) == [[], []]
    assert wild_behaviours({WILD_KEY: [["pick"], []]}, 2) == [[Wild.PICK], []]
    with pytest.raises(DataError, match=r"'s7'.*2 tasks"):
        wild_behaviours({WILD_KEY: [["pick"]]}, 2, session="s7")
    with pytest.raises(DataError, match=r"wild\[1\]"):
        wild_behaviours({WILD_KEY: [[], ["telepathy"]]}, 2, session="s7")
