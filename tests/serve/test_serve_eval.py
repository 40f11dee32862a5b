"""End to end, as a new user would: ``toolwild model serve``, then ``toolwild eval --model openai:NAME --base-url``
with default options (issue 20, item 6).

The served model is a scripted one with one slot (like the embedded model's single llama.cpp context) that plays
the gold path of the fixture; eval talks to it over a real socket with the real ``openai`` SDK, at its default
concurrency of 8.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fake_openai import serve_in_thread
from gold_responder import gold_responder
from typer.testing import CliRunner

from toolwild.cli.main import app
from toolwild.core.formats.wtb import load_wtb_suite
from toolwild.llm.backends.scripted import ScriptedBackend
from toolwild.llm.client import LLM
from toolwild.llm.types import ChatRequest
from toolwild.serve.openai_server import create_app

FIXTURE = Path(__file__).resolve().parents[2].parent / "shared/fixtures/wildtoolbench/sessions_0_4.reconstructed.jsonl"


def _gold_model(delay_s: float) -> ScriptedBackend:
    """A one-slot model answering every fixture conversation with its gold step (anything else: a short text)."""
    respond = gold_responder(load_wtb_suite(FIXTURE)[0])

    def answer(request: ChatRequest) -> dict[str, Any]:
        try:
            reply = respond({"messages": request.messages})
        except (KeyError, ValueError):  # not a fixture conversation (the preflight's one-token request)
            return {"content": "ok"}
        calls = [{"name": c.name, "arguments": c.arguments, "id": c.id} for c in reply.tool_calls]
        return {"content": reply.text, "tool_calls": calls} if calls else {"content": reply.text}

    return ScriptedBackend(answer, delay_s=delay_s, max_connections=1)


def test_model_serve_then_eval_with_default_options_finishes_every_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not FIXTURE.is_file():
        pytest.fail(f"fixture missing: {FIXTURE}")  # never a silent skip (issue 20, item 4)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    model = _gold_model(delay_s=0.02)
    server = create_app(LLM(model), model_name="smollm2")
    with serve_in_thread(server) as base_url:
        result = CliRunner().invoke(
            app,
            [
                "eval",
                "--suite",
                str(FIXTURE),
                "--model",
                "openai:smollm2",
                "--base-url",
                base_url,
                "--runs-dir",
                str(tmp_path),
                "--name",
                "served",
            ],
            env={"COLUMNS": "200", "NO_COLOR": "1"},
        )
    assert result.exit_code == 0, result.output
    lines = (tmp_path / "served" / "trajectories.jsonl").read_text(encoding="utf-8").splitlines()
    trajectories = [json.loads(line) for line in lines]
    suite, _ = load_wtb_suite(FIXTURE)
    assert sorted(t["session_id"] for t in trajectories) == sorted(s.id for s in suite.sessions)
    assert all(t["status"] == "ok" for t in trajectories), [(t["session_id"], t.get("error")) for t in trajectories]
    # the gold path was played through the server: every task of every session is correct
    metrics = json.loads((tmp_path / "served" / "metrics.json").read_text(encoding="utf-8"))
    assert metrics["total_info"]["task"] == {"accuracy": 1.0, "correct_count": 20, "total_count": 20}
    admission = server.state.admission
    assert admission.admitted == 0
    assert admission.peak == 1  # eval kept to the server's one slot (learnt at its preflight): nothing queued there
    assert model.finished == len(model.requests)  # nothing was abandoned half-way
