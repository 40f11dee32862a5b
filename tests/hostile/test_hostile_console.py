"""Issue #32, console output: messages off a terminal are never hard-wrapped, user data is neither markup nor emoji
codes, the task-type breakdown adds up, validate of a file that is not a suite says so once (and caps its list), the
user audit's interval is clustered by session, and a simulated user's failures are shown as the user's."""

from __future__ import annotations

import io
import json

import pytest
from fake_openai import FakeOpenAI, Reply, serve_in_thread
from typer.testing import CliRunner

from toolwild.cli._common import OutputConsole
from toolwild.cli.main import app
from toolwild.core.formats.wtb import session_to_wtb, write_wtb_suite
from toolwild.core.session import Suite
from toolwild.core.verdict import ScoringMode
from toolwild.eval.agents.oracle import oracle_trajectory
from toolwild.eval.metrics.accuracy import compute_metrics
from toolwild.eval.scoring.session import score_session
from toolwild.eval.user import task_facts
from toolwild.eval.user_audit import (
    AuditedRun,
    UserFinding,
    clustered_wilson_interval,
    user_audit_report,
    wilson_interval,
)
from toolwild.report.scoreboard import render_scoreboard
from toolwild.synth.providers.ledger import build_ledger_suite

NARROW = {"COLUMNS": "40", "OPENAI_API_KEY": "test"}
"""Narrower than any message here: output that were wrapped would break every one of them."""


@pytest.fixture(scope="module")
def ledger():
    return build_ledger_suite(8)


def _rows(output: str, title: str) -> list[list[str]]:
    """The body rows of the first rich table whose title starts with ``title`` (the header, drawn with heavy lines,
    left out): its cells stripped, a first cell indented under a parent marked with a leading '>'."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith(title))
    rows = []
    for line in lines[start + 1 :]:
        if line.startswith("└"):
            break
        if line.startswith("│"):
            first, *rest = line.strip().strip("│").split("│")
            rows.append([(">" if first.startswith("   ") else "") + first.strip(), *(c.strip() for c in rest)])
    return rows


# ---------------------------------------------------------------------------------------------- no hard wrapping
def test_an_error_off_a_terminal_is_one_line_whatever_the_width_and_the_path(tmp_path):
    deep = tmp_path / ("a long folder name " * 6).strip() / ("and another one " * 6).strip()
    deep.mkdir(parents=True)
    missing = deep / "no such suite.jsonl"
    result = CliRunner().invoke(app, ["validate", str(missing)], env=NARROW)
    assert result.exit_code == 1
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert errors == [f"error: {missing}: cannot read file: No such file or directory"]


def test_plain_lines_are_not_wrapped_but_tables_keep_to_the_width():
    out = io.StringIO()
    console = OutputConsole(file=out, width=40)
    assert not console.is_terminal
    console.print("a sentence that is much longer than forty columns, printed to a file as one line")
    from rich.table import Table

    table = Table(title="t")
    table.add_column("name")
    table.add_column("text")
    table.add_row("x", "a cell that is much longer than forty columns and wraps inside its column")
    console.print(table)
    lines = out.getvalue().splitlines()
    assert lines[0] == "a sentence that is much longer than forty columns, printed to a file as one line"
    assert all(len(line) <= 40 for line in lines[1:]) and len(lines) > 5


def test_resume_refusal_is_the_same_one_line_at_any_path_length(tmp_path):
    """The test of issue #32 (tests/eval/test_run_dir.py) broke where a long temporary path moved the wrap."""
    suite_obj = build_ledger_suite(8)
    suite_obj.sessions = suite_obj.sessions[:1]
    for base in (tmp_path / "s", tmp_path / ("x" * 60) / ("y y " * 15).strip()):
        base.mkdir(parents=True)
        suite = base / "suite.jsonl"
        write_wtb_suite(suite_obj, suite)
        args = ["eval", "--suite", str(suite), "--agent", "oracle", "--runs-dir", str(base), "--name", "r"]
        assert CliRunner().invoke(app, args, env=NARROW).exit_code == 0
        record = json.loads(suite.read_text().splitlines()[0])
        record["english_env_info"] = "2031-01-01 00:00:00 Wednesday"
        suite.write_text(json.dumps(record) + "\n")
        resumed = CliRunner().invoke(app, ["eval", "--resume", str(base / "r")], env=NARROW)
        assert resumed.exit_code == 1
        (line,) = [x for x in resumed.output.splitlines() if x.startswith("error:")]
        assert f"{base / 'r'}: the suite changed since the run started" in line


