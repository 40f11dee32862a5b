"""``report.html``: one self-contained page with a run's headline, the paper's figures and a trajectory viewer.

The page must open anywhere, offline and forever: plotly.js is inlined once, every chart is a JSON spec rendered in
the browser, and all data (figures, verdicts, trajectories) is embedded as JSON in ``<script type=
"application/json">`` blocks, so nothing is fetched. The viewer (vanilla JS in ``assets/viewer.js``) renders the task
list in chunks and a task's details only when opened, which keeps a 1,024-task report responsive.

The verdicts come from re-scoring the run's trajectories (as ``toolwild show`` does), and the figures from the run's
``metrics.json`` (the numbers of its scoreboard), so the report cannot disagree with the scorer.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from html import escape
from importlib.resources import files
from itertools import islice
from pathlib import Path
from typing import Any

from toolwild._version import __version__
from toolwild.core.formats.results import load_trajectories
from toolwild.core.formats.wtb import load_wtb_suite
from toolwild.core.jsonl import LoadReport
from toolwild.core.session import Session, Suite
from toolwild.core.task import ANSWER_ACTION, ASK_ACTION, Task
from toolwild.core.trajectory import Step, TaskTrajectory, Trajectory
from toolwild.core.verdict import Metrics, ScoringMode, SessionVerdict, StepVerdict, TaskVerdict
from toolwild.errors import ConfigError
from toolwild.eval.metrics.accuracy import compute_metrics
from toolwild.eval.run_config import RunConfig
from toolwild.eval.run_dir import (
    REPORT,
    check_result_file,
    load_metrics,
    load_run,
    load_run_config,
    missing_note,
    result_missing_note,
)
from toolwild.eval.scoring.dag import GoldDag, Position
from toolwild.eval.scoring.session import score_suite
from toolwild.eval.session import HistoryMode
from toolwild.report.figures import build_figures, build_headline

__all__ = [
    "RunView",
    "encode_records",
    "load_result_view",
    "load_run_view",
    "plotly_js",
    "render_report",
    "write_report",
    "write_result_report",
]

TEXT_LIMIT = 4000
"""Characters of an observation, reply or gold observation kept in the page (the rest is in the run's files)."""
MAX_PATHS = 6
"""Optimal paths listed per task (a wide parallel task has many orderings; the first few show the shape)."""


@dataclass
class RunView:
    """What a report (or ``toolwild show``) needs of a run: its sessions, trajectories and verdicts."""

    sessions: dict[str, Session]
    trajectories: dict[str, Trajectory]
    verdicts: list[SessionVerdict]
    config: RunConfig | None = None
    missing: list[str] = field(default_factory=list)
    """Sessions with no result (an unfinished run, or a result file that lacks them), in suite order: the report
    counts them as failed, as ``toolwild score`` does, and says so."""
    notes: list[str] = field(default_factory=list)
    """What the reader should know about the input (a torn last line, results that could not be checked against
    the suite), each naming its file: shown in the page and printed by ``toolwild report``."""
    encoded: dict[str, tuple[SessionVerdict, str]] = field(default_factory=dict)
    """A session's task records already encoded (:func:`encode_records`), with the verdict they were made from:
    ``eval`` encodes each session as it ends, while the run still waits on the model, so the page costs little
    after the last one. Used only for the very verdict object they were made from."""

    @classmethod
    def of(
        cls,
        suite: Suite,
        trajectories: list[Trajectory],
        verdicts: list[SessionVerdict],
        config: RunConfig | None = None,
    ) -> RunView:
        """A view of what a caller already holds (``eval`` at the end of a run: no second load or scoring)."""
        return cls(
            sessions={s.id: s for s in suite.sessions},
            trajectories={t.session_id: t for t in trajectories},
            verdicts=verdicts,
            config=config,
        )


def load_run_view(run_dir: Path, *, missing_as_failed: bool = False, trial: int = 0, fork: int = 0) -> RunView:
    """The run's sessions, trajectories and verdicts (scored again from its trajectories in its own mode), of one
    trial of a trial run or one fork of a forked run (default 0, the run's own files), with the sessions that have
    no result yet and a torn last line, if any."""
    run = load_run(run_dir, missing_as_failed=missing_as_failed, trial=trial, fork=fork)
    view = RunView.of(run.suite, run.trajectories, run.verdicts, run.config)
    view.missing = run.missing
    view.notes = [str(t) for t in run.torn]
    return view


def load_result_view(
    suite_path: Path, results: Path, *, mode: ScoringMode = ScoringMode.WTB
) -> tuple[RunView, LoadReport, LoadReport]:
    """A published WildToolBench result file (or a trajectories.jsonl) scored against its suite, as ``score`` does:
    each line is checked against the suite's session task by task, and sessions without a result count as
    failed."""
    suite, suite_report = load_wtb_suite(suite_path)
    unchecked: list[str] = []
    trajectories, result_report = load_trajectories(results, suite=suite, unchecked=unchecked)
    if not trajectories:
        raise ConfigError(f"{results}: no results to show")
    warning = check_result_file(results, suite, suite_path, unchecked)
    view = RunView.of(suite, trajectories, score_suite(suite, trajectories, mode=mode))
    view.missing = [s.id for s in suite.sessions if s.id not in view.trajectories]
    view.notes = [warning] if warning is not None else []
    return view, suite_report, result_report


def _run_metrics(run_dir: Path, view: RunView) -> Metrics:
    """The run's metrics (:func:`~toolwild.eval.run_dir.load_metrics`), named after the model its trajectories
    name, else its agent."""
    config = view.config
    assert config is not None
    name = next((t.model for t in view.trajectories.values() if t.model), None) or config.agent
    return load_metrics(run_dir, config, view.verdicts, model_name=name)


def write_report(
    run_dir: Path,
    out: Path | None = None,
    *,
    view: RunView | None = None,
    metrics: Metrics | None = None,
) -> Path:
    """Write the run's report (default ``RUN_DIR/report.html``) and return its path.

    ``eval`` passes the verdicts and metrics it has just written (``view``, ``metrics``) so the report costs no
    second scoring; ``toolwild report`` loads them from the run directory.
    """
    view = view or load_run_view(run_dir, missing_as_failed=True)
    metrics = metrics or _run_metrics(run_dir, view)
    config = view.config or load_run_config(run_dir)
    forked = config.history is HistoryMode.FORKED
    meta = {
        "title": f"{metrics.model_name} on {Path(config.suite).name}",
        "model": metrics.model_name,
        "agent": config.agent,
        "mode": config.mode.value,
        "history": config.history.value,
        "suite": config.suite,
        "source": str(run_dir),
        **({"trials": config.trials} if config.trials > 1 else {}),
        **({"forks": max(map(len, (s.tasks for s in view.sessions.values())), default=0)} if forked else {}),
    }
    if view.missing:  # an unfinished run: its figures are not the run's yet
        meta["unfinished"] = missing_note(run_dir, view.missing, len(view.sessions))
    return _write(out or run_dir / REPORT, render_report(view, metrics, meta))


def write_result_report(
    suite_path: Path,
    results: Path,
    out: Path | None = None,
    *,
    mode: ScoringMode = ScoringMode.WTB,
    view: RunView | None = None,
) -> tuple[Path, Metrics]:
    """The report of a published result file (default: ``RESULT.report.html`` beside it); ``view``: the file
    already loaded by :func:`load_result_view` (``toolwild report`` prints its notes)."""
    if view is None:
        view, _suite_report, _result_report = load_result_view(suite_path, results, mode=mode)
    name = next((t.model for t in view.trajectories.values() if t.model), None) or results.stem
    metrics = compute_metrics(view.verdicts, model_name=name, mode=mode)
    meta = {
        "title": f"{name} on {suite_path.name}",
        "model": name,
        "agent": "published results",
        "mode": mode.value,
        "history": "wtb",
        "suite": str(suite_path),
        "source": str(results),
    }
    if view.missing:  # the documented rule (they count as failed), said where the figures are shown
        meta["notes"] = [*view.notes, result_missing_note(results, view.missing, len(view.sessions))]
    path = out or results.with_name(results.stem + ".report.html")
    return _write(path, render_report(view, metrics, meta)), metrics


def _write(path: Path, html: str) -> Path:
    """Write through a temporary file, so a report being rewritten is never seen half-written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(html, encoding="utf-8")
    tmp.replace(path)
    return path


def _asset(name: str) -> str:
    return (files("toolwild.report") / "assets" / name).read_text(encoding="utf-8")


def _json_block(element_id: str, data: Any) -> str:
    """Data as a JSON script block; ``<``, ``>`` and ``&`` escaped so no text in it can close the element."""
    return _script_block(element_id, _dumps(data))


def _dumps(data: Any) -> str:
    """The page's JSON: compact, UTF-8 as it is."""
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def _script_block(element_id: str, text: str) -> str:
    """JSON text as a script block (see :func:`_json_block`)."""
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return f'<script type="application/json" id="{element_id}">{text}</script>'


def plotly_js() -> str:
    """plotly.js as plotly ships it (``plotly.offline.get_plotlyjs()``), read without importing plotly.

    Why: importing ``plotly.offline`` to read one file took longer than rendering the rest of a 1,024-task report;
    the bundle is a plain file in the package's ``package_data``, found from the package's spec without running
    its code. A plotly laid out otherwise (a zipped install) is asked the usual way.
    """
    spec = importlib.util.find_spec("plotly")
    for folder in (spec.submodule_search_locations or []) if spec is not None else []:
        bundle = Path(folder) / "package_data" / "plotly.min.js"
        if bundle.is_file():
            return bundle.read_text(encoding="utf-8")
    from plotly.offline import get_plotlyjs

    return get_plotlyjs()


def render_report(view: RunView, metrics: Metrics, meta: dict[str, Any]) -> str:
    """The whole page as a string: styles, data blocks, plotly.js and the viewer script, inlined."""
    meta = {**meta, "generated": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"), "version": __version__}
    ext = metrics.extensions
    incomplete = [] if ext.get("figures_complete", True) else ["Harness errors: the figures are incomplete."]
    if meta.get("unfinished"):  # sessions without a result count as failed (as score counts them), and are listed
        incomplete.append(meta["unfinished"])
    meta["figures_complete"] = not incomplete
    meta["incomplete"] = incomplete
    meta["missing_sessions"] = view.missing
    meta.setdefault("notes", view.notes)
    meta["excluded_sessions"] = len(ext.get("provider_error_sessions") or []) + len(
        ext.get("harness_error_sessions") or []
    )
    figures = [f.model_dump(mode="json") for f in build_figures(metrics)]
    headline = [h.model_dump(mode="json") for h in build_headline(metrics)]
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>toolwild report · {escape(meta['title'])}</title>",
            f"<style>{_asset('viewer.css')}</style>",
            "</head><body>",
            '<div id="app"><p class="loading">Loading the report…</p></div>',
            _json_block("meta", meta),
            _json_block("headline", headline),
            _json_block("figures", figures),
            _json_block("metrics", metrics.model_dump(mode="json")),
            _script_block("tasks", _tasks_json(view)),
            f"<script>{plotly_js()}</script>",
            f"<script>{_asset('viewer.js')}</script>",
            "</body></html>",
        ]
    )


