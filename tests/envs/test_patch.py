"""State patches: RFC 6902 semantics, ``increment``, all-or-nothing application."""

from __future__ import annotations

import pytest

from toolwild.envs.patch import PatchError, PatchOp, apply_patch

DOC = {"orders": [{"id": "A", "qty": 1}], "stock": {"tea": 3}, "a/b": {"~x": 1}}


def ops(*raw):
    return [PatchOp.model_validate(r) for r in raw]


def test_the_rfc_operations():
    out = apply_patch(
        DOC,
        ops(
            {"op": "add", "path": "/orders/-", "value": {"id": "B", "qty": 2}},
            {"op": "add", "path": "/orders/0", "value": {"id": "Z"}},
            {"op": "replace", "path": "/stock/tea", "value": 0},
            {"op": "copy", "from": "/orders/1", "path": "/last"},
            {"op": "move", "from": "/stock", "path": "/inventory"},
            {"op": "remove", "path": "/orders/1"},
            {"op": "test", "path": "/a~1b/~0x", "value": 1},
        ),
    )
    assert out == {
        "orders": [{"id": "Z"}, {"id": "B", "qty": 2}],
        "inventory": {"tea": 0},
        "last": {"id": "A", "qty": 1},
        "a/b": {"~x": 1},
    }
    assert DOC["orders"] == [{"id": "A", "qty": 1}]  # the input is never changed


def test_increment_is_exact_and_typed():
    out = apply_patch({"b": 0.1}, ops({"op": "increment", "path": "/b", "value": 0.2}))
    assert out == {"b": 0.3}
    with pytest.raises(PatchError, match="needs a number"):
        apply_patch({"b": "x"}, ops({"op": "increment", "path": "/b", "value": 1}))
    with pytest.raises(PatchError, match="numeric"):
        apply_patch({"b": 1}, ops({"op": "increment", "path": "/b", "value": True}))


@pytest.mark.parametrize(
    ("op", "reason"),
    [
        ({"op": "replace", "path": "/nope", "value": 1}, "no member 'nope'"),
        ({"op": "remove", "path": "/orders/5"}, "out of range"),
        ({"op": "add", "path": "/orders/01", "value": 1}, "not an array index"),
        ({"op": "add", "path": "/missing/x", "value": 1}, "no member 'missing'"),
        ({"op": "test", "path": "/stock/tea", "value": 4}, "test failed"),
        ({"op": "move", "from": "/stock", "path": "/stock/inner"}, "into itself"),
        ({"op": "remove", "path": ""}, "whole document"),
        ({"op": "add", "path": "stock", "value": 1}, "starts with '/'"),
    ],
)
def test_a_failing_operation_rejects_the_whole_patch(op, reason):
    first = {"op": "replace", "path": "/stock/tea", "value": 99}
    with pytest.raises(PatchError) as info:
        apply_patch(DOC, ops(first, op))
    assert info.value.index == 1 and reason in str(info.value)
    assert DOC["stock"]["tea"] == 3
