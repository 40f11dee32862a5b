"""Fuzzing the scorer: random replies to random gold DAGs and to the real fixture sessions, in both modes.

Property (issue 20, item 5): whatever the agent sends (random text, tool calls with names from the session's tools
and outside it, random or invalid JSON arguments, empty steps, parse errors), the scorer -- ``score_task``,
``score_session`` and the live judge ``TaskJudge.feed`` fed step by step -- never raises, and labels every task with
consistent fields:

- the label is ``correct`` or ``error``, and ``correct`` exactly when the name and arguments labels both are;
- an error has a reason and an error class; a correct task has neither;
- ``0 <= progress_complete <= progress_total`` (``wtb`` reproduces the published count, one more when the failing
  step comes after the last gold node, see :func:`_published_overrun`); ``is_optimal`` only for a correct task done
  in ``min_length`` steps;
- the live judge finishes within one feed more than the steps given, and its verdict is the replayed one.

The default run uses the bounded profile of ``tests/helpers/fuzzing.py`` (CI); ``pytest -m fuzz_long -s`` runs the
long profile and prints how many cases were tried.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fuzzing import fuzz_settings
from hypothesis import given
from hypothesis import strategies as st

from toolwild.core.formats.wtb import load_wtb_suite
from toolwild.core.session import Session
from toolwild.core.task import ANSWER_ACTION, ASK_ACTION, Action, GoldNode, Task, TaskType, TurnSubtype
from toolwild.core.tool import Tool
from toolwild.core.trajectory import Step, TaskTrajectory, ToolCall, Trajectory
from toolwild.core.verdict import ScoringMode, SessionVerdict, TaskVerdict
from toolwild.eval.agents.oracle import oracle_steps
from toolwild.eval.scoring.session import api_parameters, score_session
from toolwild.eval.scoring.task import TaskJudge, score_task

FIXTURE = Path(__file__).resolve().parents[2].parent / "shared/fixtures/wildtoolbench/sessions_0_4.reconstructed.jsonl"
MODES = (ScoringMode.WTB, ScoringMode.STRICT)
TOOL_NAMES = ("getWeather", "getWeather", "searchFlights", "bookHotel", "convert")
OUTSIDE_NAMES = ("unknown_tool", "getweather", "", " ", "prepare_to_answer ", "getWeather\u200b", "工具")
PSEUDO_NAMES = (ASK_ACTION, ANSWER_ACTION)

# ------------------------------------------------------------------ values and schemas
scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(10**12), 10**12)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=24)
    | st.sampled_from(["2024-07-14", "New York City", "LasVegas", "123.456.78.90", "北京天气", "", " . . "])
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=10,
)
json_objects = st.dictionaries(
    st.sampled_from(["city", "date", "count", "ids", "filters", "mode", "x"]) | st.text(max_size=6),
    json_values,
    max_size=4,
)

SCHEMAS: list[dict[str, Any]] = [
    {"type": "object", "properties": {}},
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "a city"},
            "date": {"type": "string"},
            "count": {"type": "integer"},
            "ratio": {"type": "float"},
            "mode": {"type": "string", "enum": ["fast", "slow"]},
        },
        "required": ["city", "count"],
    },
    {
        "type": "object",
        "properties": {
            "ids": {"type": "array", "items": {"type": "string"}},
            "filters": {
                "type": "object",
                "properties": {"min": {"type": "number"}, "tags": {"type": "array", "items": {"type": "integer"}}},
                "required": ["min"],
            },
            "maybe": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        },
        "required": ["ids"],
        "additionalProperties": True,
    },
    {"type": "object", "properties": {"x": {}, "y": {"type": "boolean"}, "z": {"type": "unknown-type"}}},
]


@st.composite
def tools(draw) -> list[Tool]:
    """The session's tools: some of the names the gold uses (possibly not all), each with a drawn schema."""
    names = draw(st.sets(st.sampled_from(sorted(set(TOOL_NAMES))), max_size=4))
    return [Tool(name=n, description=f"{n} tool", parameters=draw(st.sampled_from(SCHEMAS))) for n in sorted(names)]


