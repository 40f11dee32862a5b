"""What each environment-synthesis stage asks the model for (structured output: a pydantic model per stage).

Field -> subdomains (with stakeholders and entity types) -> task families -> tools per family (parameters, output
schema, contract, effect, consumed/produced entity types) and seed entities. Every stage's reply is validated against
its model; later deterministic checks (see :mod:`toolwild.synth.checks`) judge what a schema cannot say.

The last models are what a run logs per finished unit (``OUT/progress.jsonl``, see :mod:`toolwild.synth.envgen`):
a field's subdomain list, a subdomain's environment before dedup with its counts, an environment's audit. They are
closed shapes, so a log line edited by hand or written by another version is refused with the field named.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from toolwild.core.environment import Environment

__all__ = [
    "AuditOutcome",
    "Drop",
    "FailedStage",
    "FamilyList",
    "FieldOutcome",
    "FieldSpec",
    "SeedData",
    "Subdomain",
    "SubdomainList",
    "SubdomainOutcome",
    "ToolDraft",
    "ToolDraftList",
    "object_schema",
]


Short = Annotated[str, Field(min_length=1, max_length=160)]
Name = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,31}$")]


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


JsonType = Literal["string", "integer", "number", "boolean", "array", "object"]


class FieldSpec(_Strict):
    """One parameter or output field: the JSON Schema keywords a tool argument needs, and no more.

    Why not free-form JSON Schema: a model asked for "any JSON object" (small ones especially) can ramble until its
    token budget cuts the reply; a closed shape is also a decoding grammar. :meth:`to_schema` turns it into JSON
    Schema, so every generated schema is valid by construction and the lint judges only what it means.
    """

    name: str = Field(pattern=r"^[a-z][a-z0-9_]{0,39}$")
    type: JsonType
    description: str = Field(max_length=200)
    required: bool = True
    enum: list[str] = Field(default_factory=list, max_length=8)
    format: Literal["", "date", "date-time", "email", "uri"] = ""
    minimum: float | None = None
    maximum: float | None = None
    items: JsonType | None = None
    """Element type of an array."""

    def to_schema(self) -> dict[str, Any]:
        """This field as a JSON Schema."""
        schema: dict[str, Any] = {"type": self.type, "description": self.description}
        if self.enum and self.type == "string":
            schema["enum"] = list(self.enum)
        if self.format and self.type == "string":
            schema["format"] = self.format
        for key in ("minimum", "maximum"):
            value = getattr(self, key)
            if value is not None and self.type in ("integer", "number"):
                schema[key] = int(value) if self.type == "integer" and float(value).is_integer() else value
        if self.type == "array" and self.items is not None:
            schema["items"] = {"type": self.items}
        return schema


def object_schema(fields: list[FieldSpec]) -> dict[str, Any]:
    """An object schema from field specs (``required`` lists the required ones)."""
    return {
        "type": "object",
        "properties": {f.name: f.to_schema() for f in fields},
        "required": [f.name for f in fields if f.required],
    }


class ToolDraft(_Strict):
    """One generated tool, before the deterministic checks."""

    name: str = Field(pattern=r"^[a-z][a-z0-9_]{0,47}$")
    description: str = Field(min_length=1, max_length=400)
    parameters: list[FieldSpec] = Field(max_length=6)
    returns: list[FieldSpec] = Field(max_length=6)
    preconditions: list[Short] = Field(default_factory=list, max_length=4)
    postconditions: list[Short] = Field(default_factory=list, max_length=4)
    error_modes: list[Short] = Field(default_factory=list, max_length=5)
    effect: Literal["read", "write"]
    consumes: list[Name] = Field(default_factory=list, max_length=4)
    produces: list[Name] = Field(default_factory=list, max_length=4)


class ToolDraftList(_Strict):
    tools: list[ToolDraft] = Field(min_length=1, max_length=6)


class SeedData(_Strict):
    """Initial entities of a subdomain's environment: entity type -> records."""

    entities: dict[str, list[dict[str, Any]]]


# ------------------------------------------------------------------------------------------ unit results (the log)
class Drop(_Strict):
    """One tool left out, by which check, and why (a line of ``drops.json``)."""

    tool: str
    check: str
    reasons: list[str]


class FailedStage(_Strict):
    """A stage call whose reply never validated: that part of the tree was skipped (the run went on)."""

    stage: str
    error: str


class FieldOutcome(_Strict):
    """A field unit: its subdomains (none when the stage got no valid reply, recorded in ``failed_stages``)."""

    subdomains: list[Subdomain] = Field(default_factory=list)
    failed_stages: list[FailedStage] = Field(default_factory=list)


class SubdomainOutcome(_Strict):
    """A subdomain unit: its environment before the (global) dedup, and what happened on the way."""

    environment: Environment
    generated: int = 0
    repaired: int = 0
    drops: list[Drop] = Field(default_factory=list)
    failed_stages: list[FailedStage] = Field(default_factory=list)


class AuditOutcome(_Strict):
    """An audit unit: the tools that passed, every tool's reliability (in tool order), and the audit's drops."""

    kept: list[str] = Field(default_factory=list)
    reliability: dict[str, float] = Field(default_factory=dict)
    drops: list[Drop] = Field(default_factory=list)