# ---------------------------------------------------------------------------------------------- emoji and markup
def test_show_prints_ledger_accounts_as_they_are(tmp_path, ledger):
    suite = Suite(name="s", sessions=ledger.sessions[:1])
    session = suite.sessions[0]
    task = session.tasks[0]
    account = "Assets:Bank:Checking"
    behaviour = {session.id: [[{"content": f"Your {account} [bold]balance[/] is :bank: fine."}]] * len(session.tasks)}
    path = tmp_path / "suite.jsonl"
    write_wtb_suite(suite, path)
    (tmp_path / "b.json").write_text(json.dumps(behaviour))
    args = ["eval", "--suite", str(path), "--agent", f"scripted:{tmp_path / 'b.json'}", "--runs-dir", str(tmp_path)]
    assert CliRunner().invoke(app, [*args, "--name", "r"], env={"COLUMNS": "200"}).exit_code == 0
    shown = CliRunner().invoke(app, ["show", str(tmp_path / "r"), "--limit", "1"], env={"COLUMNS": "200"})
    assert shown.exit_code == 0, shown.output
    flat = " ".join(shown.output.split())
    assert f"Your {account} [bold]balance[/] is :bank: fine." in flat
    assert "🏦" not in shown.output
    assert task.utterance.split()[0] in flat


def test_the_scoreboard_prints_names_and_ids_as_they_are(ledger):
    session = ledger.sessions[0]
    verdict = score_session(session, oracle_trajectory(session), mode=ScoringMode.STRICT)
    verdict.harness_error = "env raised on Assets:Bank:Checking [red]"
    metrics = compute_metrics([verdict], model_name="model:bank:[bold]x[/]", mode=ScoringMode.STRICT)
    out = io.StringIO()
    render_scoreboard(metrics, OutputConsole(file=out, width=200))
    text = out.getvalue()
    assert "model:bank:[bold]x[/]" in text and "env raised on Assets:Bank:Checking [red]" in text
    assert "🏦" not in text


# ---------------------------------------------------------------------------------------------- task types add up
def test_top_level_task_type_rows_add_up_to_the_task_count(ledger):
    verdicts = [score_session(s, oracle_trajectory(s), mode=ScoringMode.STRICT) for s in ledger.sessions]
    metrics = compute_metrics(verdicts, model_name="oracle", mode=ScoringMode.STRICT)
    assert metrics.task_type_info["Multi-Tool"]["total_count"] > 0  # the parent row is there to be placed
    out = io.StringIO()
    render_scoreboard(metrics, OutputConsole(file=out, width=200))
    total = int(metrics.total_info["task"]["total_count"])
    for title in ("By task type", "By turn subtype"):
        rows = _rows(out.getvalue(), title)
        top = [r for r in rows if not r[0].startswith(">")]
        assert sum(int(r[2].split("/")[1]) for r in top) == total, (title, rows)
    kinds = [r[0] for r in _rows(out.getvalue(), "By task type")]
    multi = kinds.index("Multi-Tool")
    parts = [k for k in kinds if k.startswith(">")]
    assert parts and kinds[multi + 1 : multi + 1 + len(parts)] == parts  # the parts right under their parent


# ---------------------------------------------------------------------------------------------- validate
def test_validate_of_a_beancount_ledger_is_one_clear_error(tmp_path):
    books = tmp_path / "books.beancount"
    lines = ['option "title" "My books"', "2024-01-01 open Assets:Bank:Checking USD"]
    for day in range(1, 29):
        lines += [f'2024-02-{day:02d} * "Coffee"', "  Expenses:Food  3.50 USD", "  Assets:Bank:Checking"]
    books.write_text("\n".join(lines) + "\n")
    result = CliRunner().invoke(app, ["validate", str(books)], env=NARROW)
    assert result.exit_code == 1
    errors = [line for line in result.output.splitlines() if "error" in line]
    assert len(errors) == 1, result.output
    assert errors[0].startswith(f"error: {books}: not a suite: a .beancount file: a Beancount ledger (line 1")
    assert "expected a suite: JSON Lines (.jsonl)" in errors[0] and "--ledger" in errors[0]
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("[\n" + ",\n".join(["{}"] * 30) + "\n]\n", "one JSON array"),
        ("id,name\n" + "1,a\n" * 40, "line 1 is not JSON: 'id,name'"),
    ],
    ids=["json-array", "csv"],
)
def test_validate_of_other_files_that_are_not_suites_says_what_they_are(tmp_path, content, says):
    path = tmp_path / "data.jsonl"
    path.write_text(content)
    result = CliRunner().invoke(app, ["validate", str(path)], env=NARROW)
    assert result.exit_code == 1
    (line,) = [x for x in result.output.splitlines() if x.startswith("error:")]
    assert says in line and "expected a suite" in line


