"""The report's headline and figures, taken from a run's ``Metrics`` (the numbers of the scoreboard, never recounted).

Each figure keeps the metric leaves it shows verbatim (``series``), so a test can hold the report to ``metrics.json``,
and a plotly spec built from exactly those leaves; the browser renders the spec with the inlined plotly.js. Empty
categories (no task of that kind) keep a ``null`` value and are labelled ``n/a``, never ``0%``.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from toolwild.core.verdict import ErrorClass, Metrics

__all__ = ["Figure", "HeadlineItem", "build_figures", "build_headline"]

FAMILY_ORDER = ("action", "parameter", "inference")
COLOURS = {
    "accuracy": "#3b6ea8",
    "optimal": "#3b6ea8",
    "progress": "#e08a2b",
    "drop": "#c0392b",
    "forced": "#3b6ea8",
    "free": "#e08a2b",
}
TRIAL_SERIES = (
    ("pass^k", "task", "pass^k over tasks", "#3b6ea8", "solid"),
    ("pass@k", "task", "pass@k over tasks", "#e08a2b", "solid"),
    ("pass^k", "session", "pass^k over sessions", "#3b6ea8", "dot"),
    ("pass@k", "session", "pass@k over sessions", "#e08a2b", "dot"),
)
"""The lines of the trials figure: (figure, unit, legend, colour, dash)."""


class HeadlineItem(BaseModel):
    """One headline figure: its value (None = n/a), the counts behind it and its 95% interval when computed."""

    key: str
    label: str
    value: float | None
    correct: int
    total: int
    unit: str
    """What ``total`` counts: tasks, sessions or steps (or writes)."""
    low: float | None = None
    high: float | None = None


class Figure(BaseModel):
    """A chart: the metric leaves it shows (``source`` names where they come from in metrics.json) and its spec."""

    key: str
    title: str
    source: str
    """Dotted path of the metrics.json block the numbers are copied from (``task_type_info``,
    ``extensions.transition_info``); ``series`` maps each shown category to its leaf there."""
    series: dict[str, Any] = Field(default_factory=dict)
    derived: dict[str, Any] = Field(default_factory=dict)
    """Numbers computed from ``series`` for the chart (the drop per transition), kept to be checked too."""
    spec: dict[str, Any] = Field(default_factory=dict)
    """The plotly figure (``data`` and ``layout``) as JSON."""


def _leaf_value(leaf: dict[str, Any], rate_key: str = "accuracy", total_key: str = "total_count") -> float | None:
    return float(leaf[rate_key]) if leaf.get(total_key) else None


def build_headline(metrics: Metrics) -> list[HeadlineItem]:
    """Task and session accuracy (with their bootstrap intervals), optimal path rate, progress and state checks."""
    ci = metrics.extensions.get("confidence_intervals") or {}
    items: list[HeadlineItem] = []
    for key, label, unit in (("task", "Task accuracy", "tasks"), ("session", "Session accuracy", "sessions")):
        items.append(_leaf_item(key, label, unit, metrics.total_info[key], ci))
    opt = metrics.optimal_info["Total"]
    items.append(
        HeadlineItem(
            key="optimal",
            label="Optimal path rate",
            value=_leaf_value(opt),
            correct=int(opt["correct_count"]),
            total=int(opt["total_count"]),
            unit="tasks",
            **_bounds(ci, "optimal", int(opt["total_count"])),
        )
    )
    prog = metrics.progress_info["Total"]
    items.append(
        HeadlineItem(
            key="progress",
            label="Accomplish progress",
            value=_leaf_value(prog, "rate", "total_step"),
            correct=int(prog["complete_step"]),
            total=int(prog["total_step"]),
            unit="steps",
            **_bounds(ci, "progress", int(prog["total_step"])),
        )
    )
    items.extend(_state_items(metrics.extensions.get("state_info"), ci))
    return items


def _leaf_item(key: str, label: str, unit: str, leaf: dict[str, Any], ci: dict[str, Any]) -> HeadlineItem:
    """A headline figure from a metrics leaf (``accuracy`` of ``correct_count``/``total_count``) and its interval."""
    return HeadlineItem(
        key=key,
        label=label,
        value=_leaf_value(leaf),
        correct=int(leaf["correct_count"]),
        total=int(leaf["total_count"]),
        unit=unit,
        **_bounds(ci, key, int(leaf["total_count"])),
    )


def _bounds(ci: dict[str, Any], key: str, total: int) -> dict[str, float]:
    """The bootstrap interval of a headline figure (metrics.json ``extensions.confidence_intervals``), if it has
    one and cases to rest on."""
    bounds = ci.get(key) if total else None
    return {"low": bounds["low"], "high": bounds["high"]} if bounds else {}


def _state_items(state: dict[str, Any] | None, ci: dict[str, Any]) -> list[HeadlineItem]:
    """The state checks, only where the suite has them (free-running on a stateful environment)."""
    if not state:
        return []
    items = []
    for key, label, unit in (
        ("task_state", "Expected state after task", "tasks"),
        ("final_state", "Final state (session)", "sessions"),
    ):
        items.append(_leaf_item(key, label, unit, state[key], ci))
    writes = state.get("redundant_writes") or {}
    items.append(
        HeadlineItem(
            key="redundant_writes",
            label="Redundant writes",
            value=None,
            correct=int(writes.get("writes", 0)),
            total=int(writes.get("tasks", 0)),
            unit="writes in tasks",
        )
    )
    return items


def _pct_text(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


LEGEND_ON_TOP = {"orientation": "h", "x": 0, "xanchor": "left", "y": 1.02, "yanchor": "bottom"}
"""A horizontal legend between the title and the plot: below the plot it would sit where the x axis's (rotated,
automargined) tick labels grow, and on one chart in two it did."""


def _layout(title: str, y_title: str = "accuracy", **extra: Any) -> dict[str, Any]:
    """The layout every report chart shares.

    Why each part: the mode bar (plotly's zoom and download buttons) stands vertically in a right margin kept for it,
    since across the top it covered the centred title on a half-width chart; both axes ``automargin``, so long
    category labels (``Coreferential Reference``, rotated) grow the margin instead of being cut at the chart's edge;
    the title is anchored to the top of the chart, above the legend and the plot.
    """
    legend = extra.get("legend") is not None
    layout: dict[str, Any] = {
        "title": {"text": title, "x": 0.5, "xanchor": "center", "y": 0.98, "yanchor": "top", "yref": "container"},
        "xaxis": {"automargin": True},
        "yaxis": {"title": {"text": y_title}, "tickformat": ".0%", "range": [0, 1.15], "automargin": True},
        "margin": {"l": 60, "r": MODEBAR_MARGIN, "t": 90 if legend else 55, "b": 30},
        "height": 360,
        "showlegend": False,
        "modebar": {"orientation": "v"},
    }
    layout.update(extra)
    return layout


MODEBAR_MARGIN = 44
"""Right margin (px) that holds the vertical mode bar, clear of the plot and its labels."""


def _bar(labels: list[str], values: list[float | None], counts: list[str], name: str, colour: str) -> dict[str, Any]:
    """A bar trace whose labels read ``54.5% (6/11)`` or ``n/a``; hover shows the same."""
    text = [f"{_pct_text(v)}" + (f" ({c})" if v is not None else "") for v, c in zip(values, counts, strict=True)]
    return {
        "type": "bar",
        "name": name,
        "x": labels,
        "y": [0 if v is None else v for v in values],
        "customdata": [None if v is None else v for v in values],
        "text": text,
        "textposition": "outside",
        "hovertemplate": "%{x}: %{text}<extra></extra>",
        "marker": {"color": colour},
    }


def _accuracy_figure(key: str, title: str, source: str, info: dict[str, Any], labels: dict[str, str]) -> Figure:
    series = {k: info[k] for k in labels}
    values = [_leaf_value(series[k]) for k in labels]
    counts = [f"{series[k]['correct_count']}/{series[k]['total_count']}" for k in labels]
    spec = {
        "data": [_bar(list(labels.values()), values, counts, "accuracy", COLOURS["accuracy"])],
        "layout": _layout(title),
    }
    return Figure(key=key, title=title, source=source, series=series, spec=spec)


def _drop_text(drop: float | None) -> str:
    """A drop in points as the line's label: ``−16.7 pt`` (a drop), ``+5.0 pt`` (a rise), ``0.0 pt`` (none, not the
    ``−0.0`` a float a hair off zero would print)."""
    if drop is None:
        return ""
    if abs(drop) < 5e-4:
        return "0.0 pt"
    return f"−{drop * 100:.1f} pt" if drop > 0 else f"+{-drop * 100:.1f} pt"


def _transition_figure(metrics: Metrics) -> Figure:
    """Session accuracy per transition count, with the drop (in points) from the previous non-empty count."""
    info = metrics.extensions.get("transition_info") or {}
    series = {k: info[k]["session"] for k in sorted(info, key=int)}
    values = [_leaf_value(v) for v in series.values()]
    drops: list[float | None] = []
    previous: float | None = None
    for value in values:
        drops.append(None if value is None or previous is None else previous - value)
        previous = value if value is not None else previous
    counts = [f"{v['correct_count']}/{v['total_count']}" for v in series.values()]
    labels = [f"{k} transition{'s' if k != '1' else ''}" for k in series]
    line = {
        "type": "scatter",
        "mode": "lines+markers+text",
        "name": "trend (label: drop from the previous count, in points)",
        "x": labels,
        "y": values,
        "connectgaps": True,
        "text": [_drop_text(d) for d in drops],
        "textposition": "top center",
        "textfont": {"color": COLOURS["drop"]},
        "marker": {"color": COLOURS["drop"]},
        "hovertemplate": "%{x}: %{text}<extra>drop</extra>",
    }
    bars = _bar(labels, values, counts, "session accuracy", COLOURS["accuracy"])
    # the drop labels sit on the line's points, at the bars' tops: the bars' own labels go inside the bars (white)
    # where there is a bar to hold them, so the two never print over each other; an empty count keeps n/a outside
    bars["textposition"] = ["outside" if not v else "inside" for v in values]
    bars["insidetextanchor"] = "end"
    bars["insidetextfont"] = {"color": "white"}
    title = "Session accuracy by instruction transitions"
    spec = {
        "data": [bars, line],
        "layout": _layout(
            title,
            "session accuracy",
            showlegend=True,
            legend=LEGEND_ON_TOP,
        ),
    }
    return Figure(
        key="transitions",
        title=title,
        source="extensions.transition_info.*.session",
        series=series,
        derived={"drop": dict(zip(series, drops, strict=True))},
        spec=spec,
    )


def _taxonomy_figure(metrics: Metrics) -> Figure:
    """Failed tasks by error class, stacked within the paper's families (action, parameter, inference)."""
    taxonomy = metrics.extensions.get("error_taxonomy") or {}
    series = {k: v for k, v in taxonomy.items() if k in {c.value for c in ErrorClass}}
    families = [f for f in FAMILY_ORDER if any(v["family"] == f for v in series.values())]
    data = [
        {
            "type": "bar",
            "name": name,
            "x": families,
            "y": [leaf["count"] if leaf["family"] == f else 0 for f in families],
            "hovertemplate": f"{name}: %{{y}}<extra></extra>",
        }
        for name, leaf in series.items()
        if leaf["count"]
    ]
    title = "Failed tasks by error class"
    layout = _layout(title, "failed tasks", barmode="stack", showlegend=True, legend=LEGEND_ON_TOP)
    layout["yaxis"] = {"title": {"text": "failed tasks"}, "rangemode": "tozero", "automargin": True}
    if not data:
        layout["annotations"] = [{"text": "n/a: no failed task", "showarrow": False, "font": {"size": 16}}]
    return Figure(
        key="error_taxonomy",
        title=title,
        source="extensions.error_taxonomy",
        series=series,
        spec={"data": data, "layout": layout},
    )


