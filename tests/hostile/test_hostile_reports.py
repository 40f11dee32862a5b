"""``report``, ``score`` and ``compare`` never give a quiet wrong answer, and the report's charts and links read
right (issue #32, as a new user met them on a fresh clone).

Two suites are generated with the same session ids (``a/S.jsonl`` and ``b/S.jsonl``: the ids come from the file
name, the tasks from the seed), and the oracle runs suite a. From that run: a half-written copy (two sessions, a
torn third line, no metrics), a copy that fails some tasks (so the comparison has flips), and the same run's
trajectories without task digests, as toolwild wrote them before it recorded them. The browser tests drive Debian's
chromium through playwright, like tests/report/test_report_browser.py, at a fixed viewport.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from toolwild.cli.main import app
from toolwild.eval.compare import task_anchor

SESSIONS = 6
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]


def run(*args: str) -> Any:
    """The CLI in-process, wide enough that no message is wrapped (the assertions flatten whitespace anyway)."""
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})


def flat(text: str) -> str:
    """Whitespace collapsed: a message reads the same at any terminal width."""
    return " ".join(text.split())


def no_traceback(result: Any) -> None:
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> dict[str, Path]:
    """Suites a and b (same session ids, other tasks) and the oracle's finished run of suite a."""
    root = tmp_path_factory.mktemp("hostile_reports")
    for name, seed in (("a", "0"), ("b", "1")):
        (root / name).mkdir()
        made = run(
            "suite", "ledger", "--out", str(root / name / "S.jsonl"), "--sessions", str(SESSIONS), "--seed", seed
        )
        assert made.exit_code == 0, made.output
    done = run(
        "eval", "--suite", str(root / "a/S.jsonl"), "--agent", "oracle", "--all", "--runs-dir", str(root), "--name", "A"
    )
    assert done.exit_code == 0, done.output
    return {"root": root, "a": root / "a/S.jsonl", "b": root / "b/S.jsonl", "run": root / "A"}


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines(keepends=True)


def _copy_run(world: dict[str, Path], name: str) -> Path:
    copy = world["root"] / name
    if copy.exists():
        shutil.rmtree(copy)
    shutil.copytree(world["run"], copy)
    return copy


def _half_written(world: dict[str, Path]) -> Path:
    """The run as a kill leaves it: two finished sessions, the third line torn, no metrics, verdicts or report."""
    half = _copy_run(world, "half")
    for name in ("metrics.json", "verdicts.jsonl", "report.html"):
        (half / name).unlink()
    lines = _lines(half / "trajectories.jsonl")
    (half / "trajectories.jsonl").write_text("".join(lines[:2]) + lines[2][:150], encoding="utf-8")
    return half


def _session_ids(path: Path) -> list[str]:
    return [json.loads(line)["id"] for line in path.read_text(encoding="utf-8").splitlines()]


