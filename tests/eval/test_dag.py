"""The step-wise DAG matcher against the spec's examples and against a plain enumerator of published paths."""

from __future__ import annotations

import time

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reference_enumerator import ANSWER, ASK, enumerate_paths, run_published_loop

from toolwild.core.task import Action, GoldNode, Task, TaskType
from toolwild.core.trajectory import Step, ToolCall
from toolwild.core.verdict import ScoringMode
from toolwild.eval.scoring.dag import GoldDag
from toolwild.eval.scoring.task import Reason, TaskJudge


def our_paths(dag: GoldDag) -> list[list[list[int]]]:
    out: list[list[list[int]]] = []

    def rec(pos, acc):
        if dag.is_done(pos):
            out.append(acc)
            return
        for b in dag.batches(pos):
            rec(b.target, [*acc, list(b.nodes)])

    rec(dag.start, [])
    return out


def parallel(names: list[str]) -> tuple[list[str], list[list[int]]]:
    k = len(names)
    return [*names, ANSWER], [[] for _ in range(k)] + [list(range(k))]


# ---------------------------------------------------------------- spec §3 examples
def test_parallel_same_name_pair():
    dag = GoldDag(*parallel(["A", "A"]))
    assert our_paths(dag) == [[[0], [1], [2]], [[0, 1], [2]]]


def test_parallel_two_names():
    dag = GoldDag(*parallel(["A", "B"]))
    assert our_paths(dag) == [[[0], [1], [2]], [[1], [0], [2]], [[0, 1], [2]]]


def test_three_different_parallel_names_have_13_orders():
    dag = GoldDag(*parallel(["A", "B", "C"]))
    assert len(our_paths(dag)) == 13 == dag.count_paths()


def test_six_same_name_parallels_have_2_orders():
    dag = GoldDag(*parallel(["A"] * 6))
    assert our_paths(dag) == [[[i] for i in range(7)], [list(range(6)), [6]]]


def test_session0_task3_mixed_shape():
    names = ["getCityAQIForecast", "getCityShow", "getShowDetail", "getShowDetail", ANSWER]
    deps = [[], [0], [1], [1], [2, 3]]
    dag = GoldDag(names, deps)
    assert our_paths(dag) == [[[0], [1], [2], [3], [4]], [[0], [1], [2, 3], [4]]]
    assert dag.min_length == 4
    assert dag.first_optimal_path() == [(0,), (1,), (2, 3), (4,)]


def test_eight_wide_counts_545835_orders_without_enumerating():
    dag = GoldDag(*parallel([chr(ord("A") + i) for i in range(8)]))
    t0 = time.perf_counter()
    assert dag.count_paths() == 545_835
    assert dag.min_length == 2
    assert time.perf_counter() - t0 < 30  # generous: counting is memoised, enumeration would take minutes


def test_twelve_wide_step_match_touches_one_combination():
    names, deps = parallel([f"t{i}" for i in range(12)])
    dag = GoldDag(names, deps)
    batch = dag.find_batch(dag.start, list(reversed(names[:12])))
    assert batch is not None and batch.nodes == tuple(range(12))
    assert dag.find_batch(dag.start, ["t3"]).nodes == (3,)
    assert dag.find_batch(dag.start, ["t3", "t3"]) is None
    assert dag.first_optimal_path() == [tuple(range(12)), (12,)]


# ---------------------------------------------------------------- spec §9 same-name behaviours
def test_three_wide_same_name_run_split_two_plus_one_is_illegal():
    dag = GoldDag(*parallel(["A", "A", "A"]))
    assert dag.find_batch(dag.start, ["A", "A"]) is None
    first = dag.find_batch(dag.start, ["A"])
    assert first.nodes == (0,) and first.target.pending == (1, 2)


def test_frontier_a_a_b():
    dag = GoldDag(*parallel(["A", "A", "B"]))
    # batching the first A with B is illegal
    assert dag.find_batch(dag.start, ["A", "B"]) is None
    # B first, then A, A is legal
    after_b = dag.find_batch(dag.start, ["B"])
    assert after_b is not None
    assert dag.find_batch(after_b.target, ["A", "A"]).nodes == (0, 1)


def test_frontier_b_a_a():
    dag = GoldDag(*parallel(["B", "A", "A"]))
    assert dag.find_batch(dag.start, ["A", "B"]).nodes == (0, 1)
    # A, B, A is illegal: a lone A starts the whole run one node per step
    first_a = dag.find_batch(dag.start, ["A"])
    assert first_a.target.pending == (2,)
    assert dag.find_batch(first_a.target, ["B"]) is None


