"""The terminal scoreboard: headline metrics as rich tables."""

from __future__ import annotations

from typing import Any

from rich.console import Console, Group
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from toolwild.core.task import TaskType, TurnSubtype
from toolwild.core.verdict import Metrics

__all__ = ["render_forked", "render_outcomes", "render_scoreboard", "render_trials"]


def _pct(x: float) -> str:
    return f"{100 * x:.2f}%"


def _rate(part: int, whole: int, rate: float) -> tuple[str, str]:
    """A figure and its count; a figure of nothing is ``n/a``, never ``0.00%`` of ``0/0``."""
    return (_pct(rate), f"{part}/{whole}") if whole else ("n/a", "0")


def _interval(bounds: dict[str, Any] | None) -> str:
    return f"[{_pct(bounds['low'])}, {_pct(bounds['high'])}]" if bounds else ""


MULTI_TOOL = "Multi-Tool"
"""The published ``task_type_info`` row that sums the three multi-tool types (a parent, not a fourth type)."""
SUBSEQUENT_TURN = "Subsequent Turn"
"""The published ``turn_subtype_info`` row of every task after the first; the hidden-intent subtypes are its parts."""
CHILDREN: dict[str, tuple[str, ...]] = {
    MULTI_TOOL: tuple(t.value for t in TaskType if t.is_multi),
    SUBSEQUENT_TURN: tuple(t.value for t in TurnSubtype if t is not TurnSubtype.FIRST),
}
"""Rows of the published breakdowns that are parts of another row, shown indented under it."""
USER_AUDIT_ROW = "User audit error rate"
"""The headline row of a run with a simulated user: how often its audit found the user failing."""
USER_CLASS = "Simulated user (audit)"
"""The error-table row of failed tasks that are the simulated user's (see ``extensions.user.audit_failed_tasks``)."""


def _leaf_row(table: Table, name: str, leaf: dict[str, Any]) -> None:
    if leaf.get("total_count", 0) == 0:
        return
    table.add_row(name, _pct(leaf["accuracy"]), f"{leaf['correct_count']}/{leaf['total_count']}")


def _section(title: str, info: dict[str, dict[str, Any]], unit: str = "tasks") -> Table:
    """A breakdown as a table, the rows that are parts of another (:data:`CHILDREN`) indented under it.

    Why: the published breakdowns hold a parent row beside its parts (``Multi-Tool`` is the sum of the parallel,
    sequential and mixed rows), and shown flat the rows of 16 tasks added up to 17. Indented, the rows at the left
    margin add up to the total, and a part always follows its parent.
    """
    table = Table(title=title, title_justify="left")
    table.add_column("", style="bold")
    table.add_column("accuracy", justify="right")
    table.add_column(unit, justify="right")
    under_parent = {child for parent, children in CHILDREN.items() if parent in info for child in children}
    for name, leaf in info.items():
        if name in under_parent:
            continue
        _leaf_row(table, name, leaf)
        for child in CHILDREN.get(name, ()):
            if child in info:
                _leaf_row(table, f"  {child}", info[child])
    return table


def _user_row(head: Table, user: dict[str, Any]) -> None:
    """The simulated user's audit beside the accuracy: a share of the agent's failures may be the user's."""
    rate = user.get("audit_error_rate")
    if rate is None:
        return
    runs, failed = user.get("audit_runs"), user.get("audit_failed_runs")
    counts = f"{failed}/{runs}" if runs is not None and failed is not None else ""
    head.add_row(USER_AUDIT_ROW, _pct(rate), counts, "sessions", _interval(user.get("audit_interval")))


