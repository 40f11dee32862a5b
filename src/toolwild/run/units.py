"""A unit of work: the piece of a job that is scheduled, logged and resumed as one."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from toolwild.errors import ToolwildError

__all__ = ["Unit", "UnitFailure", "fingerprint"]

P = TypeVar("P")


@dataclass(frozen=True)
class Unit(Generic[P]):
    """One schedulable piece of a job.

    ``key`` is its identity across runs (what the log records and a resumed run skips); ``order`` is where its
    result goes in the output. Results are always written in ``order``, never in completion order, so the output
    does not depend on the concurrency or on which unit happened to finish first.
    """

    key: str
    order: int
    payload: P


class UnitFailure(ToolwildError):
    """A unit that failed in another process (a provider that kept failing), as the caller sees it: the message
    travels, the exception object (whose class may not survive pickling) does not."""


def fingerprint(identity: Any) -> str:
    """SHA-256 of the canonical JSON of ``identity``: what a run is, so a resume can refuse another run's log."""
    text = json.dumps(identity, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
