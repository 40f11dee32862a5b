"""The ledger environment: a fresh, isolated copy of a Beancount ledger per episode (a seeded one, or the user's)."""

from __future__ import annotations

from pathlib import Path

from toolwild.envs.domains.ledger.book import load_ledger_file
from toolwild.envs.domains.ledger.files import LedgerError, outside_includes_allowed
from toolwild.envs.domains.ledger.tools import LedgerEpisode
from toolwild.envs.python import PythonEnvironment

__all__ = ["ledger_environment"]


def ledger_environment(
    seed: int = 0,
    *,
    ledger: Path | None = None,
    write_through: bool = False,
    allow_outside_includes: bool | None = None,
) -> PythonEnvironment:
    """The ``ledger`` environment.

    Without ``ledger``, ``reset(seed=s)`` starts an episode on the ledger generated from ``seed + s``. A suite
    stores each session's ledger seed (``Session.extra["ledger_seed"]``), so with the default ``seed=0``
    ``reset(seed=session.extra["ledger_seed"])`` recreates exactly the ledger the session's gold was recorded on.

    With ``ledger`` (a user's Beancount file), every reset starts from that ledger as it is at that moment (the seed
    is ignored): on a copy of it and its includes, or on the files themselves with ``write_through``. The ledger is
    checked once here, so a file that does not load fails before any episode starts, and that check's load is
    the first episode's (when no file changed in between): ``env call``, a shell or an MCP session loads a big
    ledger once, not twice. Every later episode loads it once.

    Args:
        seed: an offset added to every reset seed (generated ledgers only).
        ledger: a user's ledger file.
        write_through: episodes write the user's files in place (validated, atomic, locked); needs ``ledger``.
        allow_outside_includes: the ledger may include files outside its folder (None:
            ``TOOLWILD_ALLOW_OUTSIDE_INCLUDES`` decides, once, here); otherwise such an include is refused unread.

    Raises:
        LedgerError: (a ``ConfigError``) the ledger does not load cleanly (naming file, line and construct), or
            ``write_through`` without ``ledger``.
    """
    if ledger is None:
        if write_through:
            raise LedgerError("write_through works on a user's ledger file: give ledger too")
        return PythonEnvironment("ledger", LedgerEpisode, factory=lambda s: LedgerEpisode(seed=seed + s))
    path = Path(ledger).expanduser()
    outside = outside_includes_allowed(allow_outside_includes)
    checked = [load_ledger_file(path, allow_outside_includes=outside)]

    def episode(_seed: int) -> LedgerEpisode:
        try:
            first = checked.pop()  # the check's load goes to one episode only: it takes it over
        except IndexError:
            first = None
        return LedgerEpisode(
            ledger_path=path, write_through=write_through, allow_outside_includes=outside, loaded=first
        )

    return PythonEnvironment("ledger", LedgerEpisode, factory=episode)
