"""State changes: how one JSON state becomes another, stored instead of whole expected states.

Why: a suite used to store the whole state the environment should end in after every task. For a ledger that is
every transaction of the books, again after each task: 90% of a suite's bytes (173 KB per session), and as much again
in the generation's progress log. A state check needs only the digest of that state (equal digests, equal states:
a one-cent difference changes it); the diagnostics that name *where* an episode went wrong need the state itself,
and the change since the previous task rebuilds it from the state the episode started in. A task that writes one
transaction stores that transaction, a task that reads stores ``{}``.

A change is a JSON object of one of these forms (the same for any state: dicts of lists, dicts of dicts, scalars):

- ``{}``: nothing changed;
- ``{"set": value}``: the value is ``value`` (replaced, or a key added);
- ``{"keys": {key: change, ...}, "drop": [key, ...]}``: a dict whose listed keys changed and whose dropped keys
  are gone (either part may be absent);
- ``{"splice": [[at, removed, [item, ...]], ...]}``: a list in which, at index ``at`` of the list before (the
  splices in rising order, not overlapping), ``removed`` items are replaced by the items given.

States are compared as their canonical JSON (:func:`toolwild.core.trajectory.state_digest`): ``1``, ``1.0`` and
``true`` are three values, as they are to the state check.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Sequence
from typing import Any

from toolwild.core.task import Task
from toolwild.core.trajectory import state_digest

__all__ = ["apply_change", "change_problem", "expectation", "expected_state_at", "state_change"]

_MATCH_LIMIT = 4_000_000
"""Above this many item pairs, the changed middle of a list is one splice rather than a minimal one (the matcher's
time grows with the product of the lengths; a state rewritten wholesale needs no minimal change)."""

_MISSING = object()


def state_change(before: Any, after: Any, *, after_digest: str | None = None) -> dict[str, Any]:
    """The change that turns ``before`` into ``after``: ``apply_change(before, change)`` has ``after``'s digest.

    Lists are trimmed of their common start and end and the rest matched item by item, so inserting one transaction
    into a sorted ledger stores that transaction only. ``after_digest``: ``state_digest(after)`` when the caller
    has it (the check that the change is exact reuses it).
    """
    if before is after:
        return {}
    change = _change(before, after, strict=False)
    wanted = after_digest if after_digest is not None else state_digest(after)
    if state_digest(apply_change(before, change)) == wanted:
        return change
    # Python's == took two values for one (1 and 1.0, 0.0 and -0.0) that the digest tells apart: compare by JSON
    return _change(before, after, strict=True)


def expectation(before: Any, after: Any) -> dict[str, Any]:
    """What a task stores about the state it should end in, ``after``, given the state it starts from, ``before``
    (the previous task's expected state, or the session's start): the ``Task`` fields ``expected_state_digest`` and
    ``expected_state_change``."""
    digest = state_digest(after)
    return {"expected_state_digest": digest, "expected_state_change": state_change(before, after, after_digest=digest)}


def apply_change(before: Any, change: dict[str, Any]) -> Any:
    """``before`` with ``change`` applied: a new value that shares the unchanged parts (neither input is changed,
    and the result must not be changed in place either).

    Raises:
        ValueError: the change does not fit ``before`` (a splice past the end of the list, a dict change on a
            value that is not a dict).
    """
    if not change:
        return before
    if "set" in change:
        return change["set"]
    if "splice" in change:
        if not isinstance(before, list):
            raise ValueError(f"a list change on a {type(before).__name__}")
        out: list[Any] = []
        pos = 0
        for at, removed, items in change["splice"]:
            if at < pos or at + removed > len(before):
                raise ValueError(f"a splice at {at} (removing {removed}) does not fit a list of {len(before)}")
            out.extend(before[pos:at])
            out.extend(items)
            pos = at + removed
        out.extend(before[pos:])
        return out
    if not isinstance(before, dict):
        raise ValueError(f"a dict change on a {'missing value' if before is _MISSING else type(before).__name__}")
    result = dict(before)
    for key in change.get("drop", []):
        if key not in result:
            raise ValueError(f"drops the key {key!r}, which is not there")
        del result[key]
    for key, sub in change.get("keys", {}).items():
        value = apply_change(before.get(key, _MISSING), sub)
        if value is _MISSING:
            raise ValueError(f"changes the key {key!r}, which is not there")
        result[key] = value
    return result


def change_problem(change: Any, where: str = "") -> str | None:
    """What is wrong with the form of a change read from a file (the module docstring's forms), or None."""
    here = where or "the change"
    if not isinstance(change, dict):
        return f"{here} is not an object"
    if not change:
        return None
    ops = set(change)
    if ops == {"set"}:
        return None
    if ops == {"splice"}:
        return _splice_problem(change["splice"], here)
    if not ops or not ops <= {"keys", "drop"}:
        return f"{here} has keys {sorted(ops)}, not one of set / keys and drop / splice"
    drop = change.get("drop", [])
    if not isinstance(drop, list) or not all(isinstance(k, str) for k in drop):
        return f"{here}.drop is not a list of keys"
    keys = change.get("keys", {})
    if not isinstance(keys, dict):
        return f"{here}.keys is not an object"
    for key, sub in keys.items():
        problem = change_problem(sub, f"{here}.keys.{key}")
        if problem:
            return problem
    return None


def expected_state_at(tasks: Sequence[Task], index: int, start: Any) -> Any:
    """The whole state task ``index`` of a session should end in, rebuilt from ``start`` (the episode's state before
    the first task), or None when the suite cannot say (no expected state, or a digest stored without its change
    somewhere on the way, or changes that do not fit ``start``).

    A task's change is from the expected state of the last earlier task that has one (the session's start for the
    first); a whole expected state (as files before changes stored them) is taken as it is.
    """
    if not tasks[index].checks_state:
        return None
    state = start
    for task in tasks[: index + 1]:
        if task.expected_state is not None:
            state = task.expected_state
        elif task.expected_state_digest is not None:
            if task.expected_state_change is None or state is _MISSING:
                state = _MISSING
                continue
            try:
                state = apply_change(state, task.expected_state_change)
            except ValueError:
                state = _MISSING
    return None if state is _MISSING else state


# ---------------------------------------------------------------------------------------------- computing changes
def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _same(a: Any, b: Any, strict: bool) -> bool:
    if a is b:
        return True
    if strict:
        return type(a) is type(b) and _canonical(a) == _canonical(b)
    return type(a) is type(b) and a == b


def _change(before: Any, after: Any, *, strict: bool) -> dict[str, Any]:
    if _same(before, after, strict):
        return {}
    if isinstance(before, dict) and isinstance(after, dict):
        return _dict_change(before, after, strict)
    if isinstance(before, list) and isinstance(after, list):
        return _list_change(before, after, strict)
    return {"set": after}


def _dict_change(before: dict[str, Any], after: dict[str, Any], strict: bool) -> dict[str, Any]:
    keys: dict[str, Any] = {}
    for key, value in after.items():
        sub = _change(before[key], value, strict=strict) if key in before else {"set": value}
        if sub:
            keys[key] = sub
    drop = [key for key in before if key not in after]
    out: dict[str, Any] = {}
    if keys:
        out["keys"] = keys
    if drop:
        out["drop"] = drop
    return out


def _list_change(before: list[Any], after: list[Any], strict: bool) -> dict[str, Any]:
    start = 0
    limit = min(len(before), len(after))
    while start < limit and _same(before[start], after[start], strict):
        start += 1
    end = 0
    while end < limit - start and _same(before[-1 - end], after[-1 - end], strict):
        end += 1
    old, new = before[start : len(before) - end], after[start : len(after) - end]
    if not old or not new or len(old) * len(new) > _MATCH_LIMIT:
        return {"splice": [[start, len(old), new]]} if old or new else {}
    matcher = difflib.SequenceMatcher(None, [_canonical(x) for x in old], [_canonical(x) for x in new], autojunk=False)
    splices = [[start + i1, i2 - i1, new[j1:j2]] for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"]
    return {"splice": splices} if splices else {}


def _splice_problem(splices: Any, here: str) -> str | None:
    if not isinstance(splices, list):
        return f"{here}.splice is not a list"
    last = 0
    for k, entry in enumerate(splices):
        if (
            not isinstance(entry, list)
            or len(entry) != 3
            or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in entry[:2])
            or not isinstance(entry[2], list)
        ):
            return f"{here}.splice[{k}] is not [at, removed, [items]]"
        if entry[0] < last:
            return f"{here}.splice[{k}] starts inside or before the splice before it"
        last = entry[0] + entry[1]
    return None
