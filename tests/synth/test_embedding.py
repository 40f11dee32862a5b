"""The token-embedding encoder (the fallback of semantic dedup), and the semantic dedup it drives."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from toolwild.cli.main import app

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("gguf") is None or importlib.util.find_spec("llama_cpp") is None,
    reason="the local extra (llama-cpp-python, gguf) is not installed",
)
TARBALL = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures" / "synthtools" / "tool_content.tar.gz"


@pytest.fixture(scope="module")
def embedder():
    """Fitted (IDF, common component) on the SynthTools release, as dedup fits it on its corpus."""
    from toolwild.core.formats.synthtools import load_synthtools_dir
    from toolwild.synth.dedup import embedding_text
    from toolwild.synth.embedders.token import TokenEmbedder

    if not TARBALL.exists():
        pytest.skip("shared fixtures not present")
    embedder = TokenEmbedder()
    texts = [embedding_text(t) for t in load_synthtools_dir(TARBALL).tools]
    return embedder.fit(embedder.tokenize_many(texts))


def test_vectors_are_unit_and_rank_shared_wording_first(embedder):
    corpus = [
        "Calculate the refund amount for returned items",
        "Calculate the refund amount for a returned order",
        "Book a flight to Paris for two passengers",
        "Get the weather forecast for a city",
        "Search patient records by date of birth",
        "Translate a document into Spanish",
    ]
    v = embedder.embed(corpus)
    assert v.shape == (6, embedder.dimensions) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    sims = v @ v.T
    assert sims[0, 1] == max(sims[0, j] for j in range(1, 6))  # the near-duplicate is the nearest
    assert sims[0, 1] > 0.85 > sims[0, 2]
    again = embedder.embed(corpus)
    assert np.array_equal(v, again)  # deterministic


@pytest.mark.skipif(not TARBALL.exists(), reason="shared fixtures not present")
def test_cli_semantic_pass_on_the_release(tmp_path):
    result = CliRunner().invoke(
        app,
        [
            "synth",
            "dedup",
            str(TARBALL),
            "--encoder",
            "token",
            "--report",
            str(tmp_path / "d"),
            "--out",
            str(tmp_path / "k"),
        ],
    )
    assert result.exit_code == 0, result.output
    dropped = [json.loads(line) for line in (tmp_path / "d").read_text().splitlines()]
    kept = (tmp_path / "k").read_text().splitlines()
    reasons = {d["reason"] for d in dropped}
    assert {"same-name-in-field", "similar-in-field", "similar-globally"} <= reasons
    assert sum(d["reason"] == "same-name-in-field" for d in dropped) == 443
    assert len(kept) + len(dropped) == 5900
    assert all(d["similarity"] >= 0.85 for d in dropped if d["reason"].startswith("similar"))
    kept_keys = {json.loads(line)["extra"]["source_id"] for line in kept}
    in_field = {d["key"] for d in dropped if d["reason"] == "similar-in-field"}
    for d in dropped:  # each drop names a tool that was kept when that pass ran
        if d["reason"] == "similar-globally":
            assert d["duplicate_of"] in kept_keys, d
        elif d["reason"] == "similar-in-field":
            assert d["duplicate_of"] not in in_field, d
    assert "~9%" in result.output
    assert "token: " in result.output and "fallback" not in result.output  # asked for by name: no fallback note
    assert all(d["encoder"] == "token" for d in dropped if d["reason"].startswith("similar"))
