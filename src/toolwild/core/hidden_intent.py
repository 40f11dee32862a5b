"""Value-level checks of hidden-intent subtypes: a label is believed only when the conversation bears it out.

A later task of a session leans on what was said before. Which task it leans on is visible in the values: the gold
calls of a coreferential task use a value that the *previous* task showed and that the task's own words do not
state; a long-range task uses a value shown two or more tasks back and absent from the task before it. So the
check reads only the session's text and gold, never a generator's notes:

- the *needed values* of a task are the scalar argument values of its gold calls that neither its own words (the
  utterance and the user's replies to asks) nor the observations of its own earlier calls contain; a task without
  calls (chat) needs the earlier values its gold answer quotes and its utterance does not;
  (or a value an earlier user named in passing, noted in ``Session.extra["mentioned_values"]`` and believed only
  where that task's words contain it);
- a value *appears in* an earlier task when that task's utterance, replies, gold arguments, observations or answer
  contain it as a whole token (case-insensitive; numbers in their usual spellings).

Rules: ``First Turn`` only at position 0. ``Coreferential Reference``: some needed value appears in task i-1.
``Partial Information``: some needed value appears in an earlier task. ``Long-Range Dependency``: some needed value
appears in a task at least two positions back and neither in task i-1 nor in the task itself.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from toolwild.core.session import Session
from toolwild.core.task import NodeKind, Task, TurnSubtype

__all__ = [
    "SubtypeFinding",
    "ancestors",
    "check_subtypes",
    "mentions",
    "needed_values",
    "scalar_values",
    "shown_text",
    "task_text",
]


@dataclass(frozen=True)
class SubtypeFinding:
    """A task whose label the values do not support, and why."""

    task_index: int
    subtype: TurnSubtype
    message: str
    kind: str = "label"
    """``label``: the values do not bear the label out; ``ambiguous``: the task points at an earlier value that is
    not the only one answering it (:func:`toolwild.core.references.ambiguous_references`)."""


def scalar_values(value: Any) -> list[Any]:
    """The scalar leaves of a JSON value (strings, numbers; booleans and nulls carry no reference)."""
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in scalar_values(v)]
    if isinstance(value, list):
        return [leaf for v in value for leaf in scalar_values(v)]
    if isinstance(value, bool) or value is None:
        return []
    if isinstance(value, str):
        return [value] if value.strip() else []
    if isinstance(value, int | float):
        return [value]
    return []


def _spellings(value: Any) -> list[str]:
    """How a value may be written: as given, and a number (or numeric string, as money often is) also with two
    decimals and with thousands separators ("13000.00" is said "$13,000.00")."""
    out: set[str] = set()
    if isinstance(value, str):
        out.add(value.strip().lower())
        try:
            number = float(value.replace(",", ""))
        except ValueError:
            return sorted(out)
        if not re.fullmatch(r"-?[\d,]+(\.\d+)?", value.strip()):
            return sorted(out)
        value = number
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int):
        out |= {str(value), f"{value:,}"}
    else:
        out |= {repr(value), f"{value:.2f}", f"{value:,.2f}"}
    if abs(value) >= 1000 or isinstance(value, float):
        out.add(f"{value:,.2f}")
    return sorted(out)


def mentions(text: str, value: Any) -> bool:
    """Whether ``text`` contains ``value`` as a whole token (so 25 is not found inside 2024-07-25 or O-1025)."""
    low = text.lower()
    for spelling in _spellings(value):
        if spelling and re.search(rf"(?<![\w.\-/:]){re.escape(spelling)}(?![\w\-/:]|\.\d)", low):
            return True
    return False


def task_text(task: Task) -> str:
    """What the user said in a task: the utterance and every reply to an ask."""
    replies = [n.user_input for n in task.gold if n.kind is NodeKind.ASK and n.user_input]
    return "\n".join([task.utterance, *replies])


def shown_text(task: Task) -> str:
    """Everything a task puts into the conversation."""
    parts = [task_text(task)]
    for node in task.gold:
        if node.kind is NodeKind.CALL:
            parts.append(json.dumps(node.action.arguments, ensure_ascii=False))
        parts.append(node.observation if isinstance(node.observation, str) else json.dumps(node.observation))
    return "\n".join(parts)


def needed_values(task: Task, earlier: list[Task] | None = None, named: list[list[Any]] | None = None) -> list[Any]:
    """Values a task needs from the conversation before it (see the module docstring).

    ``named``: per earlier task, values its user named in passing (a generator's note, used only where that
    task's words really contain them); a chat task may need those too.
    """
    own = task_text(task)
    calls = task.call_nodes
    if not calls:
        answers = [str(n.observation) for n in task.gold if n.kind is NodeKind.ANSWER]
        pool = [v for t in earlier or [] for n in t.call_nodes for v in scalar_values(n.action.arguments)]
        pool += [v for t in earlier or [] for n in t.call_nodes for v in scalar_values(n.observation)]
        for t, values in zip(earlier or [], named or [], strict=False):
            pool += [v for v in scalar_values(values) if mentions(task_text(t), v)]
        out = [v for v in pool if any(mentions(a, v) for a in answers) and not mentions(own, v)]
        return list(dict.fromkeys(out))
    out: list[Any] = []
    for node in calls:
        seen = "\n".join(
            json.dumps(task.gold[a].observation)
            for a in ancestors(task, node.idx)
            if task.gold[a].kind is NodeKind.CALL
        )
        for value in scalar_values(node.action.arguments):
            if not mentions(own, value) and not mentions(seen, value) and value not in out:
                out.append(value)
    return out


def ancestors(task: Task, idx: int) -> set[int]:
    """The gold nodes node ``idx`` depends on, directly or not."""
    out: set[int] = set()
    stack = list(task.gold[idx].dependency_list)
    while stack:
        i = stack.pop()
        if i not in out:
            out.add(i)
            stack.extend(task.gold[i].dependency_list)
    return out


def check_subtypes(session: Session) -> list[SubtypeFinding]:
    """Every task whose hidden-intent label its values do not bear out (empty when all labels hold)."""
    findings: list[SubtypeFinding] = []
    shown = [shown_text(t) for t in session.tasks]
    for i, task in enumerate(session.tasks):
        if i == 0:
            if task.subtype is not TurnSubtype.FIRST:
                findings.append(SubtypeFinding(i, task.subtype, "the first task must be First Turn"))
            continue
        if task.subtype is TurnSubtype.FIRST:
            findings.append(SubtypeFinding(i, task.subtype, "only the first task can be First Turn"))
            continue
        named = session.extra.get("mentioned_values")
        needed = needed_values(task, session.tasks[:i], named if isinstance(named, list) else None)
        where = {repr(v): [j for j in range(i) if mentions(shown[j], v)] for v in needed}
        if task.subtype is TurnSubtype.COREFERENTIAL:
            ok = any(i - 1 in found for found in where.values())
            want = "a value the previous task showed"
        elif task.subtype is TurnSubtype.PARTIAL:
            ok = any(where.values())
            want = "a value an earlier task showed"
        else:
            ok = any(found and max(found) <= i - 2 for found in where.values())
            want = "a value shown two or more tasks back and not in the previous task"
        if not ok:
            detail = ", ".join(f"{k} in tasks {v}" for k, v in where.items()) or "none"
            findings.append(
                SubtypeFinding(i, task.subtype, f"needs {want}; needed values and where they appear: {detail}")
            )
    return findings
