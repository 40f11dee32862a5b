"""The argument check of WildToolBench (spec §5): a schema check, then a value match against the gold call.

Results are the published strings (``"correct"`` or e.g. ``"error_match: value mismatch at 'city'"``) so that a
verdict can be compared line by line with the published scorer's output; :attr:`ArgumentCheck.code` strips the
location detail when only the kind of error matters.

String similarity uses the ``rouge`` 1.0.1 package itself (with jieba tokens for CJK text), because its sentence
splitting on "." decides real cases ("123.456.78.90" vs "123.456.78.99" passes).
"""

from __future__ import annotations

import json
import re
from difflib import SequenceMatcher
from functools import lru_cache
from typing import Any

__all__ = [
    "CORRECT",
    "ErrorCode",
    "check_arguments",
    "check_schema",
    "compare_values",
]

CORRECT = "correct"


class ErrorCode:
    """The published error strings (kept verbatim: they are part of the result format)."""

    JSON_DECODE = "error: args invalid json format"
    TOOL_UNDEFINED = "error_schema: tool not defined"  # ours: the published scorer crashes here
    MISSING = "error_schema: required args missing"
    UNDEFINED = "error_schema: args not defined"
    TYPE = "error_schema: args type inconsistent"
    ENUM = "error_schema: args value not in enum"
    NESTED_MISSING = "error_schema: required nested args missing"
    NESTED_UNDEFINED = "error_schema: nested args not defined"
    NESTED_TYPE = "error_schema: nested args type inconsistent"
    NESTED_ENUM = "error_schema: nested args value not in enum"
    KEYS_MISMATCH = "error_match: args keys mismatch"
    ARRAY_LENGTH = "error_match: array length mismatch"
    TYPE_INCONSISTENT = "error_match: value type inconsistent"
    VALUE_MISMATCH = "error_match: value mismatch"
    STR_SIMILARITY = "error_match: string similarity too low"
    ROUGE_FAIL = "error_match: rouge calculation failed"


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "float": (float,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
    "null": (type(None),),
}
_CJK = re.compile(r"[\u4e00-\u9fa5]")


def _allowed_types(schema: dict[str, Any]) -> tuple[type, ...]:
    """Python types a value may have under ``schema`` (no ``type`` means string, an unknown type means any)."""
    if "anyOf" in schema:
        out: list[type] = []
        for sub in schema["anyOf"]:
            if isinstance(sub, dict):
                out.extend(_allowed_types(sub))
        return tuple(out)
    if "type" in schema:
        t = schema["type"]
        return _JSON_TYPES.get(t, ()) if isinstance(t, str) else ()
    return (str,)


def _check_node(value: Any, schema: dict[str, Any], path: str) -> str | None:
    """Recursive schema check; top-level parameters already use the nested codes (``path`` is their name)."""
    top = path == ""
    if "anyOf" in schema and isinstance(schema["anyOf"], list):
        errors = []
        for sub in schema["anyOf"]:
            err = _check_node(value, sub if isinstance(sub, dict) else {}, path)
            if err is None:
                return None
            errors.append(err)
        return errors[0] if errors else None
    allowed = _allowed_types(schema)
    if allowed and not isinstance(value, allowed):
        return ErrorCode.TYPE if top else ErrorCode.NESTED_TYPE
    enum = schema.get("enum")
    if isinstance(enum, list) and value not in enum:
        return ErrorCode.ENUM if top else ErrorCode.NESTED_ENUM
    if isinstance(value, dict):
        props = schema.get("properties", {}) or {}
        required = {r for r in schema.get("required", []) or [] if isinstance(r, str)}
        if required - set(value):
            return ErrorCode.MISSING if top else ErrorCode.NESTED_MISSING
        for key, sub_value in value.items():
            if key not in props:
                if schema.get("additionalProperties") is True:
                    continue
                return ErrorCode.UNDEFINED if top else ErrorCode.NESTED_UNDEFINED
            sub_schema = props[key] if isinstance(props[key], dict) else {}
            err = _check_node(sub_value, sub_schema, f"{path}.{key}" if path else key)
            if err:
                return err
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            err = _check_node(item, schema["items"], f"{path}[{i}]" if path else f"[{i}]")
            if err:
                return err
    return None


