"""``report.html``: one self-contained file whose figures are the run's metrics.json and whose viewer holds every
task with its verdict; the same report from a published WildToolBench result file."""

from __future__ import annotations

import importlib.util
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from toolwild.cli.main import app
from toolwild.core.formats.wtb import load_wtb_suite
from toolwild.core.verdict import SessionVerdict
from toolwild.eval.scoring.dag import GoldDag
from toolwild.report.html import _json_block

FIXTURE = Path(__file__).resolve().parents[2].parent / "shared/fixtures/wildtoolbench/sessions_0_4.reconstructed.jsonl"
pytestmark = pytest.mark.skipif(not FIXTURE.exists(), reason=f"fixture not found: {FIXTURE}")


def _show_cases() -> Any:
    """tests/cli/test_show.py, whose scripted behaviour fails the fixture in every way a scripted agent can."""
    spec = importlib.util.spec_from_file_location("show_cases", Path(__file__).parents[1] / "cli" / "test_show.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def make_failing_run(root: Path, *extra: str) -> Path:
    """An eval run of the fixture suite with the failing scripted behaviour; returns its run directory."""
    behaviour = root / "behaviour.json"
    behaviour.write_text(json.dumps(_show_cases()._failing_behaviour(load_wtb_suite(FIXTURE)[0])))
    args = ["eval", "--suite", str(FIXTURE), "--agent", f"scripted:{behaviour}", "--runs-dir", str(root)]
    result = CliRunner().invoke(app, [*args, "--name", "r", *extra])
    assert result.exit_code == 0, result.output
    return root / "r"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("report")
    return make_failing_run(root, "--export-wtb-result", str(root / "published.jsonl"))


class _Page(HTMLParser):
    """The page's tags: every src/href, the scripts (with or without src) and the JSON blocks by id."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.scripts: list[dict[str, str | None]] = []
        self.blocks: dict[str, str] = {}
        self._block: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        self.links += [v or "" for k, v in attrs if k in ("src", "href")]
        if tag == "script":
            self.scripts.append(found)
            self._block = found.get("id") if found.get("type") == "application/json" else None

    def handle_data(self, data: str) -> None:
        if self._block is not None:
            self.blocks[self._block] = self.blocks.get(self._block, "") + data

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._block = None


def _page(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text(encoding="utf-8"))
    return page


def _blocks(path: Path) -> dict[str, Any]:
    return {k: json.loads(v) for k, v in _page(path).blocks.items()}


def _verdicts(run_dir: Path) -> list[SessionVerdict]:
    return [SessionVerdict.model_validate_json(line) for line in (run_dir / "verdicts.jsonl").read_text().splitlines()]


def test_eval_writes_one_self_contained_report(run_dir):
    from plotly.offline import get_plotlyjs

    path = run_dir / "report.html"
    page = _page(path)
    assert not [link for link in page.links if re.match(r"\s*(https?:)?//", link, re.IGNORECASE)]
    assert all("src" not in script for script in page.scripts)  # everything inlined, nothing fetched
    assert set(page.blocks) == {"meta", "headline", "figures", "metrics", "tasks"}
    assert path.read_text(encoding="utf-8").count(get_plotlyjs()[:2000]) == 1  # plotly.js inlined once


def _at(metrics: dict[str, Any], source: str) -> dict[str, Any]:
    node: Any = metrics
    for part in source.split("."):
        node = node[part]
    return node


def test_figures_equal_metrics_json(run_dir):
    metrics = json.loads((run_dir / "metrics.json").read_text())
    blocks = _blocks(run_dir / "report.html")
    figures = {f["key"]: f for f in blocks["figures"]}
    assert set(figures) == {"task_type", "position", "subtype", "transitions", "error_taxonomy", "optimal_progress"}
    for key in ("task_type", "position", "subtype"):
        source = _at(metrics, figures[key]["source"])
        assert figures[key]["series"] == source  # every category, every number
        bars = figures[key]["spec"]["data"][0]
        assert bars["customdata"] == [v["accuracy"] if v["total_count"] else None for v in source.values()]
    ext = metrics["extensions"]
    transitions = figures["transitions"]
    assert transitions["series"] == {k: v["session"] for k, v in ext["transition_info"].items()}
    # 0 transitions: 0/1; 1: none; 2: 1/4 -> the drop from 0 to 2 is -25 points (a rise)
    assert transitions["derived"]["drop"] == {"0": None, "1": None, "2": -0.25, "3": None}
    assert figures["error_taxonomy"]["series"] == ext["error_taxonomy"]
    stacked = {trace["name"]: sum(trace["y"]) for trace in figures["error_taxonomy"]["spec"]["data"]}
    assert stacked == {k: v["count"] for k, v in ext["error_taxonomy"].items() if v["count"]}
    for key, leaf in figures["optimal_progress"]["series"].items():
        assert leaf["optimal"] == metrics["optimal_info"].get(key)
        assert leaf["progress"] == metrics["progress_info"].get(key)
    assert "n/a" in figures["task_type"]["spec"]["data"][0]["text"]  # Sequential Multi-Tool has no task here
    headline = {h["key"]: h for h in blocks["headline"]}
    for key in ("task", "session"):
        leaf, ci = metrics["total_info"][key], ext["confidence_intervals"][key]
        assert (headline[key]["value"], headline[key]["correct"], headline[key]["total"]) == (
            leaf["accuracy"],
            leaf["correct_count"],
            leaf["total_count"],
        )
        assert (headline[key]["low"], headline[key]["high"]) == (ci["low"], ci["high"])
    assert headline["optimal"]["value"] == metrics["optimal_info"]["Total"]["accuracy"]
    assert headline["progress"]["value"] == metrics["progress_info"]["Total"]["rate"]
    for key in ("optimal", "progress"):  # every headline figure with cases has its interval, the scorer's own
        ci = ext["confidence_intervals"][key]
        assert (headline[key]["low"], headline[key]["high"]) == (ci["low"], ci["high"])
        assert ci["low"] <= headline[key]["value"] <= ci["high"]
    assert blocks["meta"]["mode"] == "wtb" and blocks["meta"]["history"] == "wtb"


def test_viewer_holds_every_task_with_its_verdict(run_dir):
    tasks = _blocks(run_dir / "report.html")["tasks"]
    verdicts = _verdicts(run_dir)
    expected = [(v.session_id, t.task_index, t.label, t.error_class) for v in verdicts for t in v.tasks]
    got = [(t["s"], t["i"], t["label"], t["cls"]) for t in tasks]
    assert got == [(s, i, label, cls.value if cls else None) for s, i, label, cls in expected]
    assert sum(t["label"] == "error" for t in tasks) == 7
    by_key = {(t["s"], t["i"]): t for t in tasks}
    suite = load_wtb_suite(FIXTURE)[0]
    for verdict in verdicts:
        for task in verdict.tasks:
            record = by_key[(verdict.session_id, task.task_index)]
            if task.label == "error":
                assert record["explanation"] and record["explanation"] == task.explanation
            gold = suite.session(verdict.session_id).tasks[task.task_index]
            assert record["gold"]["paths"][0] == [list(b) for b in GoldDag.from_task(gold).first_optimal_path()]
    # the text reply where a call was due: the failing step says so in words, with what was expected
    refusal = by_key[("wild_tool_bench_2", 0)]
    assert refusal["steps"][0]["verdict"]["ok"] is False
    assert refusal["steps"][0]["verdict"]["expected"] == ["getBudgets"]
    assert "got a text reply" in refusal["explanation"]


def test_report_command_rewrites_the_same_report(run_dir, tmp_path):
    out = tmp_path / "again.html"
    result = CliRunner().invoke(app, ["report", str(run_dir), "-o", str(out)])
    assert result.exit_code == 0, result.output
    fresh, written = _blocks(out), _blocks(run_dir / "report.html")
    for key in ("headline", "figures", "metrics", "tasks"):
        assert fresh[key] == written[key], key


def test_report_of_a_published_result_file(run_dir, tmp_path):
    published = run_dir.parent / "published.jsonl"
    out = tmp_path / "published.html"
    result = CliRunner().invoke(app, ["report", "--suite", str(FIXTURE), str(published), "-o", str(out)])
    assert result.exit_code == 0, result.output
    scored = tmp_path / "m.json"
    result = CliRunner().invoke(app, ["score", "--suite", str(FIXTURE), str(published), "-o", str(scored)])
    blocks = _blocks(out)
    assert blocks["metrics"] == json.loads(scored.read_text())  # the numbers of `toolwild score`
    assert blocks["metrics"]["total_info"] == json.loads((run_dir / "metrics.json").read_text())["total_info"]
    assert sum(t["label"] == "error" for t in blocks["tasks"]) == 7
    assert blocks["meta"]["agent"] == "published results"


def test_result_file_without_suite_is_refused(run_dir):
    result = CliRunner().invoke(app, ["report", str(run_dir.parent / "published.jsonl")])
    assert result.exit_code != 0
    assert "--suite is required" in " ".join(result.output.split())


def test_model_text_cannot_close_its_data_block():
    block = _json_block("tasks", {"content": "</script><script>alert(1)</script><!--"})
    assert block.count("</script>") == 1 and "<!--" not in block.split(">", 1)[1]
    assert json.loads(block.split(">", 1)[1].rsplit("<", 1)[0]) == {"content": "</script><script>alert(1)</script><!--"}