def _optimal_progress_figure(metrics: Metrics) -> Figure:
    """Optimal path rate and accomplish progress by task type (the published multi-tool breakdown), grouped."""
    keys = list(dict.fromkeys([*metrics.optimal_info, *metrics.progress_info]))
    series = {k: {"optimal": metrics.optimal_info.get(k), "progress": metrics.progress_info.get(k)} for k in keys}
    opt = [_leaf_value(v["optimal"]) if v["optimal"] else None for v in series.values()]
    prog = [_leaf_value(v["progress"], "rate", "total_step") if v["progress"] else None for v in series.values()]
    opt_counts = [
        f"{v['optimal']['correct_count']}/{v['optimal']['total_count']}" if v["optimal"] else ""
        for v in series.values()
    ]
    prog_counts = [
        f"{v['progress']['complete_step']}/{v['progress']['total_step']} steps" if v["progress"] else ""
        for v in series.values()
    ]
    title = "Optimal path rate and progress by task type"
    spec = {
        "data": [
            _bar(keys, opt, opt_counts, "optimal path rate", COLOURS["optimal"]),
            _bar(keys, prog, prog_counts, "accomplish progress", COLOURS["progress"]),
        ],
        "layout": _layout(title, "rate", barmode="group", showlegend=True, legend=LEGEND_ON_TOP),
    }
    return Figure(key="optimal_progress", title=title, source="optimal_info+progress_info", series=series, spec=spec)


