"""``toolwild compare``: paired bootstrap differences of known size, refusals, and a self-contained page.

The runs are scripted on the fixture suite (5 sessions of 4 tasks), so every difference is known in advance and
its bootstrap interval can be worked out by hand: a resample draws 5 sessions, and the task difference of a
resample is -(failed tasks drawn) / 20.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from toolwild.cli.main import app
from toolwild.core.formats.wtb import load_wtb_suite
from toolwild.errors import ConfigError, DataError
from toolwild.eval.agents.oracle import oracle_steps
from toolwild.eval.compare import compare_runs, task_anchor
from toolwild.report.compare_html import render_compare_html

FIXTURE = Path(__file__).resolve().parents[2].parent / "shared/fixtures/wildtoolbench/sessions_0_4.reconstructed.jsonl"
pytestmark = pytest.mark.skipif(not FIXTURE.exists(), reason=f"fixture not found: {FIXTURE}")
SESSIONS = [f"wild_tool_bench_{i}" for i in range(5)]
RESAMPLES = 2000


def _gold_behaviour() -> dict:
    out: dict = {}
    for s in load_wtb_suite(FIXTURE)[0].sessions:
        out[s.id] = []
        for t in s.tasks:
            steps = []
            for st in oracle_steps(t):
                if st.tool_calls:
                    steps.append(
                        {"tool_calls": [{"name": c.name, "arguments": json.loads(c.arguments)} for c in st.tool_calls]}
                    )
                else:
                    steps.append({"content": st.content})
            out[s.id].append(steps)
    return out


def _failing_first_task(sessions: list[str]) -> dict:
    """The gold path, except that the first task of each named session gets a text reply where a call is due."""
    behaviour = _gold_behaviour()
    for sid in sessions:
        behaviour[sid][0] = [{"content": "I cannot look that up."}]
    return behaviour


def _eval(root: Path, name: str, behaviour: dict, *extra: str) -> Path:
    path = root / f"{name}.json"
    path.write_text(json.dumps(behaviour))
    args = ["eval", "--suite", str(FIXTURE), "--agent", f"scripted:{path}", "--runs-dir", str(root), "--name", name]
    result = CliRunner().invoke(app, [*args, *extra])
    assert result.exit_code == 0, result.output
    return root / name


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("compare")
    return {
        "gold": _eval(root, "gold", _gold_behaviour()),
        "gold2": _eval(root, "gold2", _gold_behaviour()),
        "fail13": _eval(root, "fail13", _failing_first_task(["wild_tool_bench_1", "wild_tool_bench_3"])),
        "failall": _eval(root, "failall", _failing_first_task(SESSIONS)),
    }


def _pair(comparison, metric: str):
    return next(p for p in comparison.pairs if p.metric == metric)


def test_leaderboard_equals_each_runs_metrics_json(runs):
    comparison = compare_runs([runs["gold"], runs["fail13"]], resamples=RESAMPLES)
    for summary, run in zip(comparison.runs, (runs["gold"], runs["fail13"]), strict=True):
        metrics = json.loads((run / "metrics.json").read_text())
        assert summary.figures["task"].value == metrics["total_info"]["task"]["accuracy"]
        assert summary.figures["session"].value == metrics["total_info"]["session"]["accuracy"]
        assert summary.figures["optimal"].value == metrics["optimal_info"]["Total"]["accuracy"]
        assert summary.figures["progress"].value == metrics["progress_info"]["Total"]["rate"]
        assert summary.verdicts_source == "verdicts.jsonl"
    fail = comparison.runs[1].figures["task"]
    assert (fail.part, fail.whole, fail.value) == (18, 20, 0.9)
    assert fail.low is not None and fail.high is not None and fail.low < 0.9 <= fail.high


def test_two_failed_sessions_give_the_expected_paired_interval(runs):
    """B fails one task in sessions 1 and 3. A resample draws K of those two sessions, K ~ Binomial(5, 0.4): the
    task difference is -K/20 and the session difference -K/5. P(K=0) = 7.8% > 2.5%, so the upper end is 0; P(K=5)
    = 1% < 2.5% < P(K>=4) = 8.7%, so the lower end is K=4: -0.2 and -0.8. The interval does not exclude zero."""
    comparison = compare_runs([runs["gold"], runs["fail13"]], resamples=RESAMPLES, seed=7)
    task, session = _pair(comparison, "task"), _pair(comparison, "session")
    assert task.point == pytest.approx(-0.1) and session.point == pytest.approx(-0.4)
    assert (task.low, task.high) == (pytest.approx(-0.2), pytest.approx(0.0))
    assert (session.low, session.high) == (pytest.approx(-0.8), pytest.approx(0.0))
    assert not task.excludes_zero and not session.excludes_zero
    assert task.sessions == 5


def test_a_difference_in_every_session_excludes_zero(runs):
    """B fails the first task of every session: every resample gives exactly -5/20 and -1, so does the interval."""
    comparison = compare_runs([runs["gold"], runs["failall"]], resamples=RESAMPLES)
    task, session = _pair(comparison, "task"), _pair(comparison, "session")
    assert (task.point, task.low, task.high) == (pytest.approx(-0.25),) * 3
    assert (session.point, session.low, session.high) == (pytest.approx(-1.0),) * 3
    assert task.excludes_zero and session.excludes_zero


def test_the_order_of_the_runs_sets_the_sign(runs):
    comparison = compare_runs([runs["failall"], runs["gold"]], resamples=RESAMPLES)
    assert _pair(comparison, "task").point == pytest.approx(0.25)
    assert {f.correct_in for f in comparison.flips} == {"b"}


def test_identical_runs_differ_by_zero_with_no_flips(runs):
    comparison = compare_runs([runs["gold"], runs["gold2"]], resamples=RESAMPLES)
    for pair in comparison.pairs:
        assert (pair.point, pair.low, pair.high, pair.excludes_zero) == (0.0, 0.0, 0.0, False)
    assert comparison.flips == []
    assert all(d == 0.0 for row in comparison.categories for d in row.deltas)


def test_flips_and_category_deltas(runs):
    comparison = compare_runs([runs["gold"], runs["fail13"], runs["failall"]], resamples=200)
    assert len(comparison.pairs) == 6  # 3 pairs x (task, session)
    first_pair = [(f.session_id, f.task_index, f.correct_in) for f in comparison.flips if (f.a, f.b) == (0, 1)]
    assert first_pair == [("wild_tool_bench_1", 0, "a"), ("wild_tool_bench_3", 0, "a")]
    between_failing = {f.session_id for f in comparison.flips if (f.a, f.b) == (1, 2)}
    assert between_failing == {"wild_tool_bench_0", "wild_tool_bench_2", "wild_tool_bench_4"}
    assert all("expected a call of" in f.reason for f in comparison.flips)
    position = {r.category: r for r in comparison.categories if r.group == "position"}
    assert position["task 1"].deltas == [0.0, pytest.approx(-0.4), pytest.approx(-1.0)]
    assert position["task 2"].deltas == [0.0, 0.0, 0.0]
    assert {r.group for r in comparison.categories} == {"task type", "subtype", "position", "transitions"}


def test_a_run_without_verdicts_file_is_rescored_the_same(runs, tmp_path):
    copy = tmp_path / "fail13-old"
    shutil.copytree(runs["fail13"], copy)
    (copy / "verdicts.jsonl").unlink()
    before = compare_runs([runs["gold"], runs["fail13"]], resamples=200)
    after = compare_runs([runs["gold"], copy], resamples=200)
    assert after.runs[1].verdicts_source == "re-scored"
    assert after.pairs == before.pairs and after.flips == before.flips


def test_runs_on_different_suites_are_refused(runs, tmp_path):
    three = _eval(tmp_path, "three", _gold_behaviour(), "--limit", "3")
    with pytest.raises(ConfigError, match="different suites") as err:
        compare_runs([runs["gold"], three], resamples=10)
    digests = [json.loads((r / "config.json").read_text())["suite_digest"][:12] for r in (runs["gold"], three)]
    assert all(d in str(err.value) for d in digests)


@pytest.mark.parametrize(("field", "value"), [("mode", "strict"), ("history", "free")])
def test_runs_in_different_modes_are_refused(runs, tmp_path, field, value):
    other = tmp_path / "other"
    shutil.copytree(runs["gold"], other)
    config = json.loads((other / "config.json").read_text())
    config[field] = value
    (other / "config.json").write_text(json.dumps(config))
    (other / "verdicts.jsonl").unlink()  # re-scored in the other mode: a consistent run of that mode
    with pytest.raises(ConfigError, match=f"--{field} wtb in gold, {value} in other"):
        compare_runs([runs["gold"], other], resamples=10)


def test_a_broken_verdicts_line_names_file_and_line(runs, tmp_path):
    copy = tmp_path / "broken"
    shutil.copytree(runs["gold"], copy)
    lines = (copy / "verdicts.jsonl").read_text().splitlines()
    lines[2] = '{"session_id": "x"}'
    (copy / "verdicts.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError) as err:
        compare_runs([runs["gold"], copy], resamples=10)
    assert err.value.line == 3 and err.value.file is not None and err.value.file.endswith("verdicts.jsonl")


def test_one_run_is_refused(runs):
    with pytest.raises(ConfigError, match="at least two"):
        compare_runs([runs["gold"]])


def _without_plotly(page: str) -> str:
    """The page with the inlined plotly library cut out (the library's source quotes URLs it never loads)."""
    start = page.index("<script>")
    end = page.index("</script>", start)
    assert "plotly.js" in page[start:end][:2000].lower()
    return page[:start] + page[end:]


def test_cli_prints_the_tables_and_writes_a_self_contained_page(runs, tmp_path):
    out = tmp_path / "pages" / "compare.html"
    args = ["compare", str(runs["gold"]), str(runs["fail13"]), "-o", str(out), "--resamples", "500", "--seed", "1"]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    assert max(len(line) for line in result.output.splitlines()) <= 80
    text = " ".join(result.output.split())
    assert "fail13 − gold │ task acc. │ -10.0 │ [-20.0, 0.0] │ no" in text
    assert "2 task(s) flip" in text
    page = out.read_text()
    assert page.count("<script>") - page.count("Plotly.newPlot") == 1  # the library inlined once
    own = _without_plotly(page)
    assert re.search(r"<script[^>]*\ssrc|<link|<img|@import", page) is None  # nothing is fetched
    assert re.search(r"https?://", own) is None
    for sid in ("wild_tool_bench_1", "wild_tool_bench_3"):
        rel = Path(os.path.relpath(runs["fail13"] / "report.html", out.parent)).as_posix()
        href = f"{rel}#{task_anchor(sid, 0)}"
        assert f'href="{href}"' in own
        assert (out.parent / href.split("#")[0]).resolve() == (runs["fail13"] / "report.html").resolve()
    assert page.count("class=flip") == 2


def test_labels_and_reasons_are_escaped(runs):
    comparison = compare_runs([runs["gold"], runs["fail13"]], resamples=10)
    comparison.runs[1].label = "<script>alert(1)</script>"
    comparison.flips[0].reason = "</script><b>x"
    page = _without_plotly(render_compare_html(comparison, Path.cwd()))
    assert "<script>alert(1)" not in page and "</script><b>x" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_cli_refusal_is_one_clear_line(runs, tmp_path):
    result = CliRunner().invoke(app, ["compare", str(runs["gold"]), str(tmp_path / "nope"), "-o", str(tmp_path / "c")])
    assert result.exit_code == 1
    text = " ".join(result.output.split())
    assert "nope is not a run directory (no such folder)" in text and "Traceback" not in text
    assert not (tmp_path / "c").exists()
