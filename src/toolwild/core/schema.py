"""Deterministic JSON-Schema checks of tool arguments and results, before and after any model is involved.

Why not the scoring layer's schema check: that one reproduces WildToolBench's rules exactly (a boolean passes an
integer check, ``float`` is a type), because scores must match the published harness. An environment instead
behaves like a real service validating a request: standard JSON Schema (draft 2020-12, formats checked where a
checker exists), every violation reported at once with its path, so an agent can fix all of them in one retry.

Imported schemas are not always valid JSON Schema (WildToolBench's ``float`` type, SynthTools' per-property
``required`` flags, ``"default": "None"``); :func:`normalize_schema` maps them to what they mean before
validation, without touching the tool's own (published) schema.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from jsonschema_specifications import REGISTRY as _SPECIFICATIONS
from referencing import Registry, Resource
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT202012

__all__ = [
    "cached_schema_defect",
    "example_value",
    "normalize_schema",
    "published_types",
    "schema_defect",
    "schema_errors",
    "undeclared_required",
]

_TYPE_ALIASES = {"float": "number", "double": "number", "int": "integer", "bool": "boolean", "str": "string"}
_JSON_TYPES = frozenset({"string", "number", "integer", "boolean", "array", "object", "null"})
_SUBSCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions")
_SUBSCHEMA_ONE = ("items", "additionalProperties", "not", "contains")
_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_MAX_ERRORS = 20


def _normal_type(value: Any) -> Any:
    """A type keyword with aliases resolved; None when nothing valid remains (the constraint is dropped)."""
    names = value if isinstance(value, list) else [value]
    mapped = [_TYPE_ALIASES.get(n, n) for n in names if isinstance(n, str)]
    kept = [n for n in mapped if n in _JSON_TYPES]
    if not kept:
        return None
    return kept if isinstance(value, list) else kept[0]


def normalize_schema(schema: Any) -> Any:
    """The JSON Schema an imported schema means (a new object; the input is not changed).

    Type aliases become JSON types (``float`` -> ``number``), unknown type names drop the type constraint rather
    than reject every value, a ``required`` that is not a list is removed (it is a per-property flag from a
    non-standard format), and ``default`` is dropped (annotation only, and often of the wrong type).
    """
    if not isinstance(schema, dict):
        return schema if isinstance(schema, bool) else {}
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "type":
            normal = _normal_type(value)
            if normal is not None:
                out[key] = normal
        elif key == "required":
            if isinstance(value, list):
                out[key] = [v for v in value if isinstance(v, str)]
        elif key == "default":
            continue
        elif key in _SUBSCHEMA_MAPS and isinstance(value, dict):
            out[key] = {name: normalize_schema(sub) for name, sub in value.items()}
        elif key in _SUBSCHEMA_ONE and isinstance(value, dict | bool):
            out[key] = normalize_schema(value)
        elif key in _SUBSCHEMA_LISTS and isinstance(value, list):
            out[key] = [normalize_schema(sub) for sub in value]
        else:
            out[key] = value
    return out


_OFFLINE: Registry[Any] = _SPECIFICATIONS
"""The meta-schemas only, with no way to retrieve anything: jsonschema's default registry downloads a remote
``$ref`` at validation time, and toolwild never downloads at run time."""


@lru_cache(maxsize=4096)
def _validator(schema_text: str) -> Draft202012Validator | None:
    """A compiled validator per distinct schema (tools are called many times; compiling once matters)."""
    schema = normalize_schema(json.loads(schema_text))
    try:
        Draft202012Validator.check_schema(schema)
    except (SchemaError, RecursionError):
        return None
    return Draft202012Validator(schema, registry=_OFFLINE, format_checker=Draft202012Validator.FORMAT_CHECKER)


def published_types(schema: Any) -> Any:
    """A copy of ``schema`` with WildToolBench's non-standard type ``float`` read as ``number`` (the mapping the
    published harness applies before sending tools to a model; nothing else is changed)."""
    if isinstance(schema, list):
        return [published_types(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: published_types(v) for k, v in schema.items()}
    kind = out.get("type")
    if kind == "float":
        out["type"] = "number"
    elif isinstance(kind, list):
        out["type"] = ["number" if k == "float" else k for k in kind]
    return out


_NOT_SUBSCHEMAS = frozenset({"enum", "const", "default", "examples"})
"""Keywords whose values are data, not schemas: a ``$ref`` key inside them is not a reference."""


def _unresolvable_ref(schema: dict[str, Any]) -> str | None:
    """The path and value of the first ``$ref`` that does not resolve inside the schema (or to a meta-schema).

    Why only inside: resolving anything else means a download, and a schema that cannot be checked offline is as
    good as no schema. ``$id`` changes the base of the references below it, as in JSON Schema.
    """
    root: Resource[Any] = DRAFT202012.create_resource(schema)
    registry = _OFFLINE.with_resource(root.id() or "", root)
    stack: list[tuple[Any, str, Any]] = [(schema, "$", registry.resolver_with_root(root))]
    while stack:
        node, path, resolver = stack.pop()
        if isinstance(node, list):
            stack.extend((item, f"{path}[{i}]", resolver) for i, item in enumerate(node))
            continue
        if not isinstance(node, dict):
            continue
        if isinstance(node.get("$id"), str) and node is not schema:
            resolver = resolver.in_subresource(DRAFT202012.create_resource(node))
        ref = node.get("$ref")
        if isinstance(ref, str):
            try:
                resolver.lookup(ref)
            except Unresolvable:
                return f"{path}.$ref: {ref!r} cannot be resolved (only references within the schema are allowed)"
        stack.extend((v, f"{path}.{k}", resolver) for k, v in node.items() if k not in _NOT_SUBSCHEMAS)
    return None


@lru_cache(maxsize=8192)
def cached_schema_defect(schema_text: str, *, object_type: bool = True) -> str | None:
    """:func:`schema_defect` of a schema given as canonical JSON text (``json.dumps(schema, sort_keys=True)``),
    remembered: a suite repeats the same tools in session after session, an import checks each tool alone and then
    with its environment, and a check costs about a millisecond (ten under load: it meta-validates)."""
    return schema_defect(json.loads(schema_text), object_type=object_type)


def schema_defect(schema: Any, *, object_type: bool = True) -> str | None:
    """Why ``schema`` is not a usable JSON Schema (None when it is): meta-validation against draft 2020-12 after
    :func:`published_types`, every ``$ref`` resolvable offline, and (``object_type``) a schema of an object, as a
    tool's arguments always are.
    """
    if not isinstance(schema, dict):
        return "must be a JSON Schema object"
    mapped = published_types(schema)
    if object_type and mapped.get("type", "object") != "object":
        return f"must describe an object (type 'object'), not {mapped.get('type')!r}"
    try:
        Draft202012Validator.check_schema(mapped)
    except SchemaError as exc:
        return f"not valid JSON Schema: {exc.message} (at {_where(exc.absolute_path)})"
    except RecursionError:
        return "schema nested too deeply to check"
    return _unresolvable_ref(mapped)


_SAME_OBJECT = ("allOf", "then", "else")
"""Subschemas every value of their parent must also satisfy: a ``required`` in them is an obligation, and may name
a property the parent (or a sibling branch) declares."""
_ALTERNATIVES = ("anyOf", "oneOf", "not", "if")
"""Subschemas that apply only sometimes (one alternative of several, a negation, a condition): a ``required`` in
them need not be satisfiable (``"not": {"required": ["legacy"]}`` forbids an undeclared name), so it is not
reported."""
_CHILD_ONE = ("items", "additionalProperties", "contains", "unevaluatedProperties", "unevaluatedItems")
_CHILD_MAPS = ("properties", "patternProperties", "$defs", "definitions")


def _declared_names(node: dict[str, Any]) -> set[str]:
    """The property names an object schema declares itself or through its ``allOf``/``anyOf``/``oneOf`` branches
    (a common idiom: properties at the top, alternative ``required`` lists in the branches, or the reverse)."""
    names: set[str] = set()
    stack = [node]
    while stack:
        current = stack.pop()
        props = current.get("properties")
        if isinstance(props, dict):
            names.update(k for k in props if isinstance(k, str))
        for key in ("allOf", "anyOf", "oneOf"):
            branches = current.get(key)
            if isinstance(branches, list):
                stack.extend(b for b in branches if isinstance(b, dict))
    return names


def _may_declare_elsewhere(node: dict[str, Any], name: str) -> bool:
    """True when ``name`` may be declared where this check does not look, so it is not reported: a ``$ref`` (its
    target may declare it), a ``patternProperties`` pattern that matches it, or ``additionalProperties`` given as
    anything but ``false`` (the author explicitly allows undeclared names)."""
    if "$ref" in node or "$dynamicRef" in node:
        return True
    extra = node.get("additionalProperties")
    if extra is not None and extra is not False:
        return True
    patterns = node.get("patternProperties")
    if isinstance(patterns, dict):
        for pattern in patterns:
            try:
                if re.search(pattern, name):
                    return True
            except (re.error, TypeError):  # a pattern Python cannot read: assume it matches
                return True
    return False


def undeclared_required(schema: Any) -> tuple[str, str] | None:
    """The first name an object schema lists in ``required`` without declaring it, as ``(path, name)`` with the
    path of the ``required`` entry (``required[1]``, ``properties.address.required[0]``); None when there is none.

    Why a defect although JSON Schema allows it: an agent builds its arguments from ``properties``, so it never
    learns the name, and every call it makes is refused for lacking it (WildToolBench's ``createMod`` requires
    ``game_id`` after its property was renamed ``mod_id``). Reported only when certain: a name a ``$ref``, a
    ``patternProperties`` pattern, an explicit ``additionalProperties`` or a schema of the same object
    (``allOf``/``anyOf``/``oneOf`` branches) may declare is left alone, and so is a ``required`` that applies only
    sometimes (see :data:`_ALTERNATIVES`).
    """
    if not isinstance(schema, dict):
        return None
    # (node, path, names declared by enclosing schemas of the same object, whether its `required` is an obligation)
    stack: list[tuple[Any, str, frozenset[str], bool]] = [(schema, "", frozenset(), True)]
    while stack:
        node, path, inherited, obliged = stack.pop()
        if isinstance(node, list):
            stack.extend((item, f"{path}[{i}]", inherited, obliged) for i, item in reversed(list(enumerate(node))))
            continue
        if not isinstance(node, dict):
            continue
        declared = inherited | _declared_names(node)
        required = node.get("required")
        if obliged and isinstance(required, list):
            for i, name in enumerate(required):
                if isinstance(name, str) and name not in declared and not _may_declare_elsewhere(node, name):
                    return (f"{path}.required[{i}]" if path else f"required[{i}]"), name
        prefix = f"{path}." if path else ""
        children: list[tuple[Any, str, frozenset[str], bool]] = []
        for key in _SAME_OBJECT + _ALTERNATIVES:
            if isinstance(node.get(key), dict | list):
                children.append((node[key], f"{prefix}{key}", frozenset(declared), obliged and key in _SAME_OBJECT))
        for key in (*_CHILD_ONE, "prefixItems"):
            if isinstance(node.get(key), dict | list):
                children.append((node[key], f"{prefix}{key}", frozenset(), obliged))
        for key in _CHILD_MAPS:
            value = node.get(key)
            if isinstance(value, dict):
                children.extend((sub, f"{prefix}{key}.{name}", frozenset(), obliged) for name, sub in value.items())
        stack.extend(reversed(children))  # depth first, in document order
    return None


def _where(path: Any) -> str:
    parts = [f"[{p}]" if isinstance(p, int) else f".{p}" for p in path]
    return ("$" + "".join(parts)) if parts else "$"


def schema_errors(schema: dict[str, Any] | None, value: Any) -> list[str]:
    """Every violation of ``schema`` by ``value``, as ``"$.path: message"`` lines sorted by path (empty = valid).

    A schema that is still not valid JSON Schema after normalisation constrains nothing (we cannot tell a caller
    what is wrong with their request against a rule that has no meaning); the environment lint reports such tools.
    """
    if not schema:
        return []
    validator = _validator(json.dumps(schema, sort_keys=True, default=str))
    if validator is None:
        return []
    try:
        errors = sorted(validator.iter_errors(value), key=lambda e: (list(map(str, e.absolute_path)), e.message))
    except Unresolvable as exc:  # a schema that was not checked on load (built in code, or a suite's tools)
        return [f"$: the schema cannot be checked: unresolvable reference {exc}"]
    except RecursionError:
        return ["$: the value is nested too deeply to check"]
    lines = [f"{_where(e.absolute_path)}: {e.message}" for e in errors[:_MAX_ERRORS]]
    if len(errors) > _MAX_ERRORS:
        lines.append(f"... and {len(errors) - _MAX_ERRORS} more")
    return lines


_SCALARS: dict[str, Any] = {"string": "x1", "number": 1.5, "integer": 1, "boolean": True, "null": None}
_FORMATS = {"date": "2024-07-01", "date-time": "2024-07-01T10:00:00Z", "email": "a@example.com", "uri": "https://e.x"}


def example_value(schema: Any) -> Any:
    """A value that satisfies ``schema`` for the common keywords (type, enum, format, min*, required, items).

    Used to make test calls that pass argument validation (the audit's "valid" calls, tests).
    """
    schema = normalize_schema(schema)
    if not isinstance(schema, dict) or not schema:
        return "x1"
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) else kind
    if kind == "object" or "properties" in schema:
        props = schema.get("properties", {})
        return {name: example_value(props.get(name, {})) for name in schema.get("required", [])}
    if kind == "array":
        return [example_value(schema.get("items", {}))] * max(1, int(schema.get("minItems", 1)))
    if kind == "string" and schema.get("format") in _FORMATS:
        return _FORMATS[schema["format"]]
    if kind in ("number", "integer"):
        low = schema.get("minimum", schema.get("exclusiveMinimum", 0))
        value = max(1, low + 1) if "exclusiveMinimum" in schema else max(1, low)
        high = schema.get("maximum")
        value = high if high is not None and value > high else value
        return int(value) if kind == "integer" else float(value)
    return _SCALARS.get(kind, "x1")
