"""Bounds that make a JSON-Schema-constrained reply close within its token budget.

Why: grammar-constrained decoding (llama.cpp) gives a reply of the schema's shape only if the reply finishes. A
small model that loops inside a string (``"account_account_account..."``) or an array (the same tag again and
again) runs into ``max_tokens``; the JSON never closes and a tool call arrives as text. The local backend therefore
decodes under bounded versions of the schema, made here:

- **soft** (the first try): every string and array the schema leaves open gets a length, sized from the token
  budget at :data:`SOFT_CHARS_PER_TOKEN` characters per token and shared among the open values of an object. A reply
  within the bounds decodes exactly as without them (the grammar allows the same tokens up to the bound); a loop is
  cut where its bound is reached and the model goes on to close the JSON.
- **hard** (the retry, for a soft reply that still did not close): the longest text the grammar accepts, in
  characters, is at most the token budget. Every token of a grammar-constrained reply carries at least one character
  (llama.cpp rejects empty pieces, and end-of-generation only where the grammar is complete), so such a reply closes
  within ``max_tokens`` whatever the model does. To make the count exact the hard grammar also swaps llama.cpp's
  primitive rules for :data:`HARD_RULES` (no optional spaces; strings of printable ASCII without escapes, one
  character per token at worst; numbers of at most 10 integer and 6 decimal digits), drops what it cannot bound
  (string patterns, additional properties, optional properties that do not fit) and offers one array item where
  the budget has room for one only.

The character counts follow llama-cpp-python's schema-to-grammar converter (``llama_cpp.llama_grammar``, pinned in
``pyproject.toml``): which schema keyword wins when several are present, the fixed text of keys, enums and formats.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["HARD_RULES", "SOFT_CHARS_PER_TOKEN", "Bounds", "bound_schema", "longest_text"]

Bounds = Literal["soft", "hard"]

SOFT_CHARS_PER_TOKEN = 3
"""Characters per token the soft bounds assume. SmolLM2's calls in two demo sessions came to 2.4 characters per token
(counted on the calls re-rendered without their spaces), so a reply that uses every bound runs past ``max_tokens``
and gets the hard retry; soft bounds are there to cut loops early, not to guarantee."""

_MAX_LENGTH = 500
"""No bound exceeds this. The converter writes ``maxLength: n`` as n nested optional groups, and llama.cpp refuses
a grammar whose group holds about 2,000 generated rules ("number of rules that are going to be repeated multiplied
by the new repetition exceeds sane defaults"): a bound of 1,024 fails, so bounds stay well below."""

_SOFT_MAX_ITEMS = 8
"""Items an open array may hold under soft bounds, however large the budget."""

_SOFT_MIN_ITEMS = 2
"""Items an array may hold under soft bounds, however small its share (two tags, two parallel calls)."""

_HARD_MAX_ITEMS = 4
_HARD_ROOMY_STRING = 8
"""Under hard bounds an array gets a second item only while every item keeps this many characters per open string."""

_HARD_ROOMY_VALUE = 24
"""Under hard bounds an object keeps its optional properties only while each open value keeps this many characters
(a required account name matters more than an optional tag)."""

_ROOMY_LENGTH = 32
"""A string of this many characters is comfortable: soft bounds fit as many array items as leave each item its
properties with strings this long."""

_SOFT_MIN_LENGTH = 64
"""Soft bounds never make a string shorter than this: they are there to cut loops, not to squeeze replies."""

_INTEGER_DIGITS = 10
_DECIMAL_DIGITS = 6


def _up_to(n: int, item: str) -> str:
    """GBNF for 0..n repetitions of ``item``, nested as llama.cpp's converter writes them."""
    return "".join(f"({item} " for _ in range(n)).rstrip() + ")?" * n if n else ""


HARD_RULES: dict[str, str] = {
    "space": '""',
    "char": r"[\x20\x21\x23-\x5B\x5D-\x7E]",
    "integral-part": f"[0-9] | [1-9] {_up_to(_INTEGER_DIGITS - 1, '[0-9]')}",
    "decimal-part": f"[0-9] {_up_to(_DECIMAL_DIGITS - 1, '[0-9]')}",
    "number": '("-"? integral-part) ("." decimal-part)? space',
    "integer": '("-"? integral-part) space',
}
"""llama.cpp converter primitive rules replaced in a hard grammar, by rule name. The converter's own rules allow a
space after every value, ``\\uXXXX`` escapes (six characters for one) and multi-byte characters (up to four tokens
for one), and numbers of 52 characters."""

_NUMBER = 1 + _INTEGER_DIGITS + 1 + _DECIMAL_DIGITS
_INTEGER = 1 + _INTEGER_DIGITS
_FIXED = {"boolean": len("false"), "null": len("null"), "number": _NUMBER, "integer": _INTEGER}
_FORMATS = {"date": 12, "time": 20, "date-time": 31}
"""Quoted lengths of the converter's string formats (its time allows milliseconds and an offset); uuid is 38."""
_UUID = 38
_STRUCTURAL = ("$ref", "anyOf", "oneOf", "allOf", "type", "const", "enum", "properties", "items", "prefixItems")


@dataclass(frozen=True)
class _Fit:
    schema: dict[str, Any]
    longest: int


def bound_schema(schema: dict[str, Any], *, tokens: int, bounds: Bounds) -> dict[str, Any] | None:
    """A copy of ``schema`` whose open strings and arrays are bounded for a reply of at most ``tokens`` tokens.

    Returns None when no bounded version exists: for hard bounds, when even the shortest reply the schema allows
    (after dropping what may be dropped) is longer than ``tokens`` characters, or the schema is recursive; for soft
    bounds, only when the schema is recursive.
    """
    inlined = _inline_refs(schema, schema, ())
    if inlined is None:
        return None
    if bounds == "hard":
        fit = _Hard().fit(inlined, tokens)
        return fit.schema if fit is not None else None
    return _Soft().fit(inlined, tokens * SOFT_CHARS_PER_TOKEN)


def longest_text(schema: dict[str, Any]) -> int | None:
    """The longest reply, in characters, that a hard grammar for ``schema`` accepts; None when unbounded.

    Counts what the converter emits with :data:`HARD_RULES` in place: the proof, in tests, that a hard schema fits.
    """
    inlined = _inline_refs(schema, schema, ())
    return None if inlined is None else _longest(inlined)


# -- shared ---------------------------------------------------------------------------------------------------------


def _inline_refs(node: Any, root: dict[str, Any], seen: tuple[str, ...]) -> Any:
    """``node`` with local ``$ref``s (``#/$defs/X``, ``#/definitions/X``) replaced by their targets; None if a
    reference is recursive or does not resolve (the converter handles the same forms)."""
    if isinstance(node, list):
        items = [_inline_refs(v, root, seen) for v in node]
        return None if any(v is None for v in items) else items
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str):
        if ref in seen or not ref.startswith("#/"):
            return None
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part) if isinstance(target, dict) else None
        return _inline_refs(target, root, (*seen, ref)) if isinstance(target, dict) else None
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in ("$defs", "definitions"):
            continue
        if key == "properties" and isinstance(value, dict):
            props = {name: _inline_refs(sub, root, seen) for name, sub in value.items()}
            if any(v is None for v in props.values()):
                return None
            out[key] = props
        elif key in ("items", "prefixItems", "anyOf", "oneOf", "allOf", "additionalProperties"):
            inner = _inline_refs(value, root, seen)
            if inner is None and value is not None:
                return None
            out[key] = inner
        else:
            out[key] = value
    return out


