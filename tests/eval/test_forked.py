"""``eval --history forked``: every session once per task boundary i (tasks before i teacher-forced, the rest free).

Known behaviours give the hand-computed first divergence, recovery and self-conditioning gap; a fork is given
exactly the published teacher-forced history and, on a live environment, the state the gold leaves; the run
directory is read by ``score``, ``show`` and ``report`` and resumes (session, fork) pair by pair.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from toolwild.cli.main import app
from toolwild.core.formats.wtb import load_wtb_suite, write_wtb_suite
from toolwild.core.session import Session, Suite
from toolwild.core.task import Action, GoldNode, Task, TaskType, TurnSubtype
from toolwild.core.trajectory import Step, ToolCall
from toolwild.envs.registry import get_environment
from toolwild.errors import ConfigError
from toolwild.eval.agents.base import AgentContext
from toolwild.eval.agents.oracle import oracle_steps
from toolwild.eval.metrics.forked import compute_forked_metrics
from toolwild.eval.run_config import RunConfig
from toolwild.eval.run_dir import fork_dir, load_run_trajectories
from toolwild.eval.runner import run_trials
from toolwild.eval.session import HistoryMode, gold_history, gold_task_steps

FIXTURE = Path(__file__).resolve().parents[2].parent / "shared/fixtures/wildtoolbench/sessions_0_4.reconstructed.jsonl"
pytestmark = pytest.mark.skipif(not FIXTURE.exists(), reason=f"fixture not found: {FIXTURE}")
WRONG = "no_such_tool"
"""The tool a failing step calls: no task's gold has it, so the step fails any task by its name."""


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture(scope="module")
def fixture_suite() -> Suite:
    return load_wtb_suite(FIXTURE)[0]


def _sub_suite(suite: Suite, count: int, folder: Path) -> tuple[Suite, Path]:
    """The first ``count`` sessions, written where the run's config can point (re-scoring checks its fingerprint)."""
    sub = suite.model_copy(update={"sessions": suite.sessions[:count]})
    path = folder / "suite.jsonl"
    write_wtb_suite(sub, path)
    return load_wtb_suite(path)[0], path


def _saw_own_mistake(messages: list[dict]) -> bool:
    return any(c["function"]["name"] == WRONG for m in messages for c in m.get("tool_calls") or [])


class Behaviour:
    """A scripted agent whose step may depend on what it sees. Per session, per task: ``gold`` plays the task's
    gold path, ``fail`` calls a tool no task has, ``conditioned`` fails when its history holds its own failed call
    (a model thrown by its own earlier mistake) and plays the gold path otherwise. Every request is recorded."""

    name = "behaviour"

    def __init__(self, plan: dict[str, list[str]]) -> None:
        self.plan = plan
        self.requests: list[AgentContext] = []

    async def next_step(self, context: AgentContext) -> Step:
        self.requests.append(context)
        kind = self.plan[context.session.id][context.task_index]
        if kind == "conditioned":
            kind = "fail" if _saw_own_mistake(context.messages) else "gold"
        if kind == "fail":
            return Step(tool_calls=[ToolCall.of(WRONG, {})])
        steps = oracle_steps(context.session.tasks[context.task_index])
        if context.step_index >= len(steps):
            return Step()
        step = steps[context.step_index]
        return Step(content=step.content, tool_calls=step.tool_calls)


def _config(path: Path, **extra) -> RunConfig:
    return RunConfig(suite=str(path), agent="behaviour", history=HistoryMode.FORKED, concurrency=2, **extra)


# The three behaviours of the acceptance test, on the fixture's sessions 0..2 (4 tasks each; ✓ correct, x failed):
#   A (wild_tool_bench_0) fails task 0, then fails every task whose history holds that mistake:
#       free   (fork 0)      x x x x
#       forced (fork j, j)   x ✓ ✓ ✓     (fork 1: ✓ ✓ ✓, fork 2: ✓ ✓, fork 3: ✓: no mistake in a gold history)
#   B (wild_tool_bench_1) fails tasks 0 and 2 whatever it sees and recovers at once:
#       free                 x ✓ x ✓
#       forced               x ✓ x ✓     (fork 1: ✓ x ✓, fork 2: x ✓, fork 3: ✓)
#   C (wild_tool_bench_2) plays the gold path: ✓ everywhere.
PLAN = {
    "wild_tool_bench_0": ["fail", "conditioned", "conditioned", "conditioned"],
    "wild_tool_bench_1": ["fail", "gold", "fail", "gold"],
    "wild_tool_bench_2": ["gold", "gold", "gold", "gold"],
}


