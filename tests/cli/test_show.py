"""``toolwild show`` and the run's ``verdicts.jsonl``: failures read as conversations, with what was expected."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from toolwild.cli.main import app
from toolwild.core.formats.wtb import load_wtb_suite
from toolwild.core.verdict import SessionVerdict
from toolwild.eval.agents.oracle import oracle_steps

FIXTURE = Path(__file__).resolve().parents[2].parent / "shared/fixtures/wildtoolbench/sessions_0_4.reconstructed.jsonl"
pytestmark = pytest.mark.skipif(not FIXTURE.exists(), reason=f"fixture not found: {FIXTURE}")


def _gold_behaviour(suite) -> dict:
    out: dict = {}
    for s in suite.sessions:
        out[s.id] = []
        for t in s.tasks:
            steps = []
            for st in oracle_steps(t):
                if st.tool_calls:
                    calls = [{"name": c.name, "arguments": json.loads(c.arguments)} for c in st.tool_calls]
                    steps.append({"tool_calls": calls})
                else:
                    steps.append({"content": st.content})
            out[s.id].append(steps)
    return out


def _failing_behaviour(suite) -> dict:
    """The gold path, except for tasks that fail in every way a scripted agent can fail."""
    behaviour = _gold_behaviour(suite)
    answer = {"content": "Done."}
    behaviour["wild_tool_bench_2"][0] = [{"content": "I cannot look that up."}]  # text where a call was due
    behaviour["wild_tool_bench_2"][1] = [{"tool_calls": [{"name": "restock", "arguments": {}}]}]  # not a tool
    behaviour["wild_tool_bench_2"][2] = [{"tool_calls": [{"name": "getBudgets", "arguments": {"user_id": "1"}}]}]
    behaviour["wild_tool_bench_3"][2] = [{"tool_calls": [{"name": "getLocationByIP", "arguments": {"ip": "1"}}]}]
    topic = {"dateRange": {"endDate": "2024-12-18", "startDate": "2024-10-18"}, "topic": "Nature and wildlife"}
    behaviour["wild_tool_bench_1"][0] = [{"tool_calls": [{"name": "getParliamentDebates", "arguments": topic}]}, answer]
    behaviour["wild_tool_bench_4"][1] = []  # empty reply
    behaviour["wild_tool_bench_4"][2] = [{"tool_calls": [{"name": "userActivityReport", "arguments": "{oops"}]}]
    return behaviour


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("show")
    behaviour = root / "behaviour.json"
    behaviour.write_text(json.dumps(_failing_behaviour(load_wtb_suite(FIXTURE)[0])))
    args = ["eval", "--suite", str(FIXTURE), "--agent", f"scripted:{behaviour}", "--runs-dir", str(root)]
    result = CliRunner().invoke(app, [*args, "--name", "r"])
    assert result.exit_code == 0, result.output
    return root / "r"


def _verdicts(path: Path) -> list[SessionVerdict]:
    return [SessionVerdict.model_validate_json(line) for line in path.read_text().splitlines()]


def _flat(text: str) -> str:
    """Output with rich's line wrapping undone, to look for a sentence that may span lines."""
    return " ".join(text.split())


def test_eval_writes_verdicts_equal_to_score_verdicts(run_dir, tmp_path):
    out = tmp_path / "v.jsonl"
    result = CliRunner().invoke(app, ["score", str(run_dir), "--verdicts", str(out), "--out", str(tmp_path / "m")])
    assert result.exit_code == 0, result.output
    assert (run_dir / "verdicts.jsonl").read_text() == out.read_text()
    assert len(_verdicts(out)) == 5


def test_show_failed_names_what_was_expected_and_what_came(run_dir):
    result = CliRunner().invoke(app, ["show", str(run_dir), "--failed"])
    assert result.exit_code == 0, result.output
    text = _flat(result.output)
    failed = [t for v in _verdicts(run_dir / "verdicts.jsonl") for t in v.tasks if t.label == "error"]
    assert len(failed) == 7
    assert text.count("FAILED") == len(failed) and "correct" not in text.replace("failed.", "")
    for task in failed:
        assert _flat(task.explanation) in text
        step = next(s for s in task.steps if s.explanation)
        assert step.expected and all(name in text for name in step.expected)
    for sentence in (
        "expected a call of getBudgets; got a text reply",
        "called restock, which is not a tool of this session",
        "expected a call of syncTransactions; called getBudgets",
        "expected ask_user_for_required_parameters (a required value is missing); called getLocationByIP",
        'argument \'topic\' expected "Environmental protection", got "Nature and wildlife" (rouge score 0.00',
        "reply was empty; expected a call of emailLogin",
    ):
        assert sentence in text
    assert "7 task(s) shown of 20; 7 failed." in text


def test_show_prints_the_conversation_within_80_columns(run_dir):
    result = CliRunner().invoke(app, ["show", str(run_dir), "--session", "wild_tool_bench_3"])
    assert result.exit_code == 0, result.output
    assert max(len(line) for line in result.output.splitlines()) <= 80
    text = _flat(result.output)
    assert "wild_tool_bench_3 · task 3/4" in text
    assert "user (reply):" in text  # the reply to the gold ask of task 4
    assert 'getLocationByIP({"ip": "125.532.55.09"})' in text  # a gold call with its arguments
    assert "4 task(s) shown of 4; 1 failed." in text


def test_limit(run_dir):
    result = CliRunner().invoke(app, ["show", str(run_dir), "--limit", "2"])
    assert result.exit_code == 0, result.output
    assert "2 task(s) shown of 20" in _flat(result.output)


@pytest.mark.parametrize("extra", [[], ["--session", "nope"]])
def test_a_bad_run_dir_or_session_is_a_clear_error(run_dir, tmp_path, extra):
    target = run_dir if extra else tmp_path / "missing"
    result = CliRunner().invoke(app, ["show", str(target), *extra])
    assert result.exit_code == 1
    assert "error:" in result.output and "Traceback" not in result.output


def test_resume_rewrites_verdicts_from_every_session(run_dir, tmp_path):
    """A run killed after two sessions, resumed: verdicts.jsonl holds all five, as an uninterrupted run's does."""
    copy = tmp_path / "r"
    shutil.copytree(run_dir, copy)
    lines = (copy / "trajectories.jsonl").read_text().splitlines(keepends=True)
    (copy / "trajectories.jsonl").write_text("".join(lines[:2]))
    (copy / "verdicts.jsonl").unlink()
    result = CliRunner().invoke(app, ["eval", "--resume", str(copy)])
    assert result.exit_code == 0, result.output
    assert (copy / "verdicts.jsonl").read_text() == (run_dir / "verdicts.jsonl").read_text()
