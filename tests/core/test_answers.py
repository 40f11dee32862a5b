"""The answer check: a gold final answer reports what the results say, without JSON and without invented values."""

from __future__ import annotations

import json

import pytest

from toolwild.core.answers import (
    MAX_ANSWER_CHARS,
    answer_limit,
    answer_problems,
    is_raw_json,
    observation_result,
)

TXN = {
    "id": "txn-0146",
    "transaction": {
        "id": "txn-0146",
        "date": "2024-04-18",
        "payee": "Blue Bottle Coffee",
        "narration": "Coffee",
        "postings": [
            {"account": "Assets:Bank:Checking", "amount": "-6.69", "currency": "USD"},
            {"account": "Expenses:Food:Restaurants", "amount": "6.69", "currency": "USD"},
        ],
    },
}
ORDER = {"order_id": "ord-0001", "item": "flour", "units": 1}
BALANCE = {"account": "Liabilities:CreditCard", "balances": {"USD": "-872.82"}}
SUMMARY = {"category": "Expenses:Shopping", "total": {"USD": "0.00"}, "transactions": 0}


@pytest.mark.parametrize(
    ("answer", "results"),
    [
        (
            "Added txn-0146: Blue Bottle Coffee, $6.69 coffee on 2024-04-18, booked to Expenses:Food:Restaurants and "
            "paid from Assets:Bank:Checking.",
            [TXN],
        ),
        ("I placed the order: the order id is ord-0001, the item is flour and the units are 1.", [ORDER]),
        ("The items are apple, coffee, flour, sugar and tea.", [["apple", "coffee", "flour", "sugar", "tea"]]),
        ("You bought it on April 18, at Blue Bottle Coffee.", [TXN]),
        ("That was on 18 April 2024 (txn-0146).", [TXN]),
        ("You owe $872.82 on the credit card.", [BALANCE]),
        ("You didn't spend anything on shopping in April so far.", [SUMMARY | {"start_date": "2024-04-01"}]),
        ("Your 2024 spending: $6.69 at Blue Bottle Coffee.", [TXN]),
        ("The rate is 19.5% on item A1.", [{"rate": 0.195, "item": "A1"}]),
        ("The total is $1,234.50.", [{"total": 1234.5}]),
        ("It was at 17:12 on Monday, in room B12.", [{"at": "2024-08-19 17:12:45", "room": "B12"}]),
        ("Store O'Brien's has a follow-up for you.", [{"store": "O'Brien's", "note": 3}]),
        ("Done: I restocked.", [None]),
    ],
)
def test_answers_that_report_the_results_pass(answer, results):
    assert answer_problems(answer, results) == []


@pytest.mark.parametrize(
    ("answer", "results", "problem"),
    [
        ('Here is what I got. place order: {"order_id": "ord-0001"}.', [ORDER], "raw JSON: '{'"),
        ('The order is "order_id": ord-0001.', [ORDER], "raw JSON: '\"order_id\":'"),
        ('The items are ["apple", "tea"].', [["apple", "tea"]], "raw JSON: '[\"'"),
        ("You have 9 categories: flour.", [ORDER], "number '9' is not in the results"),
        ("You spent $6.70 at Blue Bottle Coffee.", [TXN], "number '$6.70' is not in the results"),
        ("That was on 2024-04-19 (txn-0146).", [TXN], "date '2024-04-19' is not in the results"),
        ("That was on April 19 (txn-0146).", [TXN], "date 'April 19' is not in the results"),
        ("That was on March 20, 2024 (txn-0146).", [TXN], "date 'March 20, 2024' is not in the results"),
        ("You paid it in March (txn-0146).", [TXN], "month 'March': no date of that month in the results"),
        ("Your order id is ord-0002 for flour.", [ORDER], "identifier 'ord-0002' is not in the results"),
        (
            "Booked to Expenses:Food:Groceries (txn-0146).",
            [TXN],
            "name 'Expenses:Food:Groceries' is not in the results",
        ),
        ("You paid $6.69 at Whole Foods.", [TXN], "name 'Whole' is not in the results"),
        ("All done, thanks for asking.", [ORDER], "reports nothing of call 1's result (say e.g. 'ord-0001')"),
        ("", [ORDER], "empty answer"),
    ],
)
def test_each_rule_names_the_offending_token(answer, results, problem):
    assert problem in answer_problems(answer, results)


def test_numbers_inside_identifiers_are_not_numbers():
    """txn-0146 holds 0146, ord-0001 holds 0001: neither is a number the results must hold."""
    assert answer_problems("Moved txn-0146 and ord-0001.", [{"ids": ["txn-0146", "ord-0001"]}]) == []
    assert answer_problems("Moved txn-0146 and 146 more.", [{"ids": ["txn-0146"]}]) == [
        "number '146' is not in the results"
    ]


def test_earlier_results_back_a_recalled_value_but_need_not_be_reported():
    earlier = [{"amount": "18.09"}]
    answer = "It's now $10.89 instead of $18.09."
    assert answer_problems(answer, [{"amount": "10.89"}], earlier) == []
    assert answer_problems(answer, [{"amount": "10.89"}]) == ["number '$18.09' is not in the results"]


def test_every_call_must_be_reported():
    answer = "I placed the order ord-0001."
    assert answer_problems(answer, [ORDER, {"item": "sugar", "units": 7}]) == [
        "reports nothing of call 2's result (say e.g. 'sugar')"
    ]


def test_recorded_envelopes_and_json_strings_are_read_as_their_results():
    assert observation_result({"ok": True, "result": ORDER}) == ORDER
    assert observation_result("plain") == "plain"
    answer = "I placed the order ord-0001 (flour)."
    assert answer_problems(answer, [{"ok": True, "result": ORDER}]) == []
    assert answer_problems(answer, [json.dumps(ORDER)]) == []


def test_length_is_capped_per_call():
    items = [f"item{i:03d}" for i in range(200)]
    long = "The items are " + ", ".join(items) + "."
    assert len(long) > answer_limit(1)
    assert any(p.startswith("too long") for p in answer_problems(long, [items]))
    assert answer_limit(1) == MAX_ANSWER_CHARS < answer_limit(3)


@pytest.mark.parametrize(
    ("text", "raw"),
    [
        ('{"order_id": "ord-0001"}', True),
        ('["apple", "tea"]', True),
        ("[1, 2, 3]", True),
        ('Here is what I got. place order: {"item": "flour"}.', True),
        ("I placed the order: the order id is ord-0001.", False),
        ("The sizes are [1, 2] and more.", False),
        ("", False),
    ],
)
def test_is_raw_json(text, raw):
    assert is_raw_json(text) is raw