def render_scoreboard(metrics: Metrics, console: Console) -> None:
    """Print the headline metrics: totals with confidence intervals, then the breakdowns and error classes."""
    ext = metrics.extensions
    user = ext.get("user") or {}
    title = f"{metrics.model_name} · mode {ext.get('mode', 'wtb')}"
    if "user" in user:
        title += f" · user {user['user']}"
    # Text: a model's name is read neither as markup nor as emoji codes
    head = Table(title=Text(title, style="table.title"), title_justify="left")
    head.add_column("metric", style="bold")
    head.add_column("value", justify="right")
    head.add_column("n", justify="right")
    head.add_column("counts", style="dim")
    head.add_column("95% CI", justify="right")
    ci = ext.get("confidence_intervals", {})
    for key, label, unit in (("task", "Task accuracy", "tasks"), ("session", "Session accuracy", "sessions")):
        leaf = metrics.total_info[key]
        bounds = ci.get(key) if leaf["total_count"] else None
        interval = f"[{_pct(bounds['low'])}, {_pct(bounds['high'])}]" if bounds else ""
        head.add_row(label, *_rate(leaf["correct_count"], leaf["total_count"], leaf["accuracy"]), unit, interval)
    _user_row(head, user)
    opt = metrics.optimal_info["Total"]
    if opt["total_count"]:
        head.add_row(
            "Optimal path rate",
            _pct(opt["accuracy"]),
            f"{opt['correct_count']}/{opt['total_count']}",
            "tasks",
            _interval(ci.get("optimal")),
        )
    prog = metrics.progress_info["Total"]
    if prog["total_step"]:
        head.add_row(
            "Accomplish progress",
            _pct(prog["rate"]),
            f"{prog['complete_step']}/{prog['total_step']}",
            "steps",
            _interval(ci.get("progress")),
        )
    state = ext.get("state_info")
    if state:
        for key, label, unit in (
            ("task_state", "Expected state after task", "tasks"),
            ("final_state", "Final state (session)", "sessions"),
        ):
            leaf = state[key]
            if leaf["total_count"]:
                counts = f"{leaf['correct_count']}/{leaf['total_count']}"
                head.add_row(label, _pct(leaf["accuracy"]), counts, unit, _interval(ci.get(key)))
        writes = state["redundant_writes"]
        head.add_row("Redundant writes", str(writes["writes"]), str(writes["tasks"]), "tasks", "")
    console.print(head)

    transitions = {f"{k} transitions": v["session"] for k, v in ext.get("transition_info", {}).items()}
    console.print(
        Group(
            _section("By task type", metrics.task_type_info),
            _section("By position", {f"task {k}": v for k, v in metrics.layer_info.items()}),
            _section("By turn subtype", metrics.turn_subtype_info),
            _section("Sessions by instruction transitions", transitions, unit="sessions"),
        )
    )
    _render_errors(ext, console)
    render_trials(metrics, console)
    render_forked(metrics, console)
    render_outcomes(metrics, console)


def _render_errors(ext: dict[str, Any], console: Console) -> None:
    """Failed tasks by error class; with a simulated user, the failures that are the user's on a row of their own.

    Why: the error classes judge the agent's steps, so a task the simulated user ended at the agent's question was
    filed as the agent's Early Termination. The run's user audit says where the user fails
    (``extensions.user.audit_failed_tasks``); those failures are taken out of the agent's classes and shown as the
    user's, and the shares stay shares of every failed task.
    """
    taxonomy = {k: dict(v) for k, v in ext.get("error_taxonomy", {}).items() if v["count"]}
    if not taxonomy:
        return
    failed = sum(v["count"] for v in taxonomy.values())
    users = (ext.get("user") or {}).get("audit_failed_tasks") or {}
    for name, n in (users.get("by_class") or {}).items():
        if name in taxonomy:
            taxonomy[name]["count"] -= min(n, taxonomy[name]["count"])
    by_user = failed - sum(v["count"] for v in taxonomy.values())
    if by_user:
        taxonomy[USER_CLASS] = {"family": "user", "count": by_user}
    errors = Table(title="Failed tasks by error class", title_justify="left")
    errors.add_column("class", style="bold")
    errors.add_column("family")
    errors.add_column("count", justify="right")
    errors.add_column("share", justify="right")
    for name, v in sorted(taxonomy.items(), key=lambda kv: -kv[1]["count"]):
        if v["count"]:
            errors.add_row(name, v["family"], str(v["count"]), _pct(v["count"] / failed))
    console.print(errors)
    tasks = int(users.get("tasks") or 0)
    if tasks:
        unclassed = tasks - by_user
        console.print(
            f"{USER_CLASS}: {tasks} failed task(s) from where the run's user audit found the simulated user failing "
            "(it ended a task at a question, withheld or leaked a value) are the user's failures, not the agent's"
            + (f" ({unclassed} of them failed a state or answer check, which has no error class)" if unclassed else "")
            + "; still counted as failed (--exclude-user-failures leaves their sessions out).",
            style="dim",
        )


