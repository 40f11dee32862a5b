"""The suite's quality checks travel with each session's record (issue #34): worked out where the session is made
(a worker process, where verifying has just asked the same questions), so the process that writes the suite only
adds them up. The figures must be those of counting the written suite afresh."""

from __future__ import annotations

import json

from toolwild.core.formats.wtb import load_wtb_suite
from toolwild.core.quality import QualityCounter, session_checks, suite_quality
from toolwild.core.session import Session
from toolwild.jobs.sessions import generate_sessions


def test_the_recorded_checks_are_the_sessions_and_count_as_the_written_suite(tmp_path):
    out = tmp_path / "suite.jsonl"
    made = generate_sessions(["ledger"], out, n=6, encoder="none", concurrency=2, executor="local")
    lines = (tmp_path / "suite.jsonl.progress.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines[1:]]
    done = [r for r in records if r.get("status") == "done" and r["result"]["session"] is not None]
    assert len(done) == made.sessions == 6
    for record in done:
        session = Session.model_validate(record["result"]["session"])
        assert record["result"]["checks"] == session_checks(session)
    figures = made.quality.model_dump(exclude={"semantic", "semantic_note"})  # no encoder here, none there
    suite = load_wtb_suite(out)[0]
    assert suite_quality(suite, drops=made.outcome.drops).model_dump(exclude={"semantic", "semantic_note"}) == figures
    counter = QualityCounter()
    for record in sorted(done, key=lambda r: r["order"]):
        counter.add(Session.model_validate(record["result"]["session"]), checks=record["result"]["checks"])
    assert counter.result(drops=made.outcome.drops).model_dump(exclude={"semantic", "semantic_note"}) == figures
