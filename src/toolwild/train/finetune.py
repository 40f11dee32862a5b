"""Supervised fine-tuning of a GGUF chat model on suites' gold trajectories (LoRA), written back as a GGUF.

The kept libraries do the work: transformers reads the GGUF and runs the training loop (its ``Trainer``: device
choice, checkpoints, resume), PEFT adds and merges the LoRA adapters, gguf writes the tuned file. What toolwild adds
is what makes the result trustworthy: the conversations are the ones the evaluation will show the model
(:mod:`.examples`), loss is taken on the assistant's replies only, a training suite that shares a session with a
held-out suite is refused before anything is loaded, and a run folder records its settings so that ``--resume``
continues the same run or says why it cannot.

A run folder holds ``train_config.json`` (the settings and the suites' fingerprints), ``checkpoints/`` (the
Trainer's, for ``--resume``), and when done ``adapter/`` (the LoRA weights), ``model.gguf`` (the merged model, for
``toolwild eval --model local:DIR``) and ``train_report.json`` (what was trained on, the losses, the time).
"""

from __future__ import annotations

import contextlib
import math
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from toolwild.core.formats.wtb import load_wtb_suite
from toolwild.core.session import Suite
from toolwild.errors import ConfigError, DataError
from toolwild.train.examples import Example, overlapping_sessions, prompt_mode_messages, tokenize_conversation
from toolwild.train.gguf_model import WeightType, check_writable, import_training_stack, load_base, write_tuned_gguf

__all__ = [
    "CONFIG",
    "MODEL",
    "REPORT",
    "TrainConfig",
    "TrainProgress",
    "TrainReport",
    "build_examples",
    "mean_loss",
    "resume_training",
    "train",
]

CONFIG = "train_config.json"
REPORT = "train_report.json"
MODEL = "model.gguf"
ADAPTER = "adapter"
CHECKPOINTS = "checkpoints"
LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
"""Every linear layer of a Llama block (SmolLM2's architecture)."""


class SuiteRef(BaseModel):
    """A suite named by its file and pinned by its fingerprint."""

    model_config = ConfigDict(extra="forbid")

    path: str
    fingerprint: str
    sessions: int


class TrainConfig(BaseModel):
    """Everything that decides a training run; ``--resume`` continues only a run with the same settings."""

    model_config = ConfigDict(extra="forbid")

    base: str
    """The base GGUF's file name (its path differs across machines)."""
    base_size: int
    suites: list[SuiteRef]
    held_out: list[SuiteRef] = Field(default_factory=list)
    epochs: float = 1.0
    max_steps: int | None = None
    """Optimizer steps to stop after (None: ``epochs`` decide)."""
    learning_rate: float = 2e-4
    lora_rank: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.0
    batch_size: int = 4
    """Sessions per optimizer step (one at a time, gradients accumulated: no padding, flat memory)."""
    max_tokens: int = 4096
    """The longest sequence trained on; the local backend's context window by default."""
    seed: int = 0
    weight_type: WeightType = WeightType.Q8_0
    save_steps: int = 25


SETTINGS = frozenset(
    {
        "epochs",
        "max_steps",
        "learning_rate",
        "lora_rank",
        "batch_size",
        "max_tokens",
        "seed",
        "weight_type",
        "save_steps",
    }
)
"""The fields of :class:`TrainConfig` that are :func:`train`'s keyword arguments of the same name (the others are
derived: the base file's name and size, the suites' fingerprints, LoRA's alpha and dropout)."""


class TrainReport(BaseModel):
    """What a finished run trained on and what it cost."""

    model_config = ConfigDict(extra="forbid")

    sessions: int
    truncated_sessions: int
    tokens: int
    """Tokens of all training sequences (one epoch)."""
    trained_tokens: int
    """Of those, the tokens that carry loss (the assistant's replies)."""
    steps: int
    epochs: float
    losses: list[tuple[int, float]]
    """(optimizer step, mean training loss since the previous entry)."""
    device: str
    threads: int
    resumed_at_step: int | None = None
    """The checkpoint's step a resumed run continued from (None: one uninterrupted run)."""
    train_seconds: float
    """Training time of this process (a resumed run's, from its checkpoint on)."""
    tokens_seen: int
    tokens_per_second: float
    """Tokens trained on per second by this process."""
    replaced_tensors: int
    model: str
    """The written GGUF, relative to the run folder."""


