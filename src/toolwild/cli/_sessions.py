"""The rendering of a session generation run, shared by ``toolwild synth sessions`` and ``toolwild suite ledger``
(the same job, :func:`toolwild.jobs.sessions.generate_sessions`): its progress bar, its table, its exit code."""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING

import typer
from rich.table import Table

from toolwild.cli._common import EXIT_PROVIDER_ERRORS, console, progress_bar
from toolwild.cli._quality import quality_headline

if TYPE_CHECKING:
    from rich.progress import Progress

    from toolwild.jobs.sessions import GeneratedSessions

__all__ = ["SessionsBar", "show_sessions"]


def show_sessions(made: GeneratedSessions) -> None:
    """Print the run's table; exit 1 when no session could be built or verification failed, 4 when sessions were
    lost to the provider (a resume makes them again)."""
    console.print(_table(made))
    if not made.sessions and not made.lost:
        console.print("[red]no session could be built[/] (the report says why)")
        raise typer.Exit(1)
    if made.errors:
        raise typer.Exit(1)
    if made.lost:
        console.print(f"[yellow]{made.lost} session(s) lost to the provider[/]: resume to retry them")
        raise typer.Exit(EXIT_PROVIDER_ERRORS)


class SessionsBar:
    """The progress bar of the sessions, drawn from the job's first report and taken down when the last session is
    in (before the quality figures, whose embedding has a bar of its own: rich draws one at a time)."""

    def __init__(self) -> None:
        self._bar: Progress | None = None
        self._task: int | None = None

    def update(self, done: int, total: int) -> None:
        """The job's ``on_progress``."""
        if self._bar is None:
            self._bar = progress_bar("[bold]sessions")
            self._task = self._bar.add_task("sessions", total=total, completed=done)
            self._bar.__enter__()
        elif self._task is not None:
            self._bar.update(self._task, completed=done)
        if done >= total:
            self.close()

    def close(self) -> None:
        if self._bar is not None:
            bar, self._bar = self._bar, None
            bar.__exit__(None, None, None)

    def __enter__(self) -> SessionsBar:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


def _table(made: GeneratedSessions) -> Table:
    """The run at a glance: counts, drops, wording, quality headline, what failed, the perturbed copy."""
    summary, result, perturbed = made.summary, made.outcome, made.perturbed
    table = Table(title=f"Sessions -> {made.suite}", title_justify="left", show_header=False)
    table.add_row("sessions", f"{summary.sessions:,} of {made.requested:,}")
    table.add_row("tasks", f"{summary.tasks:,}")
    for name, count in sorted(summary.task_types.items()):
        table.add_row(f"  {name}", f"{count:,}")
    for name, count in sorted(summary.subtypes.items()):
        table.add_row(f"  {name}", f"{count:,}")
    buckets = " / ".join(str(summary.transitions.get(k, 0)) for k in range(4))
    table.add_row("sessions with 0/1/2/3 transitions", buckets)
    table.add_row("task attempts dropped", f"{sum(result.drops.values()):,}")
    for reason, count in result.drops.most_common(5):
        table.add_row(f"  {reason}", f"{count:,}")
    _wording_rows(table, made)
    for name, value in quality_headline(made.quality):
        table.add_row(name, value)
    _failure_rows(table, made)
    if perturbed is not None:
        kinds = ",".join(perturbed["kinds"])
        table.add_row("perturbed copy", f"{perturbed['suite']} ({kinds}, seed {perturbed['seed']})")
        if perturbed["paraphrase"] is not None:
            p = perturbed["paraphrase"]
            table.add_row("  reworded / kept (fallback)", f"{p['reworded']:,} / {p['fallbacks']:,}")
        if perturbed["problems"]:
            table.add_row("[red]perturbed copy[/]", f"[red]{len(perturbed['problems'])} error(s)[/] (see report)")
    return table


def _wording_rows(table: Table, made: GeneratedSessions) -> None:
    """Who wrote the utterances and answers (a model, or the template it fell back to)."""
    result = made.outcome
    if result.utterances:
        sources = ", ".join(f"{k} {v}" for k, v in sorted(result.utterances.items()))
        rate = made.report["utterance_fallback_rate"]
        table.add_row("utterances", sources + (f" (fallback rate {rate:.1%})" if rate is not None else ""))
    if result.answers:
        table.add_row("answers (model-written)", ", ".join(f"{k} {v}" for k, v in sorted(result.answers.items())))


def _failure_rows(table: Table, made: GeneratedSessions) -> None:
    """Sessions not built, environments given up, sessions lost, and the suite's verification."""
    result = made.outcome
    if result.failed_sessions:
        table.add_row("[red]sessions not built[/]", f"{len(result.failed_sessions)} (reasons in the report)")
    for ref, why in result.given_up.items():
        table.add_row(f"[red]given up: {ref}[/]", why)
    if result.failed_units:
        table.add_row(
            "[red]sessions lost to the provider[/]", f"{len(result.failed_units)} (--resume makes them again)"
        )
    errors = sum(p["severity"] == "error" for p in result.problems)
    if made.verified:
        table.add_row("verification", "[green]passed[/]" if not errors else f"[red]{errors} error(s)[/] (see report)")