# ------------------------------------------------------------------ gold DAGs
@st.composite
def gold_tasks(draw) -> Task:
    """A random task of any type: random call/ask nodes with random dependencies, usually ending in an answer."""
    n = draw(st.integers(1, 6))
    names = [draw(st.sampled_from([*TOOL_NAMES, ASK_ACTION, ANSWER_ACTION])) for _ in range(n)]
    deps = [sorted(draw(st.sets(st.integers(0, i - 1), max_size=3))) if i else [] for i in range(n)]
    if draw(st.integers(0, 3)) > 0:  # most published tasks end with the answer node, after every sink
        has_child = {d for ds in deps for d in ds}
        names.append(ANSWER_ACTION)
        deps.append([i for i in range(n) if i not in has_child])
    nodes = []
    for i, name in enumerate(names):
        if name == ASK_ACTION:
            arguments: dict[str, Any] = {}
            observation: Any = draw(st.text(max_size=30))
        elif name == ANSWER_ACTION:
            arguments, observation = {}, draw(st.text(max_size=30))
        else:
            arguments, observation = draw(json_objects), draw(json_values)
        nodes.append(
            GoldNode(
                idx=i,
                action=Action(name=name, arguments=arguments),
                observation=observation,
                dependency_list=deps[i],
                user_input=draw(st.text(max_size=20)) if name == ASK_ACTION else None,
            )
        )
    return Task(
        utterance=draw(st.text(max_size=40)),
        type=draw(st.sampled_from(list(TaskType))),
        subtype=draw(st.sampled_from(list(TurnSubtype))),
        gold=nodes,
    )


@st.composite
def sessions(draw) -> Session:
    tasks = draw(st.lists(gold_tasks(), min_size=1, max_size=4))
    return Session(
        id=draw(st.text(min_size=1, max_size=12)),
        env_info="2024-07-11 22:11:58 Thursday",
        tools=draw(tools()),
        tasks=tasks,
    )


# ------------------------------------------------------------------ replies
MALFORMED_ARGUMENTS = [
    "",
    "{",
    "{'city': 'x'}",
    "null",
    "[]",
    "NaN",
    '{"a": }',
    "\x00",
    "{}" * 3,
    "[" * 5000 + "]" * 5000,  # deeper than Python's parser goes: RecursionError, not a decode error
    '{"city": ' * 300 + '"x"' + "}" * 300,  # parses, but nested far deeper than any schema
    '{"count": ' + "9" * 5000 + "}",  # an integer past Python's conversion limit: ValueError
    '"\\ud800"',  # a lone surrogate
]


def _arguments_text(draw, gold: dict[str, Any] | None) -> str:
    """Arguments as a model might write them: gold-like JSON, random JSON of any type, or text that is not JSON."""
    choice = draw(st.integers(0, 6))
    if choice == 0 and gold is not None:
        return json.dumps(gold, ensure_ascii=False)
    if choice == 1 and gold is not None:  # gold keys in another order, one value perturbed
        keys = list(gold)
        draw(st.randoms()).shuffle(keys)
        changed = {k: gold[k] for k in keys}
        if keys and draw(st.booleans()):
            changed[keys[0]] = draw(json_values)
        return json.dumps(changed, ensure_ascii=False)
    if choice == 2:
        return json.dumps(draw(json_objects), ensure_ascii=False)
    if choice == 3:
        return json.dumps(draw(json_values), ensure_ascii=False)  # valid JSON, maybe not an object
    if choice in (4, 5):
        return draw(st.sampled_from(MALFORMED_ARGUMENTS))
    return draw(st.text(max_size=30))


@st.composite
def tool_calls(draw, session: Session, task: Task) -> ToolCall:
    pool = [*(t.name for t in session.tools), *(n.name for n in task.gold), *OUTSIDE_NAMES, *PSEUDO_NAMES]
    name = draw(st.sampled_from(pool))
    golds = [n.action.arguments for n in task.gold if n.name == name]
    gold = draw(st.sampled_from(golds)) if golds else None
    return ToolCall(id=draw(st.none() | st.text(max_size=8)), name=name, arguments=_arguments_text(draw, gold))


@st.composite
def random_steps(draw, session: Session, task: Task) -> Step:
    kind = draw(st.integers(0, 6))
    if kind == 0:
        return Step()
    if kind == 1:
        return Step(content=draw(st.text(max_size=40)))
    if kind == 2:
        return Step(parse_error=draw(st.text(max_size=20)))
    if kind == 3:
        return Step(tool_calls=[])
    calls = draw(st.lists(tool_calls(session, task), min_size=1, max_size=4))
    if kind == 4:
        return Step(content=draw(st.text(max_size=20)), tool_calls=calls)
    return Step(tool_calls=calls)