def _clip(text: str | None, limit: int = TEXT_LIMIT) -> str | None:
    if text is None:
        return None
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _arguments(raw: Any) -> Any:
    """Arguments as JSON when they parse, else the model's raw text as it came (shown, never evaluated)."""
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except (ValueError, RecursionError):
            return _clip(raw, 1000)
    return raw


def _observation(value: Any) -> str:
    return _clip(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)) or ""


def optimal_paths(dag: GoldDag, limit: int = MAX_PATHS) -> list[list[list[int]]]:
    """Up to ``limit`` minimum-length paths through the gold DAG, in published order (each a list of steps)."""
    target = dag.min_length

    def walk(pos: Position, used: int) -> Iterator[list[list[int]]]:
        if dag.is_done(pos):
            if used == target:
                yield []
            return
        if used + dag.remaining_length(pos) > target:
            return
        for batch in dag.batches(pos):
            for rest in walk(batch.target, used + 1):
                yield [list(batch.nodes), *rest]

    return list(islice(walk(dag.start, 0), limit))


_Shape = tuple[tuple[int, ...], tuple[tuple[int, ...], ...], ScoringMode]


def _shape(task: Task, mode: ScoringMode) -> _Shape:
    """What the paths through a task's gold DAG depend on: which nodes share a name (the rules only ever compare
    names with each other, so each is replaced by the index of its first appearance), each node's dependencies,
    and the scoring mode."""
    first: dict[str, int] = {}
    names = tuple(first.setdefault(node.name, len(first)) for node in task.gold)
    return names, tuple(tuple(node.dependency_list) for node in task.gold), mode