class _Blocks(HTMLParser):
    """The JSON blocks of a report page, by id."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks: dict[str, str] = {}
        self._id: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        self._id = found.get("id") if tag == "script" and found.get("type") == "application/json" else None

    def handle_data(self, data: str) -> None:
        if self._id is not None:
            self.blocks[self._id] = self.blocks.get(self._id, "") + data

    def handle_endtag(self, tag: str) -> None:
        self._id = None


def _blocks(page: Path) -> dict[str, Any]:
    parser = _Blocks()
    parser.feed(page.read_text(encoding="utf-8"))
    return {k: json.loads(v) for k, v in parser.blocks.items()}


# ---------- report on a half-written run ----------


def test_report_on_a_half_written_run_names_the_missing_sessions_and_marks_its_figures_incomplete(world):
    half = _half_written(world)
    ids = _session_ids(world["a"])
    finished = [json.loads(line)["session_id"] for line in _lines(half / "trajectories.jsonl")[:2]]
    missing = [s for s in ids if s not in finished]

    result = run("report", str(half))

    no_traceback(result)
    assert result.exit_code == 3, result.output  # the page is written, but its figures are not the run's yet
    text = flat(result.output)
    assert f"{half / 'trajectories.jsonl'}, line 3" in text and "cut short" in text  # the torn line, located
    assert f"is unfinished: {len(missing)} of {SESSIONS} session(s) have no result" in text
    assert missing[0] in text and f"toolwild eval --resume {half}" in text
    blocks = _blocks(half / "report.html")
    meta = blocks["meta"]
    assert meta["figures_complete"] is False
    assert meta["missing_sessions"] == missing
    assert any("is unfinished" in reason for reason in meta["incomplete"])
    assert any("line 3" in note for note in meta["notes"])
    session = next(h for h in blocks["headline"] if h["key"] == "session")
    assert session["total"] == SESSIONS  # over the whole suite, the missing ones counted as failed (as score does)
    assert session["correct"] == len(finished)
    assert {t["s"] for t in blocks["tasks"]} == set(ids)


def test_score_of_a_half_written_run_says_so_and_does_not_exit_0(world):
    half = _half_written(world)
    result = run("score", str(half))
    no_traceback(result)
    assert result.exit_code == 3, result.output
    text = flat(result.output)
    assert "is unfinished" in text and "line 3" in text


# ---------- score against another suite with the same session ids ----------


def test_score_refuses_trajectories_scored_against_another_suite_with_the_same_ids(world):
    trajectories = world["run"] / "trajectories.jsonl"
    assert _session_ids(world["a"]) == _session_ids(world["b"])  # the trap: same ids, other tasks

    result = run("score", "--suite", str(world["b"]), str(trajectories))

    no_traceback(result)
    assert result.exit_code == 1, result.output
    text = flat(result.output)
    first = json.loads(_lines(trajectories)[0])["session_id"]
    assert f"{trajectories}, line 1" in text and "tasks[0].task_digest" in text
    assert f"session {first!r}" in text and "another suite" in text
    # the same file against its own suite still scores, in full
    own = run("score", "--suite", str(world["a"]), str(trajectories))
    assert own.exit_code == 0, own.output
    assert "100.00%" in own.output


def test_trajectories_from_before_task_digests_are_checked_through_their_run_folder(world):
    legacy = _copy_run(world, "legacy")
    path = legacy / "trajectories.jsonl"
    records = [json.loads(line) for line in _lines(path)]
    for record in records:
        for task in record["tasks"]:
            task.pop("task_digest", None)
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")

    in_run = run("score", "--suite", str(world["b"]), str(path))
    no_traceback(in_run)
    assert in_run.exit_code == 1, in_run.output
    assert f"session {records[0]['session_id']!r}, task 1" in flat(in_run.output)

    loose = world["root"] / "loose" / "trajectories.jsonl"  # out of any run folder: nothing to check it with
    loose.parent.mkdir(exist_ok=True)
    shutil.copy(path, loose)
    warned = run("score", "--suite", str(world["b"]), str(loose))
    no_traceback(warned)
    assert "matched to" in flat(warned.output) and "by session id alone" in flat(warned.output)


# ---------- compare a run with itself; a mistyped path ----------


def test_compare_refuses_a_run_compared_with_itself(world, tmp_path):
    runs = world["run"]
    link = tmp_path / "same"
    link.symlink_to(runs, target_is_directory=True)
    for args in ((str(runs), str(runs)), (str(runs), str(runs) + "/"), (str(runs), str(link))):
        result = run("compare", *args, "-o", str(tmp_path / "c.html"))
        no_traceback(result)
        assert result.exit_code == 1, (args, result.output)
        assert "given twice" in flat(result.output) and "compared with itself" in flat(result.output)
    assert not (tmp_path / "c.html").exists()


def test_compare_refuses_an_unfinished_run(world, tmp_path):
    half = _half_written(world)
    result = run("compare", str(world["run"]), str(half), "-o", str(tmp_path / "c.html"))
    no_traceback(result)
    assert result.exit_code == 1, result.output
    assert f"{half} is unfinished" in flat(result.output)


@pytest.mark.parametrize("command", ["report", "score"])
def test_a_mistyped_path_is_named_as_missing(world, tmp_path, command):
    wrong = tmp_path / "runs" / "Aa"
    result = run(command, str(wrong))
    no_traceback(result)
    assert result.exit_code == 1, result.output
    assert f"no such file or folder: {wrong}" in flat(result.output)
    assert "--suite" not in result.output


# ---------- links: the index in a link is the one the row shows ----------


def test_a_task_anchor_names_the_task_as_the_pages_number_it():
    assert task_anchor("S_1", 0) == "task=S_1/1"
    assert task_anchor("a/b#c", 3) == "task=a%2Fb%23c/4"


def _failing_copy(world: dict[str, Path]) -> Path:
    """The run with the second and fourth task of its first three sessions answered by an empty shrug."""
    worse = _copy_run(world, "worse")
    for name in ("metrics.json", "verdicts.jsonl"):
        (worse / name).unlink()
    records = [json.loads(line) for line in _lines(worse / "trajectories.jsonl")]
    for record in records[:3]:
        for task in record["tasks"][1::2]:
            task["steps"] = [{"content": "I cannot tell."}]
    (worse / "trajectories.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    assert run("score", str(worse)).exit_code == 0
    assert run("report", str(worse)).exit_code == 0
    return worse


def test_compare_html_links_a_flip_with_the_number_it_shows(world, tmp_path):
    worse = _failing_copy(world)
    out = tmp_path / "compare.html"
    assert run("compare", str(world["run"]), str(worse), "-o", str(out)).exit_code == 0
    flips = re.findall(r"<code>([^<]+)</code> task (\d+) .*?href=\"[^\"]*#task=([^/\"]+)/(\d+)\"", out.read_text())
    assert flips
    for sid, shown, linked_sid, linked in flips:
        assert (linked_sid, linked) == (sid, shown)


# ---------- in the browser: the link opens the task it names; charts leave titles and labels whole ----------


@pytest.fixture(scope="module")
def browser():
    missing = None
    if importlib.util.find_spec("playwright") is None:
        missing = "chromium not installed (playwright is missing: pip install -e '.[dev]')"
    elif not Path(CHROMIUM).exists():
        missing = "chromium not installed"
    if missing:
        if os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no"):
            pytest.fail(f"{missing}: CI must run the browser tests (make chromium installs it)")
        pytest.skip(missing)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield browser
        browser.close()


def _open(browser: Any, url: str, *, ready: str | None = "body[data-charts-ready='1']") -> Any:
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.problems = []
    page.on("pageerror", lambda e: page.problems.append(str(e)))
    page.goto(url)
    if ready:
        page.wait_for_selector(ready, timeout=30_000)
    return page


def test_a_task_link_opens_the_task_the_row_numbers_so(browser, world):
    report = world["run"] / "report.html"
    sid = _session_ids(world["a"])[1]
    page = _open(browser, report.as_uri() + f"#task={sid}/2")
    opened = page.locator("li.task.open")
    assert opened.count() == 1
    assert opened.get_attribute("data-key") == f"{sid}#1"  # the second task (index 1) ...
    assert opened.locator(".pos").inner_text().startswith("task 2/")  # ... shown as "task 2/N"
    assert opened.locator(".pos").get_attribute("href") == f"#task={sid}/2"  # its own link, the same
    page.goto(report.as_uri() + f"#task={sid}/0")  # tasks count from 1: a 0 is not silently another task
    page.wait_for_selector("#link-notice")
    assert "counted from 1" in page.locator("#link-notice").inner_text()
    assert page.problems == []
    page.close()


def _inside(inner: dict[str, float], outer: dict[str, float], slack: float = 1.0) -> bool:
    return (
        inner["x"] >= outer["x"] - slack
        and inner["y"] >= outer["y"] - slack
        and inner["x"] + inner["width"] <= outer["x"] + outer["width"] + slack
        and inner["y"] + inner["height"] <= outer["y"] + outer["height"] + slack
    )


def _overlap(a: dict[str, float], b: dict[str, float]) -> bool:
    return not (
        a["x"] + a["width"] <= b["x"]
        or b["x"] + b["width"] <= a["x"]
        or a["y"] + a["height"] <= b["y"]
        or b["y"] + b["height"] <= a["y"]
    )


def _check_charts(page: Any) -> int:
    """Hover every chart (plotly shows its mode bar then) and hold its layout to: the mode bar clear of the title,
    every axis label and tick label inside the chart. Returns how many charts were checked."""
    charts = page.locator(".js-plotly-plot")
    for k in range(charts.count()):
        chart = charts.nth(k)
        chart.scroll_into_view_if_needed()
        chart.hover(position={"x": 80, "y": 120})
        page.wait_for_timeout(150)
        name = chart.get_attribute("id")
        box = chart.locator("svg.main-svg").first.bounding_box()
        title = chart.locator(".gtitle")
        modebar = chart.locator(".modebar")
        assert modebar.count() == 1 and modebar.is_visible(), name
        if title.count():
            assert not _overlap(modebar.bounding_box(), title.bounding_box()), f"{name}: the mode bar covers the title"
        labels = chart.locator(".xtick text, .ytick text, .g-xtitle text, .g-ytitle text, .legendtext")
        for j in range(labels.count()):
            label = labels.nth(j)
            assert _inside(label.bounding_box(), box), f"{name}: {label.text_content()!r} is cut at the chart's edge"
            assert not _overlap(label.bounding_box(), modebar.bounding_box()), f"{name}: {label.text_content()!r}"
    return charts.count()


def test_report_charts_keep_the_mode_bar_off_titles_and_labels_inside(browser, world):
    worse = _failing_copy(world)
    page = _open(browser, (worse / "report.html").as_uri())
    assert _check_charts(page) == 6
    assert page.problems == []
    page.close()


def test_compare_charts_keep_the_mode_bar_off_titles_and_labels_inside(browser, world, tmp_path):
    worse = _failing_copy(world)
    out = tmp_path / "compare.html"
    assert run("compare", str(world["run"]), str(worse), "-o", str(out)).exit_code == 0
    page = _open(browser, out.as_uri(), ready=None)
    page.wait_for_selector(".js-plotly-plot svg.main-svg", timeout=30_000)
    assert _check_charts(page) == 2
    assert page.problems == []
    page.close()