def _trials_figure(trials: dict[str, Any]) -> Figure:
    """pass^k' and pass@k' against k' = 1..k, over tasks and over sessions, each point with its 95% interval: how
    fast reliability (pass^k) falls and coverage (pass@k) rises with more trials."""
    k = int(trials["k"])
    ks = [str(kk) for kk in range(1, k + 1)]
    ci = trials.get("confidence_intervals") or {}
    data = []
    for name, unit, legend, colour, dash in TRIAL_SERIES:
        values = [trials[name][unit].get(kk) for kk in ks]
        bounds = [(ci.get(name) or {}).get(unit, {}).get(kk) for kk in ks]
        data.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": legend,
                "x": [int(kk) for kk in ks],
                "y": values,
                "error_y": {
                    "type": "data",
                    "symmetric": False,
                    "array": [
                        b["high"] - v if b and v is not None else None for v, b in zip(values, bounds, strict=True)
                    ],
                    "arrayminus": [
                        v - b["low"] if b and v is not None else None for v, b in zip(values, bounds, strict=True)
                    ],
                },
                "text": [_pct_text(v) for v in values],
                "hovertemplate": f"{legend}, k=%{{x}}: %{{text}}<extra></extra>",
                "line": {"color": colour, "dash": dash},
            }
        )
    title = f"pass^k and pass@k over {k} trials"
    layout = _layout(title, "rate", showlegend=True, legend=LEGEND_ON_TOP)
    layout["xaxis"] = {"title": {"text": "k"}, "tickvals": [int(kk) for kk in ks], "dtick": 1, "automargin": True}
    series = {name: trials[name] for name in ("pass^k", "pass@k")}
    return Figure(
        key="trials",
        title=title,
        source="extensions.trials",
        series=series,
        derived={"intervals": {name: ci.get(name) for name in ("pass^k", "pass@k")}},
        spec={"data": data, "layout": layout},
    )