@dataclass(frozen=True)
class TrainProgress:
    """Where a run stands, for a progress bar: the optimizer step of the total, and the latest logged loss."""

    step: int
    total: int
    loss: float | None
    phase: str
    """``load``, ``train`` or ``write``."""


def _suite_ref(path: Path, suite: Suite) -> SuiteRef:
    return SuiteRef(path=str(path), fingerprint=suite.fingerprint(), sessions=len(suite.sessions))


def _load(paths: Sequence[str | Path]) -> list[tuple[Path, Suite]]:
    loaded = []
    for path in paths:
        suite, _ = load_wtb_suite(path)
        loaded.append((Path(path), suite))
    return loaded


def build_examples(suites: Sequence[Suite], tokenizer: Any, *, max_tokens: int) -> list[Example]:
    """Every session of ``suites`` as a training example (see :func:`.examples.tokenize_conversation`)."""
    return [
        tokenize_conversation(s.id, prompt_mode_messages(s), tokenizer, max_tokens=max_tokens)
        for suite in suites
        for s in suite.sessions
    ]


def mean_loss(model: Any, examples: Sequence[Example]) -> float:
    """The model's mean loss per trained token over ``examples`` (no gradients): how well it predicts the replies."""
    torch, _, _ = import_training_stack()
    total, count = 0.0, 0
    model.eval()
    with torch.no_grad():
        for ex in examples:
            ids = torch.tensor([ex.input_ids])
            labels = torch.tensor([ex.labels])
            n = ex.trained_tokens
            total += float(model(input_ids=ids, labels=labels).loss) * n
            count += n
    return total / count if count else math.nan


