"""The argument checker on every example of spec §5 and §9."""

from __future__ import annotations

import json

import pytest

from toolwild.eval.scoring.arguments import CORRECT, ErrorCode, check_arguments, check_schema, compare_values

PARAMS = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "ip": {"type": "string"},
        "count": {"type": "integer"},
        "price": {"type": "number"},  # a published ``float`` parameter, as sent to the model
        "flag": {"type": "boolean"},
        "format": {"type": "string", "enum": ["JSON", "XML", "CSV"]},
        "tags": {"type": "array", "items": {"type": "string"}},
        "range": {
            "type": "object",
            "properties": {"start": {"type": "string"}, "end": {"type": "string"}},
            "required": ["start"],
        },
    },
    "required": ["city"],
}


def check(predicted: dict | str, gold: dict) -> str:
    raw = predicted if isinstance(predicted, str) else json.dumps(predicted)
    return check_arguments(PARAMS, raw, gold)


@pytest.mark.parametrize(
    ("predicted", "gold", "passes"),
    [
        ("LasVegas", "Las Vegas", True),
        ("2024-07-14", "2024-07-15", False),
        ("New York City", "new york", False),
        ("123.456.78.90", "123.456.78.99", True),  # rouge splits sentences on "."
        ("Pariss", "Paris", False),  # a short single-token near miss
        ("the weather forecast for Chicago this weekend please", "the weather forecast for Chicago this weekend", True),
        ("  las   VEGAS ", "Las Vegas", True),
    ],
)
def test_string_matching(predicted, gold, passes):
    result = check({"city": predicted}, {"city": gold})
    assert (result == CORRECT) is passes, result


def test_empty_string_against_long_gold_is_a_rouge_failure():
    result = check({"city": ""}, {"city": "Los Angeles, California"})
    assert result.startswith(ErrorCode.ROUGE_FAIL)


def test_short_gold_uses_edit_similarity_first():
    result = check({"city": "Rome"}, {"city": "Paris"})
    assert result.startswith(ErrorCode.STR_SIMILARITY) and "edit score" in result


def test_extra_optional_argument_fails_keys_match():
    result = check({"city": "Paris", "format": "JSON"}, {"city": "Paris"})
    assert result.startswith(ErrorCode.KEYS_MISMATCH) and "extra: ['format']" in result


def test_missing_optional_argument_fails_keys_match():
    result = check({"city": "Paris"}, {"city": "Paris", "format": "JSON"})
    assert result.startswith(ErrorCode.KEYS_MISMATCH) and "missing: ['format']" in result


def test_integer_vs_float_value_types_must_be_identical():
    assert check({"city": "x", "price": 200.0}, {"city": "x", "price": 200}).startswith(ErrorCode.TYPE_INCONSISTENT)
    assert check({"city": "x", "price": 250}, {"city": "x", "price": 250}) == CORRECT


def test_integer_parameter_sent_as_float_fails_schema_with_nested_code():
    assert check({"city": "x", "count": 5.0}, {"city": "x", "count": 5}) == ErrorCode.NESTED_TYPE


def test_bool_passes_integer_schema_but_not_value_match():
    assert check_schema(PARAMS, {"city": "x", "count": True}) == CORRECT
    assert check({"city": "x", "count": True}, {"city": "x", "count": 1}).startswith(ErrorCode.TYPE_INCONSISTENT)


def test_bool_parameter_sent_as_0_or_1_fails_schema():
    assert check({"city": "x", "flag": 0}, {"city": "x", "flag": False}) == ErrorCode.NESTED_TYPE
    assert check({"city": "x", "flag": 1}, {"city": "x", "flag": True}) == ErrorCode.NESTED_TYPE


def test_enum_in_other_letter_case_fails_schema():
    assert check({"city": "x", "format": "json"}, {"city": "x", "format": "JSON"}) == ErrorCode.NESTED_ENUM


def test_top_level_schema_codes():
    assert check({"format": "JSON"}, {"city": "x"}) == ErrorCode.MISSING
    assert check({"city": "x", "nope": 1}, {"city": "x"}) == ErrorCode.UNDEFINED
    assert check("not json", {"city": "x"}) == ErrorCode.JSON_DECODE
    assert check("[1, 2]", {"city": "x"}) == ErrorCode.TYPE


def test_nested_object_checks_and_recursion():
    assert check({"city": "x", "range": {"end": "b"}}, {"city": "x", "range": {"start": "a"}}) == (
        ErrorCode.NESTED_MISSING
    )
    assert check({"city": "x", "range": {"start": "a", "zz": 1}}, {"city": "x", "range": {"start": "a"}}) == (
        ErrorCode.NESTED_UNDEFINED
    )
    result = check({"city": "x", "range": {"start": "2024-01-01"}}, {"city": "x", "range": {"start": "2024-01-02"}})
    assert result.startswith(ErrorCode.STR_SIMILARITY) and "'range.start'" in result


def test_lists_compared_in_order_and_by_length():
    gold = {"city": "x", "tags": ["timezone", "currency"]}
    assert check({"city": "x", "tags": ["timezone", "currency"]}, gold) == CORRECT
    assert check({"city": "x", "tags": ["currency", "timezone"]}, gold).startswith(ErrorCode.STR_SIMILARITY)
    assert check({"city": "x", "tags": ["timezone"]}, gold).startswith(ErrorCode.ARRAY_LENGTH)
    assert check({"city": "x", "tags": [1]}, {"city": "x", "tags": [1]}) == ErrorCode.NESTED_TYPE


def test_other_scalars_compare_by_inequality():
    assert compare_values(3, 3) == CORRECT
    assert compare_values(3, 4) == ErrorCode.VALUE_MISMATCH
    assert compare_values(None, None) == CORRECT


def test_cjk_strings_are_tokenised_before_rouge():
    assert compare_values("北京市朝阳区天气预报查询", "北京市朝阳区天气预报查询一下") == CORRECT
    assert compare_values("上海明天天气怎么样呢朋友", "北京市朝阳区天气预报查询").startswith(ErrorCode.STR_SIMILARITY)


def test_schema_without_type_means_string_and_unknown_type_means_any():
    params = {"type": "object", "properties": {"a": {}, "b": {"type": "mystery"}}}
    assert check_schema(params, {"a": 1}) == ErrorCode.NESTED_TYPE
    assert check_schema(params, {"b": [1, 2]}) == CORRECT


def test_any_of_passes_when_one_branch_passes():
    params = {"type": "object", "properties": {"a": {"anyOf": [{"type": "integer"}, {"type": "string"}]}}}
    assert check_schema(params, {"a": "x"}) == CORRECT
    assert check_schema(params, {"a": 1.5}) == ErrorCode.NESTED_TYPE


@pytest.mark.parametrize(
    "raw",
    [
        "[" * 5000 + "]" * 5000,  # deeper than Python's parser goes: RecursionError
        '{"city": "x", "count": ' + "9" * 5000 + "}",  # an integer past Python's conversion limit: ValueError
    ],
    ids=["nested-past-the-parser", "integer-too-long"],
)
def test_arguments_python_cannot_parse_are_a_json_error_not_a_crash(raw):
    """Found by the scorer fuzz: these raised out of the scorer (the published one crashes on them too)."""
    assert check_arguments(PARAMS, raw, {"city": "x"}) == ErrorCode.JSON_DECODE


def test_a_value_too_deep_to_write_out_is_not_in_the_context():
    from toolwild.eval.scoring.taxonomy import _value_in_context

    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    assert _value_in_context(deep, "anything") is False
    assert _value_in_context(["x"], '["x"]') is True
