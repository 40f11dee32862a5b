"""``toolwild import`` after environment files began refusing a ``required`` that names no declared property.

Three tools of WildToolBench's published ``tools_en.jsonl`` (``createMod`` and ``getMods`` on line 176,
``getBookDetails`` on line 203) require a property that was renamed, so ``import wtb-envs ... --backend llm`` (the
README's own example) exited 1 and wrote nothing. The import now leaves out only the tools whose schemas would not
load, names each one (input, line, environment, tool, field, why) on stderr and in the summary, exits 0, and never
writes a file that then fails to load. These tests fail on the importer before that change.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from toolwild.cli.main import app
from toolwild.core.formats.environment import load_environment

WIDE = {"COLUMNS": "200"}
WTB = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "wildtoolbench"
TOOLS_EN = WTB / "tools_en.jsonl"
SESSIONS = WTB / "sessions_0_4.reconstructed.jsonl"
needs_tools_en = pytest.mark.skipif(not TOOLS_EN.is_file(), reason=f"fixture not found: {TOOLS_EN}")
needs_sessions = pytest.mark.skipif(not SESSIONS.is_file(), reason=f"fixture not found: {SESSIONS}")


def _run(*args: str | Path) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args], env=WIDE)


def _flat(text: str) -> str:
    return " ".join(text.split())


def _tool(name: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    """An OpenAI-format tool, as WildToolBench publishes them."""
    parameters = {"type": "object", "properties": properties, "required": required}
    return {
        "type": "function",
        "function": {"name": name, "description": f"The {name} tool.", "parameters": parameters},
    }


STRING = {"type": "string"}
GOOD = _tool("getWeather", {"city": STRING}, ["city"])
RENAMED = _tool("createMod", {"mod_id": STRING, "name": STRING}, ["game_id", "name"])  # game_id became mod_id
ALSO_BAD = _tool("getBook", {"book": STRING}, ["book_id"])


def _env_files(directory: Path) -> dict[str, Path]:
    return {path.name: path for path in sorted(directory.glob("*.env.json"))}


# ------------------------------------------------------------------------------------------- the published file
@needs_tools_en
def test_the_published_tool_lists_import_leaving_out_only_the_three_renamed_tools(tmp_path):
    out = tmp_path / "envs"
    result = _run("import", "wtb-envs", TOOLS_EN, "--backend", "llm", "--out", out)
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
    files = _env_files(out)
    assert len(files) == len(TOOLS_EN.read_text(encoding="utf-8").splitlines()) == 256
    for path in files.values():  # nothing written that would then fail to load
        load_environment(path)

    mods = load_environment(files["wtb-tools-175.env.json"])
    names = [tool.name for tool in mods.tools]
    assert "createMod" not in names and "getMods" not in names
    assert {"authenticateUser", "updateMod", "deleteMod"} <= set(names)  # the line's other tools are kept
    assert [(item["tool"], item["field"]) for item in mods.source["left_out"]] == [
        ("createMod", "parameters.required[0]"),
        ("getMods", "parameters.required[0]"),
    ]
    books = load_environment(files["wtb-tools-202.env.json"])
    assert "getBookDetails" not in [tool.name for tool in books.tools] and books.tools
    untouched = load_environment(files["wtb-tools-0.env.json"])
    assert "left_out" not in untouched.source

    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 3, result.stderr
    first = warnings[0]
    for part in ("tools_en.jsonl, line 176", "'createMod'", "'wtb-tools-175'", "parameters.required[0]", "'game_id'"):
        assert part in first, first
    assert "line 203" in warnings[2] and "'getBookDetails'" in warnings[2] and "'book_id'" in warnings[2]
    summary = result.stdout
    assert "environments: 256 (llm)" in summary and "3 tools left out" in summary
    assert all(name in summary for name in ("'createMod'", "'getMods'", "'getBookDetails'"))


# ----------------------------------------------------------------------------------------------- a small file
def _tool_list(tmp_path: Path, *lines: list[dict[str, Any]]) -> Path:
    path = tmp_path / "tools.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def test_a_small_tool_list_keeps_every_environment_it_can_and_names_what_it_left_out(tmp_path):
    source = _tool_list(tmp_path, [GOOD], [GOOD, RENAMED], [ALSO_BAD])
    out = tmp_path / "envs"
    result = _run("import", "wtb-envs", source, "--backend", "llm", "--out", out)
    assert result.exit_code == 0, result.output
    files = _env_files(out)
    # line 3 had no tool left, so it has no file; line 2 lost one tool
    assert sorted(files) == ["wtb-tools-0.env.json", "wtb-tools-1.env.json"]
    assert [t.name for t in load_environment(files["wtb-tools-1.env.json"]).tools] == ["getWeather"]
    said = _flat(result.stderr)
    assert (
        "tools.jsonl, line 2: left out tool 'createMod' of environment 'wtb-tools-1' (parameters.required[0])" in said
    )
    assert "the required property 'game_id' is not declared under properties" in said
    assert "tools.jsonl, line 3: left out tool 'getBook' of environment 'wtb-tools-2' (parameters.required[0])" in said
    assert "line 3: left out environment 'wtb-tools-2': none of its tools would load" in said
    assert "environments: 2 (llm)" in result.stdout and "2 tools and 1 environment left out" in result.stdout


def test_a_tool_list_none_of_whose_tools_would_load_exits_1_and_writes_nothing(tmp_path):
    source = _tool_list(tmp_path, [RENAMED], [ALSO_BAD])
    out = tmp_path / "envs"
    result = _run("import", "wtb-envs", source, "--backend", "llm", "--out", out)
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert not out.exists() or not any(out.iterdir())
    said = _flat(result.stderr)
    assert "'createMod'" in said and "'getBook'" in said and "no environment written" in said


def test_a_broken_line_is_still_an_error_naming_its_line_and_nothing_is_written(tmp_path):
    source = tmp_path / "tools.jsonl"
    source.write_text(json.dumps([GOOD]) + "\n" + json.dumps([RENAMED]) + "\n{not json\n", encoding="utf-8")
    out = tmp_path / "envs"
    result = _run("import", "wtb-envs", source, "--backend", "llm", "--out", out)
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "line 3" in result.stderr and not out.exists()


@pytest.mark.parametrize("backend", ["mcp", "python"])
def test_a_backend_a_wildtoolbench_file_cannot_have_is_refused_cleanly(tmp_path, backend):
    source = _tool_list(tmp_path, [GOOD])
    result = _run("import", "wtb-envs", source, "--backend", backend, "--out", tmp_path / "envs")
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "choose --backend replay or llm" in result.stderr and not (tmp_path / "envs").exists()


# ----------------------------------------------------------------------------------------------- a suite's sessions
@needs_sessions
def test_a_session_tool_left_out_is_named_with_the_recorded_calls_it_can_no_longer_replay(tmp_path):
    lines = SESSIONS.read_text(encoding="utf-8").splitlines()
    record = json.loads(lines[0])
    tool = next(t for t in record["english_tools"] if t["function"]["name"] == "getCityForecast")
    tool["function"]["parameters"]["required"].append("town")  # a name its properties never declare
    suite = tmp_path / "suite.jsonl"
    suite.write_text(json.dumps(record) + "\n" + lines[1] + "\n", encoding="utf-8")
    out = tmp_path / "envs"
    result = _run("import", "wtb-envs", suite, "--out", out)
    assert result.exit_code == 0, result.output
    files = _env_files(out)
    assert len(files) == 2
    changed = load_environment(out / f"wtb-session-{record['id']}.env.json")
    assert "getCityForecast" not in [t.name for t in changed.tools] and changed.tools
    said = _flat(result.stderr)
    assert f"session '{record['id']}': left out tool 'getCityForecast'" in said and "'town'" in said
    assert "recorded call" in said and "cannot be replayed" in said


# ----------------------------------------------------------------------------------------------- SynthTools too
def test_a_synthtools_import_leaves_out_a_tool_whose_schema_would_not_load(tmp_path):
    tool_json = tmp_path / "tool_content" / "tool_json"
    tool_json.mkdir(parents=True)

    def spec(name: str, kind: str) -> dict[str, Any]:
        return {
            "tool_name": name,
            "tool_description": "Looks up an order.",
            "parameters": {"order_id": {"type": kind, "required": True, "description": "The order"}},
            "error_messages": [],
            "usage": "",
            "output_details": {"status": {"type": "string", "description": "Order status"}},
        }

    (tool_json / "retail_tool_spec_1__Good.json").write_text(json.dumps(spec("Good", "string")))
    (tool_json / "retail_tool_spec_1__Bad.json").write_text(json.dumps(spec("Bad", "strng")))
    out = tmp_path / "envs"
    result = _run("import", "synthtools", tmp_path / "tool_content", "--envs-out", out)
    assert result.exit_code == 0, result.output
    [path] = _env_files(out).values()
    assert [t.name for t in load_environment(path).tools] == ["Good"]
    assert "left out tool 'Bad' of environment 'retail_tool_spec_1' (parameters)" in _flat(result.stderr)
    assert "1 tool left out" in result.stdout
