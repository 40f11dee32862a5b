"""Whole jobs as library calls: what ``toolwild eval`` and ``toolwild synth`` do, callable from Python.

Why a layer of its own: a job joins every layer below it (it evaluates, scores, writes the report, exports), so it
can live neither in ``eval`` nor in ``report``; the CLI above it only parses options, calls a job and prints.
"""
