"""Session designs: orderings of the four coarse task types and how many instruction transitions they have.

A session's *pattern* is the coarse type of each of its tasks. WildToolBench's published design uses each of the
4^4 orderings of {single, multi, clarify, chat} exactly once per 256 sessions, which gives 256 tasks of each type and
sessions with 0/1/2/3 adjacent type changes in the proportion 4/36/108/108 (4 x C(3, k) x 3^k). Every generator
(the ledger suite, ``toolwild synth sessions``) draws its patterns from here, so their designs agree.
"""

from __future__ import annotations

import itertools
import random

from toolwild.core.task import CoarseType

__all__ = ["ALL_PATTERNS", "BUCKET_CYCLE", "Pattern", "patterns_with", "published_patterns", "transitions"]

Pattern = tuple[CoarseType, ...]

ALL_PATTERNS: list[Pattern] = list(itertools.product(list(CoarseType), repeat=4))
"""Every ordering of four coarse types (256)."""

BUCKET_CYCLE = (3, 2, 1, 3, 2, 0, 3, 2, 1, 3, 2, 3, 1, 2, 3, 2)
"""Transition buckets of consecutive sessions: per 16 sessions 1 x 0, 3 x 1, 6 x 2, 6 x 3 (the published suite is
4/36/108/108 of 256, which would leave bucket 0 empty in small suites)."""


def transitions(pattern: Pattern) -> int:
    """Adjacent coarse-type changes of a pattern."""
    return sum(1 for a, b in itertools.pairwise(pattern) if a != b)


def patterns_with(n_transitions: int) -> list[Pattern]:
    """The four-task patterns with exactly ``n_transitions`` adjacent type changes."""
    return [p for p in ALL_PATTERNS if transitions(p) == n_transitions]


def published_patterns(seed: int = 0) -> list[Pattern]:
    """The published design: each of the 4^4 orderings once, in a seeded order (see the module docstring)."""
    patterns = list(ALL_PATTERNS)
    random.Random(f"toolwild-ledger-published:{seed}").shuffle(patterns)
    return patterns