def _kind(node: dict[str, Any]) -> str:
    """Which converter branch ``node`` takes (its order decides when several keywords are present)."""
    kind = node.get("type")
    if "anyOf" in node or "oneOf" in node:
        return "union"
    if isinstance(kind, list):
        return "types"
    if "const" in node:
        return "const"
    if "enum" in node:
        return "enum"
    if kind in (None, "object") and (
        "properties" in node or ("additionalProperties" in node and node["additionalProperties"] is not True)
    ):
        return "object"
    if kind in (None, "object") and "allOf" in node:
        return "allOf"
    if kind in (None, "array") and ("items" in node or "prefixItems" in node):
        return "tuple" if isinstance(node.get("items", node.get("prefixItems")), list) else "array"
    if kind in (None, "string"):
        if "pattern" in node:
            return "pattern"
        fmt = node.get("format") or ""
        if fmt.startswith("uuid") and fmt[4:] in ("", "1", "2", "3", "4", "5"):
            return "uuid"
        if fmt in _FORMATS:
            return "format"
    if kind == "string":
        return "string"
    if kind == "object" or not node:
        return "open-object"
    if kind == "array":
        return "open-array"
    if kind in _FIXED:
        return str(kind)
    if not any(key in node for key in _STRUCTURAL):
        return "typeless"
    return "unknown"


