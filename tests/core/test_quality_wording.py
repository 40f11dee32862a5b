"""The wording figures of the quality report (issue #29) on hand-made suites whose every number is known: the most
repeated user turn, distinct first four words, distinct chat answers, the near-paraphrase share over utterances (with
an encoder whose vectors the test chooses) and the rate of each wild behaviour the generator records."""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

try:
    import numpy as np
except ImportError:  # a base install: the semantic figures need an encoder, and every encoder needs numpy
    np = None

from toolwild.core.quality import QualityCounter, SimpleEncoder, SuiteQuality, distinct_key, suite_quality
from toolwild.core.session import Session
from toolwild.core.task import ANSWER_ACTION, Action, GoldNode, Task, TaskType, TurnSubtype, ask_node
from toolwild.core.wild import Wild
from toolwild.errors import DataError

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_quality import chat, restock, session

WILD = [w.value for w in Wild]
needs_numpy = pytest.mark.skipif(np is None, reason="numpy is not installed (pip install 'toolwild[dedup]')")


def chats(sid: str, *utterances: str, answer: str = "Sure.") -> Session:
    return session(sid, *(chat(u, answer, TurnSubtype.FIRST) for u in utterances))


def clarify(utterance: str, reply: str) -> Task:
    """A task whose user answers an ask: the reply is a user turn too."""
    ask = ask_node(0, "restock", ["units"], "How many units?", reply, [])
    call = GoldNode(
        idx=1,
        action=Action(name="restock", arguments={"item": "tea", "units": 3}),
        observation={"ok": True},
        dependency_list=[0],
    )
    answer = GoldNode(idx=2, action=Action(name=ANSWER_ACTION), observation="Done.", dependency_list=[1])
    return Task(utterance=utterance, type=TaskType.CLARIFY, gold=[ask, call, answer])


# --- repeated turns ---------------------------------------------------------------------------------------------


def test_the_most_repeated_turn_counts_utterances_and_replies_alike():
    suite = [
        chats("a", "What's my balance?", "Restock tea."),
        session("b", clarify("Restock tea.", "3 units"), chat("WHAT'S my  balance?", "Fine.", TurnSubtype.FIRST)),
        session("c", clarify("what's my balance?", "3 Units"), chat("Anything else?", "No.", TurnSubtype.FIRST)),
    ]
    quality = suite_quality(suite)
    assert (quality.utterances.count, quality.utterances.distinct, quality.utterances.share) == (6, 3, 0.5)
    repeated = quality.repeated_turns
    # "what's my balance?" 3 (two chat utterances, one of a clarify task); "restock tea." 2; "3 units" 2 (replies to
    # asks); "anything else?" once. A turn is shown as it was said when it joined the most repeated (its second time)
    assert (repeated.most, repeated.repeated) == (3, 3)
    shown = [(r.text, r.count) for r in repeated.examples]
    assert shown == [("WHAT'S my balance?", 3), ("3 Units", 2), ("Restock tea.", 2)]


def test_only_the_five_most_repeated_are_kept_and_a_late_climber_joins_them():
    # six turns said twice each, in order t0..t5: the first five reach 2 first and hold the places
    early = [chats(f"e{k}", f"turn {k}", f"turn {k}") for k in range(6)]
    repeated = suite_quality(early).repeated_turns
    assert (repeated.most, repeated.repeated) == (2, 6)
    assert [r.text for r in repeated.examples] == [f"turn {k}" for k in range(5)]  # of equals, the first to 2

    # then t5 is said three more times (5 in all) and t0 once more (3): t5 passes the least and takes the place of
    # the one that joined last (t4), and t0, already kept, climbs
    late = [*early, chats("l", "turn 5", "Turn 5", "turn 5", "turn 0")]
    repeated = suite_quality(late).repeated_turns
    assert repeated.most == 5
    assert [(r.text, r.count) for r in repeated.examples] == [
        ("turn 5", 5),
        ("turn 0", 3),
        ("turn 1", 2),
        ("turn 2", 2),
        ("turn 3", 2),
    ]


def test_no_repeat_and_no_turn():
    once = suite_quality([chats("a", "One thing.", "Another thing.")]).repeated_turns
    assert (once.most, once.repeated, once.examples) == (1, 0, [])
    empty = suite_quality([]).repeated_turns
    assert (empty.most, empty.repeated, empty.examples) == (0, 0, [])


# --- first four words and chat answers --------------------------------------------------------------------------


def test_distinct_first_four_words_are_counted_over_utterances():
    suite = [
        chats(
            "a",
            "Check the stock now, please.",
            "check THE  stock, now! and the price",  # the same four words, punctuation between them is no word
            "Check the stock later.",
            "Stock?",  # fewer than four words: the opening is all of them
            "stock",
        )
    ]
    quality = suite_quality(suite)
    first = quality.first_words
    assert (first.count, first.distinct, first.share) == (5, 3, 0.6)
    assert (quality.utterances.count, quality.utterances.distinct) == (5, 5)  # distinct as strings, not as openings


