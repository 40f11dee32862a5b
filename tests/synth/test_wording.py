"""Template wording: varied, in the user's voice, never a pasted description, and references that say which value
they mean (the markers the ambiguity checker reads back)."""

from __future__ import annotations

import asyncio
import json
import random
import re

import pytest

from toolwild.core.hidden_intent import mentions
from toolwild.core.overlap import copied_description_spans
from toolwild.core.references import ARG_MARKERS, FIRST_MARKERS, RESULT_MARKERS, Pointer
from toolwild.core.tool import Tool
from toolwild.llm.backends.scripted import ScriptedBackend
from toolwild.llm.client import LLM
from toolwild.llm.types import ChatRequest
from toolwild.synth import utterances
from toolwild.synth.sessions import SessionsConfig, load_handle, synth_sessions
from toolwild.synth.utterances import (
    Phrase,
    Wording,
    pointer_reply,
    template_utterance,
    vague_reply,
    value_reply,
    wording_problems,
    write_utterance,
)

MARKERS = ARG_MARKERS + RESULT_MARKERS + FIRST_MARKERS
PLACE = Tool(name="place_order", description="Sell units of an item; fails when the stock is too low.")
RESTOCK = Tool(name="restock", description="Add units of an item to the stock.")
ODD = Tool(name="Amount_Consistency_Checker", description="Checks that the amounts of a ledger add up to the total.")
ANY_POINTER = [
    Pointer(how, source, tool, first)
    for how in ("coref", "long")
    for source in ("", "arg", "result")
    for tool in ("", "restock")
    for first in (False, True)
    if not (first and how == "coref")
]


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def _strings(value: object) -> list[str]:
    """The strings of a bank: a tuple of them, or a dict (of dicts) of such tuples."""
    if isinstance(value, dict):
        return [s for item in value.values() for s in _strings(item)]
    if isinstance(value, tuple):
        return [item for item in value if isinstance(item, str)]
    return []


def _bank_strings() -> dict[str, list[str]]:
    """Every template string of the module's banks, by bank name."""
    out: dict[str, list[str]] = {}
    for name, value in vars(utterances).items():
        if not name.startswith("_") or name.startswith("__"):
            continue
        strings = _strings(value)
        if strings:
            out[name] = strings
    return out


def test_no_template_word_is_a_digit_or_a_stray_marker():
    """A digit in a template could state a value by accident; a marker outside the reference banks would name a
    channel or the first task that the reference does not mean."""
    banks = _bank_strings()
    assert {"_FRAMES", "_VALUE_CORES", "_VAGUE_CORES", "_HEADS", "_PARTIALS", "_KNOWN", "_SHOP_CONTEXTS"} <= set(banks)
    pointing = {"_HEADS", "_RECALL_HEADS", "_WHEN", "_PARTIALS", "_PARTIAL_FRAMES"}
    for name, strings in banks.items():
        for s in strings:
            assert not re.search(r"\d", s), (name, s)
            assert "the user" not in s.lower() and "the assistant" not in s.lower(), (name, s)
            if name not in pointing:
                assert not any(m in s.lower() for m in MARKERS), (name, s)


@pytest.mark.parametrize("seed", range(40))
def test_templates_keep_the_rules_by_construction(seed):
    """Values that collide with template words ("now", "today", "please") are still never given away."""
    rng = random.Random(seed)
    wordings = [
        Wording(kind="single", phrases=[Phrase(PLACE, stated={"item": "apple", "units": 2})], hidden=["now"]),
        Wording(kind="single", phrases=[Phrase(PLACE, stated={"item": "today"}, refer={"units": "coref"})], hidden=[3]),
        Wording(
            kind="parallel",
            phrases=[Phrase(PLACE, stated={"item": "tea", "units": 1}), Phrase(RESTOCK, stated={"item": "please"})],
            hidden=["thanks"],
        ),
        Wording(
            kind="sequential",
            phrases=[Phrase(RESTOCK, stated={"item": "tea", "units": 4}), Phrase(PLACE, fed={"item": (0, "item")})],
        ),
        Wording(kind="partial", phrases=[Phrase(RESTOCK, stated={"units": 7})], hidden=["milk"]),
        Wording(kind="chat-first", recall=("item", "banana")),
        Wording(kind="chat-first"),
        Wording(kind="chat-recall", recall=("units", "long"), hidden=[19], first_reference=True),
        Wording(kind="chat-recall", recall=("units", "partial"), hidden=[19]),
    ]
    for wording in wordings:
        for ambiguous in (False, True):
            wording.ambiguous = ambiguous
            text = template_utterance(wording, rng)
            assert wording_problems(text, wording) == [], text


