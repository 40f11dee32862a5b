"""Argument values for generated calls: where a value can come from, and the facts a conversation has shown.

A gold call's value has one of three sources, and the source decides how the user may word it:

- the *environment* (its seed state, or what a no-argument read such as ``list_items`` shows): real entities the
  user names explicitly, so calls on them succeed;
- the *conversation*: a :class:`Fact` an earlier task showed (an argument or a result), which a later task may point
  to instead of stating (the hidden-intent subtypes);
- the *schema*: enum members, formats and bounded numbers, or a plausible made-up identifier, when nothing better
  exists (a simulated service accepts them; a coded one may refuse, and the task is then dropped).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

from toolwild.core.references import key_matches, leaves, result_key, singular
from toolwild.core.schema import normalize_schema
from toolwild.core.tool import Tool
from toolwild.synth.utterances import humanize

__all__ = ["Fact", "facts_of", "free_value", "key_matches", "leaves", "singular"]

_NAMES = ("Alex Morgan", "Priya Shah", "Diego Ramos", "Mei Chen", "Sam Okafor", "Lena Fischer")
_CITIES = ("Lisbon", "Denver", "Osaka", "Nairobi", "Toronto", "Melbourne")


@dataclass(frozen=True)
class Fact:
    """A scalar the conversation showed: in task ``task`` (-1: the environment, never shown), under ``key``."""

    task: int
    key: str
    value: Any
    channel: str = ""
    """``arg`` (the user asked for it or said it), ``result`` (a call gave it back), or empty (the environment)."""
    tool: str = ""
    """The tool of the call that showed it (empty for the user's own words)."""
    about: tuple[tuple[str, Any], ...] = ()
    """For a result: the text arguments of the call that gave it back (``(("item", "sugar"),)``), the thing the
    result describes: the stock level of sugar is no amount to order coffee by."""


def facts_of(task: int, tool: Tool, arguments: dict[str, Any], result: Any) -> list[Fact]:
    """The facts one call shows: its argument values and the scalars of its result."""
    out = [Fact(task, k, v, "arg", tool.name) for k, v in leaves(arguments, "")]
    about = tuple((k, v) for k, v in leaves(arguments, "") if isinstance(v, str))
    out += [Fact(task, k, v, "result", tool.name, about) for k, v in leaves(result, result_key(tool, tool.name))]
    return out


def _bounded_number(schema: dict[str, Any], rng: random.Random, integer: bool) -> float | int:
    low = schema.get("minimum", schema.get("exclusiveMinimum"))
    high = schema.get("maximum", schema.get("exclusiveMaximum"))
    low = 1 if low is None else low
    high = low + (4 if integer else 99) if high is None else high
    if integer:
        lo, hi = int(low) + (1 if "exclusiveMinimum" in schema else 0), int(high)
        hi = min(hi, lo + 4)
        return rng.randint(lo, max(lo, hi))
    value = round(rng.uniform(float(low), float(high)), 2)
    return value if value % 1 else value + 0.25 if value + 0.25 <= high else value


def free_value(param: str, schema: Any, rng: random.Random, pool: list[Fact], today: date) -> Any:
    """A value for ``param``: a known one from ``pool`` when its key fits, else one the schema allows."""
    schema = normalize_schema(schema) if isinstance(schema, dict) else {}
    known = [f.value for f in pool if key_matches(f.key, param)]
    if schema.get("enum"):
        allowed = [v for v in schema["enum"] if v in known] or list(schema["enum"])
        return rng.choice(allowed)
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) and kind else kind
    typed = [v for v in known if _fits(kind, v)]
    if typed:
        return rng.choice(sorted(set(typed), key=str))
    if kind == "array":
        item = free_value(singular(param), schema.get("items", {}), rng, pool, today)
        return [item]
    if kind == "object" or "properties" in schema:
        props = schema.get("properties", {})
        return {k: free_value(k, props.get(k, {}), rng, pool, today) for k in schema.get("required", [])}
    if kind == "integer":
        return _bounded_number(schema, rng, integer=True)
    if kind == "number":
        return _bounded_number(schema, rng, integer=False)
    if kind == "boolean":
        return rng.random() < 0.5
    fmt = schema.get("format")
    low = param.lower()
    if fmt == "date" or low.endswith("date"):
        return (today + timedelta(days=rng.randint(1, 20))).isoformat()
    if fmt == "date-time":
        return f"{(today + timedelta(days=rng.randint(1, 20))).isoformat()}T{rng.randint(8, 18):02d}:00:00Z"
    if fmt == "email" or "email" in low:
        return f"{rng.choice(_NAMES).split()[0].lower()}@example.com"
    if low.endswith(("_id", "id", "_code", "_number", "_sku", "_ref")):
        prefix = "".join(w[0] for w in humanize(param).split()[:-1]).upper() or "ID"
        return f"{prefix}-{rng.randint(1000, 9999)}"
    if "name" in low:
        return rng.choice(_NAMES)
    if any(w in low for w in ("city", "location", "destination", "origin", "address")):
        return rng.choice(_CITIES)
    return f"{humanize(param)} {rng.randint(2, 99)}"


def _fits(kind: Any, value: Any) -> bool:
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind in (None, "string"):
        return isinstance(value, str)
    return False
