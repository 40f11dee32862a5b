"""State patches: JSON Patch (RFC 6902) plus ``increment``, applied by code, never by the model.

Why a patch and not "the model rewrites the state": a simulated write must change exactly what it says it changes,
and the change must be checkable. The model proposes operations; this module applies them to a copy, all or
nothing, and rejects the whole patch with the failing operation's index and path when one does not apply (a path
that does not exist, a ``test`` that fails). ``increment`` is our one extension: ``{"op": "increment", "path": p,
"value": n}`` adds ``n`` to the number at ``p``, so arithmetic on balances and stock counts is done by code rather
than by the model (the published simulators' refund-arithmetic defect).
"""

from __future__ import annotations

import copy
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from toolwild.errors import ToolwildError

__all__ = ["PatchError", "PatchOp", "apply_patch"]


class PatchError(ToolwildError, ValueError):
    """A patch that does not apply; nothing of it was applied."""

    def __init__(self, index: int, op: str, path: str, reason: str) -> None:
        super().__init__(f"operation {index} ({op} {path or '/'}): {reason}")
        self.index = index
        self.reason = reason


class PatchOp(BaseModel):
    """One patch operation (``from`` is spelled ``from_`` in Python and ``from`` in JSON)."""

    op: Literal["add", "remove", "replace", "move", "copy", "test", "increment"]
    path: str
    value: Any = None
    from_: str | None = None

    model_config = ConfigDict(extra="forbid", populate_by_name=True, alias_generator=lambda n: n.rstrip("_"))


def _tokens(pointer: str) -> list[str]:
    """RFC 6901: ``/a/b~1c`` -> ``["a", "b/c"]``; the empty pointer is the whole document."""
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise ValueError("a JSON pointer starts with '/'")
    return [t.replace("~1", "/").replace("~0", "~") for t in pointer[1:].split("/")]


def _index(container: list[Any], token: str, *, for_insert: bool) -> int:
    if token == "-" and for_insert:
        return len(container)
    if not token.isdigit() or (len(token) > 1 and token.startswith("0")):
        raise ValueError(f"{token!r} is not an array index")
    index = int(token)
    limit = len(container) if for_insert else len(container) - 1
    if index > limit:
        raise ValueError(f"index {index} is out of range (array of {len(container)})")
    return index


def _parent(doc: Any, tokens: list[str]) -> Any:
    node = doc
    for token in tokens[:-1]:
        if isinstance(node, dict):
            if token not in node:
                raise ValueError(f"no member {token!r}")
            node = node[token]
        elif isinstance(node, list):
            node = node[_index(node, token, for_insert=False)]
        else:
            raise ValueError(f"cannot descend into a {type(node).__name__} at {token!r}")
    return node


def _get(doc: Any, tokens: list[str]) -> Any:
    if not tokens:
        return doc
    parent, last = _parent(doc, tokens), tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise ValueError(f"no member {last!r}")
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(parent, last, for_insert=False)]
    raise ValueError(f"a {type(parent).__name__} has no members")


def _add(doc: Any, tokens: list[str], value: Any) -> Any:
    if not tokens:
        return value
    parent, last = _parent(doc, tokens), tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, for_insert=True), value)
    else:
        raise ValueError(f"cannot add into a {type(parent).__name__}")
    return doc


def _remove(doc: Any, tokens: list[str]) -> tuple[Any, Any]:
    if not tokens:
        raise ValueError("cannot remove the whole document")
    parent, last = _parent(doc, tokens), tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise ValueError(f"no member {last!r}")
        return doc, parent.pop(last)
    if isinstance(parent, list):
        return doc, parent.pop(_index(parent, last, for_insert=False))
    raise ValueError(f"a {type(parent).__name__} has no members")


def _apply_one(doc: Any, op: PatchOp) -> Any:
    tokens = _tokens(op.path)
    if op.op == "add":
        return _add(doc, tokens, copy.deepcopy(op.value))
    if op.op == "remove":
        return _remove(doc, tokens)[0]
    if op.op == "replace":
        _get(doc, tokens)  # must exist
        doc, _ = _remove(doc, tokens) if tokens else (doc, None)
        return _add(doc, tokens, copy.deepcopy(op.value))
    if op.op in ("move", "copy"):
        if op.from_ is None:
            raise ValueError(f"{op.op} needs 'from'")
        source = _tokens(op.from_)
        if op.op == "move":
            if tokens[: len(source)] == source and len(tokens) > len(source):
                raise ValueError("cannot move a value into itself")
            doc, value = _remove(doc, source)
        else:
            value = copy.deepcopy(_get(doc, source))
        return _add(doc, tokens, value)
    if op.op == "test":
        if _get(doc, tokens) != op.value:
            raise ValueError("test failed: the value differs")
        return doc
    # increment
    current = _get(doc, tokens)
    if isinstance(current, bool) or not isinstance(current, int | float):
        raise ValueError(f"increment needs a number at the path, found {type(current).__name__}")
    if isinstance(op.value, bool) or not isinstance(op.value, int | float):
        raise ValueError("increment needs a numeric value")
    total = current + op.value
    if isinstance(total, float):
        total = round(total, 10)  # 0.1 + 0.2 is 0.3 in a ledger
    return _add(_remove(doc, tokens)[0], tokens, total)


def apply_patch(document: Any, ops: list[PatchOp]) -> Any:
    """The document after every operation, as a new object (``document`` is not changed).

    Raises:
        PatchError: an operation does not apply; the caller keeps ``document`` as it was.
    """
    doc = copy.deepcopy(document)
    for index, op in enumerate(ops):
        try:
            doc = _apply_one(doc, op)
        except ValueError as exc:
            raise PatchError(index, op.op, op.path, str(exc)) from None
    return doc
