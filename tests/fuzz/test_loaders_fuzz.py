"""Fuzzing every loader (issue 20, item 5): over any input, a loader returns data or raises DataError (ScoringError
where a result file meets a suite it does not belong to), never anything else.

Inputs are random bytes, random JSON, and valid records mutated: keys dropped or replaced, values of the wrong type,
deep nesting, huge strings, NUL bytes and odd characters, lone surrogates, invalid UTF-8, truncation. What a loader
accepts must also be usable by the next step (a suite written back and validated, an environment called, results
scored), since a loader that lets through what crashes the next step has only moved the traceback.

``pytest tests/fuzz`` runs the bounded profile; ``pytest -m fuzz_long -s tests/fuzz`` the long one, which prints
how many cases each loader was given.
"""

from __future__ import annotations

import copy
import json
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fuzzing import fuzz_settings
from hypothesis import given
from hypothesis import strategies as st

from toolwild.core.environment import BackendKind, Environment, Recording
from toolwild.core.formats.environment import load_environment, write_environment
from toolwild.core.formats.results import load_trajectories
from toolwild.core.formats.synthtools import load_synthtools_dir, load_synthtools_tool
from toolwild.core.formats.synthtools_envs import environments_from_synthtools, load_synthtools_meta
from toolwild.core.formats.wtb import load_wtb_suite, session_to_wtb, write_wtb_suite
from toolwild.core.formats.wtb_envs import environment_from_session, environments_from_tool_lists
from toolwild.core.formats.wtb_result import load_wtb_results
from toolwild.core.session import Session, Suite
from toolwild.core.task import Action, GoldNode, Task, TaskType, TurnSubtype, answer_node, ask_node
from toolwild.core.tool import Effect, Tool
from toolwild.core.trajectory import Step, TaskTrajectory, ToolCall, Trajectory
from toolwild.envs.registry import backend_for
from toolwild.errors import DataError, ScoringError
from toolwild.eval.agents.oracle import oracle_trajectory
from toolwild.eval.agents.scripted import load_behaviours
from toolwild.eval.scoring.session import score_session, score_suite
from toolwild.eval.validate import validate_suite
from toolwild.export.training import ExportFormat, write_training_export
from toolwild.export.wtb_result import session_result_to_wtb

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT.parent / "shared" / "fixtures"
SESSIONS = FIXTURES / "wildtoolbench" / "sessions_0_4.reconstructed.jsonl"

# ---------------------------------------------------------------------------------------------- seed records


