"""Hidden-intent labels are checked against the values, each subtype passing when the conversation bears it out
and failing when it does not."""

from __future__ import annotations

from typing import Any

from toolwild.core.hidden_intent import check_subtypes, mentions, needed_values
from toolwild.core.session import Session
from toolwild.core.task import ANSWER_ACTION, ASK_ACTION, Action, GoldNode, Task, TaskType, TurnSubtype


def call_task(
    utterance: str, name: str, args: dict[str, Any], result: Any, subtype: TurnSubtype = TurnSubtype.FIRST
) -> Task:
    return Task(
        utterance=utterance,
        type=TaskType.SINGLE,
        subtype=subtype,
        gold=[
            GoldNode(idx=0, action=Action(name=name, arguments=args), observation={"ok": True, "result": result}),
            GoldNode(idx=1, action=Action(name=ANSWER_ACTION), observation="done", dependency_list=[0]),
        ],
    )


def chat_task(utterance: str, answer: str, subtype: TurnSubtype) -> Task:
    return Task(
        utterance=utterance,
        type=TaskType.CHAT,
        subtype=subtype,
        gold=[GoldNode(idx=0, action=Action(name=ANSWER_ACTION), observation=answer)],
    )


def session(*tasks: Task, **extra: Any) -> Session:
    return Session(id="s", env_info="2024-07-01 10:00:00 Monday", tools=[], tasks=list(tasks), extra=extra)


def flagged(s: Session) -> set[int]:
    return {f.task_index for f in check_subtypes(s)}


FIRST = call_task("Find order O-1001 please.", "get_order", {"order_id": "O-1001"}, {"item": "lamp"})
OTHER = call_task("Look up customer C-77.", "get_customer", {"customer_id": "C-77"}, {"name": "Ada"})


def test_mentions_matches_whole_tokens_and_number_spellings():
    assert mentions("cancel O-1001 now", "o-1001")
    assert not mentions("cancel O-10011", "O-1001")
    assert not mentions("on 2024-07-13", 3)
    assert not mentions("on 2024-07-25", "25") and not mentions("order O-1025", 1025)
    assert mentions("savings was at $13,000.00.", "13000.00") and mentions("at $13,000.00", 13000)
    assert mentions("it costs 12.50 dollars", 12.5)
    assert mentions("send 3 units", 3.0)


def test_coreferential_needs_a_value_of_the_previous_task():
    coref = call_task("Cancel that order.", "cancel_order", {"order_id": "O-1001"}, {}, TurnSubtype.COREFERENTIAL)
    assert check_subtypes(session(FIRST, coref)) == []
    # the same label two tasks later: the value is no longer in the previous task
    late = session(FIRST, OTHER, coref)
    assert 2 in flagged(late)
    finding = next(f for f in check_subtypes(late) if f.task_index == 2)
    assert finding.subtype is TurnSubtype.COREFERENTIAL and "in tasks [0]" in finding.message


def test_a_value_stated_in_the_task_itself_is_not_needed_from_context():
    stated = call_task("Cancel order O-1001.", "cancel_order", {"order_id": "O-1001"}, {}, TurnSubtype.COREFERENTIAL)
    assert needed_values(stated) == []
    (finding,) = check_subtypes(session(FIRST, stated))
    assert "none" in finding.message


def test_long_range_needs_a_value_two_back_and_not_in_the_previous_task():
    long = call_task("Cancel my first order.", "cancel_order", {"order_id": "O-1001"}, {}, TurnSubtype.LONG_RANGE)
    assert 2 not in flagged(session(FIRST, OTHER, long))
    # the previous task also shows the value: it is not long-range any more
    again = call_task("Status of O-1001?", "get_status", {"order_id": "O-1001"}, {"status": "open"})
    again = again.model_copy(update={"subtype": TurnSubtype.PARTIAL})
    assert 2 in flagged(session(FIRST, again, long))
    # one task back is not long range either
    assert [f.task_index for f in check_subtypes(session(FIRST, long))] == [1]


def test_partial_information_needs_any_earlier_value():
    partial = call_task("Now with 5 units.", "restock", {"item": "lamp", "units": 5}, {"units": 9}, TurnSubtype.PARTIAL)
    assert 2 not in flagged(session(FIRST, OTHER, partial))  # "lamp" was in task 0's result
    unfounded = call_task("Now with 5 units.", "restock", {"item": "sofa", "units": 5}, {}, TurnSubtype.PARTIAL)
    assert [f.task_index for f in check_subtypes(session(FIRST, unfounded))] == [1]


def test_values_from_the_tasks_own_earlier_calls_and_replies_are_not_needed():
    task = Task(
        utterance="Find the lamp order and cancel it.",
        type=TaskType.CLARIFY,
        subtype=TurnSubtype.COREFERENTIAL,
        gold=[
            GoldNode(
                idx=0,
                action=Action(name=ASK_ACTION, arguments={}),
                observation="Which customer?",
                user_input="C-77.",
            ),
            GoldNode(
                idx=1,
                action=Action(name="cancel_order", arguments={"customer_id": "C-77", "order_id": "O-1001"}),
                observation={"ok": True, "result": {}},
                dependency_list=[0],
            ),
            GoldNode(idx=2, action=Action(name=ANSWER_ACTION), observation="done", dependency_list=[1]),
        ],
    )
    assert needed_values(task) == ["O-1001"]
    assert check_subtypes(session(FIRST, task)) == []


def test_chat_recall_needs_the_answer_to_quote_an_earlier_value():
    recall = chat_task("Which item was that?", "It was the lamp.", TurnSubtype.COREFERENTIAL)
    assert check_subtypes(session(FIRST, recall)) == []
    vague = chat_task("Thanks!", "You're welcome.", TurnSubtype.COREFERENTIAL)
    assert [f.task_index for f in check_subtypes(session(FIRST, vague))] == [1]


def test_named_values_count_only_where_the_users_words_hold_them():
    hello = chat_task("Hi, I'm sorting out item lamp today.", "Happy to help.", TurnSubtype.FIRST)
    recall = chat_task("Which item did I say?", "You said lamp.", TurnSubtype.COREFERENTIAL)
    assert check_subtypes(session(hello, recall, mentioned_values=[["lamp"], []])) == []
    assert len(check_subtypes(session(hello, recall))) == 1  # no note: chat text alone is not a value
    assert len(check_subtypes(session(hello, recall, mentioned_values=[["sofa"], []]))) == 1  # a false note


def test_first_turn_only_at_position_zero():
    later = call_task("Look up customer C-77.", "get_customer", {"customer_id": "C-77"}, {})
    findings = check_subtypes(session(FIRST, later))
    assert [(f.task_index, f.subtype) for f in findings] == [(1, TurnSubtype.FIRST)]
    wrong_first = FIRST.model_copy(update={"subtype": TurnSubtype.COREFERENTIAL})
    assert [f.task_index for f in check_subtypes(session(wrong_first))] == [0]
