"""Quality figures on a hand-made suite whose every number is known: distinct turns, distinct-n, answers that pass
the answer check, ambiguous references, copied description spans and value-backed labels."""

from __future__ import annotations

from typing import Any

import pytest

from toolwild.core.quality import QualityCounter, distinct_key, suite_quality, user_turns, words
from toolwild.core.session import Session, Suite
from toolwild.core.task import ANSWER_ACTION, Action, GoldNode, Task, TaskType, TurnSubtype, ask_node
from toolwild.core.tool import Tool

RESTOCK = Tool(
    name="restock",
    description="Add units of an item to the stock and return the new stock level.",
    parameters={
        "type": "object",
        "properties": {"item": {"type": "string"}, "units": {"type": "integer"}},
        "required": ["item", "units"],
    },
)


def restock(utterance: str, item: str, units: int, level: int, answer: Any, subtype: TurnSubtype) -> Task:
    return Task(
        utterance=utterance,
        type=TaskType.SINGLE,
        subtype=subtype,
        gold=[
            GoldNode(
                idx=0,
                action=Action(name="restock", arguments={"item": item, "units": units}),
                observation={"ok": True, "result": {"item": item, "units": level}},
            ),
            GoldNode(idx=1, action=Action(name=ANSWER_ACTION), observation=answer, dependency_list=[0]),
        ],
    )


def chat(utterance: str, answer: str, subtype: TurnSubtype) -> Task:
    return Task(
        utterance=utterance,
        type=TaskType.CHAT,
        subtype=subtype,
        gold=[GoldNode(idx=0, action=Action(name=ANSWER_ACTION), observation=answer)],
    )


def session(sid: str, *tasks: Task) -> Session:
    return Session(id=sid, env_info="2024-07-01 10:00:00 Monday", tools=[RESTOCK], tasks=list(tasks))


def hand_made() -> Suite:
    """Two sessions, four utterances (one a duplicate up to case and spaces), three tool tasks (one answering with
    JSON), one ambiguous reference (the issue's session 0: restock 3 units, the tool answers 19, "the same units as
    just now" means 19), one user turn copying the tool description, one coreferential label the values do not
    bear out."""
    first = session(
        "s0",
        restock("Restock apple by 3 units.", "apple", 3, 19, "Done: apple is now at 19 units.", TurnSubtype.FIRST),
        restock(
            "Go ahead and restock for item sugar and the same units as just now",
            "sugar",
            19,
            40,
            '{"item": "sugar", "units": 40}',
            TurnSubtype.COREFERENTIAL,
        ),
    )
    second = session(
        "s1",
        restock("restock  APPLE by 3   units.", "apple", 3, 22, "Done: apple is now at 22 units.", TurnSubtype.FIRST),
        chat("Thanks, please add units of an item to the stock later.", "Sure.", TurnSubtype.COREFERENTIAL),
    )
    return Suite(name="hand", sessions=[first, second])


def test_distinct_user_turns_ignore_case_and_spacing():
    quality = suite_quality(hand_made())
    assert distinct_key(" Restock  APPLE\tby 3 ") == "restock apple by 3"
    assert (quality.user_turns.count, quality.user_turns.distinct, quality.user_turns.share) == (4, 3, 0.75)
    assert (quality.sessions, quality.tasks) == (2, 4)


def test_replies_to_asks_are_user_turns():
    ask = ask_node(0, "restock", ["units"], "How many units?", "3 units", [])
    call = GoldNode(
        idx=1, action=Action(name="restock", arguments={"item": "tea", "units": 3}), observation={"ok": True}
    )
    answer = GoldNode(idx=2, action=Action(name=ANSWER_ACTION), observation="Done.", dependency_list=[1])
    clarify = Task(
        utterance="Restock tea.",
        type=TaskType.CLARIFY,
        gold=[ask, call.model_copy(update={"dependency_list": [0]}), answer],
    )
    assert user_turns(clarify) == ["Restock tea.", "3 units"]
    quality = suite_quality([session("c", clarify, chat("3 UNITS", "Fine.", TurnSubtype.PARTIAL))])
    assert (quality.user_turns.count, quality.user_turns.distinct) == (3, 2)


