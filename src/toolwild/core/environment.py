"""`Environment`: a set of tools with the state they act on and how calls are executed.

Only the description lives here (pure data, the ``*.env.json`` file format); executing calls is the job of
``toolwild.envs``. Built-in Python domains are referred to by id; generated or imported environments travel as
files holding this model, so a suite can name the environment its sessions run on and anyone can re-run them.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from toolwild.core.tool import Tool

__all__ = ["DEFAULT_MCP_TIMEOUT_S", "BackendKind", "Environment", "McpServer", "Recording"]

DEFAULT_MCP_TIMEOUT_S = 30.0
"""Seconds an MCP server may take to start or to answer one call before the call answers ``unavailable``."""

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class BackendKind(StrEnum):
    """How an environment answers calls: Python code, an LLM simulator, recorded observations, or a live MCP
    server."""

    PYTHON = "python"
    LLM = "llm"
    REPLAY = "replay"
    MCP = "mcp"


class McpServer(BaseModel):
    """How to reach the MCP server an environment was imported from: a command (stdio) or a URL (streamable HTTP).

    Why no secrets: environment files are shared, committed and attached to suites. ``env`` therefore holds only the
    *names* of the variables the server needs; their values are read from the caller's environment each time the
    server starts. A URL with a user name or password in it is refused for the same reason (HTTP headers, where a
    token would go, are not kept at all).
    """

    model_config = ConfigDict(extra="forbid")

    command: list[str] | None = None
    """The program and its arguments (stdio): a new process per episode."""
    url: str | None = None
    """The streamable-HTTP endpoint (``http(s)://host/mcp``): a new MCP session per episode."""
    cwd: str | None = None
    """Working directory of the command (where ``python server.py`` was typed at import time)."""
    env: list[str] = Field(default_factory=list)
    """Names of environment variables passed to the command from the caller's environment (values never stored)."""
    timeout_s: float = Field(default=DEFAULT_MCP_TIMEOUT_S, gt=0)
    """Seconds the server may take to start or to answer one call; past it the call answers ``unavailable``."""

    @field_validator("command")
    @classmethod
    def _command(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and (not value or not value[0].strip()):
            raise ValueError("the command needs a program to run")
        return value

    @field_validator("url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is None:
            return value
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {value!r}")
        if parts.username is not None or parts.password is not None:
            raise ValueError("the URL holds credentials (user:password@): they are never stored in a file")
        return value

    @field_validator("env")
    @classmethod
    def _env(cls, value: list[str]) -> list[str]:
        for name in value:
            if not _ENV_NAME.fullmatch(name):
                raise ValueError(f"{name!r} is not an environment variable name (names only: values are not stored)")
        return value

    @model_validator(mode="after")
    def _one_transport(self) -> McpServer:
        if (self.command is None) == (self.url is None):
            raise ValueError("give exactly one of command (stdio) and url (streamable HTTP)")
        if self.url is not None and (self.env or self.cwd):
            raise ValueError("env and cwd apply to a command, not to a url")
        return self

    def describe(self) -> str:
        """The server in a few words, for messages (never a secret: there is none in it)."""
        return " ".join(self.command) if self.command is not None else str(self.url)


class Recording(BaseModel):
    """One recorded call and what the real service answered (the ``replay`` backend's data)."""

    model_config = ConfigDict(extra="forbid")

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    observation: Any = None


class Environment(BaseModel):
    """A tool set in a field/subdomain, with its seed state and, for ``replay``, its recordings."""

    model_config = ConfigDict(extra="forbid")

    format_version: int = 1
    id: str
    description: str = ""
    """What the service is, in a sentence or two (the simulator is told it)."""
    field: str = ""
    subdomain: str = ""
    tools: list[Tool] = Field(default_factory=list)
    initial_state: dict[str, Any] = Field(default_factory=dict)
    """Seed data: the entities every episode starts with (customers, flights, accounts ...)."""
    backend: BackendKind = BackendKind.REPLAY
    recordings: list[Recording] = Field(default_factory=list)
    source: dict[str, Any] = Field(default_factory=dict)
    """Where the environment came from (format, file, spec number ...), for provenance."""
    mcp: McpServer | None = None
    """The MCP server the tools were imported from: the ``mcp`` backend starts it; kept with other backends too, so
    switching ``backend`` back to ``mcp`` is a one-word edit. Files without it read as before (format version 1)."""

    @model_validator(mode="after")
    def _mcp_backend_has_a_server(self) -> Environment:
        if self.backend is BackendKind.MCP and self.mcp is None:
            raise ValueError("an mcp environment needs `mcp`: the server's command or url")
        return self
