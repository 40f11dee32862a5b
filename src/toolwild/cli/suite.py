"""``toolwild suite``: write a built-in suite to a file (to inspect it, or to evaluate another harness on it)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from toolwild.cli._common import EncoderOption, handled_errors
from toolwild.cli._quality import embed_progress
from toolwild.cli._sessions import SessionsBar, show_sessions

suite_app = typer.Typer(help="Built-in suites.", no_args_is_help=True)


@suite_app.command("ledger")
def ledger(
    out: Annotated[Path, typer.Option("--out", "-o", help="Where to write the suite (WildToolBench JSONL).")],
    sessions: Annotated[int, typer.Option(min=1, help="Number of sessions.")] = 64,
    seed: Annotated[int, typer.Option(help="Generation seed (same seed, same suite).")] = 0,
    like_published: Annotated[
        bool,
        typer.Option(
            "--like-published",
            help="The published design: each of the 256 orderings of single/multi/clarify/chat once per 256 sessions.",
        ),
    ] = False,
    verify: Annotated[
        bool, typer.Option("--verify/--no-verify", help="Replay and oracle-check every session as it is made.")
    ] = False,
    concurrency: Annotated[int, typer.Option(min=1, help="Sessions made at once.")] = 32,
    resume: Annotated[bool, typer.Option("--resume", help="Continue a killed run (see `synth sessions`).")] = False,
    executor: Annotated[str, typer.Option(help="`auto`, `local`, `process` or `ray` (see `synth sessions`).")] = "auto",
    ray_address: Annotated[str | None, typer.Option(help="The Ray cluster (see `synth sessions`).")] = None,
    ledger: Annotated[
        Path | None,
        typer.Option(
            "--ledger",
            dir_okay=False,
            help="Make the sessions on your own Beancount file instead of generated ledgers (see `synth sessions`).",
        ),
    ] = None,
    encoder: EncoderOption = "auto",
) -> None:
    """Generate the Beancount ledger suite (gold calls replayed on real ledgers) and write it.

    The same job as `toolwild synth sessions --env ledger --model template` (the ledger's scenario templates),
    without verification unless asked: OUT, OUT.report.json and the progress log OUT.progress.jsonl.
    """
    from toolwild.jobs.sessions import generate_sessions

    with handled_errors(), SessionsBar() as bar:
        made = generate_sessions(
            ["ledger"],
            out,
            n=sessions,
            seed=seed,
            like_published=like_published,
            verify=verify,
            concurrency=concurrency,
            resume=resume,
            executor=executor,
            ray_address=ray_address,
            ledger=ledger,
            encoder=encoder,
            on_progress=bar.update,
            embed_progress=embed_progress,
        )
    show_sessions(made)
