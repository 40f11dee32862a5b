"""Environments by reference: a built-in id (``ledger``) or an environment file (``shop.env.json``).

Built-in Python domains are imported lazily, so one domain's dependencies never burden another. A file names its
backend: ``replay`` answers from recordings, ``llm`` needs a simulator model (an :class:`~toolwild.llm.client.LLM`
the caller supplies, so the choice of model and its cache stay with the run). :func:`open_environment` opens one
to be called by hand or served (``toolwild env``, ``toolwild serve mcp``): the user's own ledger when one is given,
and a simulator built from a model name only when the environment needs one.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from importlib import import_module
from pathlib import Path

from toolwild.core.environment import BackendKind, Environment
from toolwild.core.formats.environment import load_environment
from toolwild.core.session import Session
from toolwild.core.tool import Tool
from toolwild.envs.base import EnvironmentBackend
from toolwild.envs.replay import ReplayEnvironment
from toolwild.envs.simulated import SimulatedEnvironment
from toolwild.errors import ConfigError
from toolwild.llm.client import LLM
from toolwild.llm.registry import create_llm

__all__ = [
    "ENVIRONMENTS",
    "anchor_session",
    "backend_for",
    "check_session_environments",
    "describe_environment",
    "environment_tools",
    "file_sha256",
    "get_environment",
    "ledger_backend",
    "open_environment",
    "own_ledger",
    "resolve_environment_file",
    "session_environment",
]

ENVIRONMENTS: dict[str, str] = {
    "ledger": "toolwild.envs.domains.ledger.environment:ledger_environment",
    "inventory": "toolwild.envs.domains.inventory.environment:inventory_environment",
}
"""Environment id -> ``module:factory`` (a factory takes no arguments and returns an EnvironmentBackend)."""

_builtin: dict[str, EnvironmentBackend] = {}
_files: dict[tuple[Path, int, int], Environment] = {}
_ledgers: dict[tuple[Path, int, int, bool, bool], EnvironmentBackend] = {}
_digests: dict[tuple[Path, int, int], str] = {}
"""Loaded files by (path, mtime, size): a file edited while the process runs is read again."""


def _builtin_environment(env_id: str) -> EnvironmentBackend:
    if env_id not in _builtin:
        module, _, name = ENVIRONMENTS[env_id].partition(":")
        factory: Callable[[], EnvironmentBackend] = getattr(import_module(module), name)
        _builtin[env_id] = factory()
    return _builtin[env_id]


def resolve_environment_file(ref: str, base_dir: Path | None = None) -> Path | None:
    """The file a reference names, or None.

    A suite names its environment files relative to its own folder (``base_dir``), and only there: a file of the
    same name in the working directory must never shadow the one beside the suite, or stand in for a missing one
    (the figures would then depend on where the command ran). Without ``base_dir`` (a reference typed on the command
    line) a relative reference is read from the working directory; an absolute one is read as it is.
    """
    path = Path(ref)
    candidate = path if path.is_absolute() or base_dir is None else base_dir / path
    return candidate.resolve() if candidate.is_file() else None


def _described(ref: str, base_dir: Path | None) -> Environment:
    path = resolve_environment_file(ref, base_dir)
    if path is None:
        known = ", ".join(sorted(ENVIRONMENTS))
        raise ConfigError(f"unknown environment {ref!r}: not a built-in ({known}) and no such environment file")
    stat = path.stat()
    key = (path, stat.st_mtime_ns, stat.st_size)
    if key not in _files:
        _files[key] = load_environment(path)
    return _files[key]


def describe_environment(ref: str, *, base_dir: Path | None = None) -> Environment | None:
    """The description in an environment file (None for a built-in, whose description is its code)."""
    return None if ref in ENVIRONMENTS else _described(ref, base_dir)


def environment_tools(ref: str, *, base_dir: Path | None = None) -> list[Tool]:
    """An environment's tools, without starting anything (no simulator model is needed to describe one)."""
    if ref in ENVIRONMENTS:
        return _builtin_environment(ref).tools
    return list(_described(ref, base_dir).tools)


