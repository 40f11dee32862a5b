"""``audit user``: the oracle against a simulated user, every reply checked by code. Scripted simulators that leak,
refuse, give a wrong value, end early or never end are each caught and named; faithful ones pass; the report, its
interval and ``user_failures`` are what ``eval --exclude-user-failures`` reads."""

from __future__ import annotations

import json

import pytest
from fake_openai import FakeOpenAI, Reply, serve_in_thread
from typer.testing import CliRunner

from toolwild.cli.main import app
from toolwild.core.formats.wtb import write_wtb_suite
from toolwild.errors import DataError, TransientBackendError
from toolwild.eval.user import RecordedUser, ScriptedUser, UserTurn, UserView, task_facts
from toolwild.eval.user_audit import (
    audit_user,
    load_user_audit,
    user_audit_report,
    user_failures,
    wilson_interval,
)
from toolwild.synth.providers.ledger import build_ledger_suite

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture(scope="module")
def suite():
    return build_ledger_suite(8)


def _recorded(view: UserView) -> UserTurn | None:
    if view.turn < len(view.facts.replies):
        return UserTurn(action="answer", message=view.facts.replies[view.turn])
    return None


def _faithful(view: UserView) -> UserTurn:
    return _recorded(view) or UserTurn(action="done", message="Great, thanks.")


async def _audit(suite, play, *, trials: int = 1):
    runs = await audit_user(suite.sessions, ScriptedUser(play), trials=trials)
    return user_audit_report(suite, runs, user="scripted", trials=trials)


def _clarify_sessions(suite) -> set[str]:
    return {s.id for s in suite.sessions if any(task_facts(t).replies for t in s.tasks)}


async def test_faithful_users_pass_and_the_oracle_scores_100_percent_with_them(suite):
    for play in (_faithful, lambda view: _recorded(view) or UserTurn(action="done")):
        report = await _audit(suite, play)
        assert report.failed_runs == 0 and report.error_rate == 0.0 and report.broken == []
        assert report.oracle_task_accuracy == 1.0
    runs = await audit_user(suite.sessions, RecordedUser())
    assert not any(r.findings for r in runs)


async def test_a_user_that_leaks_a_withheld_value_is_caught(suite):
    later: dict[tuple[str, int], list[str]] = {
        (s.id, i): [f.said for t in s.tasks[i + 1 :] for f in task_facts(t).withheld]
        for s in suite.sessions
        for i in range(len(s.tasks))
    }

    def leaker(view: UserView) -> UserTurn:  # knows the whole session and tells the next task's value too soon
        ahead = later[(view.session_id, view.task_index)]
        return _recorded(view) or UserTurn(action="done", message=" ".join(["Thanks.", *ahead[:1]]))

    report = await _audit(suite, leaker)
    assert report.failed_runs > 0 and set(report.by_kind) == {"leaked"}
    why = report.broken[0].why[0]
    assert "leaked" in why and "before it was asked" in why


async def test_a_user_that_refuses_a_value_is_caught_as_withholding_it(suite):
    def refuser(view: UserView) -> UserTurn:
        if view.turn < len(view.facts.replies):
            return UserTurn(action="dont_know", message="Sorry, I don't know.")
        return UserTurn(action="done")

    report = await _audit(suite, refuser)
    assert set(report.by_kind) == {"withheld"}
    assert user_failures(report) == _clarify_sessions(suite)
    assert "dont_know" in report.broken[0].why[0]


async def test_a_user_that_gives_another_number_is_caught_as_wrong(suite):
    def misremembers(view: UserView) -> UserTurn:
        turn = _faithful(view)
        amounts = [f for f in view.facts.withheld if f.param == "amount"]
        if turn.action == "answer" and amounts and amounts[0].required_at == view.turn:
            return UserTurn(action="answer", message="It was 12.34.")
        return turn

    report = await _audit(suite, misremembers)
    assert "wrong" in report.by_kind
    assert any("gave 12.34" in why for b in report.broken for why in b.why)


async def test_a_user_that_ends_early_is_caught(suite):
    report = await _audit(suite, lambda view: UserTurn(action="done", message="Never mind."))
    assert set(report.by_kind) == {"ended_early"}
    assert user_failures(report) == _clarify_sessions(suite)
    assert report.oracle_task_accuracy is not None and report.oracle_task_accuracy < 1.0  # the oracle was cut off


async def test_a_user_that_never_ends_is_caught(suite):
    def clingy(view: UserView) -> UserTurn:
        return _recorded(view) or UserTurn(action="answer", message="And can you also email it to me?")

    report = await _audit(suite, clingy)
    assert set(report.by_kind) == {"never_ended"} and report.failed_runs == report.runs == len(suite.sessions)


