"""``toolwild train``: fine-tune the embedded model (or another GGUF chat model) on suites' gold trajectories."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from toolwild.cli._common import console, handled_errors, progress_bar
from toolwild.train.gguf_model import WeightType


def train_command(
    out: Annotated[Path, typer.Option("--out", "-o", file_okay=False, help="Run folder (new, or one to --resume).")],
    suites: Annotated[
        list[Path] | None,
        typer.Argument(
            metavar="SUITE...", exists=True, dir_okay=False, help="Suites (JSONL) to train on (none with --resume)."
        ),
    ] = None,
    held_out: Annotated[
        list[Path] | None,
        typer.Option(
            "--held-out",
            exists=True,
            dir_okay=False,
            help="An eval suite kept out of training: a training session with the same user turns is refused.",
        ),
    ] = None,
    base: Annotated[
        Path | None,
        typer.Option(exists=True, dir_okay=False, help="Base GGUF chat model (default: the embedded SmolLM2-135M)."),
    ] = None,
    epochs: Annotated[float, typer.Option(min=0.01, help="Passes over the training sessions.")] = 1.0,
    max_steps: Annotated[
        int | None, typer.Option(min=1, help="Stop after this many optimizer steps (overrides --epochs).")
    ] = None,
    lr: Annotated[float, typer.Option(min=1e-8, help="Peak learning rate (cosine schedule).")] = 2e-4,
    lora_rank: Annotated[int, typer.Option(min=1, help="LoRA rank (alpha = 2 x rank), on every linear layer.")] = 16,
    batch: Annotated[int, typer.Option(min=1, help="Sessions per optimizer step (gradients accumulated).")] = 4,
    max_tokens: Annotated[
        int, typer.Option(min=64, help="Longest sequence: a longer session keeps its first turns that fit.")
    ] = 4096,
    seed: Annotated[int, typer.Option(help="Seed of the adapters' initialisation and the data order.")] = 0,
    weight_type: Annotated[
        WeightType, typer.Option(help="How the tuned tensors are stored in model.gguf (q8_0 keeps a LoRA update).")
    ] = WeightType.Q8_0,
    save_steps: Annotated[int, typer.Option(min=1, help="Checkpoint every N optimizer steps (for --resume).")] = 25,
    device: Annotated[str, typer.Option(help="auto (a GPU when torch sees one), cpu or cuda.")] = "auto",
    threads: Annotated[int | None, typer.Option(min=1, help="CPU threads for torch (default: torch's).")] = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue the run in --out from its last checkpoint, with its settings.")
    ] = False,
) -> None:
    """Fine-tune a GGUF chat model (LoRA) on the suites' gold trajectories and write the tuned model as OUT/model.gguf.

    Each session is trained on as the model will be evaluated: the conversation `toolwild export` writes, in the
    embedded model's prompt mode (tools in the system line, calls as JSON replies) and its own chat template, with
    loss on the assistant's replies only. Run `toolwild eval --model local:OUT/model.gguf` to evaluate it with the
    same loop, prompt and scoring as the base model. `toolwild train --resume --out OUT` continues a killed run from
    its last checkpoint, with the settings it was started with. Needs the train extra: pip install 'toolwild\\[train]'.
    """
    from toolwild.train.finetune import TrainProgress, resume_training, train

    with handled_errors(), progress_bar("training", status="loss") as bar:
        task = bar.add_task("training", total=None, loss="loading the model")

        def show(p: TrainProgress) -> None:
            label = {"load": "loading the model", "write": "writing model.gguf"}.get(p.phase)
            loss = label or (f"loss {p.loss:.3f}" if p.loss is not None else "")
            bar.update(task, completed=p.step, total=p.total or None, loss=loss)

        if resume and not suites:
            report = resume_training(out, device=device, threads=threads, on_progress=show)
        else:
            report = train(
                suites or [],
                out,
                base=base,
                held_out=held_out or [],
                epochs=epochs,
                max_steps=max_steps,
                learning_rate=lr,
                lora_rank=lora_rank,
                batch_size=batch,
                max_tokens=max_tokens,
                seed=seed,
                weight_type=weight_type,
                save_steps=save_steps,
                device=device,
                threads=threads,
                resume=resume,
                on_progress=show,
            )
    table = Table(title="training", show_header=False)
    first, last = (report.losses[0][1], report.losses[-1][1]) if report.losses else (float("nan"),) * 2
    table.add_row("sessions", f"{report.sessions:,} ({report.truncated_sessions:,} cut to --max-tokens)")
    table.add_row("tokens", f"{report.tokens:,} per epoch, {report.trained_tokens:,} with loss (assistant replies)")
    table.add_row("steps", f"{report.steps:,} ({report.epochs:.2f} epochs)")
    table.add_row("training loss", f"{first:.3f} (first step) -> {last:.3f} (last step)")
    table.add_row("time", f"{report.train_seconds:,.0f} s on {report.device}, {report.tokens_per_second:,.0f} tokens/s")
    table.add_row("model", escape(str(out / report.model)))
    console.print(table)
    console.print(f"evaluate it: toolwild eval --model local:{escape(str(out / report.model))}", highlight=False)