def backend_for(environment: Environment, *, simulator: LLM | None = None) -> EnvironmentBackend:
    """The backend that runs an environment description."""
    if environment.backend is BackendKind.REPLAY:
        return ReplayEnvironment(environment)
    if environment.backend is BackendKind.LLM:
        if simulator is None:
            raise ConfigError(
                f"environment {environment.id!r} is simulated by a model: choose one (e.g. --env-model local)"
            )
        return SimulatedEnvironment(environment, simulator)
    if environment.backend is BackendKind.MCP:
        from toolwild.envs.mcp import mcp_backend

        return mcp_backend(environment)
    if environment.id in ENVIRONMENTS:
        return _builtin_environment(environment.id)
    raise ConfigError(f"environment {environment.id!r} says it is Python code, but no built-in has that id")


def get_environment(ref: str, *, simulator: LLM | None = None, base_dir: Path | None = None) -> EnvironmentBackend:
    """The environment a reference names (built-ins are built once per process; episodes are always isolated)."""
    if ref in ENVIRONMENTS:
        return _builtin_environment(ref)
    return backend_for(_described(ref, base_dir), simulator=simulator)


def _file_key(path: Path) -> tuple[Path, int, int]:
    stat = path.stat()
    return (path.resolve(), stat.st_mtime_ns, stat.st_size)


def ledger_backend(
    path: Path, *, write_through: bool = False, allow_outside_includes: bool | None = None
) -> EnvironmentBackend:
    """The ``ledger`` environment on a user's own Beancount file (``--ledger FILE``).

    Every episode starts from a copy of the file and of everything it includes, so the user's books are never
    written; ``write_through`` (only ``serve mcp ledger --write-through``) writes them in place, each write validated
    and atomic. Built once per file version: a file edited while the process runs is loaded again. Its includes must
    stay in its folder unless ``allow_outside_includes`` (None: ``TOOLWILD_ALLOW_OUTSIDE_INCLUDES`` decides).

    Raises:
        ConfigError: no such file, or the ledger does not load (the message names the directive).
    """
    if not path.is_file():
        raise ConfigError(f"--ledger {path}: no such file")
    from toolwild.envs.domains.ledger.environment import ledger_environment
    from toolwild.envs.domains.ledger.files import outside_includes_allowed

    outside = outside_includes_allowed(allow_outside_includes)
    key = (*_file_key(path), write_through, outside)
    if key not in _ledgers:
        _ledgers[key] = ledger_environment(
            ledger=path.resolve(), write_through=write_through, allow_outside_includes=outside
        )
    return _ledgers[key]


def own_ledger(
    env: str, ledger: Path | None, *, write_through: bool = False, allow_outside_includes: bool = False
) -> EnvironmentBackend | None:
    """The ledger environment on the user's own books when ``ledger`` is given (only with ``env`` ``ledger``), else
    None; asking for write-through or outside includes without a ledger is refused (they are about that file).

    ``allow_outside_includes`` lets the ledger include files outside its folder; without it
    ``TOOLWILD_ALLOW_OUTSIDE_INCLUDES`` decides (by default such an include is refused, unread). The messages name
    the command-line options (``--ledger``, ``--write-through``, ``--allow-outside-includes``), as
    :func:`ledger_backend`'s do: ``toolwild env`` and ``toolwild serve mcp`` pass them through unchanged.

    Raises:
        ConfigError: an option without ``ledger``, a ledger with another environment, or a ledger that does not load.
    """
    if ledger is None:
        if write_through:
            raise ConfigError("--write-through needs --ledger FILE: it writes your own books")
        if allow_outside_includes:
            raise ConfigError("--allow-outside-includes needs --ledger FILE: it is about your ledger's includes")
        return None
    if env != "ledger":
        raise ConfigError(f"--ledger works with the ledger environment only, not {env!r}")
    return ledger_backend(
        ledger, write_through=write_through, allow_outside_includes=True if allow_outside_includes else None
    )


