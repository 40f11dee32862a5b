"""Exact dedup: the published rule, reproduced on the SynthTools release (443 drops, the very tools it flags)."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from toolwild.cli.main import app
from toolwild.core.tool import Tool
from toolwild.synth.dedup import DropReason, exact_dedup, neighbour_share, normalized_name, semantic_dedup

TARBALL = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures" / "synthtools" / "tool_content.tar.gz"


def tool(key: str, name: str, field: str, description: str = "d") -> Tool:
    return Tool(name=name, description=description, extra={"source_id": key, "field": field})


def test_rules_on_small_cases():
    assert normalized_name("Order-Tracker  v2!") == "order tracker v2"
    report = exact_dedup(
        [
            tool("b_2", "Order Tracker", "b"),
            tool("a_1", "Order Tracker", "a"),
            tool("a_2", "order-tracker", "a", description="other"),  # same name, same field: dropped
            tool("b_1", "Order Tracker", "b", description="x"),  # same name in field b, visited first: kept
            tool("c_1", "Order  Tracker", "c"),  # same text as a_1 (whitespace and case aside): dropped
        ]
    )
    assert [t.extra["source_id"] for t in report.kept] == ["a_1", "b_1"]
    assert {(d.key, d.reason, d.duplicate_of) for d in report.dropped} == {
        ("a_2", DropReason.SAME_NAME_IN_FIELD, "a_1"),
        ("b_2", DropReason.SAME_NAME_IN_FIELD, "b_1"),
        ("c_1", DropReason.SAME_TEXT, "a_1"),
    }


@pytest.mark.skipif(not TARBALL.exists(), reason="shared fixtures not present")
def test_reproduces_the_published_exact_pass(tmp_path):
    with tarfile.open(TARBALL) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith("tool_list.json"))
        rows = [json.loads(line) for line in tar.extractfile(member).read().decode().splitlines() if line.strip()]
    flagged = {r["id"] for r in rows if r["dropped_exact"]}
    result = CliRunner().invoke(
        app,
        [
            "synth",
            "dedup",
            str(TARBALL),
            "--exact-only",
            "--out",
            str(tmp_path / "kept.jsonl"),
            "--report",
            str(tmp_path / "d"),
        ],
    )
    assert result.exit_code == 0, result.output
    dropped = [json.loads(line) for line in (tmp_path / "d").read_text().splitlines()]
    assert len(dropped) == len(flagged) == 443
    assert {d["key"] for d in dropped} == flagged
    assert len((tmp_path / "kept.jsonl").read_text().splitlines()) == 5900 - 443


def _unit(*rows):
    v = np.array(rows, dtype=np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_semantic_pass_within_fields_then_globally():
    tools = [tool("a_1", "A1", "a"), tool("a_2", "A2", "a"), tool("b_1", "B1", "b"), tool("b_2", "B2", "b")]
    vectors = _unit([1, 0, 0], [0.99, 0.1, 0], [0.98, 0, 0.2], [0, 1, 0])
    report = semantic_dedup(tools, vectors, tau=0.95)
    assert [t.extra["source_id"] for t in report.kept] == ["a_1", "b_2"]
    by_key = {d.key: d for d in report.dropped}
    assert by_key["a_2"].reason is DropReason.SIMILAR_IN_FIELD and by_key["a_2"].duplicate_of == "a_1"
    assert by_key["b_1"].reason is DropReason.SIMILAR_GLOBALLY and by_key["b_1"].duplicate_of == "a_1"
    assert by_key["a_2"].similarity == pytest.approx(float(vectors[0] @ vectors[1]), abs=1e-4)
    # a stricter threshold keeps everything; the share counts rows with any neighbour at tau
    assert semantic_dedup(tools, vectors, tau=0.999).dropped == []
    assert neighbour_share(vectors, 0.95) == 0.75


def test_semantic_pass_is_greedy_in_key_order_across_blocks(monkeypatch):
    import toolwild.synth.dedup as dedup

    monkeypatch.setattr(dedup, "_BLOCK", 3)  # force several blocks
    rng = np.random.default_rng(0)
    base = rng.normal(size=(5, 16))
    vectors = np.repeat(base, 4, axis=0) + rng.normal(scale=0.01, size=(20, 16))  # 5 clusters of 4
    vectors = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)
    tools = [tool(f"k{i:02d}", f"T{i}", "f") for i in range(20)]
    report = semantic_dedup(tools, vectors, tau=0.99)
    assert [t.extra["source_id"] for t in report.kept] == ["k00", "k04", "k08", "k12", "k16"]
    assert all(int(d.duplicate_of[1:]) == int(d.key[1:]) // 4 * 4 for d in report.dropped)
