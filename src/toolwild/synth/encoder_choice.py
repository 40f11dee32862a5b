"""Which encoder measures a suite's semantic diversity, chosen from an ``--encoder`` value before a long run.

Why a module of its own: ``toolwild validate --quality`` and ``toolwild synth sessions`` (and its library call,
:func:`toolwild.jobs.sessions.generate_sessions`) both choose the encoder the same way: an unknown name is refused
before any work, a missing package turns the figure off with the reason instead of failing the run, and the encoder
itself is loaded only when the figure is computed (:class:`LoadedOnUse`). The encoders are in
:mod:`toolwild.synth.embedding`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from toolwild.errors import ConfigError

if TYPE_CHECKING:
    from toolwild.core.quality import TextEncoder
    from toolwild.synth.embedding import Embedder

__all__ = ["NO_ENCODER", "EmbedProgress", "LoadedOnUse", "check_encoder", "quality_encoder"]

NO_ENCODER = "none"
"""``--encoder none`` on the quality commands: no semantic figure (nothing loaded or embedded)."""

EmbedProgress = Callable[[str, int], AbstractContextManager[Callable[[int], None]]]
"""Shows an embedding's progress: called with a label and the number of texts, it gives a context manager (open
while the texts are embedded) yielding the function told how many more texts are done (a CLI's progress bar)."""


def check_encoder(name: str) -> None:
    """Refuse an unknown ``--encoder`` before a long run rather than after it."""
    from toolwild.synth.embedding import ENCODERS

    if name not in (*ENCODERS, NO_ENCODER):
        raise ConfigError(f"--encoder {name!r}: choose one of {', '.join((*ENCODERS, NO_ENCODER))}")


def quality_encoder(name: str, *, progress: EmbedProgress | None = None) -> tuple[TextEncoder | None, str | None]:
    """The encoder of the semantic diversity figure for an ``--encoder`` value, or None and why.

    Never fails for a missing package (the figure is informational, and a generation run must still write its
    report): the figure is then None with the reason. An unknown name is a :class:`ConfigError`. The encoder is
    loaded only when the figure is computed (see :class:`LoadedOnUse`), its embedding shown by ``progress``.
    """
    from toolwild.synth.embedding import sentence_encoder_missing, token_encoder_missing

    check_encoder(name)
    if name == NO_ENCODER:
        return None, "not measured (--encoder none)"
    fallback = sentence_encoder_missing() if name == "auto" else None
    if fallback is not None and (no_token := token_encoder_missing()) is not None:
        return None, f"not measured: no encoder is installed ({fallback}; {no_token})"
    return LoadedOnUse(name, fallback, progress=progress), None


class LoadedOnUse:
    """An ``--encoder`` loaded when first asked to embed (its progress shown by ``progress``, when given).

    Why: the token fallback takes 15-20 s to load (most of it the PCA of the vocabulary) and cannot measure a suite
    of fewer than 200 distinct utterances anyway; the figure asks whether it is corpus-fitted first, and only then
    for vectors. Until loaded, the label is the name (with the reason for a fallback), the one a note shows.
    """

    def __init__(self, name: str, fallback: str | None, *, progress: EmbedProgress | None = None) -> None:
        self._name = name
        self._fallback = fallback
        self._progress = progress
        self._embedder: Embedder | None = None

    @property
    def label(self) -> str:
        if self._embedder is not None:
            return self._embedder.info.label()
        return f"token, the fallback: {self._fallback}" if self._fallback else self._name

    @property
    def corpus_fitted(self) -> bool:
        if self._embedder is not None:
            return self._embedder.info.corpus_fitted
        return self._name == "token" or self._fallback is not None

    def embed(self, texts: Sequence[str]) -> Any:
        from toolwild.synth.embedding import load_embedder

        if self._embedder is None:
            self._embedder = load_embedder(self._name)
        embedder = self._embedder
        if self._progress is None:
            return embedder.embed_corpus(texts)
        with self._progress(f"embedding utterances ({embedder.info.name})", len(texts)) as advance:
            return embedder.embed_corpus(texts, advance)
