"""SynthTools import: the whole published fixture, malformed files, the lint, and the ``import synthtools`` CLI.

The counts asserted here are the fixture README's published figures (5,900 tools; 2,018 ``"None"`` defaults,
20 nested arrays, 8 arrays without ``items``), so a change to conversion or lint that drifts from the source
data fails loudly.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from toolwild.cli.importer import import_app
from toolwild.core.formats.synthtools import (
    LintCode,
    SynthToolsLoad,
    lint_tool,
    load_synthtools_dir,
    load_synthtools_tool,
    tool_from_synthtools,
    write_tools_jsonl,
)
from toolwild.core.tool import Tool
from toolwild.errors import DataError

FIXTURE = Path(__file__).resolve().parents[3] / "shared/fixtures/synthtools/tool_content.tar.gz"
needs_fixture = pytest.mark.skipif(
    not FIXTURE.is_file(), reason=f"SynthTools fixture not found at {FIXTURE} (shared fixtures not mounted)"
)

N_TOOLS = 5900
N_NONE_DEFAULTS = 2018
N_NESTED_ARRAYS = 20
N_ARRAYS_WITHOUT_ITEMS = 8

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _spec(name: str = "Order Lookup", **overrides: Any) -> dict[str, Any]:
    """A small, valid SynthTools spec; ``overrides`` replace or (with value ``...``) delete top-level keys."""
    spec: dict[str, Any] = {
        "tool_name": name,
        "tool_description": "Looks up an order.",
        "parameters": {
            "order_id": {"type": "string", "required": True, "description": "The order"},
            "fields": {
                "type": "array",
                "required": False,
                "description": "Fields to return",
                "items": {"type": "string"},
                "default": "None",
            },
        },
        "error_messages": ["Order not found: check the id."],
        "usage": "Pass an order_id.",
        "output_details": {"status": {"type": "string", "description": "Order status"}},
    }
    for key, value in overrides.items():
        if value is ...:
            spec.pop(key, None)
        else:
            spec[key] = value
    return spec


def _write_release(root: Path, files: dict[str, Any]) -> Path:
    """Lay out ``root/tool_content/tool_json/<name>`` with JSON values (or raw text for ``str`` values)."""
    tool_json = root / "tool_content" / "tool_json"
    tool_json.mkdir(parents=True)
    for name, content in files.items():
        text = content if isinstance(content, str) else json.dumps(content)
        (tool_json / name).write_text(text, encoding="utf-8")
    return root / "tool_content"


# ------------------------------------------------------------------------------------------ whole fixture


@pytest.fixture(scope="module")
def release() -> SynthToolsLoad:
    """All of the published fixture, read straight from the tarball (once per module: it is the slow part)."""
    if not FIXTURE.is_file():
        pytest.skip(f"SynthTools fixture not found at {FIXTURE}")
    return load_synthtools_dir(FIXTURE)


@needs_fixture
def test_tarball_loads_every_tool_in_sorted_order(release: SynthToolsLoad) -> None:
    tools, _, skipped = release
    assert len(tools) == N_TOOLS
    assert skipped == []
    ids = [t.extra["source_id"] for t in tools]
    assert ids == sorted(ids)
    # Names repeat across fields, so the file stem is what identifies a tool.
    assert len(set(ids)) == N_TOOLS
    assert len({t.name for t in tools}) < N_TOOLS


@needs_fixture
def test_published_counts_of_lint_findings(release: SynthToolsLoad) -> None:
    counts = Counter(f.code for f in release.findings)
    assert counts[LintCode.DEFAULT_NONE_STRING] == N_NONE_DEFAULTS
    assert counts[LintCode.NESTED_ARRAY] == N_NESTED_ARRAYS
    assert counts[LintCode.ARRAY_WITHOUT_ITEMS] == N_ARRAYS_WITHOUT_ITEMS
    # The importer derives ``required`` from properties, so this can only come from a conversion bug.
    assert counts[LintCode.REQUIRED_NOT_IN_PROPERTIES] == 0
    # One finding per parameter and code: no parameter is reported twice for the same defect.
    keys = [(f.source, f.parameter, f.code) for f in release.findings]
    assert len(keys) == len(set(keys))


@needs_fixture
def test_published_tool_converts_field_by_field(release: SynthToolsLoad) -> None:
    by_id = {t.extra["source_id"]: t for t in release.tools}
    tool = by_id["academic_publishing_and_citations_tool_spec_469__Bibliography_Validator"]
    assert tool.name == "Bibliography Validator"
    assert tool.required == ["bibliography_entries", "in_text_citations", "citation_style"]
    assert all("required" not in p for p in tool.properties.values())
    assert tool.properties["bibliography_entries"]["items"] == {"type": "string"}
    assert tool.properties["bibliography_entries"]["maxItems"] == 500
    assert tool.properties["check_alphabetical"]["default"] is True
    assert tool.contract is not None and len(tool.contract.error_modes) == 5
    assert tool.returns is not None
    assert tool.returns["properties"]["completeness_score"]["type"] == "number"
    assert tool.extra["usage"].startswith("Provide bibliography_entries")
    assert set(tool.extra["output_details"]) == set(tool.returns["properties"])
    assert tool.extra["field"] == "academic_publishing_and_citations"
    assert tool.extra["spec"] == 469
    # Published names with punctuation get the identifier SynthTools itself uses in file names.
    ab = [t for t in release.tools if t.name == "A/B Test Manager"]
    assert ab and all(t.extra["identifier"] == "AB_Test_Manager" for t in ab)


# ------------------------------------------------------------------------------------------ conversion


def test_conversion_moves_required_flags_and_keeps_the_rest() -> None:
    tool = tool_from_synthtools(_spec(extra_key={"x": 1}), source_id="shop_tool_spec_7__Order_Lookup")
    assert tool.parameters == {
        "type": "object",
        "properties": {
            "order_id": {"type": "string", "description": "The order"},
            "fields": {
                "type": "array",
                "description": "Fields to return",
                "items": {"type": "string"},
                "default": "None",  # kept as published; the lint reports it
            },
        },
        "required": ["order_id"],
    }
    assert tool.returns == {
        "type": "object",
        "properties": {"status": {"type": "string", "description": "Order status"}},
    }
    assert tool.extra["unmodelled"] == {"extra_key": {"x": 1}}
    assert (tool.extra["field"], tool.extra["spec"]) == ("shop", 7)


def test_unmappable_output_details_stay_in_extra_only() -> None:
    tool = tool_from_synthtools(_spec(output_details={"status": "a string"}))
    assert tool.returns is None
    assert tool.extra["output_details"] == {"status": "a string"}


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"tool_name": ...}, "tool_name"),
        ({"tool_name": ""}, "tool_name"),
        ({"parameters": ...}, "parameters"),
        ({"parameters": ["order_id"]}, "parameters"),
        ({"parameters": {"order_id": "string"}}, "parameters.order_id"),
        ({"parameters": {"order_id": {"type": "string", "required": "yes"}}}, "parameters.order_id.required"),
        ({"error_messages": "Order not found"}, "error_messages"),
        ({"error_messages": ["ok", 3]}, "error_messages[1]"),
        ({"output_details": []}, "output_details"),
    ],
)
def test_malformed_file_names_file_and_field(tmp_path: Path, overrides: dict[str, Any], field: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(_spec(**overrides)), encoding="utf-8")
    with pytest.raises(DataError) as info:
        load_synthtools_tool(path)
    assert info.value.file == str(path)
    assert info.value.field == field


def test_bad_json_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('{\n  "tool_name": "x",\n  oops\n}', encoding="utf-8")
    with pytest.raises(DataError) as info:
        load_synthtools_tool(path)
    assert info.value.file == str(path)
    assert info.value.line == 3


def test_directory_fails_fast_or_skips_the_bad_file(tmp_path: Path) -> None:
    content = _write_release(
        tmp_path,
        {
            "a__Good_One.json": _spec("Good One"),
            "b__Nameless.json": _spec(tool_name=...),
            "c__Good_Two.json": _spec("Good Two"),
        },
    )
    with pytest.raises(DataError) as info:
        load_synthtools_dir(content)
    assert info.value.file is not None and info.value.file.endswith("b__Nameless.json")
    assert info.value.field == "tool_name"

    for source in (content, content / "tool_json"):
        tools, findings, skipped = load_synthtools_dir(source, skip_invalid=True)
        assert [t.name for t in tools] == ["Good One", "Good Two"]
        assert len(skipped) == 1
        assert skipped[0].file.endswith("b__Nameless.json")
        assert skipped[0].error.field == "tool_name"
        assert "tool_name" in skipped[0].reason
        assert [f.code for f in findings] == [LintCode.DEFAULT_NONE_STRING] * 2


def test_missing_source_and_empty_directory_raise(tmp_path: Path) -> None:
    with pytest.raises(DataError):
        load_synthtools_dir(tmp_path / "nope", skip_invalid=True)
    with pytest.raises(DataError):
        load_synthtools_dir(tmp_path, skip_invalid=True)


def test_jsonl_round_trip(tmp_path: Path) -> None:
    tools = [tool_from_synthtools(_spec(f"Tool {i}"), source_id=f"f_tool_spec_{i}__Tool_{i}") for i in range(3)]
    out = tmp_path / "tools.jsonl"
    assert write_tools_jsonl(tools, out) == 3
    lines = out.read_text(encoding="utf-8").splitlines()
    assert [Tool.model_validate_json(line) for line in lines] == tools
    assert list(tmp_path.iterdir()) == [out]  # the temporary file was renamed, not left behind


# ------------------------------------------------------------------------------------------------- lint


def _codes(parameters: dict[str, Any], required: list[str] | None = None) -> list[tuple[str, LintCode]]:
    tool = Tool(
        name="t",
        parameters={"type": "object", "properties": parameters, "required": required or []},
    )
    return [(f.parameter, f.code) for f in lint_tool(tool)]


def test_lint_separates_none_string_null_and_type_mismatch() -> None:
    assert _codes(
        {
            "a": {"type": "integer", "default": "None"},
            "b": {"type": "string", "default": "None"},
            "c": {"type": "array", "items": {"type": "string"}, "default": None},
            "d": {"type": "boolean", "default": "true"},
            "e": {"type": "array", "items": {"type": "number"}, "default": "[3, 7]"},
            "f": {"type": "integer", "default": 3.0},  # integral float: an integer in JSON Schema
            "g": {"type": "number", "default": True},  # booleans are not numbers
            "h": {"type": ["string", "null"], "default": None},
        }
    ) == [
        ("a", LintCode.DEFAULT_NONE_STRING),
        ("b", LintCode.DEFAULT_NONE_STRING),
        ("c", LintCode.DEFAULT_NULL),
        ("d", LintCode.DEFAULT_TYPE_MISMATCH),
        ("e", LintCode.DEFAULT_TYPE_MISMATCH),
        ("g", LintCode.DEFAULT_TYPE_MISMATCH),
    ]


def test_lint_arrays_types_and_required() -> None:
    assert _codes(
        {
            "matrix": {"type": "array", "items": {"type": "array"}},
            "cube": {"type": "array", "items": {"type": "array", "items": {"type": "array"}}},
            "bare": {"type": "array"},
            "deep": {"type": "object", "properties": {"tags": {"type": "array"}}},
            "ratio": {"type": "float"},
            "anything": {"description": "no type"},
            "when": {"type": "array", "items": {"type": "string"}, "format": "date-time"},
        },
        required=["matrix", "ghost"],
    ) == [
        ("ghost", LintCode.REQUIRED_NOT_IN_PROPERTIES),
        ("matrix", LintCode.NESTED_ARRAY),  # its item-less inner arrays are part of this one finding
        ("cube", LintCode.NESTED_ARRAY),
        ("cube[]", LintCode.NESTED_ARRAY),  # each level of a 3-D array is its own finding
        ("bare", LintCode.ARRAY_WITHOUT_ITEMS),
        ("deep.tags", LintCode.ARRAY_WITHOUT_ITEMS),
        ("ratio", LintCode.UNKNOWN_TYPE),
        ("anything", LintCode.UNKNOWN_TYPE),
        ("when", LintCode.FORMAT_ON_NON_STRING),
    ]


# -------------------------------------------------------------------------------------------------- CLI


@needs_fixture
def test_cli_imports_fixture_and_prints_lint_counts(tmp_path: Path) -> None:
    out = tmp_path / "tools.jsonl"
    result = CliRunner().invoke(import_app, ["synthtools", str(FIXTURE), "--out", str(out)])
    assert result.exit_code == 0, result.output
    lines = out.read_text(encoding="utf-8").splitlines()
    assert len(lines) == N_TOOLS
    assert Tool.model_validate_json(lines[0]).name == "Bibliography Validator"
    text = ANSI.sub("", result.output)
    assert re.search(r"files read:\s+5,900", text)
    assert re.search(r"tools written:\s+5,900", text)
    assert re.search(r"files skipped:\s+0\b", text)
    for code, count in [
        ("default-none-string", "2,018"),
        ("nested-array", "20"),
        ("array-without-items", "8"),
    ]:
        assert re.search(rf"{code}\W+{count}\b", text), f"{code} {count} not in output:\n{text}"


def test_cli_reports_data_error_without_traceback(tmp_path: Path) -> None:
    content = _write_release(tmp_path / "src", {"a__Ok.json": _spec("Ok"), "b__Bad.json": "{not json"})
    out = tmp_path / "tools.jsonl"
    runner = CliRunner()

    result = runner.invoke(import_app, ["synthtools", str(content), "--out", str(out)])
    assert result.exit_code == 1
    assert isinstance(result.exception, SystemExit)
    text = ANSI.sub("", result.output)
    assert "error:" in text and "b__Bad.json" in text and "invalid JSON" in text
    assert "Traceback" not in text
    assert not out.exists()

    result = runner.invoke(import_app, ["synthtools", str(content), "--out", str(out), "--skip-invalid"])
    assert result.exit_code == 0, result.output
    text = ANSI.sub("", result.output)
    assert re.search(r"files read:\s+2\b", text)
    assert re.search(r"files skipped:\s+1\b", text)
    assert "b__Bad.json" in text
    assert len(out.read_text(encoding="utf-8").splitlines()) == 1
