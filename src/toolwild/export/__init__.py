"""Writing results in other tools' formats (published WildToolBench results; training data later)."""