async def test_two_values_in_one_reply_is_not_a_leak_of_a_value_asked_in_the_same_question(suite):
    def eager(view: UserView) -> UserTurn:  # the first question asks for both: giving both is fine
        if view.turn == 0 and len(view.facts.replies) == 2:
            return UserTurn(action="answer", message=" ".join(f.said for f in view.facts.withheld))
        return _faithful(view)

    report = await _audit(suite, eager)
    assert report.failed_runs == 0, report.broken


async def test_the_simulators_error_is_counted_as_its_failure_and_a_provider_error_is_left_out(suite):
    from toolwild.eval.user import UserSimulatorError

    def broken(view: UserView) -> UserTurn:
        if view.session_id == suite.sessions[0].id:
            raise UserSimulatorError("no usable user turn after 3 attempts")
        if view.session_id == suite.sessions[1].id:
            raise TransientBackendError("503")
        return _faithful(view)

    report = await _audit(suite, broken)
    assert report.by_kind == {"simulator_error": 1} and user_failures(report) == {suite.sessions[0].id}
    assert report.provider_errors == [f"{suite.sessions[1].id}#0"] and report.runs == len(suite.sessions) - 1


async def test_trials_seed_the_user_and_each_counts(suite):
    seen: list[int] = []

    def by_trial(view: UserView) -> UserTurn:
        seen.append(view.trial)
        if view.trial == 1 and view.turn < len(view.facts.replies):
            return UserTurn(action="done")
        return _faithful(view)

    report = await _audit(suite, by_trial, trials=3)
    assert set(seen) == {0, 1, 2} and report.runs == 3 * len(suite.sessions)
    assert report.failed_runs == len(_clarify_sessions(suite))
    assert all(b.trials == [1] for b in report.broken)


def test_wilson_interval():
    none = wilson_interval(0, 10)
    assert none is not None and none.low == 0.0 and none.high == pytest.approx(0.2775, abs=1e-4)
    half = wilson_interval(5, 10)
    assert half is not None and (half.low, half.high) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    assert wilson_interval(0, 0) is None


async def test_the_report_reads_back_and_a_bad_one_is_refused(suite, tmp_path):
    report = await _audit(suite, lambda view: UserTurn(action="done"))
    path = tmp_path / "audit.json"
    path.write_text(report.model_dump_json())
    assert user_failures(load_user_audit(path)) == user_failures(report) != set()
    path.write_text(json.dumps({"user": "x"}))
    with pytest.raises(DataError, match="not a user-audit report"):
        load_user_audit(path)


# ---------------------------------------------------------------------------------------------- the command
def _suite_file(tmp_path, suite):
    path = tmp_path / "suite.jsonl"
    write_wtb_suite(suite.model_copy(update={"sessions": suite.sessions[:3]}), path)
    return path


def test_audit_user_command_with_the_recorded_user(suite, tmp_path):
    path = _suite_file(tmp_path, suite)
    args = ["audit", "user", str(path), "--user", "recorded", "-o", str(tmp_path / "r.json")]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "error rate" in result.output and "0.0%" in result.output and "Wilson" in result.output
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["runs"] == 3 and report["failed_runs"] == 0 and report["user"] == "recorded"


def test_audit_user_command_with_a_model_reports_the_sessions_it_breaks_and_replays_from_the_cache(suite, tmp_path):
    path = _suite_file(tmp_path, suite)
    fake = FakeOpenAI(lambda body: Reply(text=json.dumps({"action": "done", "message": "ok"})))
    out = tmp_path / "r.json"
    with serve_in_thread(fake) as base_url:
        args = ["audit", "user", str(path), "--user", "model:openai:fake-model", "--base-url", base_url]
        args += ["--cache", str(tmp_path / "c.sqlite"), "-o", str(out), "--limit", "2"]
        env = {"COLUMNS": "200", "OPENAI_API_KEY": "test"}
        first = CliRunner().invoke(app, args, env=env)
        report = json.loads(out.read_text()) if out.exists() else {}
        calls = fake.calls
        again = CliRunner().invoke(app, args, env=env)
    assert first.exit_code == 0, first.output
    assert "Sessions the user broke" in first.output and "ended_early" in first.output
    assert report["runs"] == 2 and report["failed_runs"] == len(_clarify_sessions(suite) & {"ledger_0", "ledger_1"})
    assert report["prompt_sha256"] and report["prompt_version"] and report["usage"]["total"]["calls"] == calls > 0
    assert again.exit_code == 0 and fake.calls == calls  # the second run made no call
    replayed = json.loads(out.read_text())
    assert replayed["usage"]["total"]["calls"] == 0 and replayed["runs_detail"] == report["runs_detail"]
