"""`Environment`: a set of tools with the state they act on and how calls are executed.

Only the description lives here (pure data); executing calls is the job of ``toolwild.envs``.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from toolwild.core.tool import Tool

__all__ = ["BackendKind", "Environment"]


class BackendKind(StrEnum):
    """How an environment answers calls: Python code, an LLM simulator, or recorded observations."""

    PYTHON = "python"
    LLM = "llm"
    REPLAY = "replay"


class Environment(BaseModel):
    """A tool set in a field/subdomain, with optional seed state."""

    model_config = ConfigDict(extra="forbid")

    format_version: int = 1
    id: str
    field: str = ""
    subdomain: str = ""
    tools: list[Tool] = Field(default_factory=list)
    initial_state: dict[str, Any] = Field(default_factory=dict)
    backend: BackendKind = BackendKind.REPLAY