def test_strict_mode_allows_any_frontier_subset():
    dag = GoldDag(*parallel(["A", "A", "A"]), mode=ScoringMode.STRICT)
    assert dag.find_batch(dag.start, ["A", "A"]) is not None
    assert dag.count_paths() == 13
    assert dag.min_length == 2


# ---------------------------------------------------------------- property tests against the enumerator
@st.composite
def dags(draw, max_nodes: int = 6):
    n = draw(st.integers(1, max_nodes))
    names = [draw(st.sampled_from(["A", "A", "B", "C", ASK])) for _ in range(n)]
    deps = []
    for i in range(n):
        deps.append(sorted(draw(st.sets(st.integers(0, i - 1), max_size=2))) if i else [])
    if draw(st.booleans()):
        has_child = {d for ds in deps for d in ds}
        names.append(ANSWER)
        deps.append([i for i in range(n) if i not in has_child])
    return names, deps


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dags())
def test_batches_equal_published_enumeration(dag_spec):
    names, deps = dag_spec
    reference = enumerate_paths(names, deps)
    dag = GoldDag(names, deps)
    assert our_paths(dag) == reference
    assert dag.count_paths() == len(reference)
    shortest = min(len(p) for p in reference)
    assert dag.min_length == shortest
    first_optimal = next(p for p in reference if len(p) == shortest)
    assert [list(b) for b in dag.first_optimal_path()] == first_optimal


def _task(names: list[str], deps: list[list[int]]) -> Task:
    nodes = [
        GoldNode(
            idx=i,
            action=Action(name=nm, arguments={}),
            observation="obs",
            dependency_list=deps[i],
            user_input="reply" if nm == ASK else None,
        )
        for i, nm in enumerate(names)
    ]
    return Task(utterance="u", type=TaskType.MIXED, gold=nodes)


_REASONS = {
    Reason.EMPTY: "error: empty",
    Reason.TEXT_AFTER_END: "error: text after end",
    Reason.NOT_CANDIDATE: "error: not candidate",
}


def _judge_replies(names, deps, replies):
    judge = TaskJudge(_task(names, deps), parameters={}, mode=ScoringMode.WTB)
    out = []
    k = 0
    while not judge.finished:
        if k < len(replies):
            kind, called = replies[k]
            step = Step(content="text") if kind == "text" else Step(tool_calls=[ToolCall(name=c) for c in called])
        else:
            step = None
        v = judge.feed(step)
        if v.name_label == "correct":
            out.append(("ok", sorted(v.matched_nodes)))
        else:
            reason = v.error_reason or ""
            out.append((_REASONS.get(reason, "error: idx none" if reason.startswith("current step") else reason), None))
        k += 1
    return ("correct" if judge.correct else "error"), out


@st.composite
def dag_and_replies(draw):
    names, deps = draw(dags())
    paths = enumerate_paths(names, deps)
    path = paths[draw(st.integers(0, len(paths) - 1))]
    replies = []
    for step in path:
        step_names = [names[i] for i in step]
        if any(nm in (ASK, ANSWER) for nm in step_names) and draw(st.integers(0, 4)) > 0:
            replies.append(("text", []))
        else:
            replies.append(("calls", step_names))
    pool = sorted(set(names) | {"Z"})
    for _ in range(draw(st.integers(0, 2))):
        where = draw(st.integers(0, len(replies)))
        choice = draw(st.integers(0, 3))
        if choice == 0:
            replies.insert(where, ("text", []))
        elif choice == 1:
            replies.insert(where, ("calls", draw(st.lists(st.sampled_from(pool), min_size=1, max_size=3))))
        elif choice == 2 and replies:
            del replies[min(where, len(replies) - 1)]
        elif replies:
            i = min(where, len(replies) - 1)
            if replies[i][0] == "calls" and len(replies[i][1]) > 1:
                replies[i : i + 1] = [("calls", [nm]) for nm in replies[i][1]]
    return names, deps, replies


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dag_and_replies())
def test_live_loop_agrees_with_published_loop(case):
    names, deps, replies = case
    expected_label, expected_log = run_published_loop(names, deps, replies)
    label, log = _judge_replies(names, deps, replies)
    expected_log = [(s, sorted(c) if c is not None else None) for s, c in expected_log]
    assert (label, log) == (expected_label, expected_log)
