"""toolwild: synthesize wild tool-use sessions and evaluate tool-calling agents on them."""

__version__ = "0.1.0"

