"""`Session` and `Suite`: ordered tasks sharing one context and tool list, and a named collection of sessions."""

from __future__ import annotations

import itertools
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from toolwild.core.task import Task
from toolwild.core.tool import Tool
from toolwild.core.trajectory import state_digest

__all__ = ["Session", "Suite", "count_transitions"]


def count_transitions(tasks: list[Task]) -> int:
    """Number of adjacent task pairs whose coarse type (single/multi/clarify/chat) differs."""
    return sum(1 for a, b in itertools.pairwise(tasks) if a.coarse_type != b.coarse_type)


class Session(BaseModel):
    """A multi-turn session: a context line (date), a tool list, and ordered tasks."""

    model_config = ConfigDict(extra="forbid")

    id: str
    env_info: str
    """The context line, e.g. ``"2024-07-11 22:11:58 Thursday"``.

    The only system message is ``"Current Date: " + env_info``."""
    tools: list[Tool]
    tasks: list[Task]
    environment: str | None = None
    """Reference to an environment (for free-running evaluation on a stateful backend)."""
    alt_gold_sizes: list[int] | None = None
    """Node counts of the other-language gold DAGs (WildToolBench ``answer_list``): its progress metric divides by
    these, so they are kept apart from ``tasks``."""
    extra: dict[str, Any] = Field(default_factory=dict)
    """Fields of the source record we do not model (kept for lossless round trips)."""

    @property
    def system_prompt(self) -> str:
        """The only system message of a WildToolBench session."""
        return f"Current Date: {self.env_info}"

    @property
    def transitions(self) -> int:
        """Instruction transitions: adjacent coarse-type changes (0–3 for 4 tasks)."""
        return count_transitions(self.tasks)

    def gold_size(self, task_index: int) -> int:
        """Gold node count used as the progress denominator (the published scorer uses ``answer_list``)."""
        if self.alt_gold_sizes is not None and task_index < len(self.alt_gold_sizes):
            return self.alt_gold_sizes[task_index]
        return len(self.tasks[task_index].gold)

    def tool(self, name: str) -> Tool | None:
        """The tool called ``name``, or None."""
        for t in self.tools:
            if t.name == name:
                return t
        return None


class Suite(BaseModel):
    """A named, versioned collection of sessions."""

    model_config = ConfigDict(extra="forbid")

    format_version: int = 1
    name: str
    version: str = "1"
    source: str = ""
    sessions: list[Session] = Field(default_factory=list)

    def fingerprint(self) -> str:
        """SHA-256 of the sessions' canonical JSON (name and version aside).

        Recorded in a run's config so that re-scoring refuses a suite that is not the one the run used: two suites
        whose session ids overlap would otherwise score each other's results without a word.
        """
        return state_digest([s.model_dump(mode="json") for s in self.sessions])

    _positions: dict[str, int] = PrivateAttr(default_factory=dict)

    def session(self, session_id: str) -> Session | None:
        """The session with this id, or None.

        Looked up in an index (rebuilt when the sessions changed): resuming or re-scoring a run asks once per
        session, and a linear scan made that quadratic in the suite size.
        """
        i = self._positions.get(session_id)
        if i is None or i >= len(self.sessions) or self.sessions[i].id != session_id:
            self._positions = {s.id: k for k, s in reversed(list(enumerate(self.sessions)))}
            i = self._positions.get(session_id)
        return self.sessions[i] if i is not None else None