@pytest.fixture(scope="module")
def forked_run(tmp_path_factory, fixture_suite):
    import anyio

    root = tmp_path_factory.mktemp("forked")
    suite, path = _sub_suite(fixture_suite, 3, root)
    agent = Behaviour(PLAN)
    run_dir = root / "run"
    by_fork = anyio.run(run_trials, suite, agent, _config(path), run_dir)
    metrics = compute_forked_metrics(by_fork, model_name="behaviour", resamples=200)
    (run_dir / "metrics.json").write_text(json.dumps(metrics.model_dump(mode="json")))
    return suite, agent, run_dir, by_fork, metrics.extensions["forked"]


def test_first_divergence_and_recovery_come_out_as_computed_by_hand(forked_run):
    _suite, _agent, _run_dir, _by_fork, forked = forked_run
    per = {s["session_id"]: s for s in forked["per_session"]}
    x, v = False, True
    assert per["wild_tool_bench_0"]["free"] == [x, x, x, x]
    assert per["wild_tool_bench_0"]["forced"] == [x, v, v, v]
    assert per["wild_tool_bench_0"]["forks"] == [[x, x, x, x], [v, v, v], [v, v], [v]]
    assert per["wild_tool_bench_1"]["forks"] == [[x, v, x, v], [v, x, v], [x, v], [v]]
    # First divergence: the first task j with forced ✓ and free x. A: task 1 (index 1); B: forced and free agree
    # everywhere; C: never fails. So 1 session of 3, at index 1, after an own failure (A's free run failed task 0).
    assert [per[s]["first_divergence"] for s in PLAN] == [1, None, None]
    first = forked["first_divergence"]
    assert (first["diverged"], first["sessions"], first["by_task"], first["after_own_failure"]) == (1, 3, {"1": 1}, 1)
    # Recovery over pairs (j, j+1) whose task j failed:
    #   free:   A fails 0, 1, 2 and fails each next one (0/3); B fails 0 and 2, passes 1 and 3 (2/2); C none -> 2/5
    #   forced: A's forced run fails 0, then passes 1 (1/1); B fails 0 and 2, passes 1 and 3 (2/2)         -> 3/3
    #   after its own mistake (the same pairs; fork j's task j+1): A fork 0 task 1 x (0/1);
    #   B fork 0 task 1 ✓, fork 2 task 3 ✓ (2/2)                                                          -> 2/3
    recovery = forked["recovery"]
    assert (recovery["free"]["recovered"], recovery["free"]["failures"], recovery["free"]["rate"]) == (2, 5, 2 / 5)
    assert (recovery["forced"]["recovered"], recovery["forced"]["failures"]) == (3, 3)
    assert (recovery["after_own_mistake"]["recovered"], recovery["after_own_mistake"]["failures"]) == (2, 3)


