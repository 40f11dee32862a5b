"""A content-addressed response cache in SQLite (WAL), shared safely by many concurrent calls.

The key is the SHA-256 of the canonical JSON of everything that can change a reply: the backend's identity
(kind, model, endpoint), the whole request (messages, tools, tool choice, response format, temperature, seed,
max tokens) and the client's own transformations (prompt mode). Re-running anything with the same inputs therefore
costs no model call and returns the very same completion. The first response stored for a key wins, so concurrent
writers cannot make a replay depend on timing.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
import time
from enum import StrEnum
from pathlib import Path
from typing import Any

from toolwild.llm.types import ChatRequest, Completion, canonical_json

__all__ = ["CacheMode", "ResponseCache", "cache_key"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    completion TEXT NOT NULL,
    model TEXT,
    created REAL NOT NULL
)
"""


class CacheMode(StrEnum):
    """``read-write`` (default), ``read-only`` (replay: a miss is an error) or ``off``."""

    READ_WRITE = "read-write"
    READ_ONLY = "read-only"
    OFF = "off"


def cache_key(identity: dict[str, Any], request: ChatRequest, transform: dict[str, Any] | None = None) -> str:
    """The content address of a request sent to a backend."""
    payload = {"backend": identity, "request": request.cache_payload(), "transform": transform or {}}
    return hashlib.sha256(canonical_json(payload).encode("utf-8")).hexdigest()


class ResponseCache:
    """Completions by content address, in one SQLite file.

    Args:
        path: the database file (created with its folder); None keeps the cache in memory.
        mode: read-write, read-only or off.
    """

    def __init__(self, path: str | Path | None, *, mode: CacheMode = CacheMode.READ_WRITE) -> None:
        self.mode = CacheMode(mode)
        self.path = Path(path) if path is not None else None
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        if self.mode is not CacheMode.OFF:
            if self.path is not None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            target = str(self.path) if self.path is not None else ":memory:"
            conn = sqlite3.connect(target, check_same_thread=False, timeout=30.0, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA busy_timeout=30000")
            conn.execute(_SCHEMA)
            self._conn = conn

    @property
    def readable(self) -> bool:
        """Whether lookups are made."""
        return self._conn is not None

    @property
    def writable(self) -> bool:
        """Whether new responses are stored."""
        return self._conn is not None and self.mode is CacheMode.READ_WRITE

    def get(self, key: str) -> Completion | None:
        """The stored completion for ``key``, or None."""
        if self._conn is None:
            return None
        with self._lock:
            row = self._conn.execute("SELECT completion FROM responses WHERE key = ?", (key,)).fetchone()
        return Completion.model_validate_json(row[0]) if row else None

    def put(self, key: str, completion: Completion) -> None:
        """Store a completion unless one is already stored for ``key`` (first writer wins)."""
        if not self.writable:
            return
        assert self._conn is not None
        with self._lock:
            self._conn.execute(
                "INSERT OR IGNORE INTO responses (key, completion, model, created) VALUES (?, ?, ?, ?)",
                (key, completion.model_dump_json(), completion.model, time.time()),
            )

    def __len__(self) -> int:
        if self._conn is None:
            return 0
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def close(self) -> None:
        """Close the database."""
        if self._conn is not None:
            with self._lock:
                self._conn.close()
            self._conn = None
