"""Teacher-forced history (spec §2): the gold trajectory of earlier tasks, as the published harness builds it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolwild.core.formats.wtb import load_wtb_suite
from toolwild.eval.session import gold_history

FIXTURE = Path(__file__).resolve().parents[2].parent / "shared/fixtures/wildtoolbench/sessions_0_4.reconstructed.jsonl"
pytestmark = pytest.mark.skipif(not FIXTURE.exists(), reason=f"fixture not found: {FIXTURE}")


def test_history_of_the_last_task_of_session_0():
    session = load_wtb_suite(FIXTURE)[0].sessions[0]
    messages = gold_history(session, 3)
    assert messages[0] == {"role": "system", "content": "Current Date: 2024-07-11 22:11:58 Thursday"}
    roles = [m["role"] for m in messages]
    # task 0: user, call, tool, answer; task 1 the same; task 2 (A -> B -> (C, C) -> P): user, 3 call turns, 4 tools
    assert roles == ["system"] + ["user", "assistant", "tool", "assistant"] * 2 + [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]
    batch = messages[-4]
    assert [c["function"]["name"] for c in batch["tool_calls"]] == ["getShowDetail", "getShowDetail"]
    assert json.loads(batch["tool_calls"][0]["function"]["arguments"]) == {"activity_id": "show123"}
    assert [m["tool_call_id"] for m in messages[-3:-1]] == [c["id"] for c in batch["tool_calls"]]
    # tool results are JSON-encoded, as the published harness does
    assert json.loads(messages[3]["content"]) == session.tasks[0].gold[0].observation
    assert messages[4]["content"] == session.tasks[0].gold[1].observation


def test_history_with_clarifications():
    session = load_wtb_suite(FIXTURE)[0].sessions[1]
    messages = gold_history(session, 4)
    ask = session.tasks[3].gold
    tail = messages[-7:]
    assert [m["role"] for m in tail[:4]] == ["assistant", "user", "assistant", "user"]
    assert tail[1]["content"] == ask[0].user_input and tail[3]["content"] == ask[1].user_input
    assert tail[0]["content"] == ask[0].observation