def _read_config(path: Path) -> TrainConfig:
    try:
        return TrainConfig.model_validate_json(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise DataError(f"{path}: not a training config ({exc})", field=CONFIG) from exc


def _check_folder(out: Path, config: TrainConfig, resume: bool) -> None:
    existing = out / CONFIG
    if not existing.exists():
        if resume:
            raise ConfigError(f"{out} holds no training run to resume (no {CONFIG})")
        if out.exists() and any(out.iterdir()):
            raise ConfigError(f"{out} is not empty; give a new folder for a training run")
        return
    if not resume:
        raise ConfigError(f"{out} already holds a training run; pass --resume to continue it, or give a new folder")
    previous = _read_config(existing)
    if previous != config:
        changed = sorted(k for k in TrainConfig.model_fields if getattr(previous, k) != getattr(config, k))
        raise ConfigError(f"{out} was trained with other settings ({', '.join(changed)}); --resume needs the same")


def _device(requested: str, torch: Any) -> str:
    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if requested == "cuda" and not torch.cuda.is_available():
        raise ConfigError("--device cuda, but torch sees no GPU (is the CPU-only torch wheel installed?)")
    if requested not in ("cpu", "cuda"):
        raise ConfigError(f"--device must be auto, cpu or cuda, got {requested!r}")
    return requested


def train(
    suite_paths: Sequence[str | Path],
    out: str | Path,
    *,
    base: str | Path | None = None,
    held_out: Sequence[str | Path] = (),
    epochs: float = 1.0,
    max_steps: int | None = None,
    learning_rate: float = 2e-4,
    lora_rank: int = 16,
    batch_size: int = 4,
    max_tokens: int = 4096,
    seed: int = 0,
    weight_type: WeightType = WeightType.Q8_0,
    save_steps: int = 25,
    device: str = "auto",
    threads: int | None = None,
    resume: bool = False,
    on_progress: Callable[[TrainProgress], None] | None = None,
) -> TrainReport:
    """Fine-tune ``base`` (default: the embedded SmolLM2-135M-Instruct) on the suites' gold trajectories, with LoRA,
    and write the merged model as ``out/model.gguf``.

    Everything that can be refused is refused before the model is loaded or anything is written.

    Raises:
        ConfigError: a training session also in a held-out suite (each pair named), bad settings, a run folder that
            holds another run, or ``resume`` with other settings.
        DataError: a malformed suite (file, line and field named).
        MissingDependencyError: the ``train`` extra is not installed.
    """
    torch, transformers, peft = import_training_stack()
    if not suite_paths:
        raise ConfigError("name at least one suite to train on")
    if max_steps is not None and max_steps < 1:
        raise ConfigError(f"--max-steps must be at least 1, got {max_steps}")
    if not epochs > 0 or batch_size < 1 or lora_rank < 1 or max_tokens < 64 or not learning_rate > 0:
        raise ConfigError("--epochs, --lr, --batch, --lora-rank must be positive and --max-tokens at least 64")
    base = _base_path(base)
    if not base.is_file():
        raise ConfigError(f"base model file not found: {base}")
    out = Path(out)
    training, holding = _load(suite_paths), _load(held_out)
    _refuse_leaks(training, holding)
    config = TrainConfig(
        base=base.name,
        base_size=base.stat().st_size,
        suites=[_suite_ref(p, s) for p, s in training],
        held_out=[_suite_ref(p, s) for p, s in holding],
        epochs=epochs,
        max_steps=max_steps,
        learning_rate=learning_rate,
        lora_rank=lora_rank,
        lora_alpha=2 * lora_rank,
        batch_size=batch_size,
        max_tokens=max_tokens,
        seed=seed,
        weight_type=weight_type,
        save_steps=save_steps,
    )
    _check_folder(out, config, resume)
    chosen = _device(device, torch)
    if threads is not None:
        torch.set_num_threads(threads)
    progress = on_progress or (lambda _: None)
    progress(TrainProgress(step=0, total=0, loss=None, phase="load"))
    loaded = load_base(base)
    check_writable(loaded.model.config.model_type)
    examples = build_examples([s for _, s in training], loaded.tokenizer, max_tokens=max_tokens)
    out.mkdir(parents=True, exist_ok=True)
    (out / CONFIG).write_text(config.model_dump_json(indent=2) + "\n", encoding="utf-8")

    lora = peft.LoraConfig(
        r=lora_rank,
        lora_alpha=config.lora_alpha,
        lora_dropout=config.lora_dropout,
        target_modules=LORA_TARGETS,
        task_type="CAUSAL_LM",
    )
    with _library_notices_quiet():
        model = peft.get_peft_model(loaded.model, lora)
    tracker = _Tracker(progress)
    trainer = transformers.Trainer(
        model=model,
        args=_arguments(transformers, config, out, cpu=chosen == "cpu"),
        train_dataset=[{"input_ids": ex.input_ids, "labels": ex.labels} for ex in examples],
        data_collator=transformers.DataCollatorForSeq2Seq(loaded.tokenizer, padding=True, label_pad_token_id=-100),
        callbacks=[tracker.callback(transformers)],
    )
    trainer.remove_callback(transformers.trainer_callback.PrinterCallback)  # the progress callback reports instead
    checkpoint = resume and any((out / CHECKPOINTS).glob("checkpoint-*"))
    started = time.perf_counter()
    with _library_notices_quiet():
        trainer.train(resume_from_checkpoint=True if checkpoint else None)
        seconds = time.perf_counter() - started
        model.save_pretrained(str(out / ADAPTER))
    replaced = write_tuned_gguf(
        base,
        model.merge_and_unload().state_dict(),
        out / MODEL,
        weight_type=weight_type,
        on_tensor=lambda done, total: progress(TrainProgress(step=done, total=total, loss=None, phase="write")),
    )
    state = trainer.state
    seen = int(getattr(state, "num_input_tokens_seen", 0) or 0)
    report = TrainReport(
        sessions=len(examples),
        truncated_sessions=sum(ex.truncated for ex in examples),
        tokens=sum(len(ex.input_ids) for ex in examples),
        trained_tokens=sum(ex.trained_tokens for ex in examples),
        steps=state.global_step,
        epochs=float(state.epoch or 0.0),
        losses=tracker.losses,
        device=chosen,
        threads=torch.get_num_threads() if chosen == "cpu" else 0,
        resumed_at_step=tracker.first_step if checkpoint else None,
        train_seconds=round(seconds, 2),
        tokens_seen=seen,
        tokens_per_second=round((seen - tracker.tokens_before) / seconds, 1) if seconds > 0 else 0.0,
        replaced_tensors=len(replaced),
        model=MODEL,
    )
    (out / REPORT).write_text(report.model_dump_json(indent=2) + "\n", encoding="utf-8")
    return report


@contextlib.contextmanager
def _library_notices_quiet() -> Iterator[None]:
    """Silence two notices that say nothing about this run: transformers' deprecation of a name PEFT still calls,
    and PEFT's remark that a GGUF's folder has no ``config.json`` (the vocabulary is the base file's, unchanged)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
        warnings.filterwarnings("ignore", message="Could not find a config file", category=UserWarning)
        yield


def _refuse_leaks(training: list[tuple[Path, Suite]], holding: list[tuple[Path, Suite]]) -> None:
    leaks = overlapping_sessions([s for _, suite in training for s in suite.sessions], [s for _, s in holding])
    if leaks:
        shown = "; ".join(f"{t} = {name}:{h}" for t, name, h in leaks[:5])
        raise ConfigError(
            f"{len(leaks)} training session(s) also in a held-out suite (same user turns): {shown}"
            + (" ..." if len(leaks) > 5 else "")
        )


def _arguments(transformers: Any, config: TrainConfig, out: Path, *, cpu: bool) -> Any:
    """The Trainer's settings: one session per forward pass (no padding), ``batch_size`` of them per optimizer step,
    a cosine schedule, the loss logged every step, a checkpoint every ``save_steps`` (the last one kept)."""
    return transformers.TrainingArguments(
        output_dir=str(out / CHECKPOINTS),
        num_train_epochs=config.epochs,
        max_steps=config.max_steps if config.max_steps is not None else -1,
        per_device_train_batch_size=1,
        gradient_accumulation_steps=config.batch_size,
        learning_rate=config.learning_rate,
        lr_scheduler_type="cosine",
        logging_steps=1,
        save_strategy="steps",
        save_steps=config.save_steps,
        save_total_limit=1,
        seed=config.seed,
        data_seed=config.seed,
        use_cpu=cpu,
        report_to=[],
        disable_tqdm=True,
        include_num_input_tokens_seen=True,
        remove_unused_columns=False,
    )


def resume_training(out: str | Path, **runtime: Any) -> TrainReport:
    """Continue the training run in ``out`` with the settings it was started with (``runtime``: ``device``,
    ``threads``, ``on_progress``, which do not change what is trained).

    Raises:
        ConfigError: ``out`` holds no training run.
    """
    path = Path(out) / CONFIG
    if not path.is_file():
        raise ConfigError(f"{out} holds no training run to resume (no {CONFIG})")
    config = _read_config(path)
    base = _base_path(None)
    if base.name != config.base:
        raise ConfigError(f"{out} was trained from {config.base}; resume it from Python with base=PATH")
    return train(
        [s.path for s in config.suites],
        out,
        base=base,
        held_out=[s.path for s in config.held_out],
        resume=True,
        **config.model_dump(include=SETTINGS),
        **runtime,
    )


def _base_path(base: str | Path | None) -> Path:
    if base is None:
        from toolwild.llm.backends.local import default_model_path

        return default_model_path()
    return Path(base)


class _Tracker:
    """What the Trainer reports as it goes: the losses (the state's log history, which a resume restores, so the
    losses logged before a kill are kept), the first step this process ran, the tokens seen before it, and progress."""

    def __init__(self, progress: Callable[[TrainProgress], None]) -> None:
        self.progress = progress
        self.losses: list[tuple[int, float]] = []
        self.first_step: int | None = None
        self.tokens_before = 0

    def callback(self, transformers: Any) -> Any:
        """A transformers ``TrainerCallback`` (made here: transformers is imported only when training)."""
        tracker = self

        class Callback(transformers.TrainerCallback):
            def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
                tracker.tokens_before = int(getattr(state, "num_input_tokens_seen", 0) or 0)

            def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any) -> None:
                tracker.losses = [
                    (int(e["step"]), round(float(e["loss"]), 5)) for e in state.log_history if "loss" in e
                ]

            def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
                if tracker.first_step is None:
                    tracker.first_step = state.global_step - 1
                loss = tracker.losses[-1][1] if tracker.losses else None
                tracker.progress(TrainProgress(step=state.global_step, total=state.max_steps, loss=loss, phase="train"))

        return Callback()