def check_schema(parameters: dict[str, Any], arguments: Any) -> str:
    """Check parsed arguments against a tool's parameter schema (published semantics: a bool passes as integer)."""
    top = {
        "type": "object",
        "required": list(parameters.get("required", []) or []),
        "properties": parameters.get("properties", {}) or {},
    }
    return _check_node(arguments, top, "") or CORRECT


@lru_cache(maxsize=1)
def _rouge() -> Any:
    from rouge import Rouge  # imported lazily: it is only needed for long-string comparisons

    return Rouge()


@lru_cache(maxsize=65536)
def _rouge_l_f(predicted: str, gold: str) -> float:
    if _CJK.search(gold) or _CJK.search(predicted):
        import jieba

        jieba.setLogLevel(60)
        predicted = " ".join(jieba.cut(predicted))
        gold = " ".join(jieba.cut(gold))
    return float(_rouge().get_scores(predicted, gold)[0]["rouge-l"]["f"])


def _normalise(s: str) -> str:
    return "".join(s.split()).lower()


def compare_values(predicted: Any, gold: Any, path: str = "") -> str:
    """Compare a predicted value with the gold one (types identical, dict keys identical, lists in order)."""
    where = f" at '{path}'" if path else ""
    if type(predicted) is not type(gold):
        return f"{ErrorCode.TYPE_INCONSISTENT}{where}"
    if isinstance(gold, dict):
        if set(predicted) != set(gold):
            missing = [k for k in gold if k not in predicted]
            extra = [k for k in predicted if k not in gold]
            detail = []
            if missing:
                detail.append(f"missing: {missing}")
            if extra:
                detail.append(f"extra: {extra}")
            return f"{ErrorCode.KEYS_MISMATCH}{where} ({', '.join(detail)})"
        for key in gold:
            res = compare_values(predicted[key], gold[key], f"{path}.{key}" if path else key)
            if res != CORRECT:
                return res
        return CORRECT
    if isinstance(gold, list):
        if len(predicted) != len(gold):
            return f"{ErrorCode.ARRAY_LENGTH}{where}"
        for i, (p, g) in enumerate(zip(predicted, gold, strict=True)):
            res = compare_values(p, g, f"{path}[{i}]")
            if res != CORRECT:
                return res
        return CORRECT
    if isinstance(gold, str):
        if predicted == gold or _normalise(predicted) == _normalise(gold):
            return CORRECT
        if len(gold) < 10:
            ratio = SequenceMatcher(None, predicted, gold).ratio()
            if ratio < 0.8:
                return f"{ErrorCode.STR_SIMILARITY}{where} (edit score: {ratio:.2f})"
        try:
            score = _rouge_l_f(predicted, gold)
        except Exception:
            # The rouge package raises on empty hypotheses and sentence-less inputs (ValueError, and others on
            # odd text); the published scorer catches everything here and reports a failed comparison.
            return f"{ErrorCode.ROUGE_FAIL}{where}"
        if score < 0.7:
            return f"{ErrorCode.STR_SIMILARITY}{where} (rouge score: {score:.2f})"
        return CORRECT
    if predicted != gold:
        return f"{ErrorCode.VALUE_MISMATCH}{where}"
    return CORRECT


def check_arguments(parameters: dict[str, Any] | None, predicted_raw: str, gold: dict[str, Any]) -> str:
    """The full check of one call: JSON parse, schema, then value match (first failure wins).

    Args:
        parameters: the tool's parameter schema as sent to the model (``float`` already mapped to ``number``);
            None when the tool is not in the session's tool list.
        predicted_raw: the arguments text the model wrote.
        gold: the gold arguments.
    """
    try:
        predicted = json.loads(predicted_raw)
    except (json.JSONDecodeError, TypeError):
        return ErrorCode.JSON_DECODE
    except (RecursionError, ValueError):
        # Nested past the parser's depth, or an integer literal past Python's conversion limit. The published
        # scorer catches JSONDecodeError only and crashes here; no other label can be right: it is not usable JSON.
        return ErrorCode.JSON_DECODE
    if parameters is None:
        return ErrorCode.TOOL_UNDEFINED
    status = check_schema(parameters, predicted)
    if status != CORRECT:
        return status
    return compare_values(predicted, gold)