def _literal(value: Any) -> int:
    return len(json.dumps(value))


def _key_cost(name: str) -> int:
    return len(json.dumps(name)) + 1  # "name":


def _longest(node: Any) -> int | None:
    """Longest accepted text of ``node`` under hard rules (see :func:`longest_text`); None when unbounded."""
    if not isinstance(node, dict):
        return None
    kind = _kind(node)
    if kind == "union":
        alts = [_longest(alt) for alt in node.get("anyOf") or node.get("oneOf") or []]
        return None if not alts or any(a is None for a in alts) else max(a for a in alts if a is not None)
    if kind == "const":
        return _literal(node["const"])
    if kind == "enum":
        return max((_literal(v) for v in node["enum"]), default=None)
    if kind == "object":
        if node.get("additionalProperties") not in (None, False):
            return None
        props = node.get("properties") or {}
        parts = [_longest(sub) for sub in props.values()]
        if any(p is None for p in parts):
            return None
        keys = sum(_key_cost(name) for name in props)
        return 2 + keys + sum(p for p in parts if p is not None) + max(len(props) - 1, 0)
    if kind == "array":
        most, item = node.get("maxItems"), _longest(node["items"])
        if most == 0:
            return 2
        if most is None or item is None:
            return None
        return 2 + most * item + max(most - 1, 0)
    if kind == "tuple":
        items = [_longest(sub) for sub in node.get("items", node.get("prefixItems"))]
        return None if any(i is None for i in items) else 2 + sum(i for i in items if i) + max(len(items) - 1, 0)
    if kind == "string":
        most = node.get("maxLength")
        return None if most is None else 2 + int(most)
    if kind == "format":
        return _FORMATS[node["format"]]
    if kind == "uuid":
        return _UUID
    return _FIXED.get(kind)


# -- soft -----------------------------------------------------------------------------------------------------------


