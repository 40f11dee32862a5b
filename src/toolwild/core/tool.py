"""`Tool`: what an agent can call, described the way an environment needs it.

A tool is more than an OpenAI function signature: generation and simulation need its contract (what must hold
before, what holds after, how it fails), its effect (does it change state) and the entity types it consumes and
produces (so tool chains can be built from a dependency graph). Only ``name``, ``description`` and ``parameters``
are needed for evaluation; the rest is optional so imported tool lists (WildToolBench, SynthTools) fit as they are.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Contract", "Effect", "Tool"]


class Effect(StrEnum):
    """Whether calling a tool can change the environment's state."""

    READ = "read"
    WRITE = "write"


class Contract(BaseModel):
    """The I/O contract of a tool, in natural language (checked by code where it can be, by a judge otherwise)."""

    model_config = ConfigDict(extra="forbid")

    preconditions: list[str] = Field(default_factory=list)
    """What must hold before the call (e.g. "the order exists and is not shipped")."""
    postconditions: list[str] = Field(default_factory=list)
    """What holds after a successful call."""
    error_modes: list[str] = Field(default_factory=list)
    """How the call can fail, one line each (invalid arguments, not found, ...)."""


class Tool(BaseModel):
    """A callable tool: name, description, JSON-Schema parameters and, optionally, its contract and effect."""

    model_config = ConfigDict(extra="forbid")

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    """JSON Schema of the arguments object, as given (WildToolBench's non-standard ``float`` type is kept)."""
    returns: dict[str, Any] | None = None
    """JSON Schema of the result, where known."""
    contract: Contract | None = None
    effect: Effect | None = None
    consumes: list[str] = Field(default_factory=list)
    """Entity types this tool needs as input (e.g. ``order_id``)."""
    produces: list[str] = Field(default_factory=list)
    """Entity types this tool returns for other tools to use."""
    extra: dict[str, Any] = Field(default_factory=dict)
    """Fields of the source format we do not model, kept so writing the tool back loses nothing."""

    @property
    def required(self) -> list[str]:
        """Names of the required parameters."""
        req = self.parameters.get("required", [])
        return list(req) if isinstance(req, list) else []

    @property
    def properties(self) -> dict[str, Any]:
        """The parameter schemas by name."""
        props = self.parameters.get("properties", {})
        return props if isinstance(props, dict) else {}
