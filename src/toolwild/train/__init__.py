"""Fine-tuning a small open model on toolwild's gold trajectories (the ``train`` extra: torch, transformers, PEFT).

:mod:`.examples` turns sessions into token sequences with loss on the assistant's replies, :mod:`.gguf_model` reads
the base GGUF and writes the tuned one, :mod:`.finetune` runs the training. A package because the three are separate
jobs over the same model; only :mod:`.finetune` and :mod:`.gguf_model` import the training stack, and lazily.
"""

from toolwild._exports import lazy_exports

_EXPORTS = {
    "TrainConfig": "toolwild.train.finetune",
    "TrainProgress": "toolwild.train.finetune",
    "TrainReport": "toolwild.train.finetune",
    "WeightType": "toolwild.train.gguf_model",
    "overlapping_sessions": "toolwild.train.examples",
    "prompt_mode_messages": "toolwild.train.examples",
    "tokenize_conversation": "toolwild.train.examples",
    "train": "toolwild.train.finetune",
    "write_tuned_gguf": "toolwild.train.gguf_model",
}
"""Each public name and the module that defines it (see :mod:`toolwild._exports`)."""

__all__ = [
    "TrainConfig",
    "TrainProgress",
    "TrainReport",
    "WeightType",
    "overlapping_sessions",
    "prompt_mode_messages",
    "tokenize_conversation",
    "train",
    "write_tuned_gguf",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
