"""Spans a user's text shares with a tool description: found case- and punctuation-blind, merged, counted once."""

from __future__ import annotations

import pytest

from toolwild.core.overlap import copied_description_spans, copied_spans
from toolwild.core.tool import Tool

DESCRIPTION = "Sell units of an item; fails when the stock is too low."


def test_the_pasted_description_of_the_issue_is_one_span():
    text = "help with this: sell units of an item; fails when the stock is too low for item apple and units 2"
    assert copied_spans(text, DESCRIPTION) == ["sell units of an item fails when the stock is too low"]


def test_case_and_punctuation_do_not_hide_a_copy():
    assert copied_spans("SELL units, of an ITEM... fails!", DESCRIPTION) == ["sell units of an item fails"]


def test_five_shared_words_are_not_a_copy_six_are():
    assert copied_spans("please sell units of an apple", DESCRIPTION) == []
    assert copied_spans("please sell units of an item now", DESCRIPTION) == []
    assert copied_spans("please sell units of an item fails now", DESCRIPTION) == ["sell units of an item fails"]
    assert copied_spans("sell units of an item", DESCRIPTION, n=5) == ["sell units of an item"]


def test_separate_copies_are_separate_spans_and_repeats_count_once():
    text = "sell units of an item fails, then when the stock is too low, and sell units of an item fails"
    assert copied_spans(text, DESCRIPTION) == ["sell units of an item fails", "when the stock is too low"]


def test_spans_against_every_tool_of_a_session():
    tools = [
        Tool(name="place_order", description=DESCRIPTION),
        Tool(name="restock", description="Add units of an item to the stock."),
        Tool(name="silent"),
    ]
    text = "add units of an item to the stock and sell units of an item fails when asked"
    assert copied_description_spans(text, tools) == [
        "sell units of an item fails when",
        "add units of an item to the stock",
    ]
    assert copied_description_spans("restock the apples please, two of them", tools) == []


def test_n_must_be_positive():
    with pytest.raises(ValueError):
        copied_spans("a", "a", n=0)
