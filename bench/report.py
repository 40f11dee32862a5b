"""The HTML report at published scale: 1,024 tasks (256 sessions) opened in headless chromium.

Run: ``.venv/bin/python bench/report.py [--keep DIR]`` (about a minute). Needs Debian's chromium (``make chromium``)
and playwright (the dev extra). Makes a 256-session suite like the published one on the built-in inventory
environment, evaluates a scripted agent on it that plays the gold path except for one task in five (a text reply
where a call was due, so the report has failures to show), then prints: the time ``toolwild report`` takes to write
the page, the file size, and in chromium the time to DOMContentLoaded, to the first chunk of the task list, and to
every chart drawn, each the median of 5 loads (target: the list under 3 s).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from toolwild.core.formats.wtb import load_wtb_suite
from toolwild.eval.agents.oracle import oracle_steps

BIN = Path(sys.executable).parent
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
LOADS = 5


def _toolwild(*args: str) -> None:
    subprocess.run([str(BIN / "toolwild"), *args], check=True, stdout=subprocess.DEVNULL)


def _behaviour(suite_path: Path) -> dict:
    """The gold path, but every fifth task answered with text where a call was due (or a wrong call)."""
    out: dict = {}
    n = 0
    for session in load_wtb_suite(suite_path)[0].sessions:
        out[session.id] = []
        for task in session.tasks:
            steps = []
            for step in oracle_steps(task):
                if step.tool_calls:
                    calls = [{"name": c.name, "arguments": json.loads(c.arguments)} for c in step.tool_calls]
                    steps.append({"tool_calls": calls})
                else:
                    steps.append({"content": step.content})
            n += 1
            out[session.id].append([{"content": "I cannot do that."}] if n % 5 == 0 else steps)
    return out


def _measure(report: Path) -> dict[str, float]:
    from playwright.sync_api import sync_playwright

    runs: dict[str, list[float]] = {"dom": [], "list": [], "charts": []}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
        for _ in range(LOADS):
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(report.as_uri())
            page.wait_for_selector("body[data-charts-ready='1']", timeout=60_000)
            timing = page.evaluate(
                "() => { const n = performance.getEntriesByType('navigation')[0];"
                " return {dom: n.domContentLoadedEventEnd, list: window.toolwildReport.listRenderedAt,"
                " charts: performance.now(), rows: document.querySelectorAll('li.task').length}; }"
            )
            for key in runs:
                runs[key].append(timing[key] / 1000)
            rows = timing["rows"]
            page.close()
        browser.close()
    return {**{k: statistics.median(v) for k, v in runs.items()}, "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, help="Keep the suite and the run in this folder.")
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="report-bench-"))
    root.mkdir(parents=True, exist_ok=True)
    suite = root / "inventory.jsonl"
    if not suite.exists():
        _toolwild("synth", "sessions", "--env", "inventory", "--n", "256", "--like-published", "--out", str(suite))
    behaviour = root / "behaviour.json"
    behaviour.write_text(json.dumps(_behaviour(suite)))
    run = root / "run"
    if not (run / "metrics.json").exists():
        _toolwild(
            "eval", "--suite", str(suite), "--agent", f"scripted:{behaviour}", "--runs-dir", str(root), "--name", "run"
        )
    tasks = sum(len(s.tasks) for s in load_wtb_suite(suite)[0].sessions)
    start = time.perf_counter()
    _toolwild("report", str(run))
    write_s = time.perf_counter() - start
    report = run / "report.html"
    figures = _measure(report)
    print(f"tasks: {tasks}; report: {report} ({report.stat().st_size / 2**20:.2f} MiB)")
    print(f"toolwild report (load, re-score, write): {write_s:.2f} s")
    print(
        f"chromium, median of {LOADS} loads: DOMContentLoaded {figures['dom']:.2f} s, first list chunk rendered "
        f"{figures['list']:.2f} s ({figures['rows']} rows in the DOM), every chart drawn {figures['charts']:.2f} s"
    )
    print("target: the page usable (list rendered) in under 3 s:", "met" if figures["list"] < 3 else "NOT met")


if __name__ == "__main__":
    main()
