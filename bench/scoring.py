"""Scoring speed and memory: 1,024 synthetic tasks of published shapes, and wide parallel DAGs.

Run: ``.venv/bin/python bench/scoring.py``. Prints figures; asserts nothing (targets live in the README).

The published scorer enumerates every legal path before judging a step: 58 s and 2.5 GB for an 8-wide
different-name parallel task, and a 9-wide one does not finish on a 24 GiB machine. toolwild matches a step
against the frontier, so the cost of a step depends on the names called, not on the number of paths.
"""

from __future__ import annotations

import random
import statistics
import tempfile
import time
import tracemalloc
from pathlib import Path

from toolwild.core.files import write_json
from toolwild.core.session import Session, Suite
from toolwild.core.task import ANSWER_ACTION, ASK_ACTION, Action, GoldNode, Task, TaskType, TurnSubtype
from toolwild.core.tool import Tool
from toolwild.core.trajectory import Step, ToolCall
from toolwild.core.verdict import ScoringMode
from toolwild.eval.agents.oracle import oracle_trajectory
from toolwild.eval.metrics.accuracy import compute_metrics
from toolwild.eval.metrics.passk import compute_trial_metrics
from toolwild.eval.run_config import RunConfig
from toolwild.eval.run_dir import verdict_line, write_part_verdicts
from toolwild.eval.scoring.dag import GoldDag
from toolwild.eval.scoring.session import api_parameters, score_suite
from toolwild.eval.scoring.task import TaskJudge

WORDS = "weather city forecast flight hotel booking price stock news sports music movie order account".split()


def _tool(name: str) -> Tool:
    return Tool(
        name=name,
        description=f"{name} tool",
        parameters={
            "type": "object",
            "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
            "required": ["query"],
        },
    )


def _call(idx: int, name: str, rng: random.Random, deps: list[int]) -> GoldNode:
    args = {"query": " ".join(rng.sample(WORDS, 3)), "limit": rng.randint(1, 20)}
    return GoldNode(idx=idx, action=Action(name=name, arguments=args), observation={"ok": True}, dependency_list=deps)


def _answer(idx: int, deps: list[int], kind: str = "tool") -> GoldNode:
    return GoldNode(
        idx=idx,
        action=Action(name=ANSWER_ACTION, arguments={"answer_type": kind}),
        observation="done",
        dependency_list=deps,
    )


def _task(ttype: TaskType, rng: random.Random, names: list[str]) -> Task:
    nodes: list[GoldNode] = []
    if ttype is TaskType.SINGLE:
        nodes = [_call(0, rng.choice(names), rng, []), _answer(1, [0])]
    elif ttype is TaskType.PARALLEL:
        k = rng.choice([2, 2, 3, 4])
        picked = [rng.choice(names) for _ in range(k)]
        nodes = [_call(i, nm, rng, []) for i, nm in enumerate(picked)] + [_answer(k, list(range(k)))]
    elif ttype is TaskType.SEQUENTIAL:
        nodes = [_call(0, rng.choice(names), rng, []), _call(1, rng.choice(names), rng, [0]), _answer(2, [1])]
    elif ttype is TaskType.MIXED:
        a, b = rng.sample(names, 2)
        nodes = [
            _call(0, a, rng, []),
            _call(1, b, rng, [0]),
            _call(2, a, rng, [1]),
            _call(3, a, rng, [1]),
            _answer(4, [2, 3]),
        ]
    elif ttype is TaskType.CLARIFY:
        ask = GoldNode(
            idx=0,
            action=Action(name=ASK_ACTION, arguments={"tool_list": []}),
            observation="which?",
            dependency_list=[],
            user_input="this one",
        )
        nodes = [ask, _call(1, rng.choice(names), rng, [0]), _answer(2, [1])]
    else:
        nodes = [_answer(0, [], "chat")]
    return Task(utterance="do it", type=ttype, subtype=TurnSubtype.FIRST, gold=nodes)


def synthetic_suite(seed: int = 0) -> Suite:
    """256 sessions x 4 tasks with the published type counts (256 single, 156/16/84 multi, 256 clarify, 256 chat)."""
    rng = random.Random(seed)
    multi = [TaskType.PARALLEL] * 156 + [TaskType.SEQUENTIAL] * 16 + [TaskType.MIXED] * 84
    pools = {
        "single": [TaskType.SINGLE] * 256,
        "multi": multi,
        "clarify": [TaskType.CLARIFY] * 256,
        "chat": [TaskType.CHAT] * 256,
    }
    for pool in pools.values():
        rng.shuffle(pool)
    sessions = []
    for n in range(256):
        names = [f"tool_{n}_{i}" for i in range(6)]
        order = list(pools)
        rng.shuffle(order)
        tasks = [_task(pools[kind].pop(), rng, names) for kind in order]
        for i, t in enumerate(tasks):
            t.utterance = f"request {i} of session {n}"
        for t in tasks[1:]:
            t.subtype = rng.choice(list(TurnSubtype)[1:])
        sessions.append(
            Session(id=f"s{n}", env_info="2024-07-11 22:11:58 Thursday", tools=[_tool(nm) for nm in names], tasks=tasks)
        )
    return Suite(name="bench", sessions=sessions)


def noisy_trajectories(suite: Suite, seed: int = 1):
    """Oracle trajectories with 30% of argument values perturbed (so the argument checker and ROUGE do work)."""
    rng = random.Random(seed)
    out = []
    for s in suite.sessions:
        traj = oracle_trajectory(s)
        for task in traj.tasks:
            for step in task.steps:
                for call in step.tool_calls or []:
                    if rng.random() < 0.3:
                        call.arguments = call.arguments.replace('"query": "', '"query": "very ')
        out.append(traj)
    return out


