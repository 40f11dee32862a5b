"""Training export: gold trajectories as OpenAI-chat, ShareGPT and Parquet conversations, role order checked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from toolwild.cli.main import app
from toolwild.core.formats.wtb import load_wtb_suite
from toolwild.errors import DataError
from toolwild.export.training import (
    ExportFormat,
    check_alternation,
    openai_chat_record,
    sharegpt_record,
    write_training_export,
)

FIXTURE = Path(__file__).resolve().parents[2].parent / "shared/fixtures/wildtoolbench/sessions_0_4.reconstructed.jsonl"
pytestmark = pytest.mark.skipif(not FIXTURE.exists(), reason=f"fixture not found: {FIXTURE}")


@pytest.fixture(scope="module")
def suite():
    return load_wtb_suite(FIXTURE)[0]


def test_openai_chat_holds_every_gold_step_in_order(suite):
    for session in suite.sessions:
        record = openai_chat_record(session)
        messages = record["messages"]
        assert messages[0] == {"role": "system", "content": session.system_prompt}
        assert [
            m["content"]
            for m in messages
            if m["role"] == "user" and m["content"] in {t.utterance for t in session.tasks}
        ] == [t.utterance for t in session.tasks]
        calls = [c["function"]["name"] for m in messages if m["role"] == "assistant" for c in m.get("tool_calls", [])]
        assert sorted(calls) == sorted(n.name for t in session.tasks for n in t.call_nodes)
        tool_results = [json.loads(m["content"]) for m in messages if m["role"] == "tool"]
        assert len(tool_results) == len(calls)
        assert {t["function"]["name"] for t in record["tools"]} == {t.name for t in session.tools}
        assert messages[-1]["role"] == "assistant" and "tool_calls" not in messages[-1]


def test_sharegpt_alternates_and_groups_parallel_calls(suite):
    parallel = 0
    for session in suite.sessions:
        turns = sharegpt_record(session)["conversations"]
        for k, turn in enumerate(turns):
            assert turn["from"] in (("human", "observation") if k % 2 == 0 else ("gpt", "function_call"))
        for k, turn in enumerate(turns):
            if turn["from"] == "function_call":
                value = json.loads(turn["value"])
                assert turns[k + 1]["from"] == "observation"
                if isinstance(value, list):
                    parallel += 1
                    assert len(json.loads(turns[k + 1]["value"])) == len(value)
        assert turns[-1]["from"] == "gpt"
    assert parallel >= 1  # the fixture has parallel tasks


@pytest.mark.parametrize(
    ("messages", "problem"),
    [
        ([{"role": "user", "content": "hi"}], "first message must be the system"),
        (
            [{"role": "system", "content": ""}, {"role": "user", "content": "a"}, {"role": "user", "content": "b"}],
            "right after a user message",
        ),
        (
            [
                {"role": "system", "content": ""},
                {"role": "user", "content": "a"},
                {"role": "assistant", "content": "", "tool_calls": [{"id": "1", "function": {}}]},
                {"role": "assistant", "content": "x"},
            ],
            "left unanswered",
        ),
        (
            [
                {"role": "system", "content": ""},
                {"role": "user", "content": "a"},
                {"role": "tool", "tool_call_id": "9", "content": "{}"},
            ],
            "answers no pending call",
        ),
        (
            [
                {"role": "system", "content": ""},
                {"role": "user", "content": "a"},
                {"role": "assistant", "content": "", "tool_calls": [{"id": "1", "function": {}}]},
                {"role": "tool", "tool_call_id": "1", "content": "{}"},
                {"role": "user", "content": "b"},
            ],
            "right after a tool result",
        ),
        ([{"role": "system", "content": ""}, {"role": "user", "content": "a"}], "must end with an assistant"),
    ],
)
def test_broken_role_orders_are_rejected(messages, problem):
    with pytest.raises(DataError, match=problem):
        check_alternation(messages)


def test_cli_writes_each_format(tmp_path, suite):
    for fmt in ExportFormat:
        if fmt is ExportFormat.PARQUET:
            pytest.importorskip("pyarrow")
        out = tmp_path / f"out.{fmt.value}"
        result = CliRunner().invoke(app, ["export", str(FIXTURE), "--out", str(out), "--format", fmt.value])
        assert result.exit_code == 0, result.output
        assert "5 conversations" in result.output
    lines = (tmp_path / "out.openai-chat").read_text().splitlines()
    assert [json.loads(line)["id"] for line in lines] == [s.id for s in suite.sessions]
    import pyarrow.parquet as pq

    table = pq.read_table(tmp_path / "out.parquet")
    assert table.column_names == ["id", "messages", "tools"] and table.num_rows == 5
    first = json.loads(table.column("messages")[0].as_py())
    assert first == json.loads(lines[0])["messages"]


def test_write_is_atomic_and_names_a_bad_session(tmp_path, suite):
    broken = suite.model_copy(deep=True)
    broken.sessions[1].tasks[0].gold = []  # no final answer: the conversation would end on a user turn
    out = tmp_path / "x.jsonl"
    with pytest.raises(DataError) as info:
        write_training_export(broken, out, ExportFormat.OPENAI_CHAT)
    assert info.value.field == broken.sessions[1].id
    assert list(tmp_path.iterdir()) == []
