"""Bad input never crashes and never escapes (issue 20, items 3 and 5): each test is one finding of the bad-input
review, and failed before its fix.

Findings: (1) bytes that are not UTF-8, (2) deep nesting and oversized lines, (3) a NUL in a session id, (4) file
names taken from ids, (5) unusable environment files, (6) environment files shadowed by the working directory,
(7) an empty suite, (8) a behaviour file for another suite, (9) a result file of another suite, (10) a binary
trajectories file.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from toolwild.cli.main import app
from toolwild.core.environment import Environment, Recording
from toolwild.core.files import MAX_LINE_BYTES, contained_path, iter_text_lines, read_text_file, safe_filename
from toolwild.core.formats.environment import load_environment, write_environment
from toolwild.core.formats.results import load_trajectories
from toolwild.core.formats.synthtools_envs import load_synthtools_meta, parse_environment_yml
from toolwild.core.formats.wtb import load_wtb_suite, session_to_wtb, write_wtb_suite
from toolwild.core.formats.wtb_result import load_wtb_results
from toolwild.core.jsonl import MAX_JSON_DEPTH, parse_json, read_jsonl
from toolwild.core.schema import schema_errors
from toolwild.core.session import Session, Suite
from toolwild.core.task import Action, GoldNode, Task, TaskType, answer_node
from toolwild.core.tool import Effect, Tool
from toolwild.core.trajectory import TaskTrajectory, Trajectory
from toolwild.envs.registry import get_environment, resolve_environment_file
from toolwild.errors import DataError, ScoringError
from toolwild.eval.agents.oracle import oracle_trajectory
from toolwild.eval.agents.scripted import load_behaviours
from toolwild.eval.build import build_agent
from toolwild.eval.run_config import RunConfig
from toolwild.eval.scoring.session import score_suite
from toolwild.eval.validate import Severity, validate_suite

ROOT = Path(__file__).resolve().parents[2]
SESSIONS = ROOT.parent / "shared" / "fixtures" / "wildtoolbench" / "sessions_0_4.reconstructed.jsonl"
needs_sessions = pytest.mark.skipif(not SESSIONS.is_file(), reason=f"fixture not found at {SESSIONS}")


def run_cli(*args: str | Path):
    return CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "200", "NO_COLOR": "1"})


def assert_clean_failure(result, *fragments: str) -> None:
    """Exit 1 with a message, not a traceback."""
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    for fragment in fragments:
        assert fragment in " ".join(result.output.split()), result.output


def fixture_lines() -> list[str]:
    return [line for line in SESSIONS.read_text(encoding="utf-8").splitlines() if line.strip()]


def with_bad_bytes(line: str) -> bytes:
    raw = line.encode("utf-8")
    return raw[:50] + b"\xff\xfe" + raw[50:]


def _obj(props: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": props}


def small_session(sid: str = "s0", *, utterance: str = "Book one seat.", environment: str | None = None) -> Session:
    call = GoldNode(idx=0, action=Action(name="book", arguments={"seats": 1}), observation={"ok": True})
    task = Task(utterance=utterance, type=TaskType.SINGLE, gold=[call, answer_node([call], "Booked.")])
    tool = Tool(name="book", description="Book seats.", parameters=_obj({"seats": {"type": "integer"}}))
    return Session(id=sid, env_info="2024-07-11 10:00:00 Thursday", tools=[tool], tasks=[task], environment=environment)


# ------------------------------------------------------------------------------------------ 1. bytes not UTF-8
@needs_sessions
def test_a_suite_line_with_bad_bytes_is_a_located_error_and_skippable(tmp_path):
    lines = fixture_lines()[:3]
    path = tmp_path / "suite.jsonl"
    path.write_bytes(lines[0].encode() + b"\n" + with_bad_bytes(lines[1]) + b"\n" + lines[2].encode() + b"\n")
    with pytest.raises(DataError) as info:
        load_wtb_suite(path)
    assert info.value.line == 2 and info.value.file == str(path) and "not UTF-8" in info.value.message
    suite, report = load_wtb_suite(path, skip_invalid=True)
    assert [s.id for s in suite.sessions] == [json.loads(lines[0])["id"], json.loads(lines[2])["id"]]
    assert [e.line for e in report.skipped] == [2]


def test_read_text_file_names_the_line_and_column_of_the_bad_byte(tmp_path):
    path = tmp_path / "x.json"
    path.write_bytes(b'{\n  "a": "ok",\n  "b": "\xc3\x28"\n}\n')
    with pytest.raises(DataError) as info:
        read_text_file(path)
    assert info.value.line == 3 and "column 9" in info.value.message and "0xc3" in info.value.message


@pytest.mark.parametrize("loader", [load_environment, load_behaviours], ids=["environment", "behaviours"])
def test_single_document_loaders_refuse_bad_bytes(tmp_path, loader):
    path = tmp_path / "file.json"
    path.write_bytes(b'{"id": "\xff"}')
    with pytest.raises(DataError, match="not UTF-8") as info:
        loader(path)
    assert info.value.file == str(path) and info.value.line == 1


def test_synthtools_tool_list_with_bad_bytes_is_refused_not_mangled(tmp_path):
    base = tmp_path / "tool_content"
    (base / "tool_json").mkdir(parents=True)
    (base / "tool_list.json").write_bytes(b'{"id": "a_tool_spec_1__X", "subfield": "caf\xe9"}\n')
    with pytest.raises(DataError, match="not UTF-8") as info:
        load_synthtools_meta(base)
    assert info.value.line == 1


@needs_sessions
def test_import_wtb_envs_of_a_file_with_bad_bytes_exits_cleanly(tmp_path):
    path = tmp_path / "suite.jsonl"
    path.write_bytes(with_bad_bytes(fixture_lines()[0]) + b"\n")
    assert_clean_failure(run_cli("import", "wtb-envs", path, "--out", tmp_path / "envs"), "not UTF-8")


# ------------------------------------------------------------------------------------ 2. nesting and line size
def test_nesting_is_bounded_at_the_module_limit():
    assert parse_json("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH) is not None
    with pytest.raises(DataError, match="nested deeper"):
        parse_json("[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1), file="f", line=4)


def test_nesting_past_the_parsers_own_limit_is_a_data_error_with_its_line(tmp_path):
    path = tmp_path / "deep.jsonl"
    path.write_text("{}\n" + "[" * 100_000 + "]" * 100_000 + "\n")
    rows = list(read_jsonl(path))
    assert rows[0] == (1, {}) and isinstance(rows[1][1], DataError) and rows[1][1].line == 2


def test_integers_too_long_to_convert_nan_and_lone_surrogates_are_data_errors():
    with pytest.raises(DataError, match="invalid JSON"):
        parse_json("[" + "9" * 5000 + "]")
    with pytest.raises(DataError, match="NaN is not a JSON value"):
        parse_json('{"latency": NaN}')
    with pytest.raises(DataError, match="surrogate"):
        parse_json('{"id": "\\ud800"}')
    assert parse_json('"\\ud83d\\ude00"') == "\U0001f600"  # a surrogate pair is one character: fine


def test_an_oversized_line_is_skipped_alone(tmp_path):
    path = tmp_path / "t.txt"
    path.write_bytes(b"short\n" + b"x" * 100 + b"\nlast\n")
    rows = list(iter_text_lines(path, max_line_bytes=50))
    assert rows[0] == (1, "short") and rows[2] == (3, "last")
    assert isinstance(rows[1][1], DataError) and rows[1][1].line == 2 and "longer than 50" in rows[1][1].message


def test_a_line_over_64_mib_is_a_data_error_and_the_next_line_still_loads(tmp_path):
    assert MAX_LINE_BYTES == 64 * 1024 * 1024
    path = tmp_path / "trajectories.jsonl"
    good = Trajectory(session_id="s0").model_dump_json()
    with path.open("wb") as handle:
        handle.write(b'"' + b"a" * MAX_LINE_BYTES + b'"\n')
        handle.write(good.encode() + b"\n")
    loaded, report = load_trajectories(path, skip_invalid=True)
    assert [t.session_id for t in loaded] == ["s0"]
    assert report.skipped[0].line == 1 and "longer than" in report.skipped[0].message


# --------------------------------------------------------------------------------------- 3. NUL in a session id
@needs_sessions
@pytest.mark.parametrize("bad_id", ["a\x00b", "two\nlines", "", "   "], ids=["nul", "newline", "empty", "blank"])
def test_a_session_id_must_be_printable_and_non_empty(tmp_path, bad_id):
    record = json.loads(fixture_lines()[0])
    record["id"] = bad_id
    path = tmp_path / "suite.jsonl"
    path.write_text(json.dumps(record) + "\n")
    with pytest.raises(DataError) as info:
        load_wtb_suite(path)
    assert info.value.field == "id" and info.value.line == 1


@needs_sessions
def test_import_wtb_envs_with_a_nul_in_an_id_exits_cleanly(tmp_path):
    record = json.loads(fixture_lines()[0])
    record["id"] = "a\x00b"
    path = tmp_path / "suite.jsonl"
    path.write_text(json.dumps(record) + "\n")
    result = run_cli("import", "wtb-envs", path, "--out", tmp_path / "envs")
    assert_clean_failure(result, "non-printable character (U+0000)")
    assert not (tmp_path / "envs").exists() or not any((tmp_path / "envs").iterdir())


# ------------------------------------------------------------------------------------- 4. names taken from ids
@pytest.mark.parametrize("name", ["../../x", "/etc/passwd", "..", ".", "", "a/b", "a\\b", "x\x00y", "é" * 300])
def test_safe_filename_is_one_harmless_component(name):
    safe = safe_filename(name)
    assert safe and "/" not in safe and "\\" not in safe and "\x00" not in safe and not safe.startswith(".")
    assert len(safe) <= 120


def test_safe_filename_keeps_safe_names_and_never_merges_two_ids():
    assert safe_filename("wtb-session-wild_tool_bench_0") == "wtb-session-wild_tool_bench_0"
    assert safe_filename("a/b") != safe_filename("a_b")
    assert safe_filename("a/b") == safe_filename("a/b")


def test_contained_path_refuses_every_escape(tmp_path):
    assert contained_path(tmp_path, "ok.json") == tmp_path / "ok.json"
    for name in ("../x", "/tmp/x", "a/../../x", "", "."):
        with pytest.raises(DataError, match="not a file inside"):
            contained_path(tmp_path, name)


@needs_sessions
def test_import_wtb_envs_never_writes_outside_out(tmp_path):
    lines = fixture_lines()
    records = [json.loads(lines[0]), json.loads(lines[1])]
    records[0]["id"], records[1]["id"] = "../../../escaped", str(tmp_path / "absolute")
    path = tmp_path / "suite.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    out = tmp_path / "a" / "b" / "out"
    result = run_cli("import", "wtb-envs", path, "--out", out)
    assert result.exit_code == 0, result.output
    written = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*.env.json"))
    assert len(written) == 2 and all(p.parent == Path("a/b/out") for p in written), written
    assert all(load_environment(tmp_path / p).id.startswith("wtb-session-") for p in written)


# -------------------------------------------------------------------------------------- 5. environment files
def _env_file(tmp_path: Path, tools: list[dict[str, Any]], name: str = "e.env.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps({"id": "e", "backend": "replay", "tools": tools}))
    return path


def _tool(name: str, parameters: Any) -> dict[str, Any]:
    return {"name": name, "parameters": parameters}


@pytest.mark.parametrize(
    ("tools", "field", "fragment"),
    [
        ([], "tools", "at least one tool"),
        ([_tool("a", _obj({})), _tool("b", _obj({})), _tool("a", _obj({}))], "tools[2].name", "repeats tools[0]"),
        ([_tool("a", _obj({"x": {"type": "strng"}}))], "tools[0].parameters", "not valid JSON Schema"),
        ([_tool("a", {"type": "object", "required": "x"})], "tools[0].parameters", "not valid JSON Schema"),
        ([_tool("a", {"type": "string"})], "tools[0].parameters", "must describe an object"),
        ([_tool("a", _obj({})), _tool("b", _obj({"x": {"$ref": "#/$defs/nowhere"}}))], "tools[1].parameters", "$ref"),
        ([_tool("a", _obj({"x": {"$ref": "https://example.invalid/s.json"}}))], "tools[0].parameters", "$ref"),
    ],
    ids=["no-tools", "duplicate-name", "bad-type", "bad-required", "not-object", "dangling-ref", "remote-ref"],
)
def test_unusable_environment_files_are_refused_naming_file_and_field(tmp_path, tools, field, fragment):
    path = _env_file(tmp_path, tools)
    with pytest.raises(DataError) as info:
        load_environment(path)
    assert info.value.file == str(path) and info.value.field == field and fragment in info.value.message


def test_published_float_type_and_local_refs_are_accepted(tmp_path):
    params = {
        "type": "object",
        "properties": {"price": {"type": "float"}, "where": {"$ref": "#/$defs/place"}},
        "$defs": {"place": {"type": "string"}},
    }
    environment = load_environment(_env_file(tmp_path, [_tool("quote", params)]))
    assert environment.tools[0].parameters["properties"]["price"] == {"type": "float"}  # kept as published


def test_a_dangling_ref_no_longer_reaches_a_call(tmp_path):
    """Before: the file loaded and the first call raised an unresolvable-reference traceback."""
    path = _env_file(tmp_path, [_tool("a", _obj({"x": {"$ref": "#/$defs/nowhere"}}))])
    with pytest.raises(DataError, match="cannot be resolved"):
        get_environment(str(path))
    # a schema built in code is never checked on load: validating against it says so instead of raising
    assert "unresolvable reference" in schema_errors(_obj({"x": {"$ref": "#/$defs/no"}}), {"x": 1})[0]


# ------------------------------------------------------------------------- 6. environment beside the suite
def _suite_with_env_beside(tmp_path: Path, decoy_effect: Effect | None) -> Path:
    """A suite whose session names ``shop.env.json`` (its ``book`` tool writes), and a decoy of the same name in
    the working directory whose ``book`` only reads (or no decoy)."""
    folder, cwd = tmp_path / "suite", tmp_path / "cwd"
    folder.mkdir()
    cwd.mkdir()
    book = Tool(name="book", parameters=_obj({"seats": {"type": "integer"}}))
    recording = Recording(name="book", arguments={"seats": 1}, observation={"ok": True})
    shop = Environment(id="shop", tools=[book.model_copy(update={"effect": Effect.WRITE})], recordings=[recording])
    write_environment(shop, folder / "shop.env.json")
    if decoy_effect is not None:
        decoy = shop.model_copy(update={"tools": [book.model_copy(update={"effect": decoy_effect})]})
        write_environment(decoy, cwd / "shop.env.json")
    suite_path = folder / "suite.jsonl"
    write_wtb_suite(Suite(name="s", sessions=[small_session(environment="shop.env.json")]), suite_path)
    return suite_path


@pytest.mark.parametrize("decoy", [Effect.READ, None], ids=["decoy-in-cwd", "nothing-in-cwd"])
def test_scoring_resolves_the_environment_beside_the_suite(tmp_path, monkeypatch, decoy):
    suite_path = _suite_with_env_beside(tmp_path, decoy)
    monkeypatch.chdir(tmp_path / "cwd")
    suite, _ = load_wtb_suite(suite_path)
    trajectory = oracle_trajectory(suite.sessions[0])
    trajectory.tasks[0] = trajectory.tasks[0].model_copy(update={"writes": 1})  # the oracle's one gold write
    verdict = score_suite(suite, [trajectory])[0]
    assert verdict.tasks[0].redundant_writes == 0, "the gold write counted as redundant: wrong environment file"


def test_the_working_directory_never_shadows_or_stands_in(tmp_path, monkeypatch):
    suite_path = _suite_with_env_beside(tmp_path, Effect.READ)
    monkeypatch.chdir(tmp_path / "cwd")
    assert resolve_environment_file("shop.env.json", suite_path.parent) == (suite_path.parent / "shop.env.json")
    (suite_path.parent / "shop.env.json").unlink()
    assert resolve_environment_file("shop.env.json", suite_path.parent) is None
    assert resolve_environment_file("shop.env.json") == (tmp_path / "cwd" / "shop.env.json")  # typed by a user


# ------------------------------------------------------------------------------------------- 7. empty suite
def test_an_empty_suite_is_not_valid(tmp_path):
    path = tmp_path / "empty.jsonl"
    path.write_text("\n")
    suite, _ = load_wtb_suite(path)
    problems = validate_suite(suite)
    assert [(p.severity, p.message) for p in problems] == [(Severity.ERROR, "the suite holds no session")]
    result = run_cli("validate", path)
    assert result.exit_code == 1 and "holds no session" in result.output and "suite is valid" not in result.output


# -------------------------------------------------------------------------------------- 8. behaviour files
def _behaviour_run(tmp_path: Path, behaviours: dict[str, Any]) -> RunConfig:
    suite_path = tmp_path / "suite.jsonl"
    write_wtb_suite(Suite(name="s", sessions=[small_session("s0"), small_session("s1")]), suite_path)
    behaviour_path = tmp_path / "behaviour.json"
    behaviour_path.write_text(json.dumps(behaviours))
    return RunConfig(suite=str(suite_path), agent=f"scripted:{behaviour_path}")


def test_a_behaviour_file_matching_no_session_is_refused(tmp_path):
    config = _behaviour_run(tmp_path, {"other-suite-0": [[{"content": "hi"}]]})
    with pytest.raises(DataError, match="scripts no session of the suite") as info:
        build_agent(config, tmp_path)
    assert info.value.file.endswith("behaviour.json")


def test_a_behaviour_file_covering_some_sessions_is_run_with_a_warning(tmp_path, caplog):
    config = _behaviour_run(tmp_path, {"s0": [[{"content": "hi"}]], "typo": []})
    with caplog.at_level(logging.WARNING, logger="toolwild.eval.build"):
        agent, _ = build_agent(config, tmp_path)
    assert agent.name == "scripted"
    text = caplog.text
    assert "1 session(s) of the suite have no behaviour" in text and "'s1'" in text and "'typo'" in text


# ------------------------------------------------------------------------- 9. results of another suite
def _published_result(session: Session, utterances: list[str]) -> dict[str, Any]:
    results = [
        {
            "inference_log": {
                "task_idx": i,
                "begin_of_current_task": {"role": "user", "content": text},
                "step_0": {"inference_output": {"content": "Booked.", "tool_calls": None}},
            }
        }
        for i, text in enumerate(utterances)
    ]
    return {"id": session.id, "model_name": "m", "result": results}


@pytest.mark.parametrize("loader", [load_trajectories, load_wtb_results], ids=["auto", "published"])
def test_a_result_answering_other_tasks_is_refused_naming_session_and_task(tmp_path, loader):
    ours = Suite(name="ours", sessions=[small_session("s0", utterance="Book one seat.")])
    path = tmp_path / "result.jsonl"
    path.write_text(json.dumps(_published_result(ours.sessions[0], ["Cancel my order."])) + "\n")
    with pytest.raises(ScoringError, match=r"session 's0', task 0 answers 'Cancel my order.'"):
        loader(path, suite=ours, skip_invalid=True)  # a wrong suite is not a bad record: never skipped
    path.write_text(json.dumps(_published_result(ours.sessions[0], ["Book one seat.", "More?"])) + "\n")
    with pytest.raises(ScoringError, match="has 2 tasks, the suite's session 1"):
        loader(path, suite=ours)
    path.write_text(json.dumps(_published_result(ours.sessions[0], ["Book  one seat. "])) + "\n")
    loaded, _ = loader(path, suite=ours)
    assert [t.session_id for t in loaded] == ["s0"]


@needs_sessions
def test_results_exported_by_toolwild_match_their_own_suite(tmp_path):
    """The check must accept every honest result: an oracle run exported in the published format."""
    from toolwild.eval.scoring.session import score_session
    from toolwild.export.wtb_result import write_wtb_results

    suite, _ = load_wtb_suite(SESSIONS)
    trajectories = [oracle_trajectory(s) for s in suite.sessions]
    verdicts = [score_session(s, t) for s, t in zip(suite.sessions, trajectories, strict=True)]
    path = tmp_path / "result.jsonl"
    write_wtb_results(path, suite, trajectories, verdicts, model_name="oracle")
    loaded, _ = load_trajectories(path, suite=suite)
    assert len(loaded) == len(suite.sessions)
    other = suite.model_copy(deep=True)
    other.sessions[2].tasks[1].utterance = "Something else entirely."
    with pytest.raises(ScoringError, match=f"session {other.sessions[2].id!r}, task 1"):
        load_trajectories(path, suite=other)


# ---------------------------------------------------------------------------- 10. a binary trajectories file
@needs_sessions
def test_score_of_a_binary_trajectories_file_exits_cleanly(tmp_path):
    path = tmp_path / "trajectories.jsonl"
    path.write_bytes((bytes(range(128, 256)) + bytes(range(128))) * 40)
    with pytest.raises(DataError, match="not UTF-8") as info:
        load_trajectories(path)
    assert info.value.file == str(path) and info.value.line is not None
    assert_clean_failure(run_cli("score", path, "--suite", SESSIONS), "not UTF-8")


def test_a_torn_multibyte_character_costs_its_line_only(tmp_path):
    path = tmp_path / "trajectories.jsonl"
    good = Trajectory(session_id="s0", tasks=[TaskTrajectory(task_index=0)]).model_dump_json().encode()
    path.write_bytes(good + b"\n" + good[:-3] + "é".encode()[:1] + b"\n")
    loaded, report = load_trajectories(path, skip_invalid=True)
    assert len(loaded) == 1 and report.skipped[0].line == 2


# ------------------------------------------------------------------------ found by the fuzzer, and on the way
def test_a_session_without_id_keeps_its_id_when_written_at_another_line(tmp_path):
    """Its id comes from its line (``wild_tool_bench_<index>``); once an invalid line before it is skipped, writing
    the suite back moved it up a line and silently renamed it."""
    record = {k: v for k, v in json.loads(json.dumps(session_to_wtb(small_session()))).items() if k != "id"}
    path = tmp_path / "suite.jsonl"
    path.write_text("not json\n" + json.dumps(record) + "\n")
    suite, _ = load_wtb_suite(path, skip_invalid=True)
    assert [s.id for s in suite.sessions] == ["wild_tool_bench_1"]
    write_wtb_suite(suite, tmp_path / "back.jsonl")
    assert [s.id for s in load_wtb_suite(tmp_path / "back.jsonl")[0].sessions] == ["wild_tool_bench_1"]


def test_a_suite_tool_whose_parameters_are_not_json_schema_is_refused_on_load(tmp_path):
    """``"required": [["seats"]]`` loaded, then crashed the scorer's schema check (``unhashable type: 'list'``) in
    validate and in every scored run."""
    record = session_to_wtb(small_session())
    record["english_tools"][0]["function"]["parameters"]["required"] = [["seats"]]
    path = tmp_path / "suite.jsonl"
    path.write_text(json.dumps(record) + "\n")
    with pytest.raises(DataError, match="not valid JSON Schema") as info:
        load_wtb_suite(path)
    assert info.value.field == "english_tools[0].function.parameters" and info.value.line == 1


def test_validate_prints_input_text_that_looks_like_markup_verbatim(tmp_path):
    """A session id ``[/]`` in a problem line was read as a closing markup tag: a MarkupError traceback."""
    record = session_to_wtb(small_session("[/]"))
    path = tmp_path / "suite.jsonl"
    path.write_text(json.dumps(record) + "\n" + json.dumps(record) + "\n")
    result = run_cli("validate", path)
    assert_clean_failure(result, "duplicate session id '[/]'")


def test_deeply_nested_yaml_seed_data_is_refused_at_once():
    """PyYAML spent seconds on a few thousand nested brackets before failing (3.6 s for 5,000 in the fuzzer)."""
    text = "tool_set_yml: |\n  data: " + "[" * 5000 + "]" * 5000 + "\n"
    started = time.perf_counter()
    with pytest.raises(DataError, match="YAML nested deeper than 100 levels"):
        parse_environment_yml(text, file="x.environment.yml")
    assert time.perf_counter() - started < 0.5
    assert parse_environment_yml("tool_set_yml: |\n  data: {a: [[1]]}\n")[1] == {"a": [[1]]}
