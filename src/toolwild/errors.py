"""The toolwild exception tree.

Every error toolwild raises on purpose derives from :class:`ToolwildError`, so callers can catch at any level::

    ToolwildError
    ├── ConfigError            a bad option or combination of options
    ├── DataError              bad input data: names the file, line and field
    └── ScoringError           a suite and a result file that do not belong together

Errors carry their context as attributes (not only in the message) so the CLI can print them as a table and a
caller can react to, say, the line number of a bad record without parsing text.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["ConfigError", "DataError", "ScoringError", "ToolwildError"]


class ToolwildError(Exception):
    """Root of every error toolwild raises on purpose."""


class ConfigError(ToolwildError):
    """A bad option or an impossible combination of options."""


class DataError(ToolwildError):
    """Bad input data, located as precisely as we can: file, 1-based line, and field path.

    Why a dedicated type: a malformed record must never crash a whole run. Loaders raise ``DataError`` for one
    record, and a loader asked to skip bad records catches exactly this type, counts it and goes on.
    """

    def __init__(
        self,
        message: str,
        *,
        file: str | Path | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.message = message
        self.file = str(file) if file is not None else None
        self.line = line
        self.field = field
        super().__init__(self.__str__())

    def __str__(self) -> str:
        where = []
        if self.file is not None:
            where.append(self.file)
        if self.line is not None:
            where.append(f"line {self.line}")
        if self.field:
            where.append(f"field {self.field!r}")
        prefix = ", ".join(where)
        return f"{prefix}: {self.message}" if prefix else self.message

    def located(self, *, file: str | Path | None = None, line: int | None = None) -> DataError:
        """Return a copy that also names the file and line, keeping what is already known."""
        return DataError(
            self.message,
            file=self.file if self.file is not None else file,
            line=self.line if self.line is not None else line,
            field=self.field,
        )


class ScoringError(ToolwildError):
    """A result file and a suite that do not belong together (unknown session id, wrong task count)."""
