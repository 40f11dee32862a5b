"""``toolwild synth sessions``: verified wild sessions over any environment, streamed to disk and resumable."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from toolwild.cli._common import console, handled_errors, make_llm, progress_bar
from toolwild.errors import ConfigError
from toolwild.llm.registry import describe_backends


def _environment_refs(envs: list[str]) -> list[str]:
    """Expand ``--env`` values: a directory stands for its environment files (sorted)."""
    from toolwild.core.formats.environment import ENV_SUFFIX

    refs: list[str] = []
    for value in envs:
        path = Path(value)
        if path.is_dir():
            found = sorted(str(p) for p in path.glob(f"*{ENV_SUFFIX}"))
            if not found:
                raise ConfigError(f"--env {value}: the directory holds no *{ENV_SUFFIX} file")
            refs += found
        else:
            refs.append(value)
    return refs


def _suite_ref(ref: str, suite_dir: Path) -> str:
    """How the suite names an environment: a built-in by id, a file relative to the suite's folder."""
    import os

    path = Path(ref)
    if not path.is_file():
        return ref
    return os.path.relpath(path.resolve(), suite_dir.resolve())


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
        bool, typer.Option(help="Each of the 4^4 orderings of single/multi/clarify/chat once per 256 sessions.")
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
    base_url: Annotated[str | None, typer.Option(help="Base URL of an OpenAI-compatible server.")] = None,
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
) -> None:
    """Generate wild sessions over any environment: verified tasks built bottom-up from its dependency graph.

    Each task's gold calls are executed on the session's episode as it is built (state evolves; observations are
    real); a task whose calls fail, whose dependency values are not in the parent's result, or whose hidden-intent
    label the values do not bear out is dropped with its reason and another is tried. Writes OUT, and OUT with
    .report.json (counts, drops by reason, sessions that could not be built). Model calls are cached: a second run
    makes none and writes the same suite.
    """
    from toolwild.cli._common import run_async
    from toolwild.core.files import write_json
    from toolwild.core.formats.wtb import write_wtb_suite
    from toolwild.eval.validate import Severity, summarize_suite, validate_suite
    from toolwild.synth.sessions import SessionsConfig, load_handle, synth_sessions

    with handled_errors():
        if like_published and transitions is not None:
            raise ConfigError("--like-published fixes every session's pattern: leave out --transitions")
        refs = _environment_refs(env)
        cache_path = cache or out.with_name(out.name + ".cache.sqlite")
        out.parent.mkdir(parents=True, exist_ok=True)
        simulator = make_llm(env_model, base_url=base_url, cache=cache_path) if env_model else None
        writer = make_llm(model, base_url=base_url, cache=cache_path) if model != "template" else None
        handles = [load_handle(r, simulator=simulator, suite_ref=_suite_ref(r, out.parent)) for r in refs]
        config = SessionsConfig(
            n_sessions=n,
            seed=seed,
            like_published=like_published,
            transitions=transitions,
            max_calls=max_calls,
            ambiguous=ambiguous,
            vague=vague,
            distractors=distractors,
        )

        async def go():
            bar = progress_bar("[bold]sessions")
            task = bar.add_task("sessions", total=n)
            try:
                with bar:
                    return await synth_sessions(
                        handles, config, writer=writer, name=out.stem, progress=lambda: bar.advance(task)
                    )
            finally:
                for llm in (simulator, writer):
                    if llm is not None:
                        await llm.aclose()

        result = run_async(go())
        write_wtb_suite(result.suite, out)
        if published is not None:
            write_wtb_suite(result.suite, published, published=True)
        summary = summarize_suite(result.suite)
        problems = []
        if verify:
            with console.status("verifying..."):
                verifier = make_llm(env_model, base_url=base_url, cache=cache_path) if env_model else None
                problems = validate_suite(
                    result.suite, replay=True, subtypes=True, base_dir=out.parent, simulator=verifier
                )
        report = {
            "suite": str(out),
            "environments": [h.ref for h in handles],
            "config": vars(config),
            "sessions": summary.sessions,
            "tasks": summary.tasks,
            "task_types": dict(sorted(summary.task_types.items())),
            "subtypes": dict(sorted(summary.subtypes.items())),
            "transitions": {str(k): v for k, v in sorted(summary.transitions.items())},
            "failed_sessions": result.failed_sessions,
            "environments_given_up": result.given_up,
            "drops": dict(result.drops.most_common()),
            "drop_examples": result.drop_examples,
            "utterances": dict(result.utterances),
            "verified": verify,
            "problems": [{"severity": p.severity.value, "where": p.where, "message": p.message} for p in problems],
            "usage": {name: llm.usage.as_dict() for name, llm in (("simulator", simulator), ("writer", writer)) if llm},
        }
        write_json(out.with_name(out.name + ".report.json"), report)

    table = Table(title=f"Sessions -> {out}", title_justify="left", show_header=False)
    table.add_row("sessions", f"{summary.sessions:,} of {n:,}")
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
    if result.utterances:
        table.add_row("utterances", ", ".join(f"{k} {v}" for k, v in sorted(result.utterances.items())))
    if result.failed_sessions:
        table.add_row("[red]sessions not built[/]", f"{len(result.failed_sessions)} (reasons in the report)")
    for ref, why in result.given_up.items():
        table.add_row(f"[red]given up: {ref}[/]", why)
    if verify:
        errors = sum(p.severity is Severity.ERROR for p in problems)
        table.add_row("verification", "[green]passed[/]" if not errors else f"[red]{errors} error(s)[/] (see report)")
    console.print(table)
    if not result.suite.sessions:
        console.print("[red]no session could be built[/] (the report says why)")
        raise typer.Exit(1)
    if verify and any(p.severity is Severity.ERROR for p in problems):
        raise typer.Exit(1)
