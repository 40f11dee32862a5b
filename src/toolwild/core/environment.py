"""`Environment`: a set of tools with the state they act on and how calls are executed.

Only the description lives here (pure data, the ``*.env.json`` file format); executing calls is the job of
``toolwild.envs``. Built-in Python domains are referred to by id; generated or imported environments travel as
files holding this model, so a suite can name the environment its sessions run on and anyone can re-run them.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from toolwild.core.tool import Tool

__all__ = ["BackendKind", "Environment", "Recording"]


class BackendKind(StrEnum):
    """How an environment answers calls: Python code, an LLM simulator, or recorded observations."""

    PYTHON = "python"
    LLM = "llm"
    REPLAY = "replay"


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
