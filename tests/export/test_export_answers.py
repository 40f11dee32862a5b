"""Exported training conversations of a generated suite never show the user raw JSON in an assistant turn."""

from __future__ import annotations

import asyncio
import json

import pytest

from toolwild.core.answers import is_raw_json
from toolwild.export.training import ExportFormat, write_training_export
from toolwild.synth.sessions import SessionsConfig, load_handle, synth_sessions


@pytest.fixture(scope="module")
def inventory():
    config = SessionsConfig(n_sessions=64, like_published=True)
    return asyncio.run(synth_sessions([load_handle("inventory")], config)).suite


def _lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_openai_chat_assistant_turns_are_never_raw_json(inventory, tmp_path):
    path = tmp_path / "chat.jsonl"
    assert write_training_export(inventory, path, ExportFormat.OPENAI_CHAT) == len(inventory.sessions)
    said = [
        m["content"]
        for record in _lines(path)
        for m in record["messages"]
        if m["role"] == "assistant" and isinstance(m.get("content"), str) and m["content"].strip()
    ]
    assert len(said) >= len(inventory.sessions) * 4
    assert [text for text in said if is_raw_json(text)] == []


def test_sharegpt_assistant_turns_are_never_raw_json(inventory, tmp_path):
    path = tmp_path / "sharegpt.jsonl"
    write_training_export(inventory, path, ExportFormat.SHAREGPT)
    said = [turn["value"] for record in _lines(path) for turn in record["conversations"] if turn["from"] == "gpt"]
    assert said and [text for text in said if is_raw_json(text)] == []
