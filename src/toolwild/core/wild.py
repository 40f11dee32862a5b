"""The wild user behaviours a generated task can show, and where a session records them.

Why a record: the published benchmark's point is that real users do not talk like templates (they answer with
fragments, make a request depend on what a tool returns, pick "the second one" from a list, give a value in parts,
correct themselves, bundle unrelated requests). A generator that makes these happen says so per task, so a suite's
quality report can count each behaviour's rate and a test can find the tasks that carry one. A suite that does not
record them (a published one, an older one) simply shows none: the figure is what the generator claims, checked by
the generator's own tests, not read back from the words.

The record is ``Session.extra["wild"]``: one list of behaviour names per task, in task order (``[]`` for a plain
task). It travels with the session through every writer that keeps ``extra``.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from toolwild.errors import DataError

__all__ = ["WILD_KEY", "Wild", "wild_behaviours"]

WILD_KEY = "wild"
"""The key of :attr:`Session.extra` that holds the behaviours of each task."""


class Wild(StrEnum):
    """One wild behaviour (the published benchmark's phenomena, as toolwild generates them)."""

    FRAGMENT = "fragment"
    """A terse fragment rather than a sentence ("checking balance?", "groceries, last month")."""
    CONDITIONAL = "conditional"
    """A request whose branch depends on what a call returns ("if it's under $500, move ..."); the gold follows the
    branch the state selects."""
    PICK = "pick"
    """An ordinal or descriptive pick from a list the assistant just gave ("the second one among those three")."""
    PARTS = "parts"
    """A value given in parts across replies ("it starts with ...", then "the rest is ...")."""
    CORRECTION = "correction"
    """The user corrects something they said themselves (never something the assistant got right)."""
    BUNDLE = "bundle"
    """Unrelated requests bundled in one turn (different kinds of question at once)."""


def wild_behaviours(extra: dict[str, Any], tasks: int, *, session: str = "") -> list[list[Wild]]:
    """The behaviours of each of a session's ``tasks`` tasks, read from its ``extra`` (none when it records none).

    Raises:
        DataError: the record is not one list of known behaviour names per task (naming the session and the field).
    """
    raw = extra.get(WILD_KEY)
    if raw is None:
        return [[] for _ in range(tasks)]
    where = f"session {session!r}: " if session else ""
    if not isinstance(raw, list) or len(raw) != tasks:
        raise DataError(
            f"{where}extra.{WILD_KEY} must list the behaviours of each of its {tasks} tasks", field=WILD_KEY
        )
    out: list[list[Wild]] = []
    known = {w.value for w in Wild}
    for i, names in enumerate(raw):
        if not isinstance(names, list) or any(n not in known for n in names):
            raise DataError(
                f"{where}extra.{WILD_KEY}[{i}] must be a list of behaviour names ({', '.join(sorted(known))})",
                field=f"{WILD_KEY}[{i}]",
            )
        out.append([Wild(n) for n in names])
    return out