def open_environment(
    env: str,
    *,
    model: str = "local",
    base_url: str | None = None,
    cache: Path | None = None,
    ledger: Path | None = None,
    write_through: bool = False,
    allow_outside_includes: bool = False,
) -> tuple[EnvironmentBackend, LLM | None]:
    """The environment a reference names, opened to be called by hand or served: the user's own books when
    ``ledger`` is given (see :func:`own_ledger`), else :func:`get_environment`, with a simulator built from ``model``
    (``base_url``, ``cache``) only when the environment is model-simulated (loading a model takes time).

    Returns the backend and the simulator it uses (None when it needs none): the caller closes the simulator.
    """
    books = own_ledger(env, ledger, write_through=write_through, allow_outside_includes=allow_outside_includes)
    if books is not None:
        return books, None
    description = describe_environment(env)
    if description is None or description.backend is not BackendKind.LLM:
        return get_environment(env), None
    llm = create_llm(model, base_url=base_url, cache=cache)
    return get_environment(env, simulator=llm), llm


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file's bytes (cached per file version): how a suite pins the ledger it was made on."""
    key = _file_key(path)
    if key not in _digests:
        _digests[key] = hashlib.sha256(path.read_bytes()).hexdigest()
    return _digests[key]


def session_environment(
    session: Session, *, simulator: LLM | None = None, base_dir: Path | None = None
) -> EnvironmentBackend:
    """The environment a session runs on: its ``environment`` reference, or, for a ledger session made on a user's
    own books, the snapshot of those books the suite keeps beside it (``extra["ledger_file"]``, relative to the
    suite's folder, pinned by ``extra["ledger_sha256"]``).

    Raises:
        ConfigError: the environment is unknown, or the session's ledger is missing or changed since the suite was
            made (its gold would no longer match: regenerate the suite).
    """
    from toolwild.envs.renamed import renamed_for_session  # a session perturbed with renamed tools maps them back

    return renamed_for_session(session, _session_backend(session, simulator=simulator, base_dir=base_dir))


def anchor_session(session: Session, folder: Path) -> Session:
    """The session with every file it names relative to its suite's folder (``folder``) made absolute: its
    environment file and the snapshot of the user's own books (``extra["ledger_file"]``).

    Why: a copy of a suite written elsewhere (the ``suite.jsonl`` an eval run keeps of the sessions it runs) resolves
    relative names against its own folder, where those files are not; own-books sessions then failed to find their
    ledger. A built-in id (``ledger``) is never a file, even when a file of that name lies beside the suite, and a
    name that resolves to nothing is left as it is, so the error still names what the suite says.
    """
    update: dict[str, object] = {}
    env = session.environment
    if env and env not in ENVIRONMENTS and not Path(env).is_absolute():
        found = resolve_environment_file(env, folder)
        if found is not None:
            update["environment"] = str(found)
    ledger_file = session.extra.get("ledger_file")
    if isinstance(ledger_file, str) and not Path(ledger_file).is_absolute() and (folder / ledger_file).is_file():
        update["extra"] = {**session.extra, "ledger_file": str((folder / ledger_file).resolve())}
    return session.model_copy(update=update) if update else session


def check_session_environments(
    sessions: Iterable[Session], *, simulator: LLM | None = None, base_dir: Path | None = None
) -> None:
    """Open the environment of every distinct (environment, own-books ledger) of the sessions once: a missing or
    unknown environment, a simulated one without a simulator model, or own books missing or changed since the suite
    was made is a setup error, said before any session runs (and, from the command line, before anything is written).

    Raises:
        ConfigError: as :func:`session_environment`.
    """
    distinct: dict[tuple[str, str], Session] = {}
    for s in sessions:
        if s.environment:
            distinct.setdefault((s.environment, str(s.extra.get("ledger_file"))), s)
    for key in sorted(distinct):
        session_environment(distinct[key], simulator=simulator, base_dir=base_dir)


def _session_backend(session: Session, *, simulator: LLM | None, base_dir: Path | None) -> EnvironmentBackend:
    ledger_file = session.extra.get("ledger_file")
    if session.environment != "ledger" or not isinstance(ledger_file, str):
        return get_environment(session.environment or "", simulator=simulator, base_dir=base_dir)
    path = Path(ledger_file)
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    if not path.is_file():
        raise ConfigError(f"session {session.id!r}: its ledger {ledger_file!r} is missing (looked for {path})")
    pinned = session.extra.get("ledger_sha256")
    if isinstance(pinned, str) and file_sha256(path) != pinned:
        raise ConfigError(
            f"session {session.id!r}: the ledger {path} changed since the suite was made (sha256 differs); its gold "
            "no longer applies: make the suite again"
        )
    return ledger_backend(path)