def render_trials(metrics: Metrics, console: Console) -> None:
    """A trial run's pass^k and pass@k for k = 1..K (over tasks and over sessions, with 95% intervals), the success
    variance, and the sessions whose trials were not all counted. Nothing for a run of one trial."""
    trials = metrics.extensions.get("trials")
    if not trials:
        return
    ci = trials.get("confidence_intervals") or {}
    table = Table(
        title=f"pass^k and pass@k: {trials['k']} trials of {trials['sessions']} sessions ({trials['valid_runs']} "
        "valid runs)",
        title_justify="left",
    )
    table.add_column("k", justify="right", style="bold")
    table.add_column("")
    for unit in ("tasks", "sessions"):
        table.add_column(unit, justify="right")
        table.add_column("95% CI", justify="right")
    for k in range(1, int(trials["k"]) + 1):
        key = str(k)
        for name in ("pass^k", "pass@k"):
            cells = []
            for unit in ("task", "session"):
                value = trials[name][unit].get(key)
                bounds = (ci.get(name) or {}).get(unit, {}).get(key)
                cells += ["n/a", ""] if value is None else [_pct(value), _interval(bounds)]
            table.add_row(key if name == "pass^k" else "", name, *cells, end_section=name == "pass@k")
    console.print(table)
    console.print(
        "Task and session accuracy and the breakdowns above pool every trial (a task run k times counts k times); "
        "pass^1 equals them when no trial was left out.",
        style="dim",
    )
    variance = trials.get("success_variance") or {}
    if variance.get("value") is not None:
        bounds = ci.get("success_variance")
        spread = f" [{bounds['low']:.4f}, {bounds['high']:.4f}]" if bounds else ""
        console.print(
            f"Per-task success variance: {variance['value']:.4f}{spread} over {variance['tasks']} tasks "
            "(unbiased sample variance of each task's 0/1 success over its trials, averaged)"
        )
    incomplete = trials.get("incomplete_sessions") or []
    if incomplete:
        shown = ", ".join(f"{escape(s['session_id'])} ({s['valid_trials']}/{trials['k']})" for s in incomplete[:5])
        more = f" and {len(incomplete) - 5} more" if len(incomplete) > 5 else ""
        console.print(
            f"[yellow]{len(incomplete)} session(s) with trials left out (provider or harness errors); their "
            f"pass^k uses the trials they have: {shown}{more}[/]"
        )


def _points(value: float | None) -> str:
    """A difference of rates in percentage points, signed (``n/a`` for nothing)."""
    return "n/a" if value is None else f"{100 * value:+.2f}"


def _points_interval(leaf: dict[str, Any]) -> str:
    return f"[{100 * leaf['low']:+.1f}, {100 * leaf['high']:+.1f}]" if "low" in leaf else ""


def _share(
    leaf: dict[str, Any], value: str = "accuracy", part: str = "correct_count", whole: str = "total_count"
) -> str:
    """A rate with its counts, or ``n/a`` with its (zero) count."""
    if leaf.get(value) is None:
        return f"n/a 0/{leaf.get(whole, 0)}"
    return f"{_pct(leaf[value])} {leaf[part]}/{leaf[whole]}"


def _gap_table(title: str, rows: dict[str, dict[str, Any]]) -> Table:
    """Forced and free accuracy with the gap (forced minus free, in points) and its 95% interval, one row each."""
    table = Table(title=title, title_justify="left")
    table.add_column("", style="bold")
    table.add_column("forced", justify="right")
    table.add_column("free", justify="right")
    table.add_column("gap, pt", justify="right")
    table.add_column("95% CI", justify="right")
    for name, block in rows.items():
        table.add_row(
            name, _share(block["forced"]), _share(block["free"]), _points(block["gap"]), _points_interval(block)
        )
    return table


