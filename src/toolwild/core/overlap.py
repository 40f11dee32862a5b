"""Word spans a user's text shares with a tool's description: the sign of a description pasted into a request.

A user does not speak in API documentation. A generated utterance that repeats six or more words of a tool's
description in a row ("sell units of an item; fails when the stock is too low") teaches a model to expect requests
that spell out the tool, and makes tool choice a string match. Spans are compared as word n-grams, lower-cased and
blind to punctuation, so "Sell units of an item; fails" and "sell units of an item, fails" are the same span; shared
n-grams that overlap in the text are merged into one span, so an eight-word copy counts once.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from toolwild.core.tool import Tool

__all__ = ["copied_description_spans", "copied_spans", "words"]

_WORD = re.compile(r"[^\W_]+")


def words(text: str) -> list[str]:
    """The words of ``text`` in lower case, punctuation dropped (``don't`` gives ``don``, ``t`` on both sides)."""
    return _WORD.findall(text.lower())


def _ngrams(tokens: list[str], n: int) -> set[tuple[str, ...]]:
    return {tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)}


def copied_spans(text: str, description: str, n: int = 6) -> list[str]:
    """The spans of ``n`` or more words that ``text`` shares with ``description``, in the order of ``text``.

    Every word n-gram of the text that the description also holds is shared; runs of shared n-grams that overlap in
    the text are merged into one span (its words joined by single spaces).
    """
    if n < 1:
        raise ValueError("n must be at least 1")
    tokens = words(text)
    shared = _ngrams(words(description), n)
    if not shared:
        return []
    spans: list[str] = []
    start = end = -1
    for i in range(len(tokens) - n + 1):
        if tuple(tokens[i : i + n]) not in shared:
            continue
        if i <= end:  # overlaps the current run: extend it
            end = i + n - 1
            continue
        if start >= 0:
            spans.append(" ".join(tokens[start : end + 1]))
        start, end = i, i + n - 1
    if start >= 0:
        spans.append(" ".join(tokens[start : end + 1]))
    return list(dict.fromkeys(spans))


def copied_description_spans(text: str, tools: Iterable[Tool], n: int = 6) -> list[str]:
    """The spans of ``n`` or more words ``text`` shares with the description of any of ``tools`` (each once)."""
    out: list[str] = []
    for tool in tools:
        if tool.description:
            out.extend(copied_spans(text, tool.description, n))
    return list(dict.fromkeys(out))