@st.composite
def replies(draw, session: Session, task: Task) -> list[Step]:
    """Random steps, or the gold path with a few mutations (so that deep positions of the DAG are reached)."""
    if draw(st.booleans()):
        return draw(st.lists(random_steps(session, task), max_size=6))
    steps = [s.model_copy(deep=True) for s in oracle_steps(task)]
    for _ in range(draw(st.integers(0, 3))):
        where = draw(st.integers(0, len(steps)))
        op = draw(st.integers(0, 6))
        if op == 0:
            steps.insert(where, draw(random_steps(session, task)))
        elif op == 1 and steps:
            del steps[min(where, len(steps) - 1)]
        elif op == 2 and steps:  # split a batch into one call per turn, in a drawn order
            i = min(where, len(steps) - 1)
            calls = list(steps[i].tool_calls or [])
            if len(calls) > 1:
                draw(st.randoms()).shuffle(calls)
                steps[i : i + 1] = [Step(tool_calls=[c]) for c in calls]
        elif op == 3 and steps:  # new arguments for one call
            i = min(where, len(steps) - 1)
            for call in steps[i].tool_calls or []:
                if draw(st.booleans()):
                    call.arguments = _arguments_text(draw, None)
        elif op == 5 and steps:  # malformed arguments for one call of a step
            calls = steps[min(where, len(steps) - 1)].tool_calls or []
            if calls:
                calls[draw(st.integers(0, len(calls) - 1))].arguments = draw(st.sampled_from(MALFORMED_ARGUMENTS))
        elif op == 4 and steps:  # reverse the calls of a batch
            i = min(where, len(steps) - 1)
            if steps[i].tool_calls:
                steps[i].tool_calls = list(reversed(steps[i].tool_calls))
        else:
            steps.append(draw(random_steps(session, task)))
    return steps


# ------------------------------------------------------------------ the property
def _published_overrun(verdict: TaskVerdict, task: Task, mode: ScoringMode) -> int:
    """1 where the published progress counts one step past the gold, else 0.

    The published progress logs every step, the failing one included. Every accepted step takes at least one gold
    node, so a step can only fail after n accepted steps when all n nodes are done and the task has not ended: a DAG
    without an answer node, or (``wtb`` only) ``prepare_to_answer`` called as a function, matched like a tool. The
    agent's next step (text, a call, an empty reply) then fails and is logged as entry n+1 over n gold nodes.
    ``wtb`` reproduces that count on purpose; ``strict`` counts gold nodes done, never more than there are.
    """
    if mode is not ScoringMode.WTB or not verdict.steps:
        return 0
    last = verdict.steps[-1]
    return int(last.name_label == "error" and last.step >= len(task.gold))


def assert_consistent(verdict: TaskVerdict, session: Session, mode: ScoringMode) -> None:
    """Every field of a task verdict agrees with the others (see the module docstring)."""
    task = session.tasks[verdict.task_index]
    assert verdict.label in ("correct", "error")
    both_correct = verdict.name_label == "correct" and verdict.arguments_label == "correct"
    assert (verdict.label == "correct") == both_correct, verdict
    if verdict.label == "error":
        assert verdict.error_reason, verdict
        assert verdict.error_class is not None, verdict
    else:
        assert verdict.error_reason is None and verdict.error_class is None, verdict
    if mode is ScoringMode.STRICT or verdict.name_label == "correct":
        assert verdict.arguments_label in ("correct", "error"), verdict
    assert 0 <= verdict.progress_complete <= verdict.progress_total + _published_overrun(verdict, task, mode), verdict
    assert verdict.progress_total == (
        session.gold_size(verdict.task_index) if mode is ScoringMode.WTB else len(task.gold)
    )
    assert verdict.min_length >= 1 and verdict.steps_used >= 1
    assert verdict.steps_used == len(verdict.steps)
    if verdict.is_optimal:
        assert verdict.label == "correct" and verdict.steps_used == verdict.min_length, verdict
    if verdict.dropped_step is not None:
        assert 0 <= verdict.dropped_step < len(verdict.steps), verdict
    for k, step in enumerate(verdict.steps):
        assert step.step == k
        assert step.name_label in ("correct", "error")
        if step.name_label == "error":
            assert step.error_reason and k == len(verdict.steps) - 1, verdict  # an error ends the loop
        assert all(0 <= node < len(task.gold) for node in step.matched_nodes)
        assert all(0 <= check.gold_idx < len(task.gold) for check in step.argument_checks)
    text = verdict.model_dump_json()  # it serialises and reads back (non-finite gold floats become null)
    assert TaskVerdict.model_validate_json(text).model_dump_json() == text


def judge_live(session: Session, index: int, steps: list[Step], mode: ScoringMode) -> TaskVerdict:
    """Feed the steps one by one as the runner does; running out of steps is an empty reply."""
    judge = TaskJudge(session.tasks[index], parameters=api_parameters(session), mode=mode)
    feeds = 0
    while not judge.finished:
        assert feeds <= len(steps), "the judge did not finish after an empty reply"
        step_verdict = judge.feed(steps[feeds] if feeds < len(steps) else None)
        assert step_verdict.step == feeds
        feeds += 1
    with pytest.raises(RuntimeError):
        judge.feed(Step(content="more"))  # a finished task takes no more steps, loudly
    return judge.verdict(session, index, steps)