def test_chat_answers_count_chat_tasks_and_their_distinct_answers():
    tool = restock("Restock apple by 3 units.", "apple", 3, 19, "Sure.", TurnSubtype.FIRST)  # a call: not chat
    suite = [
        session("a", chat("Hi there.", "Hello! How can I help?", TurnSubtype.FIRST), tool),
        session(
            "b",
            chat("Hello.", "hello!  how can I help?", TurnSubtype.FIRST),  # the same answer up to case and spaces
            chat("Thanks.", "You're welcome.", TurnSubtype.FIRST),
        ),
    ]
    answers = suite_quality(suite).chat_answers
    assert (answers.count, answers.distinct, answers.share) == (3, 2, 0.6667)


# --- wild behaviours --------------------------------------------------------------------------------------------


def wild_session(sid: str, *behaviours: list[str]) -> Session:
    made = chats(sid, *(f"{sid} task {i}" for i in range(len(behaviours))))
    return made.model_copy(update={"extra": {"wild": [list(b) for b in behaviours]}})


def test_wild_behaviours_are_counted_per_task_with_their_share_of_all_tasks():
    suite = [
        wild_session("a", ["fragment"], ["conditional", "fragment"], []),
        wild_session("b", ["pick", "pick"], ["parts"]),  # a behaviour named twice in a task counts once
        chats("c", "No record here.", "None at all."),  # records none: counts for no behaviour, but its tasks count
    ]
    quality = suite_quality(suite)
    assert quality.tasks == 7
    counted = {name: (rate.tasks, rate.share) for name, rate in quality.wild.items()}
    assert counted == {
        "fragment": (2, 0.2857),
        "conditional": (1, 0.1429),
        "pick": (1, 0.1429),
        "parts": (1, 0.1429),
        "correction": (0, 0.0),
        "bundle": (0, 0.0),
    }
    assert list(quality.wild) == WILD  # every behaviour, in the enum's order


def test_a_suite_without_the_record_counts_zero_for_every_behaviour():
    quality = suite_quality([chats("a", "Restock tea.", "What's my balance?")])
    assert {name: (rate.tasks, rate.share) for name, rate in quality.wild.items()} == dict.fromkeys(WILD, (0, 0.0))
    empty = suite_quality([])
    assert {name: (rate.tasks, rate.share) for name, rate in empty.wild.items()} == dict.fromkeys(WILD, (0, None))
    assert list(SuiteQuality().wild) == WILD


@pytest.mark.parametrize(
    "record",
    [
        [["fragment"]],  # one list for two tasks
        [["fragment"], ["shouting"]],  # an unknown behaviour
        [["fragment"], "pick"],  # not a list of names
        {"0": ["fragment"]},
    ],
)
def test_a_bad_wild_record_is_a_data_error_naming_the_session(record):
    good = chats("good", "Restock tea.")
    bad = chats("s-bad", "Restock tea.", "And coffee.").model_copy(update={"extra": {"wild": record}})
    counter = QualityCounter()
    counter.add(good)
    with pytest.raises(DataError, match="session 's-bad'"):
        counter.add(bad)
    # read before anything is counted: the figures so far are those of the good session alone
    assert counter.result() == suite_quality([good])


# --- near-paraphrase share over utterances ----------------------------------------------------------------------


class Chosen:
    """An encoder whose vectors the test chooses, per text (up to case and spacing); it records what it embeds."""

    def __init__(self, vectors: dict[str, Sequence[float]]) -> None:
        self.vectors = {distinct_key(k): v for k, v in vectors.items()}
        self.calls: list[list[str]] = []

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        return np.array([self.vectors[distinct_key(t)] for t in texts], dtype=float)


@needs_numpy
def test_near_paraphrase_share_counts_utterances_and_exact_repeats():
    c = (0.9, math.sqrt(1 - 0.81), 0.0, 0.0)  # cosine 0.9 with b; 0.436 with d
    chosen = Chosen(
        {
            "alpha": (0.0, 0.0, 1.0, 0.0),  # said twice: a paraphrase of itself (cosine 1), alone otherwise
            "bravo": (1.0, 0.0, 0.0, 0.0),
            "charlie": c,
            "delta": (0.0, 1.0, 0.0, 0.0),
            "echo": (0.0, 0.0, 0.0, 1.0),  # once, and orthogonal to all: no near-paraphrase
        }
    )
    suite = [chats("a", "alpha", "bravo", "delta"), chats("b", "ALPHA ", "charlie", "echo")]
    semantic = suite_quality(suite, encoder=SimpleEncoder(embed=chosen, label="chosen")).semantic
    assert semantic is not None
    assert (semantic.of, semantic.sampled) == (5, 5)
    # distinct texts: bravo and charlie are near-duplicates (2 of 5); alpha's repeat is no pair of distinct texts
    assert (semantic.near_duplicates, semantic.near_duplicate_share) == (2, 0.4)
    # utterances: alpha x2 (a repeat), bravo, charlie (each other) -> 4 of 6; delta and echo have none
    assert (semantic.near_paraphrases, semantic.utterances, semantic.near_paraphrase_share) == (4, 6, 0.6667)