def test_the_self_conditioning_gap_is_forced_minus_free_per_transition_count(forked_run):
    forked = forked_run[4]
    # overall: forced A 3 + B 2 + C 4 = 9/12, free 0 + 2 + 4 = 6/12, gap 3/12; sessions: only C, both ways (1/3)
    overall = forked["overall"]
    assert (overall["forced"]["correct_count"], overall["free"]["correct_count"], overall["free"]["total_count"]) == (
        9,
        6,
        12,
    )
    assert overall["gap"] == 3 / 12
    assert overall["low"] <= 3 / 12 <= overall["high"]
    assert (overall["session"]["forced"]["accuracy"], overall["session"]["gap"]) == (1 / 3, 0.0)
    # sessions by transitions: A and B have 2 (single, single, multi|chat, chat|clarify), C has 0 (four singles)
    #   2: forced (3 + 2)/8, free (0 + 2)/8 -> gap 3/8;   0: C, 4/4 both ways -> gap 0
    by_transitions = forked["gap_by_transitions"]
    assert set(by_transitions) == {"0", "2"}
    assert (by_transitions["2"]["forced"]["accuracy"], by_transitions["2"]["free"]["accuracy"]) == (5 / 8, 2 / 8)
    assert by_transitions["2"]["gap"] == 3 / 8 and by_transitions["0"]["gap"] == 0.0
    # tasks by the transitions before them (A and B: 0, 0, 1, 2; C: 0, 0, 0, 0):
    #   0: forced A 1 + B 1 + C 4 = 6/8, free 0 + 1 + 4 = 5/8 -> 1/8
    #   1: A's and B's task 2: forced ✓ x, free x x -> 1/2;   2: their task 3: forced ✓ ✓, free x ✓ -> 1/2
    before = forked["gap_by_transitions_before"]
    assert {k: b["gap"] for k, b in before.items()} == {"0": 1 / 8, "1": 1 / 2, "2": 1 / 2}
    assert before["0"]["forced"]["total_count"] == 8
    # the cost: per session of 4 tasks, 4 + 3 + 2 + 1 = 10 task-runs
    assert forked["task_runs"] == 30 and forked["tasks"] == 12


def test_each_fork_is_given_the_teacher_forced_history_and_runs_only_its_own_tasks(forked_run):
    suite, agent, run_dir, by_fork, _forked = forked_run
    started = [(c.session.id, c.task_index, c.messages) for c in agent.requests if c.step_index == 0]
    for session in suite.sessions:
        mine = [(ti, messages) for sid, ti, messages in started if sid == session.id]
        # fork i asks for tasks i..3: task j is started by forks 0..j, so 1 + 2 + 3 + 4 = 10 starts
        assert sorted(ti for ti, _ in mine) == [0, 1, 1, 2, 2, 2, 3, 3, 3, 3]
        for i in range(4):  # exactly the published teacher-forced request: gold history, then the utterance
            expected = [*gold_history(session, i), {"role": "user", "content": session.tasks[i].utterance}]
            assert expected in [messages for ti, messages in mine if ti == i], (session.id, i)
    for i in range(1, 4):
        assert len(load_run_trajectories(run_dir, fork=i)) == 3
        assert (run_dir / "forks" / str(i) / "trajectories.jsonl").is_file()
        for traj in load_run_trajectories(run_dir, fork=i):  # the forced tasks are recorded as the gold steps
            session = next(s for s in suite.sessions if s.id == traj.session_id)
            assert [t.steps for t in traj.tasks[:i]] == [gold_task_steps(session, k) for k in range(i)]
        assert all(t.label == "correct" for v in by_fork[i] for t in v.tasks[:i])
    assert not (run_dir / "forks" / "0").exists() and (run_dir / "trajectories.jsonl").is_file()


def test_score_show_and_report_read_a_forked_run(forked_run, tmp_path):
    _suite, _agent, run_dir, _by_fork, forked = forked_run
    runner = CliRunner()
    result = runner.invoke(app, ["score", str(run_dir), "--out", str(tmp_path / "m.json")])
    assert result.exit_code == 0, result.output
    rescored = json.loads((tmp_path / "m.json").read_text())
    assert rescored["extensions"]["forked"]["per_session"] == forked["per_session"]
    assert rescored["total_info"]["task"]["correct_count"] == 6  # the headline is fork 0's: the free run
    text = " ".join(result.output.split())
    assert "First divergence" in text and "1 of 3 session(s)" in text
    assert "after its own mistake 66.67% 2/3" in text
    shown = runner.invoke(app, ["show", str(run_dir), "--fork", "2", "--session", "wild_tool_bench_0"])
    assert shown.exit_code == 0, shown.output
    assert shown.output.count("teacher-forced in fork 2") == 2
    assert "2 task(s) shown of 2 (fork 2: tasks from 3 on); 0 failed." in shown.output
    refused = runner.invoke(app, ["show", str(run_dir), "--fork", "4"])
    assert refused.exit_code == 1 and "forks 0..3" in refused.output
    report = runner.invoke(app, ["report", str(run_dir), "-o", str(tmp_path / "r.html")])
    assert report.exit_code == 0, report.output
    page = (tmp_path / "r.html").read_text()
    figures = json.loads(re.search(r'<script type="application/json" id="figures">(.*?)</script>', page).group(1))
    gap = next(f for f in figures if f["key"] == "forked")
    assert gap["derived"]["gap"] == {"all": 3 / 12, "0": 0.0, "2": 3 / 8}
    assert '"forks":4' in page


