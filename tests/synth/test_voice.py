"""Issue #29: a user's voice wraps the template's sentence and never changes what it asks; the ledger's reasons carry
no value a checker could read."""

from __future__ import annotations

import random
import re

import pytest

from toolwild.core.hidden_intent import CARRY_OVER
from toolwild.envs.domains.ledger.seed import CHECKING
from toolwild.synth.providers.ledger.phrasing import CATEGORY_NICKS
from toolwild.synth.providers.ledger.voice import reasons, topic_of
from toolwild.synth.voice import REGISTERS, Voice

SENTENCE = "How much did I spend on groceries last month?"


@pytest.mark.parametrize("register", REGISTERS, ids=lambda r: r.name)
def test_every_realisation_keeps_the_sentence_and_ends_with_it_unwrapped(register):
    voice = Voice(random.Random(3), reasons(), register=register)
    for _ in range(50):
        said = voice.realisations(SENTENCE, "spend")
        assert said[-1] == SENTENCE
        for text in said:
            # the request's words survive every wrapping (its first letter may drop to lower case, its mark go)
            assert "ow much did I spend on groceries last month" in text, text


def test_a_carried_fragment_stays_a_fragment_and_nothing_goes_before_its_request():
    voice = Voice(random.Random(1), reasons(), register=REGISTERS[1])
    for _ in range(50):
        for text in voice.realisations("And savings?", "look", carry=True):
            sentences = re.split(r"(?<=[.!?])\s+", text.lower())
            k = next(i for i, s in enumerate(sentences) if "and savings" in s)
            assert sentences[k].startswith(CARRY_OVER), text  # an aside may come before it, in its own sentence
            assert len(" ".join(sentences[k + 1 :]).split()) <= 4, text  # and at most a short tail after it


def test_terse_users_use_the_fragment_when_there_is_one():
    voice = Voice(random.Random(2), reasons(), register=next(r for r in REGISTERS if r.name == "terse"))
    firsts = [voice.realisations(SENTENCE, "spend", fragments=["groceries last month?"])[0] for _ in range(40)]
    assert sum(f.lower().startswith("groceries last month") for f in firsts) >= 30


def test_the_same_seed_gives_the_same_words():
    def run(seed: int) -> list[list[str]]:
        voice = Voice(random.Random(seed), reasons())
        return [voice.realisations(SENTENCE, topic) for topic in ("spend", "look", "learn", "add")]

    assert run(5) == run(5)
    assert run(5) != run(6)


_VALUES = re.compile(
    r"\d|\b(?:today|yesterday|month|months|week|weeks|year|monday|tuesday|wednesday|thursday|friday|saturday|sunday|"
    r"january|february|march|april|may|june|july|august|september|october|november|december)\b",
    re.IGNORECASE,
)
_POINTERS = re.compile(r"\b(?:it|that|those|them|first|earlier|again|same|both)\b", re.IGNORECASE)


def test_no_reason_states_a_value_or_points_at_anything():
    nicks = {n.lower() for n in CATEGORY_NICKS.values()} | {"card", "category", "owe", "paid", "charged"}
    for topic, pool in reasons().items():
        assert len(set(pool)) == len(pool), f"{topic} repeats a reason"
        for reason in pool:
            assert not _VALUES.search(reason), reason
            assert not _POINTERS.search(reason), reason
            words = set(re.findall(r"[a-z]+", reason.lower()))
            assert not words & nicks, (reason, words & nicks)


def test_each_topic_has_enough_reasons_that_two_sessions_rarely_share_one():
    sizes = {topic: len(pool) for topic, pool in reasons().items()}
    assert all(size >= 25 for topic, size in sizes.items() if topic != "query"), sizes
    assert all(size >= 100 for topic, size in sizes.items() if topic in ("look", "spend", "add", "fix", "move")), sizes
    assert topic_of("add_missing_two") == "add" and topic_of("salient_compare") == "look"
    assert CHECKING.endswith("Checking")