class _Soft:
    """Soft bounds: open strings get the share of the budget their object gives them (never under
    :data:`_SOFT_MIN_LENGTH`), open arrays as many items as fit comfortably. Nothing is dropped; a construct the
    bounds cannot reach is left as it is."""

    def fit(self, node: Any, budget: int) -> Any:
        if not isinstance(node, dict):
            return node
        kind = _kind(node)
        if kind == "union":
            key = "anyOf" if "anyOf" in node else "oneOf"
            return {**node, key: [self.fit(alt, budget) for alt in node[key]]}
        if kind == "object":
            return self._object(node, budget)
        if kind == "array":
            return self._array(node, budget)
        if kind in ("string", "typeless"):
            return _bounded_string(node, min(max(budget - 2, _SOFT_MIN_LENGTH), _MAX_LENGTH))
        return node

    def _object(self, node: dict[str, Any], budget: int) -> dict[str, Any]:
        props: dict[str, Any] = node.get("properties") or {}
        if not props:
            return node
        floors = {name: _floor(sub) for name, sub in props.items()}
        fixed = 2 + sum(_key_cost(name) + 1 for name in props) + sum(floors.values())
        elastic = [name for name, sub in props.items() if _elastic(sub)]
        share = max(budget - fixed, 0) // max(len(elastic), 1)
        bounded = {name: self.fit(sub, floors[name] + share) if name in elastic else sub for name, sub in props.items()}
        return {**node, "properties": bounded}

    def _array(self, node: dict[str, Any], budget: int) -> dict[str, Any]:
        """As many items as the budget holds at a comfortable size each (at most :data:`_SOFT_MAX_ITEMS`, at least
        :data:`_SOFT_MIN_ITEMS` unless the schema says fewer), each bounded to its share: a model that loops over
        items (one more tag, one more call) is stopped where the reply can still close."""
        least = int(node.get("minItems", 0))
        most = max(min(int(node.get("maxItems", _SOFT_MAX_ITEMS)), _SOFT_MAX_ITEMS), least)
        count = min(max((budget - 2) // (_roomy(node["items"]) + 1), least, _SOFT_MIN_ITEMS), most)
        return {**node, "items": self.fit(node["items"], (budget - 2) // max(count, 1)), "maxItems": count}


def _roomy(node: Any) -> int:
    """A comfortable length for ``node``: its required properties, strings of :data:`_ROOMY_LENGTH` characters,
    one item per array (what soft bounds count an array item as when deciding how many fit)."""
    if not isinstance(node, dict):
        return _ROOMY_LENGTH
    kind = _kind(node)
    if kind == "union":
        return max((_roomy(alt) for alt in node.get("anyOf") or node.get("oneOf") or []), default=_ROOMY_LENGTH)
    if kind == "object":
        props = node.get("properties") or {}
        required = set(node.get("required") or [])
        return 2 + sum(_key_cost(name) + _roomy(sub) + 1 for name, sub in props.items() if name in required)
    if kind == "array":
        return 2 + _roomy(node["items"])
    if kind in ("string", "typeless", "pattern"):
        return 2 + min(int(node.get("maxLength", _ROOMY_LENGTH)), _ROOMY_LENGTH)
    return _longest(node) or _ROOMY_LENGTH


def _bounded_string(node: dict[str, Any], room: int) -> dict[str, Any]:
    """``node`` as a string of at most ``room`` characters (its own bound if smaller, never under its minimum)."""
    out = {k: v for k, v in node.items() if k != "pattern"} if "pattern" in node else dict(node)
    out["type"] = "string"
    least = int(out.get("minLength", 0))
    out["maxLength"] = max(min(int(out.get("maxLength", room)), room), least)
    return out


def _floor(node: Any) -> int:
    """The characters ``node`` takes when every open value is as short as it may be (the fixed part of a share)."""
    if not isinstance(node, dict):
        return 0
    kind = _kind(node)
    if kind == "union":
        return min((_floor(alt) for alt in node.get("anyOf") or node.get("oneOf") or []), default=0)
    if kind == "object":
        props = node.get("properties") or {}
        required = set(node.get("required") or [])
        kept = [name for name in props if name in required]
        return 2 + sum(_key_cost(n) + _floor(props[n]) for n in kept) + max(len(kept) - 1, 0)
    if kind == "array":
        least = int(node.get("minItems", 0))
        return 2 + least * _floor(node["items"]) + max(least - 1, 0)
    if kind in ("string", "typeless", "pattern"):
        return 2 + int(node.get("minLength", 0))
    return _longest(node) or 0


def _elastic(node: Any) -> bool:
    """Whether ``node`` holds a string or array whose length a bound decides."""
    if not isinstance(node, dict):
        return False
    kind = _kind(node)
    if kind == "union":
        return any(_elastic(alt) for alt in node.get("anyOf") or node.get("oneOf") or [])
    if kind == "object":
        return any(_elastic(sub) for sub in (node.get("properties") or {}).values())
    return kind in ("array", "string", "typeless", "pattern", "open-array")


# -- hard -----------------------------------------------------------------------------------------------------------


class _Hard:
    """Hard bounds: a copy whose longest text (under :data:`HARD_RULES`) fits the budget, or None."""

    def fit(self, node: Any, budget: int) -> _Fit | None:
        if not isinstance(node, dict) or budget < 0:
            return None
        kind = _kind(node)
        if kind == "union":
            return self._union(node, budget)
        if kind == "types":
            return self._union({"anyOf": [{**node, "type": t} for t in node["type"]]}, budget)
        if kind in ("object", "open-object"):
            return self._object(node, budget)
        if kind in ("array", "open-array"):
            return self._array(node, budget)
        if kind == "tuple":
            return self._tuple(node, budget)
        if kind in ("string", "typeless", "pattern"):
            if budget - 2 < int(node.get("minLength", 0)):
                return None
            out = _bounded_string(node, min(budget - 2, _MAX_LENGTH))
            return _Fit(out, 2 + out["maxLength"])
        longest = _longest(node)
        return _Fit(node, longest) if longest is not None and longest <= budget else None

    def _union(self, node: dict[str, Any], budget: int) -> _Fit | None:
        """Every alternative that fits, each bounded on its own (the longest of them is the union's length)."""
        key = "anyOf" if "anyOf" in node else "oneOf"
        fits = [fit for fit in (self.fit(alt, budget) for alt in node[key]) if fit is not None]
        if not fits:
            return None
        rest = {k: v for k, v in node.items() if k not in ("anyOf", "oneOf")}
        return _Fit({**rest, key: [f.schema for f in fits]}, max(f.longest for f in fits))

    def _object(self, node: dict[str, Any], budget: int) -> _Fit | None:
        """Keys, separators and every value at its shortest first, the rest shared among open values. Optional
        properties are dropped (last first) while the open values would get less than :data:`_HARD_ROOMY_VALUE`
        characters each; where even the required ones do not fit, alternatives longer than needed go too."""
        props: dict[str, Any] = dict(node.get("properties") or {})
        required = [name for name in props if name in set(node.get("required") or [])]
        optional = [name for name in props if name not in required]
        best: _Fit | None = None
        while True:
            shared = self._share(node, props, [n for n in props if n in required or n in optional], budget, keep=True)
            if shared is not None:
                best, share = shared
                if share >= _HARD_ROOMY_VALUE:
                    return best
            if not optional:
                break
            optional.pop()
        if best is not None:
            return best
        shared = self._share(node, props, required, budget, keep=False)
        return shared[0] if shared is not None else None

    def _share(
        self, node: dict[str, Any], props: dict[str, Any], names: list[str], budget: int, *, keep: bool
    ) -> tuple[_Fit, int] | None:
        """The object with ``names`` only, each value at its floor plus an equal share of what is left (the share
        is returned too); None when the floors alone do not fit."""
        floors = [_hard_floor(props[name], keep=keep) for name in names]
        if any(f is None for f in floors):
            return None
        fixed = 2 + sum(_key_cost(name) + (f or 0) for name, f in zip(names, floors, strict=True))
        fixed += max(len(names) - 1, 0)
        if fixed > budget:
            return None
        elastic = sum(_elastic(props[name]) for name in names)
        share = (budget - fixed) // max(elastic, 1)
        bounded: dict[str, Any] = {}
        total = 2 + max(len(names) - 1, 0)
        for name, floor in zip(names, floors, strict=True):
            fit = self.fit(props[name], (floor or 0) + (share if _elastic(props[name]) else 0))
            if fit is None:
                return None
            bounded[name] = fit.schema
            total += _key_cost(name) + fit.longest
        out = {k: v for k, v in node.items() if k not in ("additionalProperties", "properties", "required")}
        out.update(type="object", properties=bounded, additionalProperties=False)
        kept_required = [name for name in node.get("required") or [] if name in bounded]
        if kept_required:
            out["required"] = kept_required
        return _Fit(out, total), (share if elastic else budget)

    def _array(self, node: dict[str, Any], budget: int) -> _Fit | None:
        """As many items as leave each a roomy share; one where the schema asks for none, if it fits, else none."""
        items = node["items"] if isinstance(node.get("items"), dict) else {"type": "string"}
        least = int(node.get("minItems", 0))
        most = max(min(int(node.get("maxItems", _HARD_MAX_ITEMS)), _HARD_MAX_ITEMS), least)
        floor = _hard_floor(items, keep=False)
        if floor is None:
            return None
        roomy = _hard_floor(items, keep=True) or floor
        roomy += _HARD_ROOMY_STRING + 2 if _elastic(items) else 0
        count = least
        for n in range(max(least, 1), most + 1):
            if (budget - 2 - (n - 1)) // n >= (roomy if n > 1 else floor):
                count = n
        out = {**node, "type": "array", "maxItems": count}
        if count == 0:  # "[]" only; the item schema is never used, but the grammar would still hold its rules
            return _Fit({**out, "items": {"type": "null"}}, 2) if budget >= 2 else None
        fit = self.fit(items, (budget - 2 - (count - 1)) // count)
        if fit is None:
            return None
        return _Fit({**out, "items": fit.schema}, 2 + count * fit.longest + count - 1)

    def _tuple(self, node: dict[str, Any], budget: int) -> _Fit | None:
        key = "items" if "items" in node else "prefixItems"
        parts = node[key]
        floors = [_hard_floor(p, keep=True) for p in parts]
        if any(f is None for f in floors):
            return None
        fixed = 2 + sum(f or 0 for f in floors) + max(len(parts) - 1, 0)
        if fixed > budget:
            return None
        share = (budget - fixed) // max(sum(_elastic(p) for p in parts), 1)
        fits = [self.fit(p, (f or 0) + (share if _elastic(p) else 0)) for p, f in zip(parts, floors, strict=True)]
        if any(f is None for f in fits):
            return None
        total = 2 + sum(f.longest for f in fits if f) + max(len(parts) - 1, 0)
        return _Fit({**node, key: [f.schema for f in fits if f]}, total)


def _hard_floor(node: Any, *, keep: bool) -> int | None:
    """The shortest a hard-bounded ``node`` can be made, every open value empty; with ``keep``, keeping every
    alternative of a union (its longest counts), else only the shortest. None: it cannot be bounded at all."""
    if not isinstance(node, dict):
        return None
    kind = _kind(node)
    if kind in ("union", "types"):
        alts = node.get("anyOf") or node.get("oneOf") or [{**node, "type": t} for t in node.get("type") or []]
        floors = [f for f in (_hard_floor(alt, keep=keep) for alt in alts) if f is not None]
        if not floors:
            return None
        return max(floors) if keep else min(floors)
    if kind in ("object", "open-object"):
        props = node.get("properties") or {}
        required = [name for name in props if name in set(node.get("required") or [])]
        floors = [_hard_floor(props[name], keep=keep) for name in required]
        if any(f is None for f in floors):
            return None
        return 2 + sum(_key_cost(n) for n in required) + sum(f or 0 for f in floors) + max(len(required) - 1, 0)
    if kind in ("array", "open-array"):
        least = int(node.get("minItems", 0))
        items = node["items"] if isinstance(node.get("items"), dict) else {"type": "string"}
        item = _hard_floor(items, keep=keep) if least else 0
        return None if item is None else 2 + least * item + max(least - 1, 0)
    if kind == "tuple":
        floors = [_hard_floor(p, keep=keep) for p in node.get("items", node.get("prefixItems"))]
        return None if any(f is None for f in floors) else 2 + sum(f or 0 for f in floors) + max(len(floors) - 1, 0)
    if kind in ("string", "typeless", "pattern"):
        return 2 + int(node.get("minLength", 0))
    return _longest(node)
