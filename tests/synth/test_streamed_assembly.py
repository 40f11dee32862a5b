"""The streamed assembly of ``synth sessions``: records arriving in any order give the very writes and report of the
in-order assembly, an early record is read back from the log in its turn (not held), a resumed run's logged records
take their turn too, and a missing index is an error, not a short suite."""

from __future__ import annotations

import random

import pytest

from toolwild.core.session import Session
from toolwild.core.task import Task, TaskType, TurnSubtype, answer_node
from toolwild.errors import HarnessError
from toolwild.run import UnitLog, UnitRecord, UnitStatus
from toolwild.synth.providers.base import SessionOutcome
from toolwild.synth.session_job import SessionJob, StreamedAssembly, session_key

N = 12
GIVEN_UP = 7
"""Session 7 of environment slot 1 finds its environment unusable: later sessions on that slot are not kept."""
FAILED = 4
"""Session 4 was lost to the provider."""


def _session(index: int) -> Session:
    task = Task(
        utterance=f"what is {index} plus one?",
        type=TaskType.CHAT,
        subtype=TurnSubtype.FIRST,
        gold=[answer_node([], f"{index + 1}")],
    )
    return Session(id=f"s_{index}", env_info="2024-05-01 10:00:00 Wednesday", tools=[], tasks=[task])


def _record(index: int) -> UnitRecord:
    if index == FAILED:
        return UnitRecord(key=session_key(index), order=index, status=UnitStatus.FAILED, error="503 after retries")
    outcome = SessionOutcome(session=None if index == 9 else _session(index))
    outcome.drops[f"reason {index % 3}"] += 1
    if index == GIVEN_UP:
        outcome.given_up = "the simulator cannot answer"
    result = {
        "outcome": outcome.to_json(),
        "session": outcome.session.model_dump(mode="json") if outcome.session is not None else None,
        "problems": [],
    }
    return UnitRecord(key=session_key(index), order=index, status=UnitStatus.DONE, result=result)


def _job() -> SessionJob:
    return SessionJob([object(), object()], ["alpha", "beta"], N)  # type: ignore[list-item]  # providers unused


def _log(tmp_path) -> UnitLog:
    return UnitLog.start(tmp_path / "progress.jsonl", job="test", fingerprint="x", identity={})


def _in_order() -> tuple[list[str], dict]:
    written: list[str] = []
    report = _job().assemble((_record(i) for i in range(N)), write=lambda s: written.append(s.id))
    return written, vars(report)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_any_arrival_order_writes_what_the_in_order_assembly_writes(tmp_path, seed):
    order = list(range(N))
    random.Random(seed).shuffle(order)
    written: list[tuple[str, int]] = []  # (session, how many records had arrived when it was written)
    arrived = 0
    with _log(tmp_path / str(seed)) as log:
        streamed = StreamedAssembly(_job(), log, lambda s: written.append((s.id, arrived)))
        for index in order:
            record = _record(index)
            log.append(record)
            arrived += 1
            streamed.add(record)
        report = streamed.finish()
    expected_written, expected_report = _in_order()
    assert [sid for sid, _ in written] == expected_written
    assert vars(report) == expected_report
    assert [u["index"] for u in report.failed_units] == [FAILED]
    assert {f["index"] for f in report.failed_sessions} == {9, *range(GIVEN_UP + 2, N, 2)}
    # each session is written as soon as every one before it has arrived, not at the end
    for sid, when in written:
        index = int(sid.removeprefix("s_"))
        assert when == max(order.index(j) for j in range(index + 1)) + 1


def test_an_early_record_is_read_back_from_the_log_in_its_turn(tmp_path):
    with _log(tmp_path) as log:
        written: list[str] = []
        streamed = StreamedAssembly(_job(), log, lambda s: written.append(s.id))
        early = _record(1)
        log.append(early)
        streamed.add(early)
        early.result["session"]["id"] = "changed in memory"  # what is written comes from the log, not this object
        first = _record(0)
        log.append(first)
        streamed.add(first)
    assert written == ["s_0", "s_1"]


def test_a_resumed_runs_logged_records_take_their_turn(tmp_path):
    path = tmp_path / "progress.jsonl"
    with _log(tmp_path) as log:
        for index in (0, 2, 3):  # the killed run finished these
            log.append(_record(index))
    with UnitLog.resume(path, job="test", fingerprint="x") as log:
        written: list[str] = []
        streamed = StreamedAssembly(_job(), log, lambda s: written.append(s.id), done=log.done_keys())
        for index in (1, *range(4, N)):
            record = _record(index)
            log.append(record)
            streamed.add(record)
            if index == 1:
                assert written == ["s_0", "s_1", "s_2", "s_3"]
        report = streamed.finish()
    assert (written, vars(report)) == _in_order()


def test_a_missing_index_is_an_error_not_a_short_suite(tmp_path):
    with _log(tmp_path) as log:
        streamed = StreamedAssembly(_job(), log, lambda s: None)
        for index in (0, 1, 3):
            record = _record(index)
            log.append(record)
            streamed.add(record)
        with pytest.raises(HarnessError, match="session 2 was never made"):
            streamed.finish()
