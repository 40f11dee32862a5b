"""``--perturb`` on the command line: ``validate`` checks a perturbed copy, ``synth sessions`` writes one beside the
suite, and ``compare`` puts a run of the copy against a run of the suite (the robustness rows)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_openai import FakeOpenAI, Reply, serve_in_thread
from typer.testing import CliRunner

from toolwild.cli.main import app
from toolwild.core.formats.wtb import load_wtb_suite
from toolwild.core.perturb import suite_perturbation
from toolwild.eval.agents.oracle import oracle_steps
from toolwild.run.loop import run_async
from toolwild.synth.paraphrase import write_perturbed_suite

FIXTURE = Path(__file__).resolve().parents[2].parent / "shared/fixtures/wildtoolbench/sessions_0_4.reconstructed.jsonl"
needs_fixture = pytest.mark.skipif(not FIXTURE.exists(), reason=f"fixture not found: {FIXTURE}")


def run(*args: str):
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "100"})


@needs_fixture
def test_validate_checks_a_perturbed_copy():
    result = run("validate", str(FIXTURE), "--perturb", "distractors:2,rename,terse,shuffle", "--perturb-seed", "4")
    assert result.exit_code == 0, result.output
    assert "perturbed: distractors:2,rename,terse:8,shuffle (seed 4)" in result.output
    assert "suite is valid" in result.output


@needs_fixture
@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("scramble", "unknown kind 'scramble' (kinds: distractors:N, terse[:N], rename, shuffle, paraphrase)"),
        ("paraphrase", "needs a model to reword the utterances: give --perturb-model M"),
    ],
)
def test_validate_refuses_a_bad_perturb_value_in_one_line(value, says):
    result = run("validate", str(FIXTURE), "--perturb", value)
    assert result.exit_code == 1
    assert says in " ".join(result.output.split()) and "Traceback" not in result.output


def test_synth_sessions_writes_a_perturbed_copy_of_the_suite_it_made(tmp_path):
    out = tmp_path / "inv.jsonl"
    args = ("synth", "sessions", "--env", "inventory", "--n", "4", "-o", str(out), "--perturb", "distractors:2,rename")
    result = run(*args)
    assert result.exit_code == 0, result.output
    copy = tmp_path / "inv.perturbed.jsonl"
    suite, perturbed = load_wtb_suite(out)[0], load_wtb_suite(copy)[0]
    record = suite_perturbation(perturbed)
    assert record.base == suite.fingerprint() and record.kinds == ["distractors:2", "rename"]
    assert [s.id for s in perturbed.sessions] == [s.id for s in suite.sessions]
    report = json.loads((tmp_path / "inv.jsonl.report.json").read_text())
    assert report["perturbed"]["suite"] == str(copy) and report["perturbed"]["problems"] == []
    assert run("validate", str(copy)).exit_code == 0
    first = copy.read_bytes()
    again = run(*args, "--perturb-out", str(tmp_path / "again.jsonl"))
    assert again.exit_code == 0, again.output
    assert (tmp_path / "again.jsonl").read_bytes() == first  # the same seed, the same copy


def test_synth_sessions_refuses_paraphrase_without_a_model(tmp_path):
    out = tmp_path / "inv.jsonl"
    result = run("synth", "sessions", "--env", "inventory", "--n", "2", "-o", str(out), "--perturb", "paraphrase")
    assert result.exit_code == 1 and "needs a model" in result.output
    assert not out.exists()


def _behaviour(path: Path, failing: tuple[str, ...] = ()) -> dict:
    """The gold path of a suite as a behaviour file, with a text reply where the first task of ``failing`` calls."""
    out: dict = {}
    for session in load_wtb_suite(path)[0].sessions:
        out[session.id] = [
            [
                {"tool_calls": [{"name": c.name, "arguments": json.loads(c.arguments)} for c in st.tool_calls]}
                if st.tool_calls
                else {"content": st.content}
                for st in oracle_steps(task)
            ]
            for task in session.tasks
        ]
        if session.id in failing:
            out[session.id][0] = [{"content": "I cannot look that up."}]
    return out


def _eval(root: Path, name: str, suite: Path, behaviour: dict) -> Path:
    script = root / f"{name}.json"
    script.write_text(json.dumps(behaviour))
    result = run(
        "eval", "--suite", str(suite), "--agent", f"scripted:{script}", "--runs-dir", str(root), "--name", name
    )
    assert result.exit_code == 0, result.output
    return root / name


@needs_fixture
def test_compare_shows_each_perturbation_against_the_unperturbed_run(tmp_path):
    copy = tmp_path / "renamed.jsonl"
    run_async(write_perturbed_suite(FIXTURE, copy, "rename,terse"))
    base = _eval(tmp_path, "base", FIXTURE, _behaviour(FIXTURE))
    renamed = _eval(tmp_path, "renamed", copy, _behaviour(copy, ("wild_tool_bench_1", "wild_tool_bench_3")))
    result = run("compare", str(base), str(renamed), "-o", str(tmp_path / "compare.html"), "--resamples", "500")
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "robustness: perturbed − unperturbed" in text
    robustness = text[text.index("robustness: perturbed") :]
    assert "rename,terse:8" in robustness and "(seed 0)" in robustness and "100.0% → 90.0%" in robustness
    assert "-10.0" in robustness and "-40.0" in robustness and "renamed vs base" in robustness
    page = (tmp_path / "compare.html").read_text()
    assert "<h2>Robustness</h2>" in page and "perturbed: rename,terse:8 (seed 0)" in page
    # two runs of perturbed copies of one suite, and no unperturbed run: compared, with no delta to give
    again = _eval(tmp_path, "renamed2", copy, _behaviour(copy))
    alone = run("compare", str(renamed), str(again), "-o", str(tmp_path / "c2.html"), "--resamples", "10")
    assert alone.exit_code == 0 and "no unperturbed run given" in alone.output


@needs_fixture
def test_compare_still_refuses_a_perturbation_of_another_suite(tmp_path):
    made = run("synth", "sessions", "--env", "inventory", "--n", "2", "-o", str(tmp_path / "inv.jsonl"))
    assert made.exit_code == 0, made.output
    run_async(write_perturbed_suite(tmp_path / "inv.jsonl", tmp_path / "inv.p.jsonl", "shuffle"))
    base = _eval(tmp_path, "base", FIXTURE, _behaviour(FIXTURE))
    other = _eval(tmp_path, "other", tmp_path / "inv.p.jsonl", _behaviour(tmp_path / "inv.p.jsonl"))
    result = run("compare", str(base), str(other), "-o", str(tmp_path / "c.html"))
    assert result.exit_code == 1
    assert "different suites" in result.output and "a perturbation of" in " ".join(result.output.split())


@needs_fixture
def test_eval_perturb_runs_a_perturbed_copy_kept_in_the_run(tmp_path):
    args = ("eval", "--suite", str(FIXTURE), "--agent", "oracle", "--runs-dir", str(tmp_path), "--name", "p")
    result = run(*args, "--perturb", "distractors:2,rename,terse,shuffle", "--limit", "3")
    assert result.exit_code == 0, result.output
    kept = load_wtb_suite(tmp_path / "p" / "suite.jsonl")[0]
    record = suite_perturbation(kept)
    whole = load_wtb_suite(FIXTURE)[0]
    assert record.base == whole.model_copy(update={"sessions": whole.sessions[:3]}).fingerprint()
    assert "perturbed: distractors:2,rename,terse:8,shuffle (seed 0)" in " ".join(result.output.split())
    metrics = json.loads((tmp_path / "p" / "metrics.json").read_text())
    assert metrics["total_info"]["task"] == {"accuracy": 1.0, "correct_count": 12, "total_count": 12}
    # the same sessions unperturbed, then the robustness row: the oracle loses nothing
    three = run(*args[:-1], "l3", "--limit", "3")
    assert three.exit_code == 0, three.output
    compared = run("compare", str(tmp_path / "l3"), str(tmp_path / "p"), "-o", str(tmp_path / "c.html"))
    assert compared.exit_code == 0, compared.output
    assert "robustness" in compared.output and "100.0% → 100.0%" in compared.output


def _paraphraser(body: dict) -> Reply:
    """An OpenAI-compatible paraphraser: rewords by a lead-in, but gives a withheld value away where there is one
    (that rewording breaks the rules, so the original is kept and counted); any other request gets an unusable
    reply (the utterance writer then keeps its template)."""
    messages = body["messages"]
    if not messages[0]["content"].startswith("You reword"):
        return Reply(text="not json")
    brief = json.loads(messages[1]["content"])
    hidden = brief["do not say"]
    text = brief["reword"] + (f" It is {hidden[0]}." if hidden else " Thanks a lot.")
    return Reply(text=json.dumps({"utterance": text}))


def test_paraphrase_through_an_openai_compatible_server_counts_its_fallbacks(tmp_path):
    fake = FakeOpenAI(_paraphraser)
    out = tmp_path / "inv.jsonl"
    with serve_in_thread(fake) as base_url:
        args = ("synth", "sessions", "--env", "inventory", "--n", "4", "-o", str(out), "--base-url", base_url)
        result = run(*args, "--model", "openai:p", "--perturb", "paraphrase,rename")
        assert result.exit_code == 0, result.output
        report = json.loads((tmp_path / "inv.jsonl.report.json").read_text())["perturbed"]
        counts = report["paraphrase"]
        assert counts["utterances"] == 16 and counts["fallbacks"] > 0 and counts["reworded"] > 0
        assert "reworded / kept (fallback)" in result.output
        base, copy = load_wtb_suite(out)[0], load_wtb_suite(tmp_path / "inv.perturbed.jsonl")[0]
        for before, after in zip(base.sessions, copy.sessions, strict=True):
            kept = set(report["paraphrase"]["by_session"][before.id][1])
            for i, (old, new) in enumerate(zip(before.tasks, after.tasks, strict=True)):
                assert (new.utterance == old.utterance) == (i in kept)
                assert i in kept or new.utterance.endswith("Thanks a lot.")
        checked = run(
            "validate", str(out), "--perturb", "paraphrase", "--perturb-model", "openai:p", "--base-url", base_url
        )
        assert checked.exit_code == 0, checked.output
        said = " ".join(checked.output.split())
        assert f"{counts['reworded']} of 16 utterance(s) reworded, {counts['fallbacks']} kept the original" in said