def _obj(props: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": required or []}


def _built_session(sid: str) -> Session:
    """A session of every task kind, built in code so the fuzzer has seeds without the shared fixtures."""
    book = Tool(
        name="book",
        description="Book seats.",
        parameters=_obj({"seats": {"type": "integer"}, "day": {"type": "string", "format": "date"}}, ["seats"]),
        effect=Effect.WRITE,
    )
    look = Tool(name="look", description="Read.", parameters=_obj({"q": {"type": "float"}}))
    c0 = GoldNode(idx=0, action=Action(name="look", arguments={"q": 1.5}), observation={"n": 2})
    c1 = GoldNode(idx=1, action=Action(name="book", arguments={"seats": 2}), observation="ok", dependency_list=[0])
    ask = ask_node(0, "book", ["seats"], "How many seats?", "Two.", [])
    c2 = GoldNode(idx=1, action=Action(name="book", arguments={"seats": 2}), observation="ok", dependency_list=[0])
    chat = answer_node([], "Hello.")
    tasks = [
        Task(utterance="Look it up and book.", type=TaskType.SEQUENTIAL, gold=[c0, c1, answer_node([c0, c1], "Done.")]),
        Task(
            utterance="Book again.",
            type=TaskType.CLARIFY,
            subtype=TurnSubtype.COREFERENTIAL,
            gold=[ask, c2, answer_node([ask, c2], "Booked.")],
        ),
        Task(utterance="Thanks!", type=TaskType.CHAT, subtype=TurnSubtype.PARTIAL, gold=[chat]),
    ]
    return Session(id=sid, env_info="2024-07-11 22:11:58 Thursday", tools=[book, look], tasks=tasks)


def _seed_sessions() -> list[Session]:
    sessions = [_built_session("built_0")]
    if SESSIONS.is_file():
        suite, _ = load_wtb_suite(SESSIONS)
        sessions += suite.sessions
    return sessions


SEED_SESSIONS = _seed_sessions()
SEED_SUITE = Suite(name="seed", sessions=SEED_SESSIONS)
SUITE_RECORDS = [session_to_wtb(s) for s in SEED_SESSIONS]
ENV_RECORDS = [
    environment_from_session(SEED_SESSIONS[0]).model_dump(mode="json"),
    Environment(
        id="shop",
        tools=SEED_SESSIONS[0].tools,
        backend=BackendKind.REPLAY,
        recordings=[Recording(name="book", arguments={"seats": 2}, observation={"ok": True})],
        initial_state={"a": [1, 2]},
    ).model_dump(mode="json"),
]
BEHAVIOUR_RECORDS = [
    {
        "built_0": [
            [{"tool_calls": [{"name": "look", "arguments": {"q": 1.5}}]}, {"content": "ok"}],
            [{"tool_calls": [{"name": "book", "arguments": "{bad json"}]}],
            [{"content": "Hello."}],
        ]
    }
]


def _result_records() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for session in SEED_SESSIONS[:3]:
        trajectory = oracle_trajectory(session)
        verdict = score_session(session, trajectory)
        out.append(session_result_to_wtb(session, trajectory, verdict, model_name="oracle"))
        out.append(trajectory.model_dump(mode="json"))
    out.append(
        Trajectory(
            session_id="built_0",
            tasks=[TaskTrajectory(task_index=0, steps=[Step(tool_calls=[ToolCall.of("look", {"q": 1})])], writes=2)],
        ).model_dump(mode="json")
    )
    return out


RESULT_RECORDS = _result_records()
SYNTHTOOLS_RECORDS = [
    {
        "tool_name": "Refund Calculator",
        "tool_description": "Computes refunds.",
        "parameters": {
            "order_id": {"type": "string", "required": True, "description": "The order."},
            "items": {"type": "array", "required": False, "items": {"type": "string"}, "default": "None"},
        },
        "error_messages": ["Order not found: the id does not exist."],
        "usage": "Give an order id.",
        "output_details": {"refund": {"type": "number", "description": "Amount."}},
    }
]
TOOL_LIST_RECORDS = [[{"type": "function", "function": {"name": "f", "parameters": _obj({"a": {"type": "float"}})}}]]
YML_TEXTS = [
    "tool_set_yml: |\n  metadata:\n    task: t\n  data:\n    orders:\n      - id: 1\n        day: 2024-01-02\n",
    'tool_set_yml: |\n  # comment\n  {"task": "t", "patients": [{"id": "P"}]}\n\n  # Task list\n  text\n',
]

# ------------------------------------------------------------------------------------------------ strategies

ODD_TEXT = st.sampled_from(
    ["", " ", "\x00", "a\x00b", "\n", "\u2028", "\ud800", "\udfff", "[/]", "../../x", "/etc/x", "é", "\U0001f600"]
)
TEXT = st.text(alphabet=st.characters(), max_size=20) | ODD_TEXT
"""Any code point, surrogates included (serialised as ``\\u`` escapes they decode to lone surrogates)."""
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | TEXT
)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=20,
)


def _paths(value: Any, *, max_depth: int = 40) -> list[tuple[Any, ...]]:
    """Every position in a JSON value (the root included), down to ``max_depth`` (iterative: values may be deep)."""
    out: list[tuple[Any, ...]] = []
    stack: list[tuple[Any, tuple[Any, ...]]] = [(value, ())]
    while stack:
        node, prefix = stack.pop()
        out.append(prefix)
        if len(prefix) >= max_depth:
            continue
        if isinstance(node, dict):
            stack.extend((child, (*prefix, key)) for key, child in node.items())
        elif isinstance(node, list):
            stack.extend((child, (*prefix, i)) for i, child in enumerate(node))
    return sorted(out, key=lambda p: (len(p), repr(p)))


