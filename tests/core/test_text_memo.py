"""Answers about a text kept per text (issue #34): ``states`` and ``mentions`` answer a question asked before from
what they kept, with the answer they gave the first time; a question about another text, value or context is
worked out; and what is kept is bounded."""

from __future__ import annotations

from toolwild.core import hidden_intent
from toolwild.core.hidden_intent import TextMemo, mentions, states

CONTEXT = "2024-04-18 11:28:51 Thursday\nLedger accounts: Assets:Bank:Checking, Expenses:Food:Groceries, Expenses:Rent"


def test_a_kept_answer_is_the_answer_and_is_not_worked_out_again():
    memo = TextMemo(size=4)
    calls: list[str] = []

    def work(answer: bool) -> bool:
        calls.append("x")
        return answer

    assert memo.answer("some text", 25, lambda: work(True)) is True
    assert memo.answer("some text", 25, lambda: work(False)) is True  # kept: not worked out again
    assert calls == ["x"]
    assert memo.answer("some text", 25.5, lambda: work(False)) is False  # another value
    assert memo.answer("other text", 25, lambda: work(False)) is False  # another text
    assert memo.answer("some text", "25", lambda: work(False)) is False  # another type is another value
    assert len(calls) == 4


def test_unhashable_values_are_worked_out_each_time():
    memo = TextMemo(size=4)
    calls: list[int] = []
    for _ in range(2):
        assert memo.answer("t", ["a"], lambda: calls.append(1) or True) is True
    assert calls == [1, 1]


def test_what_is_kept_is_bounded():
    memo = TextMemo(size=3, per_text=5)
    for i in range(10):
        memo.answer(f"text {i}", 1, lambda: True)
    assert len(memo) == 3
    calls: list[int] = []
    memo.answer("text 0", 1, lambda: calls.append(1) or True)  # dropped: worked out again
    memo.answer("text 9", 1, lambda: calls.append(1) or True)  # recent: kept
    assert calls == [1]
    for v in range(12):  # a text's answers are bounded too
        memo.answer("text 9", v, lambda: True)
    assert len(memo._texts["text 9"]) <= 5


def test_states_and_mentions_give_the_same_answers_kept_or_not():
    hidden_intent._STATES.clear()
    hidden_intent._MENTIONS.clear()
    cases = [
        ("I spent 42.10 at the shop", 42.1, ""),
        ("I spent 42.10 at the shop", "42.10", ""),
        ("on 2024-07-25 I paid", 25, ""),
        ("my checking balance please", "Assets:Bank:Checking", CONTEXT),
        ("my checking balance please", "Assets:Bank:Checking", ""),
        ("how much on groceries today?", "2024-04-18", CONTEXT),
        ("how much on groceries today?", "2024-04-17", CONTEXT),
        ("the rent of march", "Expenses:Rent", CONTEXT),
        ("Salary came in: $13,000.00", 13000, ""),
    ]
    first = [states(t, v, c) for t, v, c in cases]
    assert first == [hidden_intent._states(t, v, c) for t, v, c in cases]  # the uncached check
    assert first == [True, True, False, True, False, True, False, True, True]
    assert [states(t, v, c) for t, v, c in cases] == first  # kept
    assert [mentions(t, v) for t, v, _ in cases] == [hidden_intent._mentions(t, v) for t, v, _ in cases]
    assert len(hidden_intent._STATES) == len({(t, c) for t, _, c in cases})


def test_contexts_alike_in_date_and_names_share_answers_and_others_do_not():
    hidden_intent._STATES.clear()
    building = "2024-04-18\nLedger accounts: Assets:Bank:Checking, Expenses:Food:Groceries, Expenses:Rent"
    assert states("my checking balance", "Assets:Bank:Checking", building)
    assert len(hidden_intent._STATES) == 1
    assert states("my checking balance", "Assets:Bank:Checking", CONTEXT)  # the clock and weekday read nothing
    assert len(hidden_intent._STATES) == 1
    # another day, or another chart, is another question
    assert not states("what did I spend today?", "2024-04-18", CONTEXT.replace("2024-04-18", "2024-04-19"))
    assert states("what did I spend today?", "2024-04-18", CONTEXT)
    other_chart = CONTEXT.replace("Assets:Bank:Checking", "Assets:Bank:Checking, Assets:Broker:Checking")
    assert not states("my checking balance", "Assets:Bank:Checking", other_chart)  # two checking accounts
    assert len(hidden_intent._STATES) == 4
