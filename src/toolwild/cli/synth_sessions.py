"""``toolwild synth sessions``: verified wild sessions over any environment, streamed to disk and resumable.

The job is :func:`toolwild.jobs.sessions.generate_sessions`; this module parses its options, shows its progress,
prints its table and picks the exit code.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from toolwild.cli._common import (
    PERTURB_KINDS,
    BaseUrlOption,
    EncoderOption,
    PerturbSeedOption,
    RayAddressOption,
    handled_errors,
)
from toolwild.cli._quality import embed_progress
from toolwild.cli._sessions import SessionsBar, show_sessions
from toolwild.llm.registry import describe_backends
from toolwild.run.job import AUTO_PROCESS_FROM


def sessions(
    env: Annotated[
        list[str],
        typer.Option(
            "--env",
            "-e",
            help="An environment: a built-in id (inventory, ledger), an *.env.json file, or a directory of them. "
            "Repeatable; sessions go round robin over them.",
        ),
    ],
    out: Annotated[Path, typer.Option("--out", "-o", dir_okay=False, help="The suite to write (JSONL).")],
    n: Annotated[int, typer.Option("--n", min=1, help="Sessions to generate.")] = 256,
    like_published: Annotated[
        bool,
        typer.Option(
            "--like-published", help="Each of the 4^4 orderings of single/multi/clarify/chat once per 256 sessions."
        ),
    ] = False,
    transitions: Annotated[
        int | None, typer.Option(min=0, max=3, help="Every session with this many instruction transitions.")
    ] = None,
    max_calls: Annotated[int, typer.Option(min=2, max=4, help="Calls (mini-tasks) of a multi-tool task, at most.")] = 3,
    ambiguous: Annotated[
        float, typer.Option(min=0.0, max=1.0, help="Share of tool tasks worded by what the tool does, not its name.")
    ] = 0.25,
    vague: Annotated[
        float, typer.Option(min=0.0, max=1.0, help="Share of clarify tasks whose first reply is vague (two asks).")
    ] = 0.35,
    distractors: Annotated[
        int, typer.Option(min=0, help="Tools of the other environments added to each session's tool list.")
    ] = 0,
    seed: Annotated[int, typer.Option(help="Generation seed (session i is seeded from it and i).")] = 0,
    model: Annotated[
        str,
        typer.Option(
            help="Who words the utterances: `template` (offline, no model) or a model "
            f"({'; '.join(describe_backends())}); model wording is checked and falls back to the template."
        ),
    ] = "template",
    env_model: Annotated[
        str | None, typer.Option(help="The model that simulates `llm` environments (e.g. local).")
    ] = None,
    base_url: BaseUrlOption = None,
    cache: Annotated[
        Path | None, typer.Option(help="Response cache of the model calls (default: OUT with .cache.sqlite).")
    ] = None,
    published: Annotated[
        Path | None,
        typer.Option(help="Also write the suite with the published keys only (for the original harness)."),
    ] = None,
    verify: Annotated[
        bool,
        typer.Option(
            "--verify/--no-verify",
            help="Check the written suite: oracle scores 100% in both modes, gold calls replay to the recorded "
            "observations and states, subtype labels hold on the values.",
        ),
    ] = True,
    builder: Annotated[
        str,
        typer.Option(
            help="Who makes the tasks: `auto` (an environment's own scenario templates where it has them, the built-in "
            "ledger does; the tool graph otherwise) or `graph` (the tool graph everywhere)."
        ),
    ] = "auto",
    ledger: Annotated[
        Path | None,
        typer.Option(
            "--ledger",
            dir_okay=False,
            help="With --env ledger: make the ledger's sessions on your own Beancount file (its accounts, payees, "
            "amounts, dates). A snapshot is kept beside OUT (OUT's name + .ledger/); your file is never written.",
        ),
    ] = None,
    concurrency: Annotated[int, typer.Option(min=1, help="Sessions made at once.")] = 32,
    resume: Annotated[
        bool,
        typer.Option(
            "--resume",
            help="Continue a killed run of the same command (its OUT.progress.jsonl): finished sessions are kept, "
            "none is made twice; sessions lost to the provider are made again.",
        ),
    ] = False,
    executor: Annotated[
        str,
        typer.Option(
            help="Where sessions are made: `local` (this process), `process` (worker processes on every core, shards "
            "of 256 sessions, CONCURRENCY at once inside each), `ray` (the same shards as Ray tasks; pip install "
            "'toolwild\\[ray]') or `auto`: `process` for a run that calls no model (template wording, no --env-model) "
            f"of {AUTO_PROCESS_FROM} sessions or more on a machine of two cores or more, `local` otherwise."
        ),
    ] = "auto",
    ray_address: RayAddressOption = None,
    encoder: EncoderOption = "auto",
    perturb: Annotated[
        str | None,
        typer.Option(
            help=f"Also write a perturbed copy of the suite: {PERTURB_KINDS} (reworded by --model).",
            rich_help_panel="Perturbation",
        ),
    ] = None,
    perturb_seed: PerturbSeedOption = 0,
    perturb_out: Annotated[
        Path | None,
        typer.Option(
            dir_okay=False,
            help="Where the perturbed copy goes (default: OUT's name + .perturbed.jsonl).",
            rich_help_panel="Perturbation",
        ),
    ] = None,
) -> None:
    """Generate wild sessions over any environment: verified tasks built bottom-up from its dependency graph.

    Each task's gold calls are executed on the session's episode as it is built (state evolves; observations are
    real); a task whose calls fail, whose dependency values are not in the parent's result, or whose hidden-intent
    label the values do not bear out is dropped with its reason and another is tried. The built-in ledger uses its
    own scenario templates (`--builder graph` builds its tasks from the tool graph instead).

    Sessions are made CONCURRENCY at once; each is logged to OUT.progress.jsonl the moment it is finished and
    verified (oracle at 100% in both modes, gold calls replayed, subtype labels checked), so a killed run continued
    with --resume keeps every finished session and makes none twice. OUT is written in session order as the
    sessions are made (the same file whatever the concurrency or executor; put in place when the run ends, never
    half-written), with OUT.report.json (counts, drops by reason, sessions that could not
    be built, and the quality figures of `toolwild validate --quality`, semantic diversity measured with --encoder).
    Model calls are cached: a second run makes none and writes the same suite. With --perturb a perturbed copy is
    written beside it (its oracle checked in both modes, gold calls replayed) for `toolwild compare` against the
    suite's own runs. Exit 1 when no session
    could be built or verification failed, 4 when sessions were lost to the provider (resume to retry them).
    """
    from toolwild.jobs.sessions import generate_sessions

    with handled_errors(), SessionsBar() as bar:
        made = generate_sessions(
            env,
            out,
            n=n,
            like_published=like_published,
            transitions=transitions,
            max_calls=max_calls,
            ambiguous=ambiguous,
            vague=vague,
            distractors=distractors,
            seed=seed,
            model=model,
            env_model=env_model,
            base_url=base_url,
            cache=cache,
            published=published,
            verify=verify,
            builder=builder,
            ledger=ledger,
            concurrency=concurrency,
            resume=resume,
            executor=executor,
            ray_address=ray_address,
            encoder=encoder,
            perturb=perturb,
            perturb_seed=perturb_seed,
            perturb_out=perturb_out,
            on_progress=bar.update,
            embed_progress=embed_progress,
        )
    show_sessions(made)