@lru_cache(maxsize=4096)
def _shape_paths(shape: _Shape) -> tuple[tuple[tuple[tuple[int, ...], ...], ...], int]:
    """The optimal paths and the minimum length of every gold DAG of one shape, computed once (immutable: the
    records of many tasks share them, and JSON writes tuples as arrays).

    Why: walking the DAGs was half the time a report of 1,024 tasks took, yet a suite's tasks come in a few shapes
    (a call then an answer, two parallel calls then an answer ...), so a 256-session report walks a handful.
    """
    names, deps, mode = shape
    dag = GoldDag([str(n) for n in names], deps, mode=mode)
    paths = tuple(tuple(tuple(step) for step in path) for path in optimal_paths(dag))
    return paths, dag.min_length


def _gold(session: Session, index: int, mode: ScoringMode) -> dict[str, Any]:
    task = session.tasks[index]
    paths, shortest = _shape_paths(_shape(task, mode))
    nodes = [
        {
            "idx": node.idx,
            "name": node.name,
            "pseudo": node.name in (ASK_ACTION, ANSWER_ACTION),
            "args": node.action.arguments,
            "deps": node.dependency_list,
            "user_input": node.user_input,
            "obs": None if node.observation is None else _observation(node.observation),
        }
        for node in task.gold
    ]
    return {"nodes": nodes, "paths": paths, "min": shortest}