def test_distinct_n_counts_word_ngrams_across_the_suite():
    suite = [
        session("a", chat("Check the stock!", "ok", TurnSubtype.FIRST)),
        session("b", chat("check THE price", "ok", TurnSubtype.FIRST)),
    ]
    quality = suite_quality(suite)
    # bigrams: check the, the stock, check the, the price -> 3 of 4; trigrams: 2 of 2
    assert (quality.distinct_2.count, quality.distinct_2.distinct, quality.distinct_2.share) == (4, 3, 0.75)
    assert (quality.distinct_3.count, quality.distinct_3.distinct, quality.distinct_3.share) == (2, 2, 1.0)
    assert words("Don't book 1,250.00 twice.") == ["don't", "book", "1,250.00", "twice"]


def test_ambiguity_counts_checker_findings_and_generation_drops():
    quality = suite_quality(hand_made(), drops={"ambiguous_reference": 7, "duplicate_call": 3})
    assert quality.ambiguity.generation_drops == 7
    assert (quality.ambiguity.findings, quality.ambiguity.tasks) == (1, 1)
    example = quality.ambiguity.examples[0]
    assert (example.session, example.task) == ("s0", 1) and "19" in example.why[0]
    assert suite_quality(hand_made()).ambiguity.generation_drops is None  # a suite read from a file: unknown


def test_value_backed_labels_per_subtype():
    quality = suite_quality(hand_made())
    backing = {label: (b.labels, b.value_backed) for label, b in quality.subtypes.items()}
    # s0 task 1 needs 19, which task 0 showed; s1 task 1 needs nothing from before
    assert backing == {"First Turn": (2, 2), "Coreferential Reference": (2, 1)}


def test_answers_with_json_fail_the_answer_check():
    quality = suite_quality(hand_made())
    answers = quality.answers
    assert (answers.tool_tasks, answers.passing) == (3, 2)
    assert answers.share == pytest.approx(0.6667)
    [failure] = answers.failures
    assert (failure.session, failure.task) == ("s0", 1) and failure.text.startswith("{")


def test_user_turns_copying_a_tool_description_are_counted():
    spans = suite_quality(hand_made()).copied_description_spans
    assert spans.turns == 1
    assert (spans.examples[0].session, spans.examples[0].task) == ("s1", 1)


def test_the_counter_streams_and_gives_the_same_figures():
    suite = hand_made()
    counter = QualityCounter()
    for s in suite.sessions:
        counter.add(s)
    first = counter.result(drops={"ambiguous_reference": 2})
    assert counter.result(drops={"ambiguous_reference": 2}) == first  # result() does not consume the counts
    assert suite_quality(iter(suite.sessions), drops={"ambiguous_reference": 2}) == first
    counter.add(suite.sessions[0])
    assert counter.result().user_turns.count == first.user_turns.count + 2


def test_an_empty_suite_has_no_shares():
    quality = suite_quality([])
    assert quality.user_turns.share is None and quality.answers.share is None and quality.subtypes == {}


def test_checks_worked_out_elsewhere_count_the_same():
    """A session's gold checks worked out where it was made (a worker) and sent with it as JSON give the counts
    running them here gives; a record of another form, or of another session's length, is not used."""
    import json

    from toolwild.core.quality import session_checks

    suite = hand_made()
    here, sent = QualityCounter(), QualityCounter()
    for s in suite.sessions:
        here.add(s)
        checks = json.loads(json.dumps(session_checks(Session.model_validate(s.model_dump(mode="json")))))
        sent.add(s, checks=checks)
    assert sent.result() == here.result()
    # the hand-made suite has a finding of each kind, so every part of the record is used
    assert session_checks(suite.sessions[0])["ambiguity"] and session_checks(suite.sessions[0])["answers"]["1"]
    assert session_checks(suite.sessions[1])["labels"] == [1]
    # a record that does not fit is not used: the checks run again
    wrong = QualityCounter()
    for s in suite.sessions:
        wrong.add(s, checks={**session_checks(s), "labels": [], "ambiguity": [], "answers": {}, "version": 0})
    assert wrong.result() == here.result()
    other = QualityCounter()
    lying = {**session_checks(suite.sessions[0]), "tasks": 5, "labels": [], "ambiguity": [], "answers": {}}
    other.add(suite.sessions[0], checks=lying)
    other.add(suite.sessions[1])
    assert other.result() == here.result()
    # and a record that fits is what is counted (not worked out again)
    used = QualityCounter()
    used.add(suite.sessions[0], checks={**session_checks(suite.sessions[0]), "ambiguity": []})
    assert used.result().ambiguity.findings == 0