def test_validate_lists_the_first_20_problems_and_counts_every_one(tmp_path, ledger):
    path = tmp_path / "suite.jsonl"
    good = json.dumps(session_to_wtb(ledger.sessions[0]))
    path.write_text(good + "\n" + '{"id": 3}\n' * 50)
    result = CliRunner().invoke(app, ["validate", str(path), "--no-oracle-check"], env={"COLUMNS": "200"})
    assert result.exit_code == 1
    rows = _rows(result.output, "Problems")
    assert "the first 20 of 50" in result.output and len(rows) == 20
    assert "… and 30 more" in result.output and "50 error(s)" in result.output
    every_args = ["validate", str(path), "--no-oracle-check", "--max-problems", "0"]
    every = CliRunner().invoke(app, every_args, env={"COLUMNS": "200"})
    assert len(_rows(every.output, "Problems")) == 50 and "… and" not in every.output


# ---------------------------------------------------------------------------------------------- the audit interval
def _runs(outcomes: list[list[bool]]) -> list[AuditedRun]:
    """Audited runs of sessions s0, s1, ... whose trials failed (True) or passed."""
    finding = UserFinding(kind="ended_early", task_index=0, message="said done")
    return [
        AuditedRun(session_id=f"s{i}", trial=t, findings=[finding] if failed else [])
        for i, trials in enumerate(outcomes)
        for t, failed in enumerate(trials)
    ]


def test_the_audit_interval_counts_sessions_not_sessions_times_trials():
    suite = Suite(name="s", sessions=[])
    # 10 sessions x 4 trials; the user breaks 3 sessions in every trial: 3 things were seen, not 12
    runs = _runs([[True] * 4] * 3 + [[False] * 4] * 7)
    report = user_audit_report(suite, runs, user="u", trials=4)
    per_session = wilson_interval(3, 10)
    assert report.error_rate == 0.3 and report.interval is not None and per_session is not None
    assert (report.interval.low, report.interval.high) == pytest.approx((per_session.low, per_session.high))
    assert report.interval.effective_n == pytest.approx(10)
    naive = wilson_interval(12, 40)
    assert naive is not None and report.interval.high - report.interval.low > naive.high - naive.low
    # trials that vary inside each session as independent coins keep (about) every run
    alternating = user_audit_report(suite, _runs([[True, False, True, False]] * 10), user="u", trials=4)
    assert alternating.interval is not None and alternating.interval.effective_n == pytest.approx(40)
    # one trial: exactly the plain Wilson interval of the runs
    single = clustered_wilson_interval([(1, 1), (0, 1), (0, 1)])
    assert single == wilson_interval(1, 3)
    none = clustered_wilson_interval([(0, 4)] * 5)
    assert none is not None and none.effective_n == pytest.approx(5) and none.high == wilson_interval(0, 5).high


# ---------------------------------------------------------------------------------------------- the simulated user
def test_the_simulated_users_failures_are_the_users_beside_the_accuracy(tmp_path, ledger):
    suite = Suite(name="s", sessions=ledger.sessions[:3])
    clarify = [s for s in suite.sessions if any(task_facts(t).replies for t in s.tasks)]
    assert clarify  # sessions where a user that says "done" at every question ends a task early
    path = tmp_path / "suite.jsonl"
    write_wtb_suite(suite, path)
    always_done = FakeOpenAI(lambda body: Reply(text=json.dumps({"action": "done", "message": "ok"})))
    args = ["eval", "--suite", str(path), "--agent", "oracle", "--user", "model:openai:fake-model"]
    with serve_in_thread(always_done) as base_url:
        args += ["--base-url", base_url, "--runs-dir", str(tmp_path), "--name", "r", "--no-preflight"]
        result = CliRunner().invoke(app, args, env={"COLUMNS": "200", "OPENAI_API_KEY": "test"})
    assert result.exit_code == 0, result.output
    metrics = json.loads((tmp_path / "r" / "metrics.json").read_text())
    failed = metrics["total_info"]["task"]["total_count"] - metrics["total_info"]["task"]["correct_count"]
    assert failed > 0
    ext = metrics["extensions"]
    assert ext["user"]["audit_failed_tasks"]["tasks"] == failed  # the oracle's failures are all the user's
    classified = sum(v["count"] for v in ext["error_taxonomy"].values())
    assert ext["user"]["audit_failed_tasks"]["by_class"] == {"Early Termination": classified}
    head = [r[0] for r in _rows(result.output, "oracle · mode strict · user model:openai:fake-model")]
    assert head[:3] == ["Task accuracy", "Session accuracy", "User audit error rate"]
    errors = _rows(result.output, "Failed tasks by error class")
    assert [r[0] for r in errors] == ["Simulated user (audit)"] and errors[0][2] == str(classified)
    assert f"Simulated user (audit): {failed} failed task(s) from where the run's user audit" in result.output
    unclassed = f"({failed - classified} of them failed a state or answer check"
    assert (unclassed in result.output) == (failed > classified)
