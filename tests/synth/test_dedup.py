"""Exact dedup: the published rule, reproduced on the SynthTools release (443 drops, the very tools it flags)."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from toolwild.cli.main import app
from toolwild.core.tool import Tool
from toolwild.synth.dedup import DropReason, exact_dedup, normalized_name

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
        app, ["synth", "dedup", str(TARBALL), "--out", str(tmp_path / "kept.jsonl"), "--report", str(tmp_path / "d")]
    )
    assert result.exit_code == 0, result.output
    dropped = [json.loads(line) for line in (tmp_path / "d").read_text().splitlines()]
    assert len(dropped) == len(flagged) == 443
    assert {d["key"] for d in dropped} == flagged
    assert len((tmp_path / "kept.jsonl").read_text().splitlines()) == 5900 - 443