def check_session(session: Session, per_task: list[list[Step]]) -> None:
    """Every task of the session, in both modes, through all three entry points."""
    params = api_parameters(session)
    trajectory = Trajectory(
        session_id=session.id,
        tasks=[TaskTrajectory(task_index=i, steps=steps) for i, steps in enumerate(per_task)],
    )
    for mode in MODES:
        for i, steps in enumerate(per_task):
            replayed = score_task(session, i, steps, parameters=params, mode=mode)
            assert_consistent(replayed, session, mode)
            assert judge_live(session, i, steps, mode) == replayed
        verdict: SessionVerdict = score_session(session, trajectory, mode=mode)
        assert [t.task_index for t in verdict.tasks] == list(range(len(session.tasks)))
        for task_verdict in verdict.tasks:
            assert_consistent(task_verdict, session, mode)
        assert verdict.correct == all(t.label == "correct" for t in verdict.tasks)


@st.composite
def random_cases(draw) -> tuple[Session, list[list[Step]]]:
    session = draw(sessions())
    per_task = [draw(replies(session, task)) for task in session.tasks]
    return session, per_task[: draw(st.integers(0, len(per_task)))]  # tasks without a record: no steps at all


def _fixture_sessions() -> list[Session]:
    if not FIXTURE.exists():
        pytest.skip(f"fixture not found: {FIXTURE}")
    return load_wtb_suite(FIXTURE)[0].sessions


@st.composite
def fixture_cases(draw, fixture: list[Session]) -> tuple[Session, list[list[Step]]]:
    session = draw(st.sampled_from(fixture))
    return session, [draw(replies(session, task)) for task in session.tasks]


@pytest.mark.parametrize("arguments", MALFORMED_ARGUMENTS, ids=range(len(MALFORMED_ARGUMENTS)))
def test_scorer_labels_every_malformed_argument_text(arguments):
    """Each malformed text in every call of the gold path, on a session whose tools accept nested objects (so the
    schema check and the value match are both reached): labelled, never raised."""
    nested = {"type": "object", "properties": {"city": {"type": "object", "additionalProperties": True}}}
    task = Task(
        utterance="u",
        type=TaskType.MIXED,
        gold=[
            GoldNode(idx=0, action=Action(name="getWeather", arguments={"city": {"name": "x"}})),
            GoldNode(idx=1, action=Action(name="getWeather", arguments={"city": {"name": "y"}})),
            GoldNode(idx=2, action=Action(name="convert", arguments={}), dependency_list=[0, 1]),
            GoldNode(idx=3, action=Action(name=ANSWER_ACTION), dependency_list=[2]),
        ],
    )
    tools = [Tool(name="getWeather", parameters=nested), Tool(name="convert", parameters=SCHEMAS[0])]
    session = Session(id="s", env_info="", tools=tools, tasks=[task])
    steps = [s.model_copy(deep=True) for s in oracle_steps(task)]
    for step in steps:
        for call in step.tool_calls or []:
            call.arguments = arguments
    check_session(session, [steps])
    for mode in MODES:
        verdict = score_task(session, 0, steps, parameters=api_parameters(session), mode=mode)
        assert verdict.label == "error" and verdict.arguments_label == "error"


class Counter:
    """Counts the cases hypothesis ran (printed by the long profile)."""

    def __init__(self) -> None:
        self.n = 0


# ------------------------------------------------------------------ bounded (every run)
@fuzz_settings()
@given(random_cases())
def test_scorer_labels_random_replies_to_random_dags(case):
    check_session(*case)


def test_scorer_labels_random_replies_to_the_fixture_sessions():
    fixture = _fixture_sessions()

    @fuzz_settings()
    @given(fixture_cases(fixture))
    def run(case):
        check_session(*case)

    run()


# ------------------------------------------------------------------ long (pytest -m fuzz_long -s)
@pytest.mark.fuzz_long
def test_scorer_fuzz_long_random_dags():
    tried = Counter()

    @fuzz_settings(long=True)
    @given(random_cases())
    def run(case):
        tried.n += 1
        check_session(*case)

    run()
    print(f"\nscorer fuzz (random DAGs): {tried.n} cases tried")


@pytest.mark.fuzz_long
def test_scorer_fuzz_long_fixture_sessions():
    fixture = _fixture_sessions()
    tried = Counter()

    @fuzz_settings(long=True)
    @given(fixture_cases(fixture))
    def run(case):
        tried.n += 1
        check_session(*case)

    run()
    print(f"\nscorer fuzz (fixture sessions): {tried.n} cases tried")
