"""The unit log: kept across a kill (torn last line cut), refused when it is another run's, read back in order."""

from __future__ import annotations

import json

import pytest

from toolwild.errors import ConfigError, DataError
from toolwild.run import UnitLog, UnitRecord, UnitStatus, fingerprint

IDENTITY = {"fields": ["finance"], "seed": 0}
FP = fingerprint(IDENTITY)


def _start(path):
    return UnitLog.start(path, job="test", fingerprint=FP, identity=IDENTITY)


def _resume(path, identity=IDENTITY):
    return UnitLog.resume(path, job="test", fingerprint=fingerprint(identity), identity=identity)


def _done(i: int, value: object = None) -> UnitRecord:
    return UnitRecord(key=f"u{i}", order=i, status=UnitStatus.DONE, result={"value": value if value is not None else i})


def test_records_come_back_in_output_order_whatever_the_completion_order(tmp_path):
    path = tmp_path / "log.jsonl"
    with _start(path) as log:
        for i in (3, 0, 2, 1):
            log.append(_done(i))
    with _resume(path) as log:
        assert [r.order for r in log.records()] == [0, 1, 2, 3]
        assert log.done_keys() == {"u0", "u1", "u2", "u3"}


def test_a_torn_last_line_is_cut_and_appends_go_on_cleanly(tmp_path):
    path = tmp_path / "log.jsonl"
    with _start(path) as log:
        log.append(_done(0))
        log.append(_done(1))
    whole = path.read_bytes()
    path.write_bytes(whole[:-7])  # a kill in the middle of the last write
    with _resume(path) as log:
        assert log.done_keys() == {"u0"}
        log.append(_done(1, "again"))
    with _resume(path) as log:
        assert [r.result["value"] for r in log.records()] == [0, "again"]
    assert all(json.loads(line) for line in path.read_text().splitlines())


def test_a_failed_unit_is_listed_apart_and_a_later_record_replaces_it(tmp_path):
    path = tmp_path / "log.jsonl"
    with _start(path) as log:
        log.append(UnitRecord(key="u0", order=0, status=UnitStatus.FAILED, error="503 after 6 attempts"))
        log.append(_done(1))
    with _resume(path) as log:
        assert log.failed_keys() == {"u0"} and log.done_keys() == {"u1"}
        log.append(_done(0))
    with _resume(path) as log:
        assert log.failed_keys() == set() and log.done_keys() == {"u0", "u1"}


def test_another_runs_log_is_refused_naming_what_differs(tmp_path):
    path = tmp_path / "log.jsonl"
    with _start(path) as log:
        log.append(_done(0))
    before = path.read_bytes()
    with pytest.raises(ConfigError, match=r"seed: 0 in the log, 1 now"):
        _resume(path, {"fields": ["finance"], "seed": 1})
    with pytest.raises(ConfigError, match="'test' run"):
        UnitLog.resume(path, job="other", fingerprint=FP, identity=IDENTITY)
    assert path.read_bytes() == before


def test_an_unfinished_log_is_never_replaced_silently_but_a_finished_one_is(tmp_path):
    path = tmp_path / "log.jsonl"
    with _start(path) as log:
        log.append(_done(0))
    with pytest.raises(ConfigError, match=r"unfinished run \(1 unit"):
        _start(path)
    with _resume(path) as log:
        log.mark_complete()
    with _start(path) as log:
        assert len(log) == 0
    with _resume(path) as log:
        assert not log.complete and log.done_keys() == set()


def test_a_bad_line_in_the_middle_names_file_line_and_field(tmp_path):
    path = tmp_path / "log.jsonl"
    with _start(path) as log:
        log.append(_done(0))
        log.append(_done(1))
    lines = path.read_text().splitlines()
    record = json.loads(lines[1])
    record["colour"] = "blue"
    lines[1] = json.dumps(record)
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError) as raised:
        _resume(path)
    assert raised.value.line == 2 and raised.value.field == "colour" and str(path) in str(raised.value)


def test_resuming_nothing_or_a_file_that_is_no_log_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="nothing to resume"):
        _resume(tmp_path / "missing.jsonl")
    other = tmp_path / "suite.jsonl"
    other.write_text('{"id": "wild_tool_bench_0"}\n')
    with pytest.raises(ConfigError, match="not a toolwild unit log"):
        _resume(other)
    with pytest.raises(ConfigError, match="not a finished test log"):
        _start(other)
    assert other.read_text() == '{"id": "wild_tool_bench_0"}\n'


def test_one_record_is_read_back_by_key_its_latest_line(tmp_path):
    path = tmp_path / "log.jsonl"
    with _start(path) as log:
        log.append(UnitRecord(key="u0", order=0, status=UnitStatus.FAILED, error="503"))
        log.append(_done(1))
        assert log.record("u1").result == {"value": 1}
        log.append(_done(0, "redone"))
        assert log.record("u0").status is UnitStatus.DONE and log.record("u0").result == {"value": "redone"}
        with pytest.raises(KeyError):
            log.record("u2")
