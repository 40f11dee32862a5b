"""The report's faster paths give the page it gave before: the gold paths computed once per DAG shape are the
paths of each task's own DAG, the task list encoded session by session (as eval does while sessions end) is the
list encoded whole, and plotly.js read from its file is the bundle plotly itself returns (issue 34)."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pytest

from toolwild.core.formats.wtb import load_wtb_suite
from toolwild.core.session import Session, Suite
from toolwild.core.task import ANSWER_ACTION, Action, GoldNode, Task, TaskType
from toolwild.core.verdict import ScoringMode
from toolwild.eval.agents.oracle import oracle_trajectory
from toolwild.eval.scoring.dag import GoldDag
from toolwild.eval.scoring.session import score_suite
from toolwild.report.html import RunView, _gold, _task_record, _tasks_json, encode_records, optimal_paths, plotly_js

FIXTURE = Path(__file__).resolve().parents[2].parent / "shared/fixtures/wildtoolbench/sessions_0_4.reconstructed.jsonl"


def _random_task(rng: random.Random) -> Task:
    """A gold DAG of 1-6 calls over 1-3 names (same-name runs on purpose), random dependencies, then an answer."""
    size = rng.randint(1, 6)
    names = [rng.choice("abc") for _ in range(size)]
    nodes = [
        GoldNode(
            idx=i,
            action=Action(name=f"tool_{name}", arguments={}),
            observation={"ok": True},
            dependency_list=sorted(rng.sample(range(i), rng.randint(0, min(i, 2)))),
        )
        for i, name in enumerate(names)
    ]
    nodes.append(
        GoldNode(
            idx=size,
            action=Action(name=ANSWER_ACTION, arguments={"answer_type": "tool"}),
            observation="done",
            dependency_list=list(range(size)),
        )
    )
    return Task(utterance="x", type=TaskType.MIXED, gold=nodes)


def _sessions() -> list[Session]:
    rng = random.Random(34)
    made = [
        Session(id=f"s{k}", env_info="2024-01-01", tools=[], tasks=[_random_task(rng) for _ in range(4)])
        for k in range(40)
    ]
    if FIXTURE.exists():
        made += load_wtb_suite(FIXTURE)[0].sessions
    return made


@pytest.mark.parametrize("mode", list(ScoringMode))
def test_paths_of_a_shape_are_the_paths_of_each_tasks_own_dag(mode):
    for session in _sessions():
        for index, task in enumerate(session.tasks):
            dag = GoldDag.from_task(task, mode=mode)
            gold = _gold(session, index, mode)
            assert [[list(step) for step in path] for path in gold["paths"]] == optimal_paths(dag), (session.id, index)
            assert gold["min"] == dag.min_length


def test_plotly_js_is_the_bundle_plotly_returns():
    from plotly.offline import get_plotlyjs

    assert plotly_js() == get_plotlyjs()


def test_reading_plotly_js_does_not_import_plotly(monkeypatch):
    for name in [m for m in sys.modules if m == "plotly" or m.startswith("plotly.")]:
        monkeypatch.delitem(sys.modules, name)
    assert plotly_js().startswith("/**")
    assert "plotly" not in sys.modules


def _view() -> RunView:
    sessions = _sessions()
    trajectories = [oracle_trajectory(s) for s in sessions]
    trajectories[1].tasks[0].steps = trajectories[1].tasks[0].steps[:1]  # a failure, so verdicts differ
    suite = Suite(name="t", sessions=sessions)
    return RunView.of(suite, trajectories, score_suite(suite, trajectories))


def test_records_encoded_as_sessions_end_make_the_same_task_list():
    """eval encodes each session's records as it ends; the page's task list is the one encoded whole."""
    view = _view()
    whole = []
    for verdict in view.verdicts:
        trajectory = view.trajectories[verdict.session_id]
        for task in verdict.tasks:
            record = next(t for t in trajectory.tasks if t.task_index == task.task_index)
            whole.append(_task_record(view.sessions[verdict.session_id], verdict, task, record))
    expected = json.dumps(whole, ensure_ascii=False, separators=(",", ":"))
    assert _tasks_json(view) == expected
    view.encoded = {
        v.session_id: (v, encode_records(view.sessions[v.session_id], v, view.trajectories[v.session_id]))
        for v in view.verdicts
    }
    assert _tasks_json(view) == expected


def test_records_encoded_from_another_verdict_are_not_used():
    view = _view()
    fresh = _tasks_json(view)
    first = view.verdicts[0]
    view.encoded = {first.session_id: (first.model_copy(), '{"stale":true}')}
    assert _tasks_json(view) == fresh
    view.encoded = {first.session_id: (first, '{"stale":true}')}
    assert _tasks_json(view).startswith('[{"stale":true},')