def time_suite() -> None:
    suite = synthetic_suite()
    tasks = sum(len(s.tasks) for s in suite.sessions)
    for label, trajs in (
        ("oracle", [oracle_trajectory(s) for s in suite.sessions]),
        ("noisy", noisy_trajectories(suite)),
    ):
        for mode in ScoringMode:
            runs = []
            for _ in range(3):
                t0 = time.perf_counter()
                verdicts = score_suite(suite, trajs, mode=mode)
                metrics = compute_metrics(verdicts, model_name=label, mode=mode, resamples=0)
                runs.append(time.perf_counter() - t0)
            acc = metrics.total_info["task"]["accuracy"]
            print(
                f"score {tasks} tasks  {label:6s} {mode.value:6s}: median {statistics.median(runs) * 1000:8.1f} ms"
                f"  (task accuracy {acc:.3f})"
            )
    t0 = time.perf_counter()
    compute_metrics(score_suite(suite, noisy_trajectories(suite)), model_name="x")
    print(f"score + metrics with 1,000 bootstrap resamples: {(time.perf_counter() - t0) * 1000:.1f} ms")


def time_run_end(repeats: int = 5) -> None:
    """What ``toolwild eval`` does after the last response of a 256-session run: metrics with 1,000 bootstrap
    resamples, ``metrics.json``, ``verdicts.jsonl`` and ``report.html``, from what the run holds in hand. The
    sessions were scored, and their report records and verdict lines encoded, as each ended (while the run waited
    on the model): that part is timed apart. Each repeat starts cold (the report's per-shape path cache emptied),
    as a run does."""
    suite = synthetic_suite()
    trajectories = noisy_trajectories(suite)
    with tempfile.TemporaryDirectory(prefix="toolwild-bench-end-") as folder:
        _time_run_end(suite, trajectories, Path(folder), repeats)


def _time_run_end(suite: Suite, trajectories: list, run_dir: Path, repeats: int) -> None:
    from toolwild.report import html  # imported here: the other figures do not need the report

    config = RunConfig(suite=str(run_dir / "suite.jsonl"), agent="model", model="bench")
    during, walls, cpus = [], [], []
    for _ in range(repeats):
        html._shape_paths.cache_clear()
        c0 = time.process_time()
        verdicts = score_suite(suite, trajectories)
        view = html.RunView.of(suite, trajectories, verdicts, config)
        view.encoded = {
            v.session_id: (v, html.encode_records(suite.session(v.session_id), v, t))
            for v, t in zip(verdicts, trajectories, strict=True)
        }
        lines = {v.session_id: (v, verdict_line(v)) for v in verdicts}
        during.append(time.process_time() - c0)
        t0, c0 = time.perf_counter(), time.process_time()
        metrics = compute_trial_metrics([verdicts], model_name="bench", mode=config.mode)
        write_json(run_dir / "metrics.json", metrics.model_dump(mode="json"))
        write_part_verdicts(run_dir, config, [verdicts], [lines])
        html.write_report(run_dir, view=view, metrics=metrics)
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    size = (run_dir / "report.html").stat().st_size
    print(
        f"end of a 256-session run (metrics + 1,000 resamples, metrics.json, verdicts.jsonl, report.html of"
        f" {size / 1e6:.1f} MB): median {statistics.median(walls) * 1000:.0f} ms wall,"
        f" {statistics.median(cpus) * 1000:.0f} ms CPU (best {min(walls) * 1000:.0f} ms); done while the sessions"
        f" ended (scoring, report records, verdict lines): {statistics.median(during) * 1000:.0f} ms CPU"
    )


def wide_dag(width: int) -> tuple[Session, list[str]]:
    names = [f"tool_{i}" for i in range(width)]
    rng = random.Random(width)
    nodes = [_call(i, nm, rng, []) for i, nm in enumerate(names)] + [_answer(width, list(range(width)))]
    task = Task(utterance="all at once", type=TaskType.PARALLEL, gold=nodes)
    return Session(id=f"w{width}", env_info="x", tools=[_tool(n) for n in names], tasks=[task]), names


def time_wide(width: int) -> None:
    session, names = wide_dag(width)
    task = session.tasks[0]
    params = api_parameters(session)
    step = Step(tool_calls=[ToolCall.of(n.name, n.action.arguments) for n in reversed(task.gold[:width])])
    for mode in ScoringMode:
        tracemalloc.start()
        t0 = time.perf_counter()
        judge = TaskJudge(task, parameters=params, mode=mode)
        verdict = judge.feed(step)
        match_s = time.perf_counter() - t0
        _, peak = tracemalloc.get_traced_memory()
        judge.feed(Step(content="answer"))
        total = judge.verdict(session, 0, [step, Step(content="answer")])
        full_s = time.perf_counter() - t0
        tracemalloc.stop()
        one = GoldDag.from_task(task, mode=mode)
        t1 = time.perf_counter()
        one.find_batch(one.start, [names[width // 2]])
        single_s = time.perf_counter() - t1
        print(
            f"{width:2d}-wide {mode.value:6s}: match the {width}-call step {match_s * 1000:7.2f} ms,"
            f" peak {peak / 1024:7.1f} KiB; match a 1-call step {single_s * 1000:6.3f} ms;"
            f" whole task {full_s * 1000:7.2f} ms ({verdict.name_label}, {total.label}, optimal={total.is_optimal})"
        )


def main() -> None:
    time_suite()
    time_run_end()
    for width in (8, 12, 16):
        time_wide(width)
    dag = GoldDag.from_task(wide_dag(8)[0].tasks[0])
    t0 = time.perf_counter()
    n = dag.count_paths()
    print(f"8-wide legal orders counted without enumeration: {n:,} in {(time.perf_counter() - t0) * 1000:.1f} ms")


if __name__ == "__main__":
    main()
