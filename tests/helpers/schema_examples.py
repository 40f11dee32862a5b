"""Valid example values for (imported) JSON Schemas, to make calls that pass argument validation in tests."""

from __future__ import annotations

from typing import Any

from toolwild.core.schema import normalize_schema

_SCALARS: dict[str, Any] = {"string": "x1", "number": 1.5, "integer": 1, "boolean": True, "null": None}
_FORMATS = {"date": "2024-07-01", "date-time": "2024-07-01T10:00:00Z", "email": "a@example.com", "uri": "https://e.x"}


def example_value(schema: Any) -> Any:
    """A value that satisfies ``schema`` for the common keywords (type, enum, format, min*, required, items)."""
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
