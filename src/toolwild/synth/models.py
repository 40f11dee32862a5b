"""What each environment-synthesis stage asks the model for (structured output: a pydantic model per stage).

Field -> subdomains (with stakeholders and entity types) -> task families -> tools per family (parameters, output
schema, contract, effect, consumed/produced entity types) and seed entities. Every stage's reply is validated against
its model; later deterministic checks (see :mod:`toolwild.synth.checks`) judge what a schema cannot say.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["FamilyList", "SeedData", "SubdomainList", "ToolDraft", "ToolDraftList"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Subdomain(_Strict):
    name: str = Field(min_length=1, max_length=80)
    description: str = Field(max_length=400)
    stakeholders: list[str] = Field(default_factory=list, max_length=6)
    entities: list[str] = Field(default_factory=list, max_length=8)
    """Entity types the subdomain's tools act on (``order``, ``patient`` ...)."""


class SubdomainList(_Strict):
    subdomains: list[Subdomain] = Field(min_length=1, max_length=8)


class Family(_Strict):
    name: str = Field(min_length=1, max_length=80)
    description: str = Field(max_length=400)
    """What a user of this family of tasks wants done, in a sentence or two."""


class FamilyList(_Strict):
    families: list[Family] = Field(min_length=1, max_length=8)


class ToolDraft(_Strict):
    """One generated tool, before the deterministic checks."""

    name: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_]{0,63}$")
    description: str = Field(min_length=1, max_length=600)
    parameters: dict[str, Any]
    """JSON Schema of the arguments object."""
    returns: dict[str, Any]
    """JSON Schema of the result."""
    preconditions: list[str] = Field(default_factory=list, max_length=6)
    postconditions: list[str] = Field(default_factory=list, max_length=6)
    error_modes: list[str] = Field(default_factory=list, max_length=8)
    effect: Literal["read", "write"]
    consumes: list[str] = Field(default_factory=list, max_length=6)
    produces: list[str] = Field(default_factory=list, max_length=6)


class ToolDraftList(_Strict):
    tools: list[ToolDraft] = Field(min_length=1, max_length=8)


class SeedData(_Strict):
    """Initial entities of a subdomain's environment: entity type -> records."""

    entities: dict[str, list[dict[str, Any]]]
