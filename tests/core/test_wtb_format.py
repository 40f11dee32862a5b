"""WildToolBench session records <-> `Session`: the real fixture, lossless round trips, and malformed input.

Expected values are read from the raw JSON of the fixture in the test itself (never from the loader's output), so a
loader that drops or reorders something fails here.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from toolwild.core.formats.openai_tools import from_openai_tool, to_openai_tool, to_openai_tools_for_api
from toolwild.core.formats.wtb import load_wtb_suite, session_from_wtb, session_to_wtb, write_wtb_suite
from toolwild.core.session import Suite
from toolwild.errors import DataError

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT.parent / "shared" / "fixtures" / "wildtoolbench"
SESSIONS = FIXTURES / "sessions_0_4.reconstructed.jsonl"
TOOLS = FIXTURES / "tools_en.jsonl"

needs_sessions = pytest.mark.skipif(
    not SESSIONS.is_file(), reason=f"WildToolBench session fixture not found at {SESSIONS} (shared fixtures absent)"
)
needs_tools = pytest.mark.skipif(
    not TOOLS.is_file(), reason=f"WildToolBench tool fixture not found at {TOOLS} (shared fixtures absent)"
)

TOOL_LINES = 256
TOOL_ENTRIES = 1248  # fixture README: 256 lines, 1,248 tool entries


def raw_lines() -> list[str]:
    return [line for line in SESSIONS.read_text(encoding="utf-8").splitlines() if line.strip()]


def raw_records() -> list[dict[str, Any]]:
    return [json.loads(line) for line in raw_lines()]


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def with_broken_record(tmp_path: Path, index: int, breaker: Callable[[dict[str, Any]], None]) -> Path:
    """A copy of the fixture whose record ``index`` (0-based, i.e. line index + 1) has been broken by ``breaker``."""
    records = raw_records()
    breaker(records[index])
    lines = raw_lines()
    lines[index] = json.dumps(records[index], ensure_ascii=False)
    return write_lines(tmp_path / "broken.jsonl", lines)


# ---------------------------------------------------------------- the fixture, loaded
@needs_sessions
def test_fixture_loads_with_counts_and_types_of_the_raw_file():
    records = raw_records()
    suite, report = load_wtb_suite(SESSIONS)

    assert len(records) == 5
    assert sum(len(r["english_tasks"]) for r in records) == 20
    assert len(suite.sessions) == len(records)
    assert sum(len(s.tasks) for s in suite.sessions) == sum(len(r["english_tasks"]) for r in records)
    assert report.loaded == 5
    assert report.skipped_count == 0
    assert suite.name == SESSIONS.stem

    for session, record in zip(suite.sessions, records, strict=True):
        assert session.id == record["id"]
        assert session.env_info == record["english_env_info"]
        assert session.system_prompt == "Current Date: " + record["english_env_info"]
        assert [t.type.value for t in session.tasks] == record["english_task_types"]
        assert [t.utterance for t in session.tasks] == record["english_tasks"]
        assert [t.subtype.value for t in session.tasks] == ["First Turn", *record["english_turn_subtypes"]]
        assert [len(t.gold) for t in session.tasks] == [len(dag) for dag in record["english_answer_list"]]
        assert session.alt_gold_sizes == [len(dag) for dag in record["answer_list"]]
        assert [t.name for t in session.tools] == [t["function"]["name"] for t in record["english_tools"]]
        for task, dag in zip(session.tasks, record["english_answer_list"], strict=True):
            for node, raw in zip(task.gold, dag, strict=True):
                assert node.name == raw["action"]["name"]
                assert node.action.arguments == raw["action"]["arguments"]
                assert node.dependency_list == raw["dependency_list"]
                assert node.observation == raw["observation"]
                assert node.user_input == raw.get("user_input")


@needs_sessions
def test_session_to_wtb_gives_back_each_original_line():
    suite, _ = load_wtb_suite(SESSIONS)
    for session, line in zip(suite.sessions, raw_lines(), strict=True):
        original = json.loads(line)
        written = session_to_wtb(session)
        assert written == original
        assert list(written) == list(original), "top-level key order changed"
        # the record survives a second trip through the model as well
        assert session_to_wtb(session_from_wtb(written)) == original


@needs_sessions
def test_write_then_load_round_trips(tmp_path):
    suite, _ = load_wtb_suite(SESSIONS)
    out = tmp_path / "copy.jsonl"
    write_wtb_suite(suite, out)

    assert not list(tmp_path.glob("*.tmp")), "the temporary file of the atomic write was left behind"
    written = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert written == raw_records()

    again, report = load_wtb_suite(out, name=suite.name)
    assert report.skipped_count == 0
    assert again.sessions == suite.sessions
    assert again.source == str(out)


@needs_sessions
def test_written_suite_is_utf8_not_ascii_escaped(tmp_path):
    records = raw_records()
    records[0]["english_tasks"][0] = "Wie ist das Wetter in Zürich? 北京天气"
    src = write_lines(tmp_path / "src.jsonl", [json.dumps(r, ensure_ascii=False) for r in records])
    suite, _ = load_wtb_suite(src)
    out = tmp_path / "out.jsonl"
    write_wtb_suite(suite, out)
    text = out.read_text(encoding="utf-8")
    assert "Zürich? 北京天气" in text
    assert "\\u" not in text.splitlines()[0]


@needs_sessions
def test_unknown_keys_and_missing_subtypes_survive_the_round_trip():
    record = raw_records()[0]
    record["english_answer_list"][2][1]["note_from_annotator"] = {"checked": True}
    record["english_answer_list"][2][1]["action"]["comment"] = "kept"
    del record["english_turn_subtypes"]
    record["zz_source"] = "crafted"  # unknown top-level keys go last, so the key order is still the original's
    session = session_from_wtb(copy.deepcopy(record))
    assert [t.subtype.value for t in session.tasks] == ["First Turn"] * 4
    written = session_to_wtb(session)
    assert written == record
    assert list(written) == list(record)


@needs_sessions
def test_record_without_answer_list_round_trips():
    record = raw_records()[0]
    del record["answer_list"]
    assert session_to_wtb(session_from_wtb(copy.deepcopy(record))) == record


@needs_sessions
def test_record_without_id_round_trips():
    record = raw_records()[1]
    del record["id"]
    session = session_from_wtb(copy.deepcopy(record), index=1)
    assert session.id == "wild_tool_bench_1"
    assert session_to_wtb(session) == record


@needs_sessions
def test_alt_gold_sizes_come_from_answer_list_not_english_answer_list():
    record = raw_records()[0]
    record["answer_list"][2] = record["answer_list"][2][:4]  # other-language DAG with one node fewer
    session = session_from_wtb(copy.deepcopy(record))
    assert session.alt_gold_sizes == [2, 2, 4, 1]
    assert session.gold_size(2) == 4
    assert len(session.tasks[2].gold) == 5
    assert session_to_wtb(session) == record


# ---------------------------------------------------------------- the published tool lists
@needs_tools
def test_every_published_tool_round_trips_unchanged():
    lines = TOOLS.read_text(encoding="utf-8").splitlines()
    assert len(lines) == TOOL_LINES
    n = 0
    for number, line in enumerate(lines, start=1):
        for i, entry in enumerate(json.loads(line)):
            n += 1
            tool = from_openai_tool(copy.deepcopy(entry))
            assert tool.name == entry["function"]["name"]
            assert tool.parameters == entry["function"]["parameters"]
            assert to_openai_tool(tool) == entry, f"line {number}, tool {i} ({tool.name}) changed"
    assert n == TOOL_ENTRIES


def _float_to_number(value: Any) -> tuple[Any, int]:
    """Independent expectation: every schema ``"type": "float"`` becomes ``"number"``; returns (copy, count)."""
    if isinstance(value, dict):
        out, n = {}, 0
        for k, v in value.items():
            if k == "type" and v == "float":
                out[k], n = "number", n + 1
            else:
                out[k], m = _float_to_number(v)
                n += m
        return out, n
    if isinstance(value, list):
        items = [_float_to_number(v) for v in value]
        return [v for v, _ in items], sum(m for _, m in items)
    return value, 0


@needs_tools
def test_tools_for_api_map_float_to_number_and_nothing_else():
    floats = 0
    for number, line in enumerate(TOOLS.read_text(encoding="utf-8").splitlines(), start=1):
        raw = json.loads(line)
        tools = [from_openai_tool(copy.deepcopy(t)) for t in raw]
        expected, n = _float_to_number(raw)
        floats += n
        api = to_openai_tools_for_api(tools)
        assert api == expected, f"line {number}"
        assert "float" not in json.dumps([_types(t) for t in api]), f"line {number}: a float type survived"
        # the tools themselves are not changed: the float type is kept for the argument checker
        assert [to_openai_tool(t) for t in tools] == raw
    assert floats > 0, "the fixture is documented to use the non-standard float type"


def _types(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [v for k, v in value.items() if k == "type"] + [x for v in value.values() for x in _types(v)]
    if isinstance(value, list):
        return [x for v in value for x in _types(v)]
    return []


def test_tool_without_description_or_parameters_is_written_back_without_them():
    entry = {"type": "function", "function": {"name": "ping"}}
    tool = from_openai_tool(copy.deepcopy(entry))
    assert tool.description == ""
    assert tool.properties == {}
    assert to_openai_tool(tool) == entry


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        ([], "english_tools[0]"),
        ({"type": "function"}, "english_tools[0].function"),
        ({"type": "function", "function": {"description": "x"}}, "english_tools[0].function.name"),
        ({"type": "function", "function": {"name": "f", "parameters": []}}, "english_tools[0].function.parameters"),
    ],
)
def test_malformed_tool_names_its_field(entry, field):
    with pytest.raises(DataError) as info:
        from_openai_tool(entry, field="english_tools[0]")
    assert info.value.field == field


# ---------------------------------------------------------------- malformed input
@needs_sessions
def test_non_json_line_in_the_middle_is_located(tmp_path):
    lines = raw_lines()
    path = write_lines(tmp_path / "bad.jsonl", [*lines[:2], '{"id": "wild_tool_bench_x", oops', *lines[2:]])

    with pytest.raises(DataError) as info:
        load_wtb_suite(path)
    assert info.value.line == 3
    assert info.value.field is None
    assert info.value.file == str(path)
    assert "line 3" in str(info.value)
    assert "invalid JSON" in str(info.value)

    suite, report = load_wtb_suite(path, skip_invalid=True)
    assert [s.id for s in suite.sessions] == [r["id"] for r in raw_records()]
    assert report.loaded == 5
    assert report.skipped_count == 1
    assert report.skipped[0].line == 3


@needs_sessions
def test_blank_lines_are_skipped_but_still_counted_in_line_numbers(tmp_path):
    lines = raw_lines()
    path = write_lines(tmp_path / "bad.jsonl", [lines[0], "", "   ", lines[1], "[1, 2", *lines[2:]])
    suite, report = load_wtb_suite(path, skip_invalid=True)
    assert len(suite.sessions) == 5
    assert [e.line for e in report.skipped] == [5]


BROKEN_RECORDS = [
    pytest.param(
        lambda r: r["english_task_types"].__setitem__(2, "Quadruple-Tool"),
        "english_task_types[2]",
        "Quadruple-Tool",
        id="unknown-task-type",
    ),
    pytest.param(
        lambda r: r["english_answer_list"][3][1].pop("dependency_list"),
        "english_answer_list[3][1].dependency_list",
        "missing",
        id="node-without-dependency_list",
    ),
    pytest.param(
        lambda r: r["english_answer_list"][3][2].__setitem__("dependency_list", [7]),
        "english_answer_list[3]",
        "gold[2].dependency_list names node 7",
        id="dependency-on-missing-node",
    ),
    pytest.param(
        lambda r: r["english_answer_list"][3][0].__setitem__("dependency_list", [2]),
        "english_answer_list[3]",
        "cycle",
        id="dependency-cycle",
    ),
    pytest.param(
        lambda r: r["english_turn_subtypes"].__setitem__(1, "Telepathy"),
        "english_turn_subtypes[1]",
        "Telepathy",
        id="unknown-subtype",
    ),
    pytest.param(
        lambda r: r["english_answer_list"][0][0]["action"].__setitem__("arguments", "{not json"),
        "english_answer_list[0][0].action.arguments",
        "not JSON",
        id="gold-arguments-not-json",
    ),
    pytest.param(lambda r: r.pop("english_tasks"), "english_tasks", "missing", id="missing-tasks"),
    pytest.param(
        lambda r: r["english_task_types"].pop(),
        "english_task_types",
        "3 task types for 4 tasks",
        id="task-type-count",
    ),
    pytest.param(
        lambda r: r["english_tools"][1].pop("function"),
        "english_tools[1].function",
        "function",
        id="tool-without-function",
    ),
]


@needs_sessions
@pytest.mark.parametrize(("breaker", "field", "message"), BROKEN_RECORDS)
def test_wrong_field_is_located_by_line_and_field(tmp_path, breaker, field, message):
    # record 1 (line 2) is session 1: Single, Single, Chat, Clarify with a 4-node DAG in task 3
    path = with_broken_record(tmp_path, 1, breaker)

    with pytest.raises(DataError) as info:
        load_wtb_suite(path)
    err = info.value
    assert err.line == 2
    assert err.field == field
    assert message in err.message
    assert err.file == str(path)

    suite, report = load_wtb_suite(path, skip_invalid=True)
    expected_ids = [r["id"] for i, r in enumerate(raw_records()) if i != 1]
    assert [s.id for s in suite.sessions] == expected_ids
    assert report.loaded == 4
    assert report.skipped_count == 1
    assert report.skipped[0].line == 2
    assert report.skipped[0].field == field


@needs_sessions
def test_several_bad_records_are_all_reported(tmp_path):
    records = raw_records()
    records[0]["english_task_types"][0] = "Nope"
    records[4]["english_answer_list"][1][0].pop("action")
    lines = [json.dumps(r, ensure_ascii=False) for r in records]
    lines.insert(2, "garbage")
    path = write_lines(tmp_path / "bad.jsonl", lines)

    with pytest.raises(DataError) as info:
        load_wtb_suite(path)
    assert info.value.line == 1  # without skip_invalid the first bad record stops the load

    suite, report = load_wtb_suite(path, skip_invalid=True)
    assert [s.id for s in suite.sessions] == [records[i]["id"] for i in (1, 2, 3)]
    assert [(e.line, e.field) for e in report.skipped] == [
        (1, "english_task_types[0]"),
        (3, None),
        (6, "english_answer_list[1][0].action"),
    ]


@needs_sessions
def test_duplicate_session_id_is_rejected(tmp_path):
    lines = raw_lines()
    path = write_lines(tmp_path / "dup.jsonl", [*lines, lines[0]])
    with pytest.raises(DataError) as info:
        load_wtb_suite(path)
    assert info.value.field == "id"
    assert info.value.line == len(lines) + 1
    assert "wild_tool_bench_0" in str(info.value)
    suite, report = load_wtb_suite(path, skip_invalid=True)
    assert len(suite.sessions) == len(lines) and report.skipped_count == 1


def test_missing_file_is_a_data_error(tmp_path):
    with pytest.raises(DataError) as info:
        load_wtb_suite(tmp_path / "nope.jsonl")
    assert "cannot read" in str(info.value)


def test_record_that_is_not_an_object_is_rejected(tmp_path):
    path = write_lines(tmp_path / "x.jsonl", ["[1, 2, 3]"])
    with pytest.raises(DataError) as info:
        load_wtb_suite(path)
    assert info.value.line == 1
    suite, report = load_wtb_suite(path, skip_invalid=True)
    assert suite == Suite(name="x", source=str(path), sessions=[])
    assert report.skipped_count == 1


def test_environment_and_expected_states_round_trip(tmp_path):
    from toolwild.core.formats.wtb import load_wtb_suite as load
    from toolwild.core.session import Suite

    record = raw_records()[0]
    session = session_from_wtb(copy.deepcopy(record))
    session.environment = "inventory"
    for i, task in enumerate(session.tasks):
        task.expected_state = {"stock": {"tea": i}} if i % 2 == 0 else None
    write_wtb_suite(Suite(name="x", sessions=[session]), tmp_path / "s.jsonl")
    back = load(tmp_path / "s.jsonl")[0].sessions[0]
    assert back.environment == "inventory"
    assert [t.expected_state for t in back.tasks] == [{"stock": {"tea": 0}}, None, {"stock": {"tea": 2}}, None]
    assert "environment" not in session_to_wtb(session_from_wtb(copy.deepcopy(record)))