@needs_numpy
def test_at_tau_and_below():
    chosen = Chosen({"one": (1.0, 0.0), "two": (0.85, math.sqrt(1 - 0.85**2)), "three": (0.0, 1.0)})
    suite = [chats("a", "one", "two", "three")]
    strict = suite_quality(suite, encoder=SimpleEncoder(embed=chosen, label="chosen")).semantic
    assert strict is not None and (strict.near_paraphrases, strict.utterances) == (2, 3)  # 0.85 is >= tau
    counter = QualityCounter(SimpleEncoder(embed=chosen, label="chosen"), tau=0.9)
    counter.add(suite[0])
    loose = counter.result().semantic
    assert loose is not None and (loose.near_paraphrases, loose.near_paraphrase_share) == (0, 0.0)


def one_hot(texts: Sequence[str]) -> np.ndarray:
    """Text "t<k>" on axis k: no two distinct texts alike, so only exact repeats are near-paraphrases."""
    rows = np.zeros((len(texts), 64))
    for row, text in enumerate(texts):
        rows[row, int(distinct_key(text)[1:])] = 1.0
    return rows


@needs_numpy
def test_the_counts_of_a_bounded_sample_are_exact_whatever_the_order():
    # 40 distinct texts, text k said k % 3 + 1 times, spread over sessions so that repeats come late
    said = [f"t{k}" for round_ in range(3) for k in range(40) if k % 3 >= round_]
    sessions = [chats(f"s{i}", *said[i : i + 4]) for i in range(0, len(said), 4)]
    spy = Chosen({f"t{k}": one_hot([f"t{k}"])[0] for k in range(40)})
    counter = QualityCounter(SimpleEncoder(embed=spy, label="one-hot"), sample_size=12)
    for s in sessions:
        counter.add(s)
    semantic = counter.result().semantic
    assert semantic is not None and (semantic.sampled, semantic.of) == (12, 40)
    [embedded] = spy.calls
    times = {t: int(t[1:]) % 3 + 1 for t in embedded}
    assert semantic.utterances == sum(times.values())
    assert semantic.near_paraphrases == sum(n for n in times.values() if n >= 2)
    assert semantic.near_duplicates == 0

    backwards = QualityCounter(SimpleEncoder(embed=one_hot, label="one-hot"), sample_size=12)
    for s in reversed(sessions):
        backwards.add(s)
    assert backwards.result().semantic == semantic


@needs_numpy
def test_the_new_figures_travel_in_the_json_and_come_back():
    suite = [
        wild_session("a", ["bundle"], []),
        chats("b", "a task 0", "Fine."),
    ]
    encoder = SimpleEncoder(embed=lambda texts: np.eye(len(texts)), label="eye")
    quality = suite_quality(suite, encoder=encoder)
    block = quality.model_dump(mode="json")
    assert block["utterances"] == {"count": 4, "distinct": 3, "share": 0.75}
    assert block["repeated_turns"] == {"most": 2, "repeated": 1, "examples": [{"text": "a task 0", "count": 2}]}
    assert block["first_words"] == {"count": 4, "distinct": 3, "share": 0.75}
    assert block["chat_answers"] == {"count": 4, "distinct": 1, "share": 0.25}
    assert block["wild"]["bundle"] == {"tasks": 1, "share": 0.25}
    semantic = block["semantic"]
    assert (semantic["utterances"], semantic["near_paraphrases"], semantic["near_paraphrase_share"]) == (4, 2, 0.5)
    assert SuiteQuality.model_validate(block) == quality


@needs_numpy
def test_validate_quality_shows_the_new_figures():
    """The table ``validate --quality`` prints (and whose headline ``synth sessions`` prints) has every new row."""
    from rich.console import Console

    from toolwild.cli.validate import quality_table

    suite = [wild_session("a", ["pick"], ["fragment", "bundle"]), chats("b", "Move 5 to Assets:Bank:Checking")]
    chosen = Chosen({"a task 0": (1.0, 0.0), "a task 1": (0.0, 1.0), "move 5 to assets:bank:checking": (0.0, 1.0)})
    quality = suite_quality([*suite, chats("c", "Move 5 to Assets:Bank:Checking")], encoder=SimpleEncoder(chosen, "c"))
    console = Console(width=300, record=True)
    console.print(quality_table(quality))
    shown = " ".join(console.export_text().replace("│", " ").split())
    # the turn as written (plain text: ":Bank:" is no emoji code)
    assert "most repeats of one user turn 2 times ('Move 5 to Assets:Bank:Checking'); 1 turn(s) repeat" in shown
    assert "distinct utterances 3 of 4 (75.0%)" in shown
    assert "distinct first four words (utterances) 3 of 4 (75.0%)" in shown
    assert "utterances with a near-paraphrase (cosine >= 0.85) 3 of 4 (75.0%)" in shown
    assert "distinct chat answers 1 of 4 (25.0%)" in shown
    rates = "fragment 1 (25.0%), conditional 0 (0.0%), pick 1 (25.0%), parts 0 (0.0%), correction 0 (0.0%), bundle 1"
    assert f"tasks per wild behaviour {rates} (25.0%)" in shown  # every behaviour, in the enum's order