@pytest.mark.parametrize("pointer", ANY_POINTER, ids=str)
def test_a_reference_names_what_its_pointer_says(pointer):
    wording = Wording(
        kind="single", phrases=[Phrase(PLACE, stated={"item": "tea"}, refer={"units": pointer})], hidden=[3]
    )
    rng = random.Random(7)
    for _ in range(30):
        low = template_utterance(wording, rng).lower()
        assert "units" in low and not mentions(low, 3)
        assert any(m in low for m in ARG_MARKERS) == (pointer.source == "arg")
        assert any(m in low for m in RESULT_MARKERS) == (pointer.source == "result")
        assert ("restock" in low) == bool(pointer.tool)
        assert any(m in low for m in FIRST_MARKERS) == pointer.first


def test_a_wording_that_drops_a_marker_is_refused():
    def single(pointer: Pointer) -> Wording:
        return Wording(kind="single", phrases=[Phrase(PLACE, stated={"item": "tea"}, refer={"units": pointer})])

    plain = "Place order for item tea and the same units as just now."
    assert wording_problems(plain, single(Pointer("coref"))) == []
    assert wording_problems(plain, single(Pointer("coref", source="arg")))
    assert wording_problems(plain, single(Pointer("coref", source="result")))
    assert wording_problems(plain, single(Pointer("coref", tool="restock")))
    assert wording_problems(plain.replace("just now", "earlier"), single(Pointer("long", first=True)))
    both = "Place order for item tea and the units I asked for, the ones it came back with."
    assert wording_problems(both, single(Pointer("coref", source="arg")))  # both channels name none
    marked = "Place order for item tea and the units I asked for just now."
    assert wording_problems(marked, single(Pointer("coref", source="arg"))) == []


def test_the_older_string_form_of_a_reference_still_works():
    wording = Wording(kind="single", phrases=[Phrase(PLACE, stated={"item": "tea"}, refer={"units": "long"})])
    text = template_utterance(wording, random.Random(1))
    assert "units" in text and wording_problems(text, wording) == []


def test_a_repeat_says_same_again_and_names_the_tool():
    wording = Wording(kind="partial", phrases=[Phrase(PLACE, stated={"units": 5})], hidden=["apple"])
    rng = random.Random(3)
    for _ in range(30):
        low = template_utterance(wording, rng).lower()
        assert "same again" in low and "place order" in low and mentions(low, 5)
    assert wording_problems("And with units 5 instead?", wording)


def test_an_ambiguous_request_names_neither_the_tool_nor_its_description():
    rng = random.Random(5)
    for tool in (PLACE, RESTOCK, ODD, Tool(name="get_stock", description="How many units of an item are in stock.")):
        wording = Wording(kind="single", phrases=[Phrase(tool, stated={"item": "tea"})], ambiguous=True)
        name = " ".join(re.sub(r"(?<=[a-z])(?=[A-Z])", " ", tool.name).replace("_", " ").lower().split())
        for _ in range(20):
            text = template_utterance(wording, rng)
            assert name not in text.lower(), text
            assert copied_description_spans(text, [tool]) == []


def test_a_copied_description_is_refused():
    wording = Wording(kind="single", phrases=[Phrase(PLACE, stated={"item": "tea"})])
    problems = wording_problems("Sell units of an item; fails when the stock is too low: item tea.", wording)
    assert any("copy the tool description" in p for p in problems)


