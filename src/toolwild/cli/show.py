"""``toolwild show``: a run's tasks as conversations in the terminal, with what failed and why in words.

A user who wants to know *why* a task failed should not read raw JSON: each task is printed as the user turn(s),
the model's steps, the gold calls and the verdict, each failing step saying what was expected and what came.
The verdicts are recomputed from the run's trajectories by the scorer (no model is called), so a run from before
``verdicts.jsonl`` existed shows the same explanations. A forked run shows fork 0 (the free run) unless ``--fork I``
names another; there the tasks before I are the gold conversation the agent was given, and are marked so.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.padding import Padding
from rich.rule import Rule
from rich.text import Text

from toolwild.cli._common import console, handled_errors
from toolwild.core.session import Session
from toolwild.core.task import ANSWER_ACTION, ASK_ACTION, Task
from toolwild.core.trajectory import Step, TaskTrajectory, Trajectory
from toolwild.core.verdict import SessionVerdict, StepVerdict, TaskVerdict
from toolwild.errors import ConfigError
from toolwild.eval.scoring.dag import GoldDag
from toolwild.report.html import load_run_view

WIDTH = 80
"""Output stays within 80 columns (rich wraps long lines), whatever the terminal."""
TEXT_LIMIT = 300
"""Characters of a model reply, user turn or observation shown; the rest is in trajectories.jsonl."""


def show(
    run_dir: Annotated[Path, typer.Argument(metavar="RUN_DIR", help="A run directory (runs/<name>).")],
    failed: Annotated[bool, typer.Option("--failed", help="Show only the tasks that failed.")] = False,
    session: Annotated[str | None, typer.Option("--session", help="Show only this session.")] = None,
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="Show at most N tasks.")] = None,
    trial: Annotated[int, typer.Option("--trial", min=0, help="Which trial of a --trials run (default 0).")] = 0,
    fork: Annotated[
        int,
        typer.Option("--fork", min=0, help="Which fork of a --history forked run (default 0, the free run)."),
    ] = 0,
) -> None:
    """Print a run's tasks as conversations: user turns, the model's steps, the gold calls and the verdict."""
    with handled_errors():
        sessions, trajectories, verdicts = _load_run(run_dir, trial, fork)
        if session is not None and session not in sessions:
            known = ", ".join(list(sessions)[:5]) + (", ..." if len(sessions) > 5 else "")
            raise ConfigError(f"{run_dir}: no session {session!r} in this run (sessions: {known})")
    # a layout of its own, wrapped at 80 columns even in a log file (unlike the shared console); emoji codes off, as
    # there: user data such as the account Assets:Bank:Checking holds ":bank:"
    out = Console(width=min(WIDTH, console.width), highlight=False, emoji=False)
    shown = failures = total = 0
    for verdict in verdicts:
        if session is not None and verdict.session_id != session:
            continue
        for task_verdict in verdict.tasks:
            if task_verdict.task_index < fork:  # the gold the fork was given: not the agent's work
                if not failed and (limit is None or shown < limit):
                    _print_forced(out, sessions[verdict.session_id], task_verdict.task_index, fork)
                continue
            total += 1
            failures += task_verdict.label == "error"
            if (failed and task_verdict.label == "correct") or (limit is not None and shown >= limit):
                continue
            record = _task_record(trajectories.get(verdict.session_id), task_verdict.task_index)
            _print_task(out, sessions[verdict.session_id], verdict, task_verdict, record)
            shown += 1
    out.print(Rule(style="dim"))
    of_trial = f" (trial {trial})" if trial else (f" (fork {fork}: tasks from {fork + 1} on)" if fork else "")
    out.print(f"{shown} task(s) shown of {total}{of_trial}; {failures} failed.")


def _load_run(
    run_dir: Path, trial: int = 0, fork: int = 0
) -> tuple[dict[str, Session], dict[str, Trajectory], list[SessionVerdict]]:
    """The run's sessions, trajectories and verdicts of one trial or fork (scored again from its trajectories in its
    own mode), loaded as the HTML report loads them."""
    view = load_run_view(run_dir, trial=trial, fork=fork)
    return view.sessions, view.trajectories, view.verdicts


def _print_forced(out: Console, session: Session, index: int, fork: int) -> None:
    """A task a fork teacher-forced: one line, since the agent did nothing there (it was given the task's gold
    conversation, which ``--fork 0`` shows the agent's own run of)."""
    out.print(Rule(f"{escape(session.id)} · task {index + 1}/{len(session.tasks)}", align="left", style="dim"))
    out.print(f"[dim]teacher-forced in fork {fork}: the agent was given this task's gold conversation[/]")


def _task_record(trajectory: Trajectory | None, index: int) -> TaskTrajectory | None:
    if trajectory is None:
        return None
    return next((t for t in trajectory.tasks if t.task_index == index), None)


def _clip(text: str, limit: int = TEXT_LIMIT, *, quote: bool = False) -> str:
    """User data as rich markup that prints it as it is: one line, at most ``limit`` characters, quoted with ``repr``
    when asked, and escaped last (quoting escaped text doubled its backslashes: ``[bold]`` was printed ``\\bold\\``)."""
    text = " ".join(text.split())
    text = text if len(text) <= limit else text[: limit - 1] + "…"
    return escape(repr(text) if quote else text)


def _arguments(arguments: Any) -> str:
    """Arguments as compact JSON (a model's raw text is shown as it came when it is not JSON)."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except (ValueError, RecursionError):
            return _clip(arguments, 120)
    return _clip(json.dumps(arguments, ensure_ascii=False), 120)


def _print_task(
    out: Console, session: Session, verdict: SessionVerdict, task: TaskVerdict, record: TaskTrajectory | None
) -> None:
    gold_task = session.tasks[task.task_index]
    outcome = "[green]correct[/]" if task.label == "correct" else "[bold red]FAILED[/]"
    title = f"{escape(session.id)} · task {task.task_index + 1}/{len(session.tasks)} · {task.task_type.value}"
    out.print(Rule(title, align="left", style="dim"))
    out.print(f"[bold]user:[/] {_clip(gold_task.utterance)}")
    steps = record.steps if record is not None else []
    if verdict.inference_error and not steps:
        out.print(f"[red]no steps: {escape(verdict.inference_error)}[/]")
    for k, step in enumerate(steps):
        judged = task.steps[k] if k < len(task.steps) else None
        _print_step(out, k, step, judged)
        if judged is None or judged.name_label == "error":
            if k + 1 < len(steps):
                out.print(f"  [dim]({len(steps) - k - 1} later step(s) not judged: the task had ended)[/]")
            break
    _print_gold(out, gold_task)
    _print_verdict(out, task, outcome)


def _print_step(out: Console, k: int, step: Step, judged: StepVerdict | None) -> None:
    mark = "" if judged is None else (" [red]✗[/]" if _failed(judged) else " [green]✓[/]")
    if step.parse_error is not None:
        out.print(f"[bold]model {k + 1}:[/] (unparseable output){mark}")
    elif step.tool_calls:
        calls = "; ".join(f"{escape(c.name)}({_arguments(c.arguments)})" for c in step.tool_calls)
        out.print(f"[bold]model {k + 1}:[/] calls {calls}{mark}")
        for observation in step.observations or []:
            _indented(out, f"[dim]→ {_clip(observation, 160)}[/]")
    elif step.content:
        out.print(f"[bold]model {k + 1}:[/] says {_clip(step.content, quote=True)}{mark}")
    else:
        out.print(f"[bold]model {k + 1}:[/] (empty reply){mark}")
    if judged is not None and judged.explanation:
        _indented(out, f"[red]✗ {escape(judged.explanation)}[/]")
    if step.user_reply:
        out.print(f"[bold]user (reply):[/] {_clip(step.user_reply)}")


def _failed(judged: StepVerdict) -> bool:
    return judged.name_label == "error" or judged.arguments_label == "error"


def _print_gold(out: Console, task: Task) -> None:
    """The gold calls along the first optimal path (the path teacher forcing shows), one step per line."""
    out.print("[bold]gold:[/]")
    for n, batch in enumerate(GoldDag.from_task(task).first_optimal_path(), start=1):
        nodes = [task.gold[i] for i in batch]
        if nodes[0].name == ANSWER_ACTION:
            line = "a text answer"
        elif nodes[0].name == ASK_ACTION:
            line = f"{ASK_ACTION} (user replies: {_clip(nodes[0].user_input or '', 120)})"
        else:
            line = "; ".join(f"{escape(x.name)}({_arguments(x.action.arguments)})" for x in nodes)
        out.print(f"  {n}. {line}")


def _print_verdict(out: Console, task: TaskVerdict, outcome: str) -> None:
    parts = [outcome]
    if task.error_class is not None:
        parts.append(escape(task.error_class.value))
    parts.append(f"{task.steps_used} step(s), shortest {task.min_length}")
    out.print(f"[bold]verdict:[/] {' · '.join(parts)}")
    why = task.explanation or (task.error_reason if task.label == "error" else "")
    if why:
        _indented(out, escape(why))


def _indented(out: Console, markup: str) -> None:
    """A line indented by two columns, its wrapped continuation too (explanations run past 80 columns)."""
    out.print(Padding(Text.from_markup(markup, emoji=False), (0, 0, 0, 2)))