def _inventory_session(expected_ok: bool = True) -> Session:
    """Three tasks on the inventory environment: restock an item, ask whether it went through, restock again.
    ``expected_ok=False`` records a wrong expected state after task 0 (a suite whose gold does not replay)."""
    env = get_environment("inventory")
    episode = env.reset(seed=7)
    item = episode.call("list_items", {}).result[0]
    first = episode.call("restock", {"item": item, "units": 5})
    after_first = episode.state()
    second = episode.call("restock", {"item": item, "units": 2})
    after_second = episode.state()

    def restock(units: int, observation) -> list[GoldNode]:
        return [
            GoldNode(
                idx=0,
                action=Action(name="restock", arguments={"item": item, "units": units}),
                observation=observation.model_dump(include={"ok", "result"}),
                dependency_list=[],
            ),
            GoldNode(
                idx=1,
                action=Action(name="prepare_to_answer", arguments={"answer_type": "tool"}),
                observation="Recorded.",
                dependency_list=[0],
            ),
        ]

    chat = GoldNode(
        idx=0,
        action=Action(name="prepare_to_answer", arguments={"answer_type": "chat"}),
        observation="Yes.",
        dependency_list=[],
    )
    tasks = [
        Task(
            utterance=f"Five more {item} arrived.",
            type=TaskType.SINGLE,
            gold=restock(5, first),
            expected_state=after_first if expected_ok else {"wrong": True},
        ),
        Task(
            utterance="Did that go through?",
            type=TaskType.CHAT,
            subtype=TurnSubtype.COREFERENTIAL,
            gold=[chat],
            expected_state=after_first,
        ),
        Task(utterance="Two more.", type=TaskType.SINGLE, gold=restock(2, second), expected_state=after_second),
    ]
    return Session(
        id="inv-0",
        env_info="2024-07-11 10:00:00 Thursday",
        tools=env.tools,
        tasks=tasks,
        environment="inventory",
        extra={"env_seed": 7},
    )


@pytest.mark.anyio
async def test_a_fork_on_a_live_environment_starts_from_the_state_the_gold_leaves(tmp_path):
    suite = Suite(name="inv", sessions=[_inventory_session()])
    path = tmp_path / "inv.jsonl"
    write_wtb_suite(suite, path)
    suite = load_wtb_suite(path)[0]
    by_fork = await run_trials(suite, Behaviour({"inv-0": ["gold"] * 3}), _config(path), tmp_path / "run")
    # had the forks not replayed the earlier restocks, forks 1 and 2 would end their tasks one or two restocks short
    for fork, verdicts in enumerate(by_fork):
        assert [t.state_match for t in verdicts[0].tasks] == [True, True, True], fork
        assert [t.redundant_writes for t in verdicts[0].tasks] == [0, 0, 0], fork
    digests = [[t.state_digest for t in load_run_trajectories(tmp_path / "run", fork=i)[0].tasks] for i in range(3)]
    assert digests[0] == digests[1] == digests[2]  # a replayed task leaves the state the free run's task left


@pytest.mark.anyio
async def test_a_gold_that_does_not_replay_is_a_harness_error_naming_the_task(tmp_path):
    suite = Suite(name="inv", sessions=[_inventory_session(expected_ok=False)])
    path = tmp_path / "inv.jsonl"
    write_wtb_suite(suite, path)
    suite = load_wtb_suite(path)[0]
    by_fork = await run_trials(suite, Behaviour({"inv-0": ["gold"] * 3}), _config(path), tmp_path / "run")
    error = by_fork[1][0].harness_error
    assert error is not None and "the gold of task 0 does not replay" in error
    metrics = compute_forked_metrics(by_fork, model_name="b", resamples=0)
    assert metrics.extensions["figures_complete"] is False
    assert metrics.extensions["forked"]["sessions"] == 0
    assert metrics.extensions["forked"]["incomplete_sessions"][0]["forks_left_out"] == [1, 2]