def render_forked(metrics: Metrics, console: Console) -> None:
    """A forked run's figures: the self-conditioning gap (forced minus free accuracy, overall and per transition
    count), first divergence and recovery, with their 95% intervals. Nothing for another run."""
    forked = metrics.extensions.get("forked")
    if not forked:
        return
    overall = forked["overall"]
    rows = {"all tasks": overall, "all sessions": overall["session"]}
    for key, block in forked["gap_by_transitions"].items():
        rows[f"{key} transition{'s' if key != '1' else ''}"] = block
    console.print(
        _gap_table(
            f"Forked: {forked['sessions']} sessions, {forked['tasks']} tasks, {forked['task_runs']} task-runs. "
            "Forced: gold history before the task; free: the agent's own. Rows by the session's transitions count "
            "its tasks.",
            rows,
        )
    )
    before = {f"after {k}": b for k, b in forked["gap_by_transitions_before"].items()}
    console.print(_gap_table("Tasks by the instruction transitions before them", before))
    first = forked["first_divergence"]
    where = ", ".join(f"task {int(j) + 1}: {n}" for j, n in first["by_task"].items())
    console.print(
        f"First divergence (the first task failed free but passed forced): {first['diverged']} of "
        f"{first['sessions']} session(s)"
        + (f" {_interval(first)}" if "low" in first else "")
        + (f" · {where}" if where else "")
        + f" · {first['after_own_failure']} after an own failed task"
    )
    recovery = forked["recovery"]
    parts = " · ".join(
        f"{label} {_share(recovery[kind], 'rate', 'recovered', 'failures')}"
        + (f" {_interval(recovery[kind])}" if "low" in recovery[kind] else "")
        for kind, label in (("free", "free"), ("forced", "forced"), ("after_own_mistake", "after its own mistake"))
    )
    console.print(f"Recovery (the next task correct after a failed one): {parts}")
    console.print(
        "The figures before the forked tables are fork 0's, the free run's (toolwild show --fork I shows fork I).",
        style="dim",
    )
    incomplete = forked.get("incomplete_sessions") or []
    if incomplete:
        shown = ", ".join(f"{escape(s['session_id'])} (forks {s['forks_left_out']})" for s in incomplete[:5])
        more = f" and {len(incomplete) - 5} more" if len(incomplete) > 5 else ""
        console.print(
            f"[yellow]{len(incomplete)} session(s) left out of the forked figures (a fork lost to the provider or "
            f"the harness): {shown}{more}[/]"
        )


def render_outcomes(metrics: Metrics, console: Console) -> None:
    """What the figures leave out or rest on: model failures, provider errors, harness errors, truncated context."""
    ext = metrics.extensions
    failures = ext.get("model_failures") or {}
    if failures.get("tasks"):
        kinds = ", ".join(f"{k.replace('_', ' ')} {n}" for k, n in failures.get("by_kind", {}).items())
        console.print(f"{failures['tasks']} task(s) failed by the agent's own fault, counted as failed ({kinds})")
    provider = ext.get("provider_error_sessions") or []
    if provider:
        if ext.get("provider_errors_counted"):
            console.print(f"[yellow]{len(provider)} session(s) lost to provider errors, counted as failed[/]")
        else:
            shown = escape(", ".join(provider[:5])) + (" …" if len(provider) > 5 else "")
            console.print(
                f"[yellow]{len(provider)} session(s) lost to provider errors, excluded from accuracy: {shown}[/]"
            )
    truncated = ext.get("context_truncation") or {}
    if truncated.get("tasks"):
        console.print(
            f"[yellow]{truncated['tasks']} task(s) ran with a truncated context: {truncated['messages_dropped']} "
            "oldest message(s) dropped to fit the model's window (the model did not see them)[/]"
        )
    harness = ext.get("harness_error_sessions") or []
    if harness:
        console.print(
            f"[bold red]INCOMPLETE: {len(harness)} session(s) ended by a harness error (an environment or toolwild "
            "bug), left out of every figure above:[/]"
        )
        for item in harness[:5]:
            console.print(f"  [red]•[/] {escape(item['session_id'])}: {escape(str(item['error']))}")
        if len(harness) > 5:
            console.print(f"  … and {len(harness) - 5} more")
