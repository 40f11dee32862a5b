"""The toolwild exception tree.

Every error toolwild raises on purpose derives from :class:`ToolwildError`, so callers can catch at any level (only
private signals caught in their own module are plain exceptions). The classes defined elsewhere name their module
(relative to ``toolwild``); one that is also a ``ValueError`` says so::

    ToolwildError
    ├── ConfigError            a bad option or combination of options
    │   ├── MissingDependencyError   an optional package is not installed (the message says what to install)
    │   └── LedgerError              envs.domains.ledger.files: a ledger that cannot be read or does not load
    │                                cleanly (also a ValueError)
    ├── DataError              bad input data: names the file, line and field
    ├── ScoringError           a suite and a result file that do not belong together
    ├── HarnessError           a toolwild or environment bug inside a session: the run ends loudly
    ├── BackendError           a model call failed
    │   ├── TransientBackendError    timeouts, 408/409/429/5xx, connection errors, malformed responses:
    │   │   │                        retried; after the last retry a *provider* error, never a wrong answer
    │   │   └── MalformedResponseError   the provider answered, but not with a usable completion (no choices ...)
    │   ├── ModelOutputError         the model answered with unusable output (a tool call without a name ...):
    │   │                            the model's failure, so the task fails; never retried as a provider error
    │   ├── PermanentBackendError    4xx other than the above (bad request, auth): retrying cannot help
    │   ├── CacheMissError           read-only cache mode and the request is not cached
    │   ├── ScriptExhaustedError     a scripted backend has no response left for a request
    │   ├── StructuredOutputError    the model never produced output valid against the asked schema
    │   └── GenerationAborted        llm.backends.local: a generation whose caller went away
    ├── UserSimulatorError     eval.user: the simulated user gave no usable turn (the simulator's error, not the
    │                          agent's)
    ├── UnitFailure            run.units: a unit that failed in another process, its message carried over
    ├── ToolFailure            envs.toolkit: a tool answering with a typed error (becomes the call's observation)
    ├── McpUnavailable         envs.mcp: an MCP server that cannot be reached (becomes an ``unavailable`` answer)
    ├── PatchError             envs.patch: a simulator's state patch that does not apply (also a ValueError)
    ├── QueryError             envs.domains.ledger.query: BQL that does not run (also a ValueError)
    ├── InvalidReply           llm.structured: a reply a check refuses, shown to the model to fix (also a
    │                          ValueError)
    ├── Dropped                synth.tasks: a task attempt that failed; generation tries another
    │   └── Unanswerable             synth.sessions: an environment whose simulator keeps failing (given up)
    └── GenerationError        synth.providers.ledger.scenario: a gold call failed while a template recorded it

Errors carry their context as attributes (not only in the message) so the CLI can print them as a table and a
caller can react to, say, the line number of a bad record without parsing text.
"""

from __future__ import annotations

from pathlib import Path

__all__ = [
    "BackendError",
    "CacheMissError",
    "ConfigError",
    "DataError",
    "HarnessError",
    "MalformedResponseError",
    "MissingDependencyError",
    "ModelOutputError",
    "PermanentBackendError",
    "ScoringError",
    "ScriptExhaustedError",
    "StructuredOutputError",
    "ToolwildError",
    "TransientBackendError",
]


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


class HarnessError(ToolwildError):
    """A session broke for a reason that is neither the agent's nor the provider's: an environment that raised, or
    a bug in toolwild itself.

    Why its own type: such a session says nothing about the agent, so it is never scored as the agent failing (that
    would blame the agent) nor quietly left out (that would flatter the figures); the run lists it and exits
    non-zero.
    """


class MissingDependencyError(ConfigError):
    """An optional dependency is missing; the message names the package and how to install it."""


class BackendError(ToolwildError):
    """A model call failed."""


class TransientBackendError(BackendError):
    """A failure of the provider, not of the model: retried, and reported apart from model behaviour.

    ``retry_after`` carries the server's hint (seconds) when it sent one; ``status`` the HTTP status if any.
    """

    def __init__(self, message: str, *, status: int | None = None, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


class MalformedResponseError(TransientBackendError):
    """The provider answered without a usable completion (no choices, no message ...)."""


class ModelOutputError(BackendError):
    """The model itself produced output no agent can act on (a tool call without a name, an empty reply where
    one is required).

    Why apart from :class:`MalformedResponseError`: a provider that answers garbage is the provider's failure and
    is left out of accuracy, but a model that writes garbage failed its task; counting it as a provider error
    would raise the accuracy of a worse model.
    """


class PermanentBackendError(BackendError):
    """A request the provider refuses for good (bad request, authentication): retrying cannot help."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class CacheMissError(BackendError):
    """The cache is read-only (replay) and holds no response for this request."""


class ScriptExhaustedError(BackendError):
    """A scripted backend was asked for more responses than it was given."""


class StructuredOutputError(BackendError):
    """No reply validated against the requested schema within the allowed attempts; holds the last error."""

    def __init__(self, message: str, *, last_reply: str | None = None, attempts: int = 0) -> None:
        super().__init__(message)
        self.last_reply = last_reply
        self.attempts = attempts
