"""``report.html`` in a real browser: Debian's chromium, headless, driven by playwright (no browser is downloaded).

On the report of the fixture run that fails in several ways: the page loads without console errors or any request
beyond the file itself, every chart renders, filtering to "failed" shows exactly the failed tasks, and opening a
failed task shows its reason. Screenshots go to tests/report/artifacts/ (git-ignored).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from toolwild.core.verdict import SessionVerdict

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = Path(__file__).parent / "artifacts"


def _html_cases() -> Any:
    spec = importlib.util.spec_from_file_location("report_cases", Path(__file__).parent / "test_report_html.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _browser_missing() -> str | None:
    if importlib.util.find_spec("playwright") is None:
        return "chromium not installed (playwright is missing: pip install -e '.[dev]')"
    if not Path(CHROMIUM).exists():
        return "chromium not installed"
    return None


@pytest.fixture(scope="module")
def browser(run_dir):
    """Chromium, started after the run is made: playwright's sync API keeps an event loop running in this thread,
    and ``eval`` runs its own."""
    missing = _browser_missing()
    if missing:
        if os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no"):
            pytest.fail(f"{missing}: CI must run the browser tests (make chromium installs it)")
        pytest.skip(missing)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    cases = _html_cases()
    if not cases.FIXTURE.exists():
        pytest.skip(f"fixture not found: {cases.FIXTURE}")
    return cases.make_failing_run(tmp_path_factory.mktemp("browser"))


@pytest.fixture()
def page(browser, run_dir):
    """The report opened; console errors, page errors and requests other than the file itself are collected."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.problems = []  # type: ignore[attr-defined]
    page.on("console", lambda m: m.type == "error" and page.problems.append(f"console: {m.text}"))
    page.on("pageerror", lambda e: page.problems.append(f"page error: {e}"))
    page.on("request", lambda r: r.url.startswith("file:") or page.problems.append(f"request: {r.url}"))
    page.goto((run_dir / "report.html").as_uri())
    page.wait_for_selector("body[data-charts-ready='1']", timeout=30_000)
    ARTIFACTS.mkdir(exist_ok=True)
    yield page
    page.close()


def _failed(run_dir: Path) -> dict[str, str]:
    """Failed tasks (``session#index``) and their explanation, from the run's verdicts.jsonl."""
    out = {}
    for line in (run_dir / "verdicts.jsonl").read_text().splitlines():
        verdict = SessionVerdict.model_validate_json(line)
        for task in verdict.tasks:
            if task.label == "error":
                out[f"{verdict.session_id}#{task.task_index}"] = task.explanation
    return out


def test_page_loads_clean_and_every_chart_renders(page):
    page.screenshot(path=str(ARTIFACTS / "report.png"), full_page=True)
    assert page.problems == []
    charts = page.locator(".chart")
    assert charts.count() == 6
    for k in range(charts.count()):
        assert charts.nth(k).locator("svg.main-svg").count() >= 1, charts.nth(k).get_attribute("id")
    assert page.locator("#headline-cards .card").count() >= 4
    assert page.locator("li.task").count() == 20


def test_failed_filter_shows_exactly_the_failed_tasks(page, run_dir):
    page.select_option("#f-outcome", "error")
    shown = page.locator("li.task").evaluate_all("rows => rows.map(r => r.dataset.key)")
    assert sorted(shown) == sorted(_failed(run_dir))
    assert page.locator("#task-count").inner_text().startswith(f"{len(shown)} of 20")
    page.select_option("#f-outcome", "correct")
    assert page.locator("li.task").count() == 20 - len(shown)


def test_opening_a_failed_task_shows_its_reason(page, run_dir):
    page.select_option("#f-outcome", "error")
    for key, explanation in _failed(run_dir).items():
        row = page.locator(f'li.task[data-key="{key}"]')
        row.locator(".summary").click()
        assert row.locator(".detail .verdict .reason").inner_text() == explanation
        assert row.locator(".detail .gold li").count() >= 1
    page.locator('li.task[data-key="wild_tool_bench_1#0"]').scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "failed-open.png"), full_page=True)
    assert page.problems == []


def test_a_task_link_opens_that_task(browser, run_dir):
    """compare.html links a flip as report.html#task=<session id>/<n> (n from 1, as the row's "task n/N"): the
    viewer opens and shows it, whatever filter or chunk it is in."""
    key = sorted(_failed(run_dir))[-1]
    sid, index = key.split("#")
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto((run_dir / "report.html").as_uri() + f"#task={sid}/{int(index) + 1}")
    page.wait_for_selector("body[data-charts-ready='1']", timeout=30_000)
    row = page.locator(f'li.task[data-key="{key}"]')
    assert row.locator(".detail .verdict .reason").inner_text() == _failed(run_dir)[key]
    page.close()