def test_chat_recall_follows_its_pointer():
    result = Wording(kind="chat-recall", recall=("units", "coref"), recall_pointer=Pointer("coref", "result"))
    plain = Wording(kind="chat-recall", recall=("units", "partial"))
    rng = random.Random(2)
    for _ in range(20):
        asked = template_utterance(result, rng).lower()
        assert any(m in asked for m in RESULT_MARKERS), asked
        low = template_utterance(plain, rng).lower()
        assert "units" in low and not any(m in low for m in MARKERS)


def test_replies_to_asks_vary_and_keep_their_rules():
    rng = random.Random(11)
    said = {value_reply("item", "coffee", rng, avoid=["tea"]) for _ in range(300)}
    assert len({_norm(s) for s in said}) > 150
    assert all(mentions(s, "coffee") and not mentions(s, "tea") for s in said)
    vague = {vague_reply(rng, avoid=["coffee"]) for _ in range(300)}
    assert len({_norm(s) for s in vague}) > 100 and not any(mentions(s, "coffee") for s in vague)
    for _ in range(30):
        reply = pointer_reply("units", Pointer("long", source="result", first=True), rng, first=True, avoid=[19])
        low = reply.lower()
        assert "units" in low and any(m in low for m in RESULT_MARKERS) and any(m in low for m in FIRST_MARKERS)
        assert not mentions(low, 19)


def test_a_number_reply_is_never_given_away_by_template_words():
    rng = random.Random(0)
    for _ in range(200):
        reply = value_reply("units", 2, rng, avoid=[1, 3])
        assert mentions(reply, 2) and not mentions(reply, 1) and not mentions(reply, 3)


def test_like_published_inventory_turns_are_distinct_and_copy_no_description():
    """The acceptance figures on a smaller run: >= 90% distinct user turns (utterances and replies to asks), no
    span of 6+ words shared with a tool description."""
    result = asyncio.run(synth_sessions([load_handle("inventory")], SessionsConfig(n_sessions=64, like_published=True)))
    turns, copied = [], 0
    for session in result.suite.sessions:
        for task in session.tasks:
            mine = [task.utterance] + [n.user_input for n in task.gold if n.user_input]
            turns += mine
            copied += sum(len(copied_description_spans(t, session.tools)) for t in mine)
    assert len(turns) > 150
    assert len({_norm(t) for t in turns}) / len(turns) >= 0.9
    assert copied == 0


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.mark.anyio
async def test_the_model_writer_is_told_the_pointer_and_must_keep_it():
    wording = Wording(
        kind="single",
        phrases=[Phrase(PLACE, stated={"item": "tea"}, refer={"units": Pointer("coref", source="result")})],
        hidden=[19],
    )
    template = template_utterance(wording, random.Random(0))
    briefs: list[dict] = []

    def careless(request: ChatRequest) -> str:
        briefs.append(json.loads(request.messages[1]["content"]))
        return json.dumps({"utterance": "Place order for item tea and the same units as just now."})

    text, by_model = await write_utterance(LLM(ScriptedBackend(careless)), wording, [], template)
    assert (text, by_model) == (template, False)
    pointed = briefs[0]["the request asks for"][0]["point to"]["units"].lower()
    assert any(m in pointed for m in RESULT_MARKERS)

    def careful(request: ChatRequest) -> str:
        return json.dumps({"utterance": "Sell some tea: item tea, and the units it came back with just now."})

    assert await write_utterance(LLM(ScriptedBackend(careful)), wording, [], template) == (
        "Sell some tea: item tea, and the units it came back with just now.",
        True,
    )


@pytest.mark.anyio
async def test_a_recall_question_keeps_its_pointer_when_a_model_writes_it():
    wording = Wording(kind="chat-recall", recall=("units", "coref"), recall_pointer=Pointer("coref", "arg"), hidden=[3])
    template = template_utterance(wording, random.Random(0))
    briefs: list[dict] = []

    def plain(request: ChatRequest) -> str:
        briefs.append(json.loads(request.messages[1]["content"]))
        return json.dumps({"utterance": "What were the units just now?"})

    assert await write_utterance(LLM(ScriptedBackend(plain)), wording, [], template) == (template, False)
    assert any(m in briefs[0]["the question asks about"].lower() for m in ARG_MARKERS)