def _get(value: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        value = value[part]
    return value


def _nested(depth: int, leaf: Any) -> Any:
    for _ in range(depth):
        leaf = [leaf]
    return leaf


@st.composite
def _replacement(draw: st.DrawFn, old: Any) -> Any:
    kind = draw(st.sampled_from(["json", "json", "type", "type", "deep", "huge", "odd", "odd", "empty", "number"]))
    if kind == "json":
        return draw(JSON)
    if kind == "type":  # the same value as another JSON type
        return draw(st.sampled_from([[old], {"v": old}, json.dumps(old, default=str), None, True, 0]))
    if kind == "deep":
        return _nested(draw(st.sampled_from([50, 99, 101, 150, 400])), old)
    if kind == "huge":
        return draw(st.sampled_from(["x", "\x00", "é", "{"])) * draw(st.sampled_from([10_000, 300_000]))
    if kind == "odd":
        return draw(ODD_TEXT)
    if kind == "number":
        return draw(st.sampled_from([-1, 0, 2**63, 10**400, 1e308, -0.0, True, float("nan"), float("inf")]))
    return draw(st.sampled_from([[], {}, ""]))


@st.composite
def mutated(draw: st.DrawFn, seeds: list[Any]) -> Any:
    """A seed record with one to four mutations at random positions."""
    value = copy.deepcopy(draw(st.sampled_from(seeds)))
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        paths = _paths(value)[1:]  # the root is replaced whole by the random-JSON inputs
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent, key = _get(value, path[:-1]), path[-1]
        action = draw(st.sampled_from(["drop", "replace", "replace", "rename", "duplicate"]))
        if action == "drop":
            del parent[key]
        elif action == "rename" and isinstance(parent, dict):
            parent[draw(TEXT)] = parent.pop(key)
        elif action == "duplicate" and isinstance(parent, list):
            parent.insert(key, copy.deepcopy(parent[key]))
        else:
            parent[key] = draw(_replacement(parent[key]))
    return value


def _dumps(value: Any) -> bytes:
    return json.dumps(value, allow_nan=True).encode("utf-8")


@st.composite
def damaged(draw: st.DrawFn, raw: bytes) -> bytes:
    """Byte-level damage: invalid UTF-8 inserted, the text cut short, a newline inside, or nothing."""
    kind = draw(st.sampled_from(["none"] * 6 + ["bad-utf8", "truncate", "newline", "bom"]))
    at = draw(st.integers(min_value=0, max_value=max(0, len(raw))))
    if kind == "bad-utf8":
        return raw[:at] + draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xf4\x90\x80\x80"])) + raw[at:]
    if kind == "truncate":
        return raw[:at]
    if kind == "newline":
        return raw[:at] + b"\n" + raw[at:]
    if kind == "bom":
        return b"\xef\xbb\xbf" + raw
    return raw


def records(seeds: list[Any]) -> st.SearchStrategy[bytes]:
    """One serialised record: a mutated seed, random JSON or random bytes, possibly damaged."""
    mutations = mutated(seeds).map(_dumps)
    serialised = st.one_of(
        mutations,
        mutations,
        mutations,
        mutations,
        mutations,
        st.sampled_from(seeds).map(_dumps),
        JSON.map(_dumps),
        st.sampled_from([150, 5000]).map(lambda n: b"[" * n + b"]" * n),
        st.binary(max_size=200),
    )
    return serialised.flatmap(damaged)


def jsonl(seeds: list[Any]) -> st.SearchStrategy[bytes]:
    """A JSONL file of one to three records (or random bytes)."""
    lines = st.lists(records(seeds), min_size=1, max_size=3).map(lambda rs: b"\n".join(rs) + b"\n")
    return lines | st.binary(max_size=500)


# ---------------------------------------------------------------------------------------------- properties

ACCEPTED = (DataError,)


_SCRATCH = tempfile.TemporaryDirectory(prefix="toolwild-loaders-fuzz-")
"""One folder for the whole run, emptied before each case (thousands of cases must not leave thousands of folders)."""


def _fresh_dir() -> Path:
    folder = Path(_SCRATCH.name) / "case"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    return folder


def _file(name: str, raw: bytes) -> Path:
    path = _fresh_dir() / name
    path.write_bytes(raw)
    return path


def _comparable(session: Session) -> dict[str, Any]:
    """A session as data, without the marker of a record read without an id (written back, it gets its id)."""
    data = session.model_dump(mode="json")
    data["extra"].pop("__no_id__", None)
    return data


def check_suite(raw: bytes) -> None:
    """Suites load (strict and skipping), and what loads can be written back, validated and exported."""
    path = _file("suite.jsonl", raw)
    try:
        load_wtb_suite(path)
    except ACCEPTED:
        pass
    suite, _ = load_wtb_suite(path, skip_invalid=True)
    write_wtb_suite(suite, path.with_name("back.jsonl"))
    again, _ = load_wtb_suite(path.with_name("back.jsonl"))
    assert [_comparable(s) for s in again.sessions] == [_comparable(s) for s in suite.sessions]
    validate_suite(suite, oracle_check=True)
    try:
        write_training_export(suite, path.with_name("train.jsonl"), ExportFormat.SHAREGPT)
    except DataError:
        pass  # a session whose gold path breaks the chat role order is refused by name


def check_results(raw: bytes) -> None:
    """Result files load (either reader, with and without the suite check), and what loads is scored."""
    path = _file("result.jsonl", raw)
    for loader in (load_trajectories, load_wtb_results):
        for suite in (None, SEED_SUITE):
            try:
                trajectories, _ = loader(path, skip_invalid=True, suite=suite)
            except ScoringError:
                continue
            try:
                score_suite(SEED_SUITE, trajectories)
            except ScoringError:
                pass


def check_environment(raw: bytes) -> None:
    """Environment files load or are refused; a loaded replay environment answers a call with an observation."""
    path = _file("e.env.json", raw)
    try:
        environment = load_environment(path)
    except ACCEPTED:
        return
    write_environment(environment, path.with_name("back.env.json"))
    if environment.backend is BackendKind.REPLAY:
        episode = backend_for(environment).reset(seed=0)
        for tool in environment.tools[:3]:
            episode.call(tool.name, {})
            episode.call(tool.name, {"seats": 2, "q": [1]})


def check_behaviours(raw: bytes) -> None:
    path = _file("behaviour.json", raw)
    try:
        load_behaviours(path)
    except ACCEPTED:
        pass


def check_synthtools_spec(raw: bytes) -> None:
    """One spec file, alone and as a release directory (with environments built from what loads)."""
    path = _file("x_tool_spec_1__Tool.json", raw)
    try:
        load_synthtools_tool(path)
    except ACCEPTED:
        pass
    try:
        tools, _, _ = load_synthtools_dir(path.parent, skip_invalid=True)
    except ACCEPTED:
        return
    environments_from_synthtools(tools)


def check_synthtools_meta(raw: bytes) -> None:
    """A release's ``tool_list.json`` and a ``task_meta/*.environment.yml`` (the same bytes in both)."""
    base = _fresh_dir() / "tool_content"
    (base / "tool_json").mkdir(parents=True)
    (base / "task_meta").mkdir()
    (base / "tool_list.json").write_bytes(raw)
    (base / "task_meta" / "x_tool_spec_1.environment.yml").write_bytes(raw)
    try:
        load_synthtools_meta(base)
    except ACCEPTED:
        pass
    (base / "tool_list.json").unlink()
    try:
        load_synthtools_meta(base)
    except ACCEPTED:
        pass


def check_tool_lists(raw: bytes) -> None:
    path = _file("tools_en.jsonl", raw)
    try:
        environments_from_tool_lists(path)
    except ACCEPTED:
        pass


def _yml_bytes() -> st.SearchStrategy[bytes]:
    embedded = mutated([{"task": "t", "patients": [{"id": "P"}]}]).map(
        lambda v: ("tool_set_yml: |\n  " + json.dumps(v) + "\n").encode()
    )
    yaml_like = st.sampled_from(YML_TEXTS).map(str.encode).flatmap(damaged)
    anchors = st.just(b"tool_set_yml: |\n  a: &a [1]\n  data: &d {x: *a, y: *a}\n")
    deep = st.sampled_from([50, 1200]).map(lambda n: b"tool_set_yml: |\n  data: " + b"[" * n + b"]" * n + b"\n")
    return embedded | yaml_like | anchors | deep | jsonl([{"id": "x_tool_spec_1__A", "subfield": "s", "task": "t"}])


CASES: dict[str, tuple[Callable[[bytes], None], Callable[[], st.SearchStrategy[bytes]]]] = {
    "suite": (check_suite, lambda: jsonl(SUITE_RECORDS)),
    "results": (check_results, lambda: jsonl(RESULT_RECORDS)),
    "environment": (check_environment, lambda: records(ENV_RECORDS)),
    "behaviours": (check_behaviours, lambda: records(BEHAVIOUR_RECORDS)),
    "synthtools-spec": (check_synthtools_spec, lambda: records(SYNTHTOOLS_RECORDS)),
    "synthtools-meta": (check_synthtools_meta, _yml_bytes),
    "tool-lists": (check_tool_lists, lambda: jsonl(TOOL_LIST_RECORDS)),
}


def fuzz(case: str, *, long: bool) -> int:
    """Run one loader's property under the bounded or long profile; returns how many cases were tried."""
    check, strategy = CASES[case]
    tried = 0

    @fuzz_settings(long=long)
    @given(strategy())
    def run(raw: bytes) -> None:
        nonlocal tried
        tried += 1
        check(raw)

    run()
    return tried


@pytest.mark.parametrize("case", sorted(CASES))
def test_loader_returns_data_or_a_data_error(case):
    assert fuzz(case, long=False) > 0


@pytest.mark.fuzz_long
@pytest.mark.parametrize("case", sorted(CASES))
def test_loader_returns_data_or_a_data_error_long(case):
    tried = fuzz(case, long=True)
    print(f"\nfuzz {case}: {tried:,} cases tried")
    assert tried > 0


@pytest.mark.parametrize("seed", range(len(SUITE_RECORDS)))
def test_seed_records_load_unchanged(seed):
    """The seeds themselves are valid (so mutations start from real records, not from already-rejected ones)."""
    check_suite(json.dumps(SUITE_RECORDS[seed]).encode() + b"\n")
    suite, report = load_wtb_suite(_file("s.jsonl", json.dumps(SUITE_RECORDS[seed]).encode()))
    assert report.skipped_count == 0 and len(suite.sessions) == 1