@pytest.mark.anyio
async def test_forked_runs_refuse_trials_and_a_simulated_user(tmp_path, fixture_suite):
    suite, path = _sub_suite(fixture_suite, 1, tmp_path)
    with pytest.raises(ConfigError, match="one trial"):
        await run_trials(suite, Behaviour(PLAN), _config(path, trials=2), tmp_path / "a")
    with pytest.raises(ConfigError, match="recorded user"):
        await run_trials(suite, Behaviour(PLAN), _config(path, user="model:scripted"), tmp_path / "b")


def _gold_file(suite: Suite, path: Path) -> Path:
    def steps(task) -> list[dict]:
        out = []
        for step in oracle_steps(task):
            if step.tool_calls:
                out.append(
                    {"tool_calls": [{"name": c.name, "arguments": json.loads(c.arguments)} for c in step.tool_calls]}
                )
            else:
                out.append({"content": step.content})
        return out

    path.write_text(json.dumps({s.id: [steps(t) for t in s.tasks] for s in suite.sessions}))
    return path


def test_eval_states_the_cost_first_and_a_killed_forked_run_resumes_pair_by_pair(tmp_path, fixture_suite):
    behaviour = _gold_file(fixture_suite, tmp_path / "gold.json")
    args = ["eval", "--suite", str(FIXTURE), "--agent", f"scripted:{behaviour}", "--runs-dir", str(tmp_path)]
    runner = CliRunner()
    result = runner.invoke(app, [*args, "--name", "r", "--limit", "2", "--history", "forked"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    # 2 sessions of 4 tasks: 4 + 3 + 2 + 1 = 10 task-runs each, 20 in all, against 8: 12 more, 1.50 per task
    assert "8 task(s) run once per task boundary: 8 session forks, 20 task-runs" in text
    assert "12 more, 1.50 per task" in text
    assert text.index("task-runs") < text.index("Task accuracy")  # said before the run, not after
    run_dir = tmp_path / "r"
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["extensions"]["forked"]["overall"]["gap"] == 0.0  # the gold path: nothing to diverge
    assert json.loads((run_dir / "config.json").read_text())["history"] == "forked"
    # the kill: fork 2 lost one session, fork 3's last line was cut mid-write
    two = run_dir / "forks/2/trajectories.jsonl"
    lines = two.read_text().splitlines(keepends=True)
    two.write_text(lines[0])
    three = run_dir / "forks/3/trajectories.jsonl"
    lines = three.read_text().splitlines(keepends=True)
    three.write_text(lines[0] + lines[1][:20])
    both = {s.id for s in fixture_suite.sessions[:2]}
    kept_in_two, kept_in_three = json.loads(two.read_text())["session_id"], json.loads(lines[0])["session_id"]
    lost = (both - {kept_in_two}) | (both - {kept_in_three})
    scored = runner.invoke(app, ["score", str(run_dir), "--out", str(tmp_path / "partial.json")])
    assert scored.exit_code == 3, scored.output  # an unfinished run: written, and said to be incomplete
    partial = json.loads((tmp_path / "partial.json").read_text())["extensions"]["forked"]
    # a fork without a result is left out of the forked figures (scored as failed, it would invent a gap)
    assert {s["session_id"] for s in partial["incomplete_sessions"]} == lost
    assert partial["sessions"] == 2 - len(lost) and partial["overall"]["gap"] in (0.0, None)
    resumed = runner.invoke(app, ["eval", "--resume", str(run_dir)])
    assert resumed.exit_code == 0, resumed.output
    # left: fork 2's lost session (tasks 2, 3) and fork 3's (task 3): 3 task-runs
    assert "3 task-run(s) left to run" in " ".join(resumed.output.split())
    for fork in range(4):
        assert len(load_run_trajectories(run_dir, fork=fork)) == 2
    assert json.loads((run_dir / "metrics.json").read_text())["extensions"]["forked"]["sessions"] == 2
    refused = runner.invoke(app, [*args, "--name", "t", "--history", "forked", "--trials", "2"])
    assert refused.exit_code == 1 and "one trial" in refused.output


def test_the_report_shows_the_forked_table_and_figure_in_a_browser(forked_run, tmp_path):
    import shutil

    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    pw = pytest.importorskip("playwright.sync_api", reason="playwright is missing: pip install -e '.[dev]'")
    if not Path(chromium).exists():
        pytest.skip("chromium not installed")
    run_dir = forked_run[2]
    out = tmp_path / "report.html"
    assert CliRunner().invoke(app, ["report", str(run_dir), "-o", str(out)]).exit_code == 0
    problems: list[str] = []
    with pw.sync_playwright() as p:  # started after every run of this module: its loop would hold this thread
        browser = p.chromium.launch(executable_path=chromium, args=["--headless=new", "--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page()
            page.on("pageerror", lambda e: problems.append(str(e)))
            page.on("console", lambda m: m.type == "error" and problems.append(m.text))
            page.goto(out.as_uri())
            page.wait_for_selector("body[data-charts-ready='1']", timeout=30_000)
            cells = page.locator("#forked-table tr[data-row='tasks'] td").all_inner_texts()
            assert cells[0] == "tasks" and cells[1].startswith("75.0% (9/12) [") and cells[2].startswith("50.0% (6/12)")
            assert cells[3].startswith("+25.0 pt [")
            assert "1 of 3 session(s)" in page.locator("#forked-divergence").inner_text()
            assert "after its own mistake 66.7% (2/3)" in page.locator("#forked-recovery").inner_text()
            assert page.locator("#chart-forked svg.main-svg").count() >= 1
        finally:
            browser.close()
    assert problems == []


def _ledger_forked(tmp_path: Path, name: str, *extra: str) -> Path:
    runner = CliRunner()
    suite = tmp_path / "ledger.jsonl"
    if not suite.exists():
        assert runner.invoke(app, ["suite", "ledger", "--out", str(suite), "--sessions", "3"]).exit_code == 0
    args = ["eval", "--suite", str(suite), "--agent", "oracle", "--history", "forked", "--runs-dir", str(tmp_path)]
    result = runner.invoke(app, [*args, "--name", name, "--concurrency", "2", *extra])
    assert result.exit_code == 0, result.output
    return tmp_path / name


def test_the_oracle_forked_on_real_ledgers_passes_every_state_check(tmp_path):
    """The built-in ledger suite: each fork books the gold of the tasks before its boundary on a fresh ledger, so
    the gold path is right in every fork, with every state check passed and no doubled write."""
    run_dir = _ledger_forked(tmp_path, "local")
    metrics = json.loads((run_dir / "metrics.json").read_text())
    forked = metrics["extensions"]["forked"]
    assert forked["sessions"] == 3 and forked["overall"]["gap"] == 0.0
    assert forked["overall"]["forced"]["accuracy"] == forked["overall"]["free"]["accuracy"] == 1.0
    sizes = [len(s["free"]) for s in forked["per_session"]]
    assert forked["task_runs"] == sum(n * (n + 1) // 2 for n in sizes)
    for fork in range(max(sizes)):
        for line in (fork_dir(run_dir, fork) / "verdicts.jsonl").read_text().splitlines():
            tasks = json.loads(line)["tasks"]
            assert [(t["state_match"], t["redundant_writes"]) for t in tasks] == [(True, 0)] * len(tasks), fork


@pytest.mark.slow
def test_a_forked_run_on_ray_gives_the_local_metrics(tmp_path, request):
    pytest.importorskip("ray", reason="Ray is not installed (pip install 'toolwild[ray]')")
    local = _ledger_forked(tmp_path, "local")
    request.getfixturevalue("local_ray")
    remote = _ledger_forked(tmp_path, "ray", "--executor", "ray")
    assert (remote / "metrics.json").read_bytes() == (local / "metrics.json").read_bytes()
    for fork in range(1, 4):
        assert (fork_dir(remote, fork) / "verdicts.jsonl").read_bytes() == (
            fork_dir(local, fork) / "verdicts.jsonl"
        ).read_bytes()
