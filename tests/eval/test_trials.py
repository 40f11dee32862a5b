"""``eval --trials k``: known per-trial outcomes give the hand-computed pass^k; one trial is today's run; a killed
trial run resumes pair by pair; ``score``, ``show``, ``report`` and ``compare`` read trial runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_openai import FakeOpenAI, Reply, fake_backend
from gold_responder import gold_responder
from typer.testing import CliRunner

from toolwild.cli.main import app
from toolwild.core.formats.wtb import load_wtb_suite
from toolwild.core.trajectory import Step
from toolwild.errors import DataError
from toolwild.eval.agents.base import AgentContext
from toolwild.eval.agents.model import ModelAgent
from toolwild.eval.agents.oracle import oracle_steps
from toolwild.eval.agents.scripted import ScriptedAgent, load_behaviours
from toolwild.eval.metrics.passk import compute_trial_metrics
from toolwild.eval.run_config import RunConfig
from toolwild.eval.run_dir import load_run_trajectories
from toolwild.eval.runner import run_trials
from toolwild.llm.cache import ResponseCache
from toolwild.llm.client import LLM

FIXTURE = Path(__file__).resolve().parents[2].parent / "shared/fixtures/wildtoolbench/sessions_0_4.reconstructed.jsonl"
pytestmark = pytest.mark.skipif(not FIXTURE.exists(), reason=f"fixture not found: {FIXTURE}")

# Which trials each task of the fixture's 5 sessions (4 tasks each) gets right, out of 3 trials. Per task c:
#   s0: 3 3 3 3   s1: 2 3 3 3   s2: 1 1 3 3   s3: 0 0 0 0   s4: 2 0 3 1      (sum of c = 12+11+8+0+6 = 37)
# Sessions right in every task: s0 in trials 0,1,2 (c=3); s1 in trials 0,1 (c=2); s2, s3, s4 never (c=0).
PLAN = [
    [{0, 1, 2}, {0, 1, 2}, {0, 1, 2}, {0, 1, 2}],
    [{0, 1}, {0, 1, 2}, {0, 1, 2}, {0, 1, 2}],
    [{0}, {1}, {0, 1, 2}, {0, 1, 2}],
    [set(), set(), set(), set()],
    [{1, 2}, set(), {0, 1, 2}, {2}],
]


@pytest.fixture(scope="module")
def suite():
    return load_wtb_suite(FIXTURE)[0]


@pytest.fixture
def anyio_backend():
    return "asyncio"


def _gold(task) -> list[dict]:
    steps = []
    for step in oracle_steps(task):
        if step.tool_calls:
            calls = [{"name": c.name, "arguments": json.loads(c.arguments)} for c in step.tool_calls]
            steps.append({"tool_calls": calls})
        else:
            steps.append({"content": step.content})
    return steps


def _plan_file(suite, path: Path, plan=PLAN, trials: int = 3) -> Path:
    """A per-trial behaviour file: a task of the plan plays its gold path in the trials listed, nothing otherwise
    (an empty reply: the task fails)."""
    scripted = [
        {
            s.id: [_gold(t) if k in plan[i][j] else [] for j, t in enumerate(s.tasks)]
            for i, s in enumerate(suite.sessions)
        }
        for k in range(trials)
    ]
    path.write_text(json.dumps({"trials": scripted}))
    return path


def _eval(root: Path, behaviour: Path, *extra: str, name: str = "r") -> Path:
    args = ["eval", "--suite", str(FIXTURE), "--agent", f"scripted:{behaviour}", "--runs-dir", str(root)]
    result = CliRunner().invoke(app, [*args, "--name", name, *extra])
    assert result.exit_code == 0, result.output
    return root / name


@pytest.fixture(scope="module")
def trial_run(tmp_path_factory, suite) -> Path:
    root = tmp_path_factory.mktemp("trials")
    return _eval(root, _plan_file(suite, root / "plan.json"), "--trials", "3")


def _metrics(run_dir: Path, name: str = "metrics.json") -> dict:
    return json.loads((run_dir / name).read_text())


def test_known_per_trial_outcomes_give_the_hand_computed_estimators(trial_run):
    metrics = _metrics(trial_run)
    trials = metrics["extensions"]["trials"]
    assert trials["k"] == 3 and trials["sessions"] == 5 and trials["tasks"] == 20 and trials["valid_runs"] == 15
    # pass^1 = pass@1 over tasks = mean of c/3 = 37/60
    # pass^2 over tasks = mean of C(c,2)/C(3,2): c=3 -> 1 (10 tasks), c=2 -> 1/3 (2 tasks), else 0 -> (10+2/3)/20 = 8/15
    # pass^3 over tasks = share of tasks with c=3 = 10/20
    assert trials["pass^k"]["task"] == {"1": 37 / 60, "2": 8 / 15, "3": 1 / 2}
    # pass@2 over tasks = mean of 1 - C(3-c,2)/3: c>=2 -> 1 (12 tasks), c=1 -> 2/3 (3 tasks), c=0 -> 0 -> 14/20
    # pass@3 over tasks = share of tasks with c>=1 = 15/20
    assert trials["pass@k"]["task"] == {"1": 37 / 60, "2": 7 / 10, "3": 3 / 4}
    # sessions c = 3, 2, 0, 0, 0: pass^1 = 5/15; pass^2 = (1 + 1/3)/5 = 4/15; pass^3 = 1/5
    assert trials["pass^k"]["session"] == {"1": 1 / 3, "2": 4 / 15, "3": 1 / 5}
    # pass@2 = (1 + 1)/5 (c=2: 1 - C(1,2)/3 = 1); pass@3 = 2/5
    assert trials["pass@k"]["session"] == {"1": 1 / 3, "2": 2 / 5, "3": 2 / 5}
    # variance c(3-c)/6: 1/3 for c in {1, 2} (5 tasks), else 0 -> (5/3)/20 = 1/12
    assert trials["success_variance"]["value"] == 1 / 12
    # the headline pools the 3 trials, and pass^1 is exactly it
    assert metrics["total_info"]["task"] == {"accuracy": 37 / 60, "correct_count": 37, "total_count": 60}
    assert metrics["total_info"]["session"]["accuracy"] == trials["pass^k"]["session"]["1"]
    for name in ("pass^k", "pass@k"):
        assert set(trials["confidence_intervals"][name]["task"]) == {"1", "2", "3"}


def test_a_trial_run_keeps_every_trial_apart(trial_run, suite):
    assert json.loads((trial_run / "config.json").read_text())["trials"] == 3
    for t in range(3):
        folder = trial_run if t == 0 else trial_run / "trials" / str(t)
        verdicts = [json.loads(line) for line in (folder / "verdicts.jsonl").read_text().splitlines()]
        assert [v["session_id"] for v in verdicts] == [s.id for s in suite.sessions]
        for i, verdict in enumerate(verdicts):
            assert [x["label"] == "correct" for x in verdict["tasks"]] == [t in trial for trial in PLAN[i]]
        assert len(load_run_trajectories(trial_run, trial=t)) == 5


def test_one_trial_is_todays_run_directory(tmp_path, suite):
    one_object = tmp_path / "gold.json"
    one_object.write_text(json.dumps({s.id: [_gold(t) for t in s.tasks] for s in suite.sessions}))
    plain = _eval(tmp_path, one_object, name="plain")
    one = _eval(tmp_path, one_object, "--trials", "1", name="one")
    for name in ("config.json", "trajectories.jsonl", "verdicts.jsonl", "metrics.json"):
        assert (plain / name).read_bytes() == (one / name).read_bytes(), name
    assert "trials" not in json.loads((one / "config.json").read_text())
    assert "trials" not in _metrics(one)["extensions"]
    assert not (one / "trials").exists()


def test_score_rescores_every_trial_to_the_runs_figures(trial_run, tmp_path):
    before = _metrics(trial_run)
    kept = {t: (trial_run / "trials" / str(t) / "verdicts.jsonl").read_text() for t in (1, 2)}
    for t in (1, 2):
        (trial_run / "trials" / str(t) / "verdicts.jsonl").unlink()
    result = CliRunner().invoke(app, ["score", str(trial_run)])
    assert result.exit_code == 0, result.output
    assert _metrics(trial_run) == before
    assert {t: (trial_run / "trials" / str(t) / "verdicts.jsonl").read_text() for t in (1, 2)} == kept
    assert "pass^k" in result.output and "pass@k" in result.output
    strict = CliRunner().invoke(app, ["score", str(trial_run), "--mode", "strict"])
    assert strict.exit_code == 0, strict.output
    assert _metrics(trial_run, "metrics.strict.json")["extensions"]["trials"]["k"] == 3


def test_show_reads_the_trial_asked_for(trial_run):
    def shown(*extra: str) -> str:
        result = CliRunner().invoke(app, ["show", str(trial_run), "--session", "wild_tool_bench_4", *extra])
        assert result.exit_code == 0, result.output
        return result.output.splitlines()[-1]

    # session 4 task outcomes: trial 0 right in task 2 only; trial 2 right in tasks 0, 2 and 3
    assert shown() == "4 task(s) shown of 4; 3 failed."
    assert shown("--trial", "2") == "4 task(s) shown of 4 (trial 2); 1 failed."
    missing = CliRunner().invoke(app, ["show", str(trial_run), "--trial", "3"])
    assert missing.exit_code == 1 and "no trial 3" in missing.output


def test_report_shows_pass_k_from_the_metrics(trial_run):
    page = (trial_run / "report.html").read_text()
    blocks = {}
    for element in ("meta", "figures", "metrics"):
        start = page.index(f'id="{element}">') + len(f'id="{element}">')
        blocks[element] = json.loads(page[start : page.index("</script>", start)])
    assert blocks["meta"]["trials"] == 3
    figure = next(f for f in blocks["figures"] if f["key"] == "trials")
    trials = _metrics(trial_run)["extensions"]["trials"]
    assert figure["series"] == {"pass^k": trials["pass^k"], "pass@k": trials["pass@k"]}
    lines = {trace["name"]: trace["y"] for trace in figure["spec"]["data"]}
    assert lines["pass^k over tasks"] == [37 / 60, 8 / 15, 1 / 2]
    assert blocks["metrics"]["extensions"]["trials"] == trials  # the page's table reads this block


def test_compare_refuses_a_trial_run(trial_run):
    result = CliRunner().invoke(app, ["compare", str(trial_run), str(trial_run)])
    assert result.exit_code == 1 and "3 trials" in result.output.replace("\n", " ")


def test_a_behaviour_file_with_too_few_trials_is_refused_before_anything_runs(tmp_path, suite):
    behaviour = _plan_file(suite, tmp_path / "plan.json", trials=2)
    args = ["eval", "--suite", str(FIXTURE), "--agent", f"scripted:{behaviour}", "--runs-dir", str(tmp_path)]
    result = CliRunner().invoke(app, [*args, "--name", "r", "--trials", "3"])
    assert result.exit_code == 1, result.output
    assert "scripts 2 trial(s)" in result.output.replace("\n", " ")
    assert not (tmp_path / "r" / "trajectories.jsonl").exists()


def test_a_resume_keeps_its_trials(trial_run):
    result = CliRunner().invoke(app, ["eval", "--resume", str(trial_run), "--trials", "2"])
    assert result.exit_code == 1 and "keeps its trials (3)" in result.output


class Counting:
    """A scripted agent that records which (session, trial) pairs it started."""

    name = "scripted"

    def __init__(self, inner: ScriptedAgent, played: list, trial: int = 0) -> None:
        self.inner, self.played, self.trial = inner, played, trial

    def for_trial(self, trial: int) -> Counting:
        return Counting(self.inner.for_trial(trial), self.played, trial)

    async def next_step(self, context: AgentContext) -> Step:
        if context.task_index == 0 and context.step_index == 0:
            self.played.append((context.session.id, self.trial))
        return await self.inner.next_step(context)


@pytest.mark.anyio
async def test_a_killed_trial_run_resumes_without_redoing_finished_pairs(tmp_path, suite):
    behaviour = _plan_file(suite, tmp_path / "plan.json")
    config = RunConfig(suite=str(FIXTURE), agent=f"scripted:{behaviour}", trials=3, concurrency=2)
    whole = await run_trials(suite, ScriptedAgent(load_behaviours(behaviour)), config, tmp_path / "whole")
    run_dir = tmp_path / "killed"
    await run_trials(suite, ScriptedAgent(load_behaviours(behaviour)), config, run_dir)
    # the kill: trial 1 lost its last two sessions, trial 2's last line was cut mid-write
    one = run_dir / "trials/1/trajectories.jsonl"
    lines = one.read_text().splitlines(keepends=True)
    lost = {(json.loads(line)["session_id"], 1) for line in lines[-2:]}
    one.write_text("".join(lines[:-2]))
    two = run_dir / "trials/2/trajectories.jsonl"
    lines = two.read_text().splitlines(keepends=True)
    lost.add((json.loads(lines[-1])["session_id"], 2))
    two.write_text("".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2])
    played: list = []
    resumed = await run_trials(
        suite, Counting(ScriptedAgent(load_behaviours(behaviour)), played), config, run_dir, resume=True
    )
    assert sorted(played) == sorted(lost)  # only the pairs the kill lost, each once
    assert resumed == whole
    for t in range(3):
        assert sorted(x.session_id for x in load_run_trajectories(run_dir, trial=t)) == sorted(
            s.id for s in suite.sessions
        )
    assert compute_trial_metrics(resumed, model_name="m") == compute_trial_metrics(whole, model_name="m")


@pytest.mark.anyio
async def test_model_trials_send_seed_plus_t_and_never_share_a_cached_reply(tmp_path, suite):
    respond = gold_responder(suite)

    def script(body):  # a model that is right at seed 10 and answers "no" at any other seed
        return respond(body) if body.get("seed") == 10 else Reply(text="no")

    fake = FakeOpenAI(script)
    cache = tmp_path / "cache.sqlite"
    config = RunConfig(suite=str(FIXTURE), agent="model", trials=2, seed=10, temperature=0.0, concurrency=4)

    async def run(run_dir: Path):
        llm = LLM(fake_backend(fake), cache=ResponseCache(cache))
        try:
            return await run_trials(suite, ModelAgent(llm, seed=10), config, run_dir)
        finally:
            await llm.aclose()

    first = await run(tmp_path / "a")
    assert {body.get("seed") for body in fake.requests} == {10, 11}
    assert all(v.correct for v in first[0])
    assert not any(v.correct or v.excluded for v in first[1])  # answered "no": failed, not lost to the provider
    calls = fake.calls
    again = await run(tmp_path / "b")  # the same run again: every trial's replies come from the cache
    assert fake.calls == calls and again == first


def test_behaviour_file_forms_are_told_apart_by_shape(tmp_path):
    legacy = tmp_path / "legacy.json"  # a session that happens to be named "trials": a list of task lists
    legacy.write_text(json.dumps({"trials": [[{"content": "hi"}]]}))
    behaviours = load_behaviours(legacy)
    assert not behaviours.per_trial and behaviours["trials"][0][0].content == "hi"
    assert ScriptedAgent(behaviours).for_trial(5).behaviours is behaviours  # one script plays every trial
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"trials": [{"s": [[]]}, {"s": [[{"content": 3}]]}]}))
    with pytest.raises(DataError) as caught:
        load_behaviours(bad)
    assert caught.value.field == "trials[1].s[0][0].content"
