"""``toolwild validate --quality`` prints the quality table without changing the exit code, and the generator's
report carries the same figures in its ``quality`` block."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from typer.testing import CliRunner

from toolwild.cli.main import app
from toolwild.cli.validate import quality_encoder
from toolwild.core.formats.wtb import load_wtb_suite, write_wtb_suite
from toolwild.core.quality import suite_quality

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core"))
from test_quality import hand_made


def run(*args: str):
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})


def test_validate_quality_prints_the_figures_and_keeps_the_exit_code(tmp_path):
    path = tmp_path / "hand.jsonl"
    write_wtb_suite(hand_made(), path)
    plain = run("validate", str(path))
    result = run("validate", str(path), "--quality")
    assert result.exit_code == plain.exit_code == 0, result.output
    assert "Quality" not in plain.output
    assert "distinct user turns" in result.output and "3 of 4 (75.0%)" in result.output
    assert "ambiguous references (checker)" in result.output and "1 in 1 task(s)" in result.output
    assert "Coreferential Reference" in result.output and "1 of 2 (50.0%)" in result.output
    # the example behind the ambiguity figure is shown, with where it is
    assert "s0 task 1" in result.output and "the same units as just now" in result.output


def test_generated_report_has_the_quality_block_validate_shows(tmp_path):
    out = tmp_path / "inv.jsonl"
    made = run("synth", "sessions", "--env", "inventory", "--n", "8", "--out", str(out), "--no-verify")
    assert made.exit_code == 0, made.output
    assert "distinct user turns" in made.output
    report = json.loads((tmp_path / "inv.jsonl.report.json").read_text())
    block = report["quality"]
    assert block["sessions"] == 8 and block["tasks"] == 32
    assert block["ambiguity"]["generation_drops"] == report["drops"].get("ambiguous_reference", 0)

    # read back and measured again with the same encoder (--encoder auto), the figures are the same
    suite, _ = load_wtb_suite(out)
    encoder, missing = quality_encoder("auto")
    again = suite_quality(suite, drops=report["drops"], encoder=encoder, encoder_missing=missing)
    assert again.model_dump(mode="json") == block
    assert (block["semantic"] is None) != (block["semantic_note"] is None)  # a figure, or why there is none

    turns = block["user_turns"]
    shown = f"{turns['distinct']:,} of {turns['count']:,} ({turns['share']:.1%})"
    checked = run("validate", str(out), "--quality", "--no-oracle-check")
    assert checked.exit_code == 0, checked.output
    assert shown in checked.output and shown in made.output
