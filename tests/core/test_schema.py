"""Environment-side JSON-Schema checks: imported schemas normalised, every violation reported."""

from __future__ import annotations

from toolwild.core.schema import normalize_schema, schema_errors


def test_imported_quirks_are_normalised_without_changing_the_input():
    raw = {
        "type": "object",
        "properties": {
            "price": {"type": "float", "default": "None"},
            "tags": {"type": "array", "items": {"type": "str"}},
            "odd": {"type": "decimal128"},
            "flag": {"type": "boolean", "required": True},
        },
        "required": ["price"],
    }
    norm = normalize_schema(raw)
    assert norm["properties"]["price"] == {"type": "number"}
    assert norm["properties"]["tags"]["items"] == {"type": "string"}
    assert norm["properties"]["odd"] == {}
    assert norm["properties"]["flag"] == {"type": "boolean"}
    assert raw["properties"]["price"]["type"] == "float"  # untouched


def test_every_violation_is_reported_with_its_path():
    schema = {
        "type": "object",
        "properties": {
            "n": {"type": "integer", "minimum": 1},
            "items": {"type": "array", "items": {"type": "object", "properties": {"q": {"type": "float"}}}},
            "day": {"type": "string", "format": "date"},
            "kind": {"enum": ["a", "b"]},
        },
        "required": ["n", "kind"],
        "additionalProperties": False,
    }
    errors = schema_errors(schema, {"n": 0, "items": [{"q": "x"}], "day": "2024-13-45", "extra": 1})
    assert any(e.startswith("$: 'kind' is a required property") for e in errors)
    assert any(e.startswith("$.n:") and "minimum" in e for e in errors)
    assert any(e.startswith("$.items[0].q:") for e in errors)
    assert any(e.startswith("$.day:") and "date" in e for e in errors)
    assert any("'extra' was unexpected" in e for e in errors)
    assert schema_errors(schema, {"n": 2, "kind": "a", "items": [{"q": 1}], "day": "2024-02-29"}) == []


def test_a_schema_that_means_nothing_constrains_nothing():
    assert schema_errors({"type": "object", "minProperties": "two"}, {}) == []
    assert schema_errors(None, {"anything": 1}) == []