def _step(step: Step, judged: StepVerdict | None) -> dict[str, Any]:
    record: dict[str, Any] = {
        "content": _clip(step.content),
        "calls": [{"name": c.name, "args": _arguments(c.arguments)} for c in step.tool_calls or []],
        "obs": [_observation(o) for o in step.observations or []],
        "reply": _clip(step.user_reply),
        "parse_error": _clip(step.parse_error, 1000),
    }
    if judged is not None:
        record["verdict"] = {
            "ok": judged.name_label == "correct" and judged.arguments_label != "error",
            "name_label": judged.name_label,
            "args_label": judged.arguments_label,
            "reason": judged.error_reason,
            "explanation": judged.explanation,
            "expected": judged.expected,
            "checks": [{"name": c.name, "result": c.result} for c in judged.argument_checks],
        }
    return record


def _task_record(
    session: Session, verdict: SessionVerdict, task: TaskVerdict, record: TaskTrajectory | None
) -> dict[str, Any]:
    steps = record.steps if record is not None else []
    return {
        "s": verdict.session_id,
        "i": task.task_index,
        "n": len(session.tasks),
        "type": task.task_type.value,
        "subtype": task.subtype.value,
        "label": "excluded" if verdict.excluded else task.label,
        "cls": task.error_class.value if task.error_class is not None else None,
        "tr": verdict.transitions,
        "optimal": task.is_optimal,
        "used": task.steps_used,
        "min": task.min_length,
        "explanation": task.explanation or (task.error_reason if task.label == "error" else "") or "",
        "reason": task.error_reason,
        "failure": None if record is None or record.failure is None else record.failure.model_dump(mode="json"),
        "session_error": verdict.inference_error
        or verdict.harness_error
        or ("provider error" if verdict.provider_error else None),
        "state_match": task.state_match,
        "redundant": task.redundant_writes,
        "state_diff": None if record is None else record.state_diff,
        "user": session.tasks[task.task_index].utterance,
        "gold": _gold(session, task.task_index, verdict.mode),
        "steps": [_step(s, task.steps[k] if k < len(task.steps) else None) for k, s in enumerate(steps)],
    }


def _session_error(verdict: SessionVerdict) -> str | None:
    """Why a session has no (or only part of its) steps: its inference, the harness or the provider failed."""
    return verdict.inference_error or verdict.harness_error or ("provider error" if verdict.provider_error else None)


def encode_records(session: Session, verdict: SessionVerdict, trajectory: Trajectory | None) -> str:
    """The page's records of one session's tasks as JSON text, the records separated by commas (empty for a
    session without tasks): the task list is these texts joined, exactly as if the whole list were encoded at once.
    """
    by_index: dict[int, TaskTrajectory] = {}
    for record in trajectory.tasks if trajectory is not None else []:
        by_index.setdefault(record.task_index, record)  # the first, should a task be recorded twice
    return ",".join(
        _dumps(_task_record(session, verdict, task, by_index.get(task.task_index))) for task in verdict.tasks
    )


def _tasks_json(view: RunView) -> str:
    """The task list of the page as JSON: each session's records as encoded when it ended, or encoded now."""
    parts = []
    for verdict in view.verdicts:
        done = view.encoded.get(verdict.session_id)
        if done is not None and done[0] is verdict:
            text = done[1]
        else:
            sid = verdict.session_id
            text = encode_records(view.sessions[sid], verdict, view.trajectories.get(sid))
        if text:
            parts.append(text)
    return "[" + ",".join(parts) + "]"