def _error_bars(leaves: list[dict[str, Any]], values: list[float | None]) -> dict[str, Any]:
    """Asymmetric error bars from leaves holding ``low`` and ``high`` (none where a value or interval is missing)."""
    pairs = list(zip(leaves, values, strict=True))
    return {
        "type": "data",
        "symmetric": False,
        "array": [leaf["high"] - v if v is not None and "high" in leaf else None for leaf, v in pairs],
        "arrayminus": [v - leaf["low"] if v is not None and "low" in leaf else None for leaf, v in pairs],
    }


def _forked_figure(forked: dict[str, Any]) -> Figure:
    """Forced against free task accuracy, overall and per instruction-transition count of the session, each with
    its 95% interval; the gap (forced minus free, in points) is each group's label: where the agent's own history
    costs it, and whether that grows with the transitions."""
    groups = {"all": forked["overall"], **forked["gap_by_transitions"]}
    labels = ["all tasks" if k == "all" else f"{k} transition{'s' if k != '1' else ''}" for k in groups]
    data = []
    for kind, legend in (("forced", "forced (gold history)"), ("free", "free (own history)")):
        leaves = [block[kind] for block in groups.values()]
        values = [_leaf_value(leaf) if leaf.get("accuracy") is not None else None for leaf in leaves]  # n/a: None
        counts = [f"{leaf['correct_count']}/{leaf['total_count']}" for leaf in leaves]
        trace = _bar(labels, values, counts, legend, COLOURS[kind])
        trace["error_y"] = _error_bars(leaves, values)
        data.append(trace)
    gaps = {k: block["gap"] for k, block in groups.items()}
    title = "Self-conditioning gap: forced minus free task accuracy"
    layout = _layout(title, "task accuracy", barmode="group", showlegend=True, legend=LEGEND_ON_TOP)
    layout["annotations"] = [
        {
            "x": label,
            "y": 1.1,
            "text": "gap n/a" if gap is None else f"gap {gap * 100:+.1f} pt",
            "showarrow": False,
        }
        for label, gap in zip(labels, gaps.values(), strict=True)
    ]
    return Figure(
        key="forked",
        title=title,
        source="extensions.forked",
        series=groups,
        derived={"gap": gaps},
        spec={"data": data, "layout": layout},
    )


def build_figures(metrics: Metrics) -> list[Figure]:
    """The paper's figures for this run, in the order the report shows them (a trial run's pass^k figure first, a
    forked run's gap figure first)."""
    positions = {k: f"task {int(k) + 1}" for k in metrics.layer_info}
    trials = metrics.extensions.get("trials")
    forked = metrics.extensions.get("forked")
    first = [_trials_figure(trials)] if trials else []
    if forked:
        first.append(_forked_figure(forked))
    return [
        *first,
        _accuracy_figure(
            "task_type",
            "Accuracy by task type",
            "task_type_info",
            metrics.task_type_info,
            {k: k for k in metrics.task_type_info},
        ),
        _accuracy_figure(
            "position", "Accuracy by position in the session", "layer_info", metrics.layer_info, positions
        ),
        _accuracy_figure(
            "subtype",
            "Accuracy by hidden-intent subtype",
            "turn_subtype_info",
            metrics.turn_subtype_info,
            {k: k for k in metrics.turn_subtype_info},
        ),
        _transition_figure(metrics),
        _taxonomy_figure(metrics),
        _optimal_progress_figure(metrics),
    ]
