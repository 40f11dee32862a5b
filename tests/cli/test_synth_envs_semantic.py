"""`synth envs`'s semantic dedup pass: on by default with the sentence encoder (no minimum run size), named in the
table, summary.json and every drop; skipped with a note on the token fallback; off with a note when no sentence
encoder is installed; part of the run's identity, so a resume with another encoder or threshold is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from toolwild.core.formats.environment import load_environment
from toolwild.llm.backends.scripted import ScriptedBackend
from toolwild.llm.types import ChatRequest
from toolwild.synth.embedding import sentence_encoder_missing

OBJ = [{"name": "order_id", "type": "string", "description": "Id of the order.", "items": "string"}]
RET = [{"name": "status", "type": "string", "description": "Where it is.", "items": "string"}]
ENV_FILE = "ecommerce__order_tracking.env.json"
KEY = "ecommerce__order_tracking__"


def _tool(name: str, description: str, effect: str = "read") -> dict:
    return {
        "name": name,
        "description": description,
        "parameters": OBJ,
        "returns": RET,
        "preconditions": ["the order exists"],
        "postconditions": ["the order is cancelled" if effect == "write" else "nothing changes"],
        "error_modes": ["not found: unknown order id"],
        "effect": effect,
        "consumes": ["order"],
        "produces": [],
    }


TOOLS = [
    _tool("get_order_status", "Looks up an order by its id and returns its shipping status."),
    # the same tool, reworded and reordered under another name: the exact pass keeps it (cosine 0.94 with MiniLM)
    _tool("lookup_order_status", "Returns the shipping status of an order, looked up by its id."),
    _tool("cancel_order", "Cancels an open order so that it is never shipped.", effect="write"),
]


def designer(request: ChatRequest) -> str:
    """One field, one subdomain, one family of the three tools above."""
    title = request.response_format.get("title")
    if title == "SubdomainList":
        sub = {"name": "Order Tracking", "description": "Where orders are.", "stakeholders": ["buyer"]}
        return json.dumps({"subdomains": [{**sub, "entities": ["order"]}]})
    if title == "FamilyList":
        return json.dumps({"families": [{"name": "Status checks", "description": "Check an order."}]})
    if title == "SeedData":
        return json.dumps({"entities": {"order": [{"id": "O-1", "status": "open"}]}})
    assert title == "ToolDraftList", title
    return json.dumps({"tools": TOOLS})


ARGS = ["synth", "envs", "--fields", "ecommerce", "--per-field", "1", "--families", "1", "--tools", "3"]


@pytest.fixture
def envs(monkeypatch):
    import toolwild.llm.registry as registry
    from toolwild.cli.main import app

    monkeypatch.setattr(registry, "create_backend", lambda spec, **kw: ScriptedBackend(designer))

    def run(out: Path, *extra: str):
        return CliRunner().invoke(app, [*ARGS, "--out", str(out), *extra], env={"COLUMNS": "200"})

    return run


needs_minilm = pytest.mark.skipif(
    sentence_encoder_missing() is not None, reason=f"no sentence encoder: {sentence_encoder_missing()}"
)


def _summary(out: Path) -> dict:
    return json.loads((out / "summary.json").read_text())


def _kept(out: Path) -> list[str]:
    return [t.name for t in load_environment(out / ENV_FILE).tools]


@needs_minilm
def test_by_default_a_reworded_near_duplicate_is_dropped_naming_the_kept_tool_and_the_encoder(tmp_path, envs):
    out = tmp_path / "run"
    result = envs(out)
    assert result.exit_code == 0, result.output
    assert _kept(out) == ["get_order_status", "cancel_order"]
    (drop,) = json.loads((out / "drops.json").read_text())
    assert drop["tool"] == f"{KEY}lookup_order_status" and drop["check"] == "dedup"
    (reason,) = drop["reasons"]
    assert reason.startswith(f"similar-in-field of {KEY}get_order_status (cosine 0.9") and reason.endswith(", minilm)")
    summary = _summary(out)
    semantic = summary["semantic_dedup"]
    assert semantic["encoder"]["name"] == "minilm" and semantic["encoder"]["kind"] == "sentence"
    assert "all-MiniLM-L6-v2" in semantic["encoder"]["model"] and semantic["encoder"]["note"] is None
    assert (semantic["tau"], semantic["tools"], semantic["dropped"]) == (0.85, 3, 1)
    assert summary["tools_dropped"] == {"dedup": 1} and summary["notes"] == []
    table = " ".join(result.output.split())
    assert "semantic dedup │ 1 of 3 tools dropped at cosine >= 0.85" in table and "minilm: all-MiniLM-L6-v2" in table


def test_exact_only_keeps_the_near_duplicate_and_says_the_pass_is_off(tmp_path, envs, monkeypatch):
    import toolwild.synth.embedding as embedding

    monkeypatch.setattr(embedding, "load_embedder", lambda name="auto": pytest.fail("an encoder was loaded"))
    out = tmp_path / "run"
    result = envs(out, "--exact-only")
    assert result.exit_code == 0, result.output
    assert _kept(out) == ["get_order_status", "lookup_order_status", "cancel_order"]
    summary = _summary(out)
    assert summary["semantic_dedup"] is None and summary["notes"] == ["semantic dedup off (--exact-only)"]
    both = envs(tmp_path / "both", "--exact-only", "--tau", "0.9")
    assert both.exit_code == 1 and "--tau 0.9 asks for the semantic pass and --exact-only" in both.output
    assert not (tmp_path / "both").exists()


def test_on_the_token_encoder_a_small_run_skips_the_pass_with_a_note(tmp_path, envs, monkeypatch):
    """The token encoder is fitted on the corpus it dedups: 3 tools are no corpus. It is not even loaded."""
    import toolwild.synth.embedding as embedding

    monkeypatch.setattr(embedding, "load_embedder", lambda name="auto": pytest.fail("an encoder was loaded"))
    out = tmp_path / "run"
    result = envs(out, "--encoder", "token")
    assert result.exit_code == 0, result.output
    assert _kept(out) == ["get_order_status", "lookup_order_status", "cancel_order"]
    summary = _summary(out)
    assert summary["semantic_dedup"] is None
    (note,) = summary["notes"]
    assert note.startswith("semantic dedup skipped: 3 tools, and the token encoder learns its weights")
    assert "needs at least 200" in note and "pip install 'toolwild[dedup]'" in note
    assert "semantic dedup skipped: 3 tools" in " ".join(result.output.split())


WHY = "the sentence encoder needs onnxruntime: pip install 'toolwild[dedup]'"


def test_without_a_sentence_encoder_the_pass_is_off_by_default_and_the_note_says_how_to_run_it(
    tmp_path, envs, monkeypatch
):
    import toolwild.synth.embedding as embedding

    monkeypatch.setattr(embedding, "sentence_encoder_missing", lambda: WHY)
    monkeypatch.setattr(embedding, "load_embedder", lambda name="auto": pytest.fail("an encoder was loaded"))
    out = tmp_path / "run"
    result = envs(out)
    assert result.exit_code == 0, result.output
    assert _kept(out) == ["get_order_status", "lookup_order_status", "cancel_order"]
    summary = _summary(out)
    assert summary["semantic_dedup"] is None
    assert summary["notes"] == [
        f"semantic dedup off: {WHY}; --tau 0.85 runs it on the token-embedding fallback (lexical)"
    ]
    assert "semantic dedup off: the sentence encoder needs onnxruntime" in " ".join(result.output.split())
    assert "toolwild[dedup]" in result.output  # the note is printed as text, not read as rich markup
    header = json.loads((out / "progress.jsonl").read_text().splitlines()[0])
    assert header["identity"]["tau"] is None and "encoder" not in header["identity"]
    # an explicit --tau runs it all the same, on the fallback: skipped here (3 tools), saying both why and what
    forced = envs(tmp_path / "forced", "--tau", "0.85")
    assert forced.exit_code == 0, forced.output
    notes = _summary(tmp_path / "forced")["notes"]
    assert notes[0] == f"fallback: no sentence encoder installed ({WHY})"
    assert notes[1].startswith("semantic dedup skipped: 3 tools, and the token encoder")
    # and with no encoder at all, an explicit --tau is refused before any model call
    no_token = "the token-embedding fallback needs llama_cpp: pip install 'toolwild[local]'"
    monkeypatch.setattr(embedding, "token_encoder_missing", lambda: no_token)
    none = envs(tmp_path / "none", "--tau", "0.85")
    message = " ".join(none.output.split())
    assert none.exit_code == 1 and f"semantic dedup needs an encoder ({WHY}; {no_token})" in message
    assert not (tmp_path / "none").exists()


@needs_minilm
def test_a_resume_with_another_encoder_or_threshold_is_refused_naming_what_differs(tmp_path, envs):
    out = tmp_path / "run"
    assert envs(out).exit_code == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    for extra, differs in (
        (["--encoder", "token"], "encoder: 'minilm' in the log, 'token' now"),
        (["--tau", "0.9"], "tau: 0.85 in the log, 0.9 now"),
        (["--exact-only"], "tau: 0.85 in the log, None now"),
    ):
        refused = envs(out, "--resume", *extra)
        message = " ".join(refused.output.split())
        assert refused.exit_code == 1 and "belongs to another run" in message and differs in message, message
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    # `auto` resolves to the same encoder as before: the resume is the same run
    again = envs(out, "--resume", "--encoder", "minilm")
    assert again.exit_code == 0, again.output
    assert _kept(out) == ["get_order_status", "cancel_order"]


def test_an_unknown_encoder_is_refused_before_anything_is_written(tmp_path, envs):
    result = envs(tmp_path / "run", "--encoder", "bert")
    assert result.exit_code == 1 and "--encoder 'bert': choose one of auto, minilm, e5, token" in result.output
    assert not (tmp_path / "run").exists()
