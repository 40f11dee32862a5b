"""Environment synthesis, top down: field -> subdomains -> task families -> tools (+ seed data) -> checks -> dedup.

Each stage is one structured-output call through the cached :class:`~toolwild.llm.client.LLM` (temperature 0, the
run's seed), so a second run with the same cache makes no model call and writes identical files.

After the tools stage, deterministic checks (:mod:`toolwild.synth.checks`) judge each tool; a tool that fails is
sent back to the model with its problems (at most ``max_repairs`` rounds) and dropped with the reason if it still
fails. Seed entities are generated for the subdomain's entity types, then the dependency check drops tools that
consume an entity type nothing produces, the exact dedup pass runs over everything kept, then (when
``SynthConfig.tau`` is set) the semantic pass on a sentence encoder (:mod:`toolwild.synth.embedding`; the encoder
is recorded in :attr:`SynthResult.semantic_dedup` and in every drop it causes) and, if asked, the audit
(:mod:`toolwild.synth.audit`) drops tools whose simulation is judged correct too rarely. One environment file
per subdomain (``llm`` backend) is written, with a report of every drop.

**Concurrency.** Every stage runs as soon as what it needs is there: all fields at once, then every subdomain (its
families, then the tools of all its families at once, repair rounds in sequence per family, then its seed data),
then, after the global dedup, the audit of every environment (all test calls at once). One limit bounds the stage
calls in flight (``SynthConfig.concurrency``; the model client has its own connection limit beneath it). Nothing is
appended to shared lists as it finishes: each unit returns its own counts, drops and skipped stages, merged in
(field, subdomain, family) order, so the output does not depend on the concurrency or on which call came back
first. Every stage call carries the run's seed: this module draws no random numbers, so there is no stream whose
order could matter, and two identical requests (a small model names two families alike) stay one cached call.

**Units and resume.** The work is cut into units, scheduled by :class:`toolwild.run.LocalExecutor` and, when a
:class:`toolwild.run.UnitLog` is given, appended to it the moment each finishes: one per field (its subdomain list),
one per subdomain (its environment before dedup, with its counts), one per audited environment (keyed by the
environment's content, so an environment that a resumed run's dedup changes is audited again; its unchanged calls
come from the cache). A resumed run reads the finished units back and redoes none. A unit whose provider kept
failing (:class:`~toolwild.errors.TransientBackendError` after the client's retries) is logged ``failed``, listed in
:attr:`SynthResult.failed_units`, and the run goes on; a resumed run does it again. Any other exception is a bug:
it ends the run (finished units are in the log).

**Elsewhere.** Given an ``executor`` (a :class:`~toolwild.run.ray_executor.RayExecutor`) and an :class:`EnvWorker`,
the same units run in other processes: the worker travels as plain values (:class:`EnvSpec`: model spec, base URL,
cache path, config) and builds its own client and limit there; each unit's outcome comes back here, where alone it is
logged and merged. Dedup (the encoder included) and the files stay in this process, so the output is the one of
the local executor.
"""

from __future__ import annotations

import functools
import json
import re
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from toolwild.core.environment import BackendKind, Environment
from toolwild.core.jsonl import validation_to_data_error
from toolwild.core.tool import Contract, Effect, Tool
from toolwild.errors import DataError, StructuredOutputError, TransientBackendError
from toolwild.llm.client import LLM
from toolwild.llm.structured import InvalidReply, generate_checked
from toolwild.run import LocalExecutor, Unit, UnitLog, UnitRecord, UnitStatus, fingerprint
from toolwild.synth.audit import RankedLimit, audit_environment, in_order
from toolwild.synth.checks import CheckKind, contract_problems, dependency_problems, schema_problems
from toolwild.synth.dedup import DedupReport, exact_dedup, tool_key
from toolwild.synth.embedding import MIN_CORPUS, EncoderInfo
from toolwild.synth.models import (
    AuditOutcome,
    Drop,
    FailedStage,
    Family,
    FamilyList,
    FieldOutcome,
    FieldSpec,
    SeedData,
    Subdomain,
    SubdomainList,
    SubdomainOutcome,
    ToolDraft,
    ToolDraftList,
    object_schema,
)

if TYPE_CHECKING:
    from toolwild.synth.embedding import Embedder

__all__ = [
    "JOB",
    "SEMANTIC_MIN",
    "EnvSpec",
    "EnvWorker",
    "SemanticPass",
    "SynthConfig",
    "SynthResult",
    "run_identity",
    "synth_environments",
]

JOB = "synth-envs"
"""The job name in the unit log."""

ROLE = "synth"
_SYSTEM = (
    "You design realistic software services for a tool-use benchmark: their areas, the tasks users bring, and the "
    "API tools that serve them. Reply with one JSON object only, matching the requested schema."
)
_MAX_SEED_RECORDS = 5
SEMANTIC_MIN = MIN_CORPUS
"""Tools the corpus-fitted token fallback needs before the semantic pass runs on it (a sentence encoder: any)."""

# Bounds laid over every stage's JSON Schema (see :func:`bounded_schema`)
_TEXT_CAP = 120
"""Characters of a free-text string whose model allows more (descriptions, conditions)."""
_ITEM_CAP = 40
"""Characters of a string the model leaves unbounded (stakeholders, entity types, enum values)."""
_LIST_CAP = 4
"""Items of a nested list (parameters, returned fields, stakeholders, entity types)."""
_CONTRACT_CAP = 2
"""Items of each contract list (preconditions, postconditions, error modes): a looping small model fills every
slot it is given, and these lists are most of a tool's tokens."""

Progress = Callable[[str], None]
M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class SynthConfig:
    """How much to generate."""

    subdomains_per_field: int = 2
    families_per_subdomain: int = 2
    tools_per_family: int = 4
    max_repairs: int = 2
    seed: int = 0
    max_tokens: int = 1536
    audit_threshold: float | None = None
    """Audit every kept tool and drop those judged reliable less often than this (None: no audit)."""
    concurrency: int = 32
    """Stage calls in flight at once, over every stage and the audit (the output does not depend on it)."""
    tau: float | None = None
    """Semantic dedup threshold (None: exact pass only, the library default; ``synth envs`` resolves its own default,
    0.85 when a sentence encoder is installed). A sentence encoder embeds each tool on its own, so any run size
    works; the token-embedding fallback learns its weights from the corpus it dedups, so on it the pass runs only
    on runs of at least :data:`SEMANTIC_MIN` tools (a few dozen texts are no corpus) and is skipped with a note
    otherwise."""
    encoder: str = "auto"
    """Which encoder the semantic pass uses (a name :func:`toolwild.synth.embedding.load_embedder` takes); only
    read when ``tau`` is set."""

    def identity(self) -> dict[str, Any]:
        """The knobs that decide the output (everything but the concurrency), as a resumed run must repeat them.

        ``encoder`` only when the semantic pass runs (``tau`` set): an exact-only run does not depend on it, and
        leaving it out keeps the identity (so the resume) of exact-only runs made before it existed."""
        knobs = ("subdomains_per_field", "families_per_subdomain", "tools_per_family", "max_repairs", "seed")
        knobs += ("max_tokens", "audit_threshold", "tau")
        if self.tau is not None:
            knobs += ("encoder",)
        return {k: getattr(self, k) for k in knobs}

    def planned_steps(self, fields: int) -> int:
        """Stage calls a run plans (for a progress bar): per field one, per subdomain families + tools + seed, and
        one step for the semantic pass when it is on."""
        per_subdomain = 1 + self.families_per_subdomain + 1
        audit = self.subdomains_per_field if self.audit_threshold is not None else 0
        semantic = 1 if self.tau is not None else 0
        return fields * (1 + self.subdomains_per_field * per_subdomain + audit) + semantic


class SemanticPass(BaseModel):
    """What the semantic dedup pass did, for ``summary.json``: which encoder measured the similarities (a run's
    drops mean nothing without it), at which threshold, over how many tools, and how many it dropped."""

    model_config = ConfigDict(extra="forbid")

    encoder: EncoderInfo
    """The encoder that measured the similarities (:mod:`toolwild.synth.embedding` imports without numpy)."""
    tau: float
    tools: int
    """Tools embedded (what the exact pass kept)."""
    dropped: int


@dataclass
class SynthResult:
    """The environments and what happened on the way (counts for the summary, one reason per drop)."""

    environments: list[Environment] = field(default_factory=list)
    generated: int = 0
    repaired: int = 0
    dropped: Counter[str] = field(default_factory=Counter)
    drops: list[dict[str, Any]] = field(default_factory=list)
    failed_stages: list[dict[str, str]] = field(default_factory=list)
    """Stage calls whose reply never validated (that part of the tree was skipped)."""
    reliability: dict[str, float] = field(default_factory=dict)
    """``env/tool`` -> share of audit calls judged correct (when audited)."""
    notes: list[str] = field(default_factory=list)
    empty: list[str] = field(default_factory=list)
    """Subdomains that ended with no tool: not written, as an environment without tools serves no task."""
    failed_units: list[dict[str, str]] = field(default_factory=list)
    """Units whose provider kept failing (``unit``, ``error``): their part is missing; a resumed run redoes them."""
    semantic_dedup: SemanticPass | None = None
    """The semantic pass, when it ran (None: off, or skipped; then a note says why)."""

    @property
    def kept(self) -> int:
        """Tools in the written environments."""
        return sum(len(e.tools) for e in self.environments)


_SCALARS = ("string", "integer", "number", "boolean")
_ID_PATTERN = "^[A-Za-z0-9_-]{1,24}$"
"""Seed record ids: a free string let a small model write JSON punctuation and newlines into ids."""

# the main list of each stage's reply, capped at the count the stage asks for
_TOP_LISTS = {"SubdomainList": "subdomains", "FamilyList": "families", "ToolDraftList": "tools"}


def _problem_lines(exc: ValidationError, limit: int = 5) -> str:
    return "\n".join(
        f"- {'.'.join(str(p) for p in e.get('loc', ())) or '(root)'}: {e.get('msg')}" for e in exc.errors()[:limit]
    )


def _checker(output: type[M]) -> Callable[[str], M]:
    """Validate a reply as ``output``; a rejection names the fields, for the model to fix. Raw control characters
    inside strings (llama.cpp grammars allow them) are tolerated, as in :func:`generate_structured`."""

    def check(text: str) -> M:
        try:
            return output.model_validate_json(text)
        except ValidationError as exc:
            try:
                return output.model_validate(json.loads(text, strict=False))
            except (ValueError, ValidationError):
                raise InvalidReply(_problem_lines(exc)) from None

    return check


def bounded_schema(schema: Any, *, top: tuple[str, int] | None = None) -> Any:
    """A copy of a stage's JSON Schema in which every string and every list has a bound, never looser than the
    model's own, so every reply it allows still validates; ``top`` caps the stage's main list (name, count).

    Why: the schema is also the decoding grammar of the embedded model. At temperature 0 a 135M model falls into
    repetition loops ("Finance.Sales.Fu.Fu.Fu..."); inside an unbounded string (a stakeholder, an entity type) the
    loop runs until ``max_tokens`` cuts the reply mid-string, and the stage fails with "EOF while parsing a string"
    after three such attempts, each slower than the last as the cut reply is fed back. With a bound the grammar
    closes the string and the reply goes on, so a loop costs at most the bound.
    """
    if isinstance(schema, list):
        return [bounded_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: bounded_schema(value) for key, value in schema.items()}
    kind = schema.get("type")
    if kind == "string" and "pattern" not in schema and "enum" not in schema:
        limit = schema.get("maxLength")
        out["maxLength"] = min(limit, _TEXT_CAP) if limit is not None else _ITEM_CAP
    elif kind == "array":
        out["maxItems"] = min(schema.get("maxItems", _LIST_CAP), _LIST_CAP)
    if top is not None:
        name, count = top
        out["properties"][name]["maxItems"] = count
    return out


@functools.cache
def _stage_schema(output: type[BaseModel], top: str | None, count: int) -> dict[str, Any]:
    """A stage's bounded schema, made once per (stage, count): pydantic builds a model's schema anew on every call,
    which cost more harness time per stage call than anything else."""
    return bounded_schema(output.model_json_schema(), top=(top, count) if top else None)


@functools.cache
def _tools_schema(count: int) -> dict[str, Any]:
    """The tools stage's schema: bounded, and shaped so that the checks' structural rules hold by construction.

    Every field names a scalar ``items`` type (used by arrays only: an array without items, or of arrays, fails the
    lint), and every tool lists preconditions, postconditions and error modes (the contract check asks for them).
    A small model otherwise spends its repair rounds on these and still fails; what a grammar cannot say (distinct
    field names, sensible content) is left to the checks and repairs.
    """
    schema = bounded_schema(ToolDraftList.model_json_schema(), top=("tools", count))
    draft = schema["$defs"]["ToolDraft"]
    for key in ("preconditions", "postconditions", "error_modes"):
        draft["properties"][key] |= {"minItems": 1, "maxItems": _CONTRACT_CAP}
    draft["required"] = [*draft["required"], "preconditions", "postconditions", "error_modes"]
    field_spec = schema["$defs"]["FieldSpec"]
    field_spec["properties"]["items"] = {"type": "string", "enum": list(_SCALARS)}
    field_spec["required"] = [*field_spec["required"], "items"]
    return schema


def _seed_schema(types: list[str], tools: list[Tool]) -> dict[str, Any]:
    """The seed stage's schema: a list of at most :data:`_MAX_SEED_RECORDS` records per asked entity type, each
    with an ``id`` and up to 5 scalar fields named after the subdomain's tool fields (a closed shape: an open
    "any object" is the unbounded grammar the bounds exist to avoid)."""
    scalar = {"string": {"type": "string", "maxLength": _ITEM_CAP}, "integer": {"type": "integer"}}
    scalar |= {"number": {"type": "number"}, "boolean": {"type": "boolean"}}
    fields: dict[str, Any] = {}
    for tool in tools:
        for schema in (tool.returns or {}).get("properties", {}), tool.properties:
            for name, spec in schema.items():
                kind = spec.get("type") if isinstance(spec, dict) else None
                if name != "id" and kind in scalar and len(fields) < 5:
                    fields.setdefault(name, scalar[kind])
    record = {
        "type": "object",
        "properties": {"id": {"type": "string", "pattern": _ID_PATTERN}, **fields},
        "required": ["id"],
        "additionalProperties": False,
    }
    per_type = {"type": "array", "items": record, "minItems": 1, "maxItems": _MAX_SEED_RECORDS}
    entities = {
        "type": "object",
        "properties": dict.fromkeys(types, per_type),
        "required": types,
        "additionalProperties": False,
    }
    return {
        "title": "SeedData",
        "type": "object",
        "properties": {"entities": entities},
        "required": ["entities"],
        "additionalProperties": False,
    }


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_") or "x"


def _messages(text: str) -> list[dict[str, Any]]:
    return [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": text}]


def _distinct(fields: list[FieldSpec]) -> list[FieldSpec]:
    """The first field of each name: a repeated name (a small model's habit) would make ``required`` list it twice,
    which JSON Schema forbids, and cost the tool a repair round for what is plain duplication."""
    kept: dict[str, FieldSpec] = {}
    for spec in fields:
        kept.setdefault(spec.name, spec)
    return list(kept.values())


def _tool(draft: ToolDraft, field_name: str, subdomain: str, family: str) -> Tool:
    return Tool(
        name=draft.name,
        description=draft.description,
        parameters=object_schema(_distinct(draft.parameters)),
        returns=object_schema(_distinct(draft.returns)),
        contract=Contract(
            preconditions=draft.preconditions, postconditions=draft.postconditions, error_modes=draft.error_modes
        ),
        effect=Effect(draft.effect),
        consumes=draft.consumes,
        produces=draft.produces,
        extra={"field": field_name, "subdomain": subdomain, "family": family, "source_id": ""},
    )


def _problems(tool: Tool) -> list[tuple[str, str]]:
    return [(CheckKind.SCHEMA, p) for p in schema_problems(tool)] + [
        (CheckKind.CONTRACT, p) for p in contract_problems(tool)
    ]


def run_identity(llm: LLM, fields: list[str], config: SynthConfig) -> dict[str, Any]:
    """What a run is, for its unit log: the fields, the knobs that decide the output, and the generator model (kind,
    name, endpoint without credentials; never a key). A resumed run must have the same identity."""
    return {"fields": list(fields), **config.identity(), "model": llm.backend.identity()}


_ORDER = 100
"""Places in the log's order per field: the field unit, then its subdomains (at most 8), then their audits."""
_AUDIT_AT = 50


@dataclass
class _Part:
    """What a piece of work (a family, a subdomain) produced besides its tools; parts are merged in a fixed order,
    never appended to shared lists as calls come back."""

    generated: int = 0
    repaired: int = 0
    drops: list[Drop] = field(default_factory=list)
    failed_stages: list[FailedStage] = field(default_factory=list)

    def drop(self, tool: Tool, kind: str, reasons: list[str]) -> None:
        self.drops.append(Drop(tool=tool_key(tool), check=kind, reasons=reasons))

    def extend(self, other: _Part) -> None:
        self.generated += other.generated
        self.repaired += other.repaired
        self.drops += other.drops
        self.failed_stages += other.failed_stages


_RESULTS: dict[str, type[BaseModel]] = {"field": FieldOutcome, "subdomain": SubdomainOutcome, "audit": AuditOutcome}
"""The result model of each kind of unit (the key's first part)."""


class _Store:
    """Finished units by key: read back from the log when resuming, and every unit finished now (appended to the
    log the moment it finishes, flushed, so a killed run keeps it)."""

    def __init__(self, log: UnitLog | None) -> None:
        self.log = log
        self.done: dict[str, Any] = {}
        self.failed: dict[str, str] = {}
        if log is not None:
            for record in log.records():
                if record.status is UnitStatus.DONE:
                    self.done[record.key] = self._parse(record)
                else:
                    self.failed[record.key] = record.error or "failed"

    def _parse(self, record: UnitRecord) -> BaseModel:
        """A logged result as its model; a record this version cannot read is a DataError naming file, line, field."""
        assert self.log is not None
        model = _RESULTS.get(record.key.split(":", 1)[0])
        try:
            if model is None:
                raise DataError(f"unknown unit {record.key!r} (not a field, subdomain or audit unit)", field="key")
            return model.model_validate(record.result)
        except (ValidationError, DataError) as exc:
            error = exc if isinstance(exc, DataError) else validation_to_data_error(exc, prefix="result")
            line = _line_of(self.log, record.key)
            raise DataError(
                f"not a {JOB} unit record: {error.message}", file=self.log.path, line=line, field=error.field
            ) from None

    def finish(self, unit: Unit[Any], result: BaseModel) -> None:
        dumped = result.model_dump(mode="json")
        if self.log is not None:
            self.log.append(UnitRecord(key=unit.key, order=unit.order, status=UnitStatus.DONE, result=dumped))
        # kept as read back from JSON, so a fresh run and a resumed one build the output from the very same values
        self.done[unit.key] = type(result).model_validate(dumped)
        self.failed.pop(unit.key, None)

    def fail(self, unit: Unit[Any], exc: BaseException) -> None:
        error = " ".join(str(exc).split())[:300] or type(exc).__name__
        if self.log is not None:
            self.log.append(UnitRecord(key=unit.key, order=unit.order, status=UnitStatus.FAILED, error=error))
        self.failed[unit.key] = error


def _line_of(log: UnitLog, key: str) -> int | None:
    """The line of the latest record of ``key`` (only looked up to name it in an error)."""
    found = None
    with log.path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                obj = json.loads(raw)
            except ValueError:
                continue
            if isinstance(obj, dict) and obj.get("key") == key:
                found = number
    return found


class _Run:
    def __init__(
        self,
        llm: LLM,
        config: SynthConfig,
        progress: Progress | None,
        log: UnitLog | None = None,
        *,
        executor: Any = None,
        worker: EnvWorker | None = None,
        embedder: Embedder | None = None,
    ) -> None:
        self.llm = llm
        self.config = config
        self.progress = progress or (lambda _msg: None)
        self.result = SynthResult()
        self.limit = RankedLimit(config.concurrency)
        """The one bound on stage calls in flight, shared by every stage and the audit (in this process)."""
        self.store = _Store(log)
        self.executor = executor
        """Where the units run (None: here, under a :class:`LocalExecutor`); with it, ``worker`` runs them."""
        self.worker = worker
        self.embedder = embedder
        """The semantic pass's encoder when the caller loaded it (None: loaded by the pass if it needs one)."""

    # ------------------------------------------------------------------------------------------ stage calls
    async def ask(self, text: str, output: type[M], schema: dict[str, Any]) -> M:
        """One stage call: decoding follows ``schema`` (a bounded form of ``output``'s), ``output`` validates."""
        async with self.limit.slot():
            return await generate_checked(
                self.llm,
                _messages(text),
                schema,
                _checker(output),
                name=output.__name__,
                role=ROLE,
                seed=self.config.seed,
                max_tokens=self.config.max_tokens,
            )

    async def try_ask(
        self, text: str, output: type[M], what: str, part: _Part, *, schema: dict[str, Any] | None = None
    ) -> M | None:
        """Like :meth:`ask`, but a reply that never validates skips this part (recorded in ``part``) instead of
        ending the run.

        ``schema`` defaults to ``output``'s own, bounded (:func:`bounded_schema`), its main list capped by the count
        asked for.
        """
        if schema is None:
            top = _TOP_LISTS.get(output.__name__)
            schema = _stage_schema(output, top, self._count(output))
        try:
            reply: M | None = await self.ask(text, output, schema)
        except StructuredOutputError as exc:
            part.failed_stages.append(FailedStage(stage=what, error=" ".join(str(exc).split())[:300]))
            reply = None
        self.progress(what)
        return reply

    def _count(self, output: type[BaseModel]) -> int:
        """How many items the stage asks for (the cap of its main list)."""
        c = self.config
        counts = {"SubdomainList": c.subdomains_per_field, "FamilyList": c.families_per_subdomain}
        return counts.get(output.__name__, c.tools_per_family)

    def drop(self, tool: Tool | str, kind: str, reasons: list[str]) -> None:
        """Record a drop of the global passes (dedup) in the result."""
        self.record(Drop(tool=tool if isinstance(tool, str) else tool_key(tool), check=kind, reasons=reasons))

    def record(self, drop: Drop) -> None:
        self.result.dropped[drop.check] += 1
        self.result.drops.append(drop.model_dump())

    # ------------------------------------------------------------------------------------------ stages
    async def tools_for(self, field_name: str, subdomain: Subdomain, family: Family) -> tuple[list[Tool], _Part]:
        """One family's tools after the checks and (sequential) repair rounds, and what happened to the others."""
        c = self.config
        part = _Part()
        request = (
            f"Field: {field_name}. Subdomain: {subdomain.name} ({subdomain.description}). Entity types: "
            f"{', '.join(subdomain.entities) or 'any'}.\nTask family: {family.name}: {family.description}\n"
            f"Design {c.tools_per_family} API tools for this family. Each tool: a snake_case name, a one-sentence "
            "description, its parameters and returned fields (name, type, description, required; enum, format, "
            "minimum, maximum or items where they apply), preconditions, postconditions and error_modes (short "
            "sentences), effect read or write, and the entity types it consumes and produces (lowercase words)."
        )
        schema = _tools_schema(c.tools_per_family)
        what = f"tools: {field_name} / {subdomain.name} / {family.name}"
        reply = await self.try_ask(request, ToolDraftList, what, part, schema=schema)
        if reply is None:
            return [], part
        prefix = f"{_slug(field_name)}__{_slug(subdomain.name)}__"
        tools = []
        for d in reply.tools[: c.tools_per_family]:
            tool = _tool(d, field_name, subdomain.name, family.name)
            tool.extra["source_id"] = prefix + d.name
            tools.append(tool)
        part.generated = len(tools)
        kept: list[Tool] = []
        pending = tools
        failed_once: set[str] = set()
        for round_ in range(c.max_repairs + 1):
            failing = {id(t): _problems(t) for t in pending}
            kept += [t for t in pending if not failing[id(t)]]
            broken = [t for t in pending if failing[id(t)]]
            if not broken:
                break
            failed_once |= {t.name for t in broken}
            if round_ == c.max_repairs:
                for t in broken:
                    kinds = Counter(k for k, _ in failing[id(t)])
                    part.drop(t, kinds.most_common(1)[0][0], [p for _, p in failing[id(t)]])
                break
            listing = "\n".join(
                f"- {t.name}: " + "; ".join(p for _, p in failing[id(t)]) + f"\n  current: {_tool_json(t)}"
                for t in broken
            )
            repair = f"{request}\nThese tools have problems; reply with the corrected tools only:\n{listing}"
            repair_what = f"repair: {field_name} / {subdomain.name}"
            fixed = await self.try_ask(repair, ToolDraftList, repair_what, part, schema=schema)
            by_name = {d.name: d for d in fixed.tools} if fixed is not None else {}
            pending = []
            for t in broken:
                draft = by_name.get(t.name)
                if draft is None:
                    part.drop(t, "repair", ["the repair reply did not include this tool"])
                    continue
                new = _tool(draft, field_name, subdomain.name, family.name)
                new.extra["source_id"] = t.extra["source_id"]
                pending.append(new)
        part.repaired = sum(1 for t in kept if t.name in failed_once)
        return kept, part

    async def seed_for(self, field_name: str, subdomain: Subdomain, tools: list[Tool], part: _Part) -> dict[str, Any]:
        types = sorted({*subdomain.entities, *(c for t in tools for c in t.consumes)})
        if not types:
            return {}
        request = (
            f"Field: {field_name}. Subdomain: {subdomain.name}. Create realistic seed records (at most "
            f"{_MAX_SEED_RECORDS} each, with ids) for these entity types: {', '.join(types)}. Reply "
            '{"entities": {"<type>": [records]}}.'
        )
        what = f"seed data: {field_name} / {subdomain.name}"
        seed = await self.try_ask(request, SeedData, what, part, schema=_seed_schema(types, tools))
        if seed is None:
            return {}
        return {k: v[:_MAX_SEED_RECORDS] for k, v in sorted(seed.entities.items()) if isinstance(v, list)}

    # ------------------------------------------------------------------------------------------ units
    async def field_unit(self, field_name: str) -> FieldOutcome:
        """A field's subdomains."""
        c = self.config
        part = _Part()
        reply = await self.try_ask(
            f"Field: {field_name}.\nList {c.subdomains_per_field} different subdomains of {field_name}, each an "
            'area served by one software service.\nFor each: "name" (2 to 4 words), "description" (one sentence), '
            '"stakeholders" (2 or 3 kinds of users), "entities" (2 or 3 kinds of records it stores, one lowercase '
            "word each).",
            SubdomainList,
            f"subdomains: {field_name}",
            part,
        )
        subdomains = reply.subdomains[: c.subdomains_per_field] if reply is not None else []
        return FieldOutcome(subdomains=subdomains, failed_stages=part.failed_stages)

    async def subdomain_unit(self, field_name: str, sub: Subdomain) -> SubdomainOutcome:
        """A subdomain's environment before dedup: its families, then every family's tools at once, then seed data
        and the dependency check."""
        c = self.config
        part = _Part()
        listed = await self.try_ask(
            f"Field: {field_name}. Subdomain: {sub.name} ({sub.description}).\nList "
            f"{c.families_per_subdomain} families of tasks its users bring. For each: "
            '"name" (2 to 5 words) and "description" (one sentence: what the user wants done).',
            FamilyList,
            f"task families: {field_name} / {sub.name}",
            part,
        )
        families = listed.families[: c.families_per_subdomain] if listed is not None else []
        tools: list[Tool] = []
        for family_tools, family_part in await in_order(self.tools_for(field_name, sub, f) for f in families):
            tools += family_tools
            part.extend(family_part)
        seed = await self.seed_for(field_name, sub, tools, part)
        missing = dependency_problems(tools, seed)
        for tool in [t for t in tools if t.name in missing]:
            part.drop(tool, CheckKind.DEPENDENCY, missing[tool.name])
        environment = Environment(
            id=f"{_slug(field_name)}__{_slug(sub.name)}",
            description=sub.description,
            field=field_name,
            subdomain=sub.name,
            tools=[t for t in tools if t.name not in missing],
            initial_state=seed,
            backend=BackendKind.LLM,
            source={"format": "toolwild-synth", "stakeholders": sub.stakeholders, "seed": c.seed},
        )
        return SubdomainOutcome(
            environment=environment,
            generated=part.generated,
            repaired=part.repaired,
            drops=part.drops,
            failed_stages=part.failed_stages,
        )

    async def audit_unit(self, env: Environment) -> AuditOutcome:
        """An environment's audit: every test call of every tool at once, under the run's limit."""
        threshold = self.config.audit_threshold
        assert threshold is not None
        _kept, audits = await audit_environment(env, self.llm, threshold=threshold, limit=self.limit)
        self.progress(f"audit: {env.id}")
        drops = []
        for audit in audits:
            if not audit.passes(threshold):  # the same rule that decided what audit_environment kept
                reasons = [f"{c['kind']}: {c['reason']}" for c in audit.calls if not c["correct"]]
                if audit.schema_check is False:
                    reasons.insert(0, "schema check: an invalid call was not rejected")
                drops.append(
                    Drop(
                        tool=f"{env.id}/{audit.tool}",
                        check="audit",
                        reasons=[f"reliability {audit.reliability:.0%}", *reasons],
                    )
                )
        return AuditOutcome(
            kept=[a.tool for a in audits if a.passes(threshold)],
            reliability={a.tool: a.reliability for a in audits},
            drops=drops,
        )

    async def units(
        self, units: list[Unit[Any]], work: Callable[[Unit[Any]], Awaitable[BaseModel]], steps: int
    ) -> None:
        """Run the units not finished yet (a resumed run skips the logged ones), at most ``concurrency`` at once;
        each is stored and logged as it finishes, a provider failure fails only its unit.

        With a remote executor the units run in its worker (``work`` is left aside: it is bound to this process's
        client); the worker's stage calls report no progress here, so a finished unit advances the bar by its
        planned ``steps``."""
        todo = []
        for unit in units:
            if unit.key in self.store.done:
                for _ in range(steps):
                    self.progress(f"{unit.key} (done before)")
            else:
                todo.append(unit)
        if self.executor is None:
            await LocalExecutor(self.config.concurrency).map(
                todo, work, on_done=self.store.finish, on_failed=self.store.fail, failures=(TransientBackendError,)
            )
            return

        def finished(unit: Unit[Any], result: BaseModel) -> None:
            self.store.finish(unit, result)
            for _ in range(steps):
                self.progress(unit.key)

        await self.executor.map(
            todo, self.worker, on_done=finished, on_failed=self.store.fail, failures=(TransientBackendError,)
        )

    def outcome(self, unit: Unit[Any]) -> Any:
        """A unit's result, or None when it failed (then listed in the result's ``failed_units``)."""
        found = self.store.done.get(unit.key)
        if found is None:
            self.result.failed_units.append({"unit": unit.key, "error": self.store.failed.get(unit.key, "not run")})
        return found

    def merge(self, part: FieldOutcome | SubdomainOutcome) -> None:
        """Add a unit's counts, drops and skipped stages to the result (called in field, subdomain order)."""
        if isinstance(part, SubdomainOutcome):
            self.result.generated += part.generated
            self.result.repaired += part.repaired
            for drop in part.drops:
                self.record(drop)
        self.result.failed_stages += [f.model_dump() for f in part.failed_stages]


def _tool_json(tool: Tool) -> str:
    return json.dumps({"name": tool.name, "parameters": tool.parameters, "returns": tool.returns}, ensure_ascii=False)[
        :1200
    ]


def _remove(run: _Run, environments: list[Environment], report: DedupReport, encoder: str | None = None) -> None:
    """Take dedup drops out of the environments, each recorded with the tool it duplicates (and, for a semantic
    drop, the cosine and the ``encoder`` that measured it).

    Tools are matched by identity, not key: a duplicate can share its key with the tool it duplicates (a subdomain
    whose two families got the same tool has it twice under one source id), and removing by key then removed the
    kept tool too, leaving the subdomain empty.
    """
    kept = {id(t) for t in report.kept}
    by_key = {d.key: d for d in report.dropped}
    for env in environments:
        for tool in env.tools:
            if id(tool) not in kept:
                d = by_key[tool_key(tool)]
                measured = f"cosine {d.similarity}, {encoder}" if encoder else f"cosine {d.similarity}"
                cosine = f" ({measured})" if d.similarity is not None else ""
                run.drop(tool, "dedup", [f"{d.reason.value} of {d.duplicate_of}{cosine}"])
        env.tools = [t for t in env.tools if id(t) in kept]


_INSTALL_SENTENCE = "pip install 'toolwild[dedup]'"


def _fallback_without_loading(encoder: str) -> tuple[str, str | None] | None:
    """The corpus-fitted encoder ``encoder`` resolves to, known without loading it (its name, and the fallback note
    when ``auto`` fell back to it), or None (a sentence encoder, or not known before loading). Why: the token
    encoder takes 15-30 s to load (it reads the embedded model's GGUF), and a small run only skips it."""
    if encoder == "token":
        return "token", None
    if encoder == "auto":
        from toolwild.synth.embedding import sentence_encoder_missing  # looked up at call time (tests replace it)

        why = sentence_encoder_missing()
        if why is not None:
            return "token", f"fallback: no sentence encoder installed ({why})"
    return None


def _skip_note(name: str, tools: int) -> str:
    return (
        f"semantic dedup skipped: {tools} tools, and the {name} encoder learns its weights from the corpus it "
        f"dedups, so it needs at least {SEMANTIC_MIN}; a sentence encoder has no minimum ({_INSTALL_SENTENCE}, "
        "--encoder auto or minilm)"
    )


def _semantic_pass(run: _Run, environments: list[Environment]) -> None:
    """Drop near-duplicate tools (cosine >= ``tau`` between their vectors), within each field, then globally.

    A sentence encoder embeds each tool on its own, so any number of tools works; the corpus-fitted token fallback
    needs :data:`SEMANTIC_MIN` tools and is skipped with a note below that. The encoder that ran is recorded in
    the result (:class:`SemanticPass`), and a fallback's note in the notes."""
    tau = run.config.tau
    if tau is None:
        return
    tools = [t for e in environments for t in e.tools]
    embedder = run.embedder
    if embedder is None:
        fallback = _fallback_without_loading(run.config.encoder)
        if fallback is not None and len(tools) < SEMANTIC_MIN:
            name, note = fallback
            run.progress("semantic dedup (skipped)")
            run.result.notes += [note] if note else []
            run.result.notes.append(_skip_note(name, len(tools)))
            return
        from toolwild.synth.embedding import load_embedder

        embedder = load_embedder(run.config.encoder)
    info = embedder.info
    if info.note:
        run.result.notes.append(info.note)
    if info.corpus_fitted and len(tools) < SEMANTIC_MIN:
        run.progress("semantic dedup (skipped)")
        run.result.notes.append(_skip_note(info.name, len(tools)))
        return
    from toolwild.synth.dedup import embed_tools, semantic_dedup

    run.progress(f"semantic dedup: {len(tools)} tools ({info.name})")  # before: the label shows while it embeds
    dropped = 0
    if tools:
        report = semantic_dedup(tools, embed_tools(tools, embedder), tau=tau)
        _remove(run, environments, report, encoder=info.name)
        dropped = len(report.dropped)
    run.result.semantic_dedup = SemanticPass(encoder=info, tau=tau, tools=len(tools), dropped=dropped)


async def synth_environments(
    llm: LLM,
    fields: list[str],
    config: SynthConfig | None = None,
    *,
    progress: Progress | None = None,
    log: UnitLog | None = None,
    executor: Any = None,
    worker: EnvWorker | None = None,
    embedder: Embedder | None = None,
) -> SynthResult:
    """Generate environments for ``fields`` (see the module docstring); the exact dedup runs over all of them, and
    the semantic pass when ``config.tau`` is set.

    Args:
        llm: the generator (also the simulator and judge of the audit).
        fields: the fields, in output order.
        config: what to generate and how many stage calls at once.
        progress: called with a label after each stage call (and for each planned call of a unit done before).
        log: the run's unit log (opened by the caller with :meth:`UnitLog.start` or :meth:`UnitLog.resume` and
            :func:`run_identity`): finished units are appended to it at once, and units it holds are not redone.
        executor: run the units elsewhere (a :class:`~toolwild.run.ray_executor.RayExecutor`), with ``worker``
            (built from the same model and ``config``); ``llm`` then makes no call. None: here.
        worker: the picklable :class:`EnvWorker` the executor runs.
        embedder: the semantic pass's encoder, already loaded (the CLI loads it before the run, so that a missing
            one is named before any model call); None: ``load_embedder(config.encoder)`` when the pass needs it.
            Its ``info.name`` should be ``config.encoder`` (or what ``auto`` resolved to).

    Raises:
        DataError: a unit in ``log`` that cannot be read back (file, line and field named).
        Any bug of a unit's work (finished units are in the log); a provider that kept failing fails only its unit.
    """
    if (executor is None) != (worker is None):
        raise ValueError("a remote executor needs its worker, and a worker its executor")
    run = _Run(llm, config or SynthConfig(), progress, log, executor=executor, worker=worker, embedder=embedder)
    c = run.config
    field_units = [Unit(f"field:{i}:{name}", i * _ORDER, name) for i, name in enumerate(fields)]
    await run.units(field_units, lambda u: run.field_unit(u.payload), steps=1)
    field_outcomes = [run.store.done.get(u.key) for u in field_units]

    sub_units: list[Unit[Any]] = []
    for i, (name, outcome) in enumerate(zip(fields, field_outcomes, strict=True)):
        for j, sub in enumerate(outcome.subdomains if outcome is not None else []):
            sub_units.append(Unit(_subdomain_key(i, j, name, sub), i * _ORDER + 1 + j, (name, sub)))
    await run.units(sub_units, lambda u: run.subdomain_unit(*u.payload), steps=2 + c.families_per_subdomain)

    # merged in (field, subdomain) order, whatever order the units finished in
    slots: list[tuple[int, int]] = []
    environments: list[Environment] = []
    by_key = {u.key: u for u in sub_units}
    for i, (unit, outcome) in enumerate(zip(field_units, field_outcomes, strict=True)):
        if run.outcome(unit) is None:
            continue
        run.merge(outcome)
        for j, sub in enumerate(outcome.subdomains):
            done = run.outcome(by_key[_subdomain_key(i, j, fields[i], sub)])
            if done is None:
                continue
            run.merge(done)
            slots.append((i, j))
            environments.append(done.environment.model_copy(deep=True))
    environments = _unique_ids(environments)

    report = exact_dedup([t for e in environments for t in e.tools])
    _remove(run, environments, report)
    _semantic_pass(run, environments)
    if c.audit_threshold is not None:
        environments = await _audit(run, slots, environments)
    run.result.environments = _with_tools(run, environments)
    return run.result


def _unique_ids(environments: list[Environment]) -> list[Environment]:
    """The environments with distinct ids, in order: a later one whose id is taken gets ``_2``, ``_3``...

    Why: ids are slugs of the model's subdomain names, and a model may name two subdomains of a field alike
    ("Billing Ops", "billing ops"); both were written to one file, the second over the first, and one environment
    was lost without a word. Its tools' source ids follow the new id, so dedup and drops tell them apart.
    """
    taken = {e.id for e in environments}
    seen: set[str] = set()
    out = []
    for env in environments:
        if env.id in seen:
            n = 2
            while f"{env.id}_{n}" in taken:
                n += 1
            new_id = f"{env.id}_{n}"
            taken.add(new_id)
            for tool in env.tools:
                source = str(tool.extra.get("source_id", ""))
                if source.startswith(f"{env.id}__"):
                    tool.extra["source_id"] = f"{new_id}__{source[len(env.id) + 2 :]}"
            env = env.model_copy(update={"id": new_id})
        seen.add(env.id)
        out.append(env)
    return out


def _subdomain_key(i: int, j: int, field_name: str, sub: Subdomain) -> str:
    """A subdomain unit's key: its place (field i, subdomain j) and its names, readable in failure lists."""
    return f"subdomain:{i}:{j}:{field_name}/{sub.name}"


async def _audit(run: _Run, slots: list[tuple[int, int]], environments: list[Environment]) -> list[Environment]:
    """Audit every environment that kept a tool (one unit each, keyed by its content) and apply the outcomes in
    order; an environment whose audit failed is left out (listed in ``failed_units``)."""
    units = [
        Unit(f"audit:{i}:{j}:{env.id}:{fingerprint(env.model_dump(mode='json'))[:16]}", i * _ORDER + _AUDIT_AT + j, env)
        for (i, j), env in zip(slots, environments, strict=True)
        if env.tools
    ]
    await run.units(units, lambda u: run.audit_unit(u.payload), steps=1)
    outcomes = {id(u.payload): u for u in units}
    audited: list[Environment] = []
    for env in environments:
        unit = outcomes.get(id(env))
        if unit is None:  # no tool left to audit: named as empty below
            audited.append(env)
            continue
        outcome = run.outcome(unit)
        if outcome is None:
            continue
        for tool, reliability in outcome.reliability.items():
            run.result.reliability[f"{env.id}/{tool}"] = reliability
        for drop in outcome.drops:
            run.record(drop)
        kept = set(outcome.kept)
        audited.append(env.model_copy(update={"tools": [t for t in env.tools if t.name in kept]}))
    return audited


def _with_tools(run: _Run, environments: list[Environment]) -> list[Environment]:
    """The environments that kept at least one tool; the others are named in the result (not silently lost)."""
    for env in environments:
        if not env.tools:
            run.result.empty.append(env.id)
    return [e for e in environments if e.tools]


@dataclass(frozen=True)
class EnvSpec:
    """What a process needs to run units of a synthesis: the values of the command line, not objects.

    Why: with a distributed executor the units run in other processes (other hosts), which build their own model
    client from this. ``base_url`` travels in memory only (never written to a file); ``cache`` must be a path every
    worker can open (on one host: OUT/cache.sqlite, shared by all workers; on a cluster: shared storage).
    """

    model: str
    config: SynthConfig
    base_url: str | None = None
    cache: str | None = None
    max_connections: int | None = None


class EnvWorker:
    """Runs field, subdomain and audit units from an :class:`EnvSpec`, building its client (and the limit on stage
    calls in flight, ``config.concurrency``) on first use in whatever process it runs. Picklable: only the spec
    travels."""

    def __init__(self, spec: EnvSpec) -> None:
        self.spec = spec
        self._run: _Run | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"spec": self.spec}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["spec"])

    async def aopen(self) -> _Run:
        """The client and the stage machinery (built once); nothing is logged or merged here."""
        if self._run is None:
            from toolwild.llm.registry import create_llm

            spec = self.spec
            llm = create_llm(spec.model, base_url=spec.base_url, cache=spec.cache, max_connections=spec.max_connections)
            self._run = _Run(llm, spec.config, None)
        return self._run

    async def __call__(self, unit: Unit[Any]) -> BaseModel:
        run = await self.aopen()
        kind = unit.key.split(":", 1)[0]
        if kind == "field":
            return await run.field_unit(unit.payload)
        if kind == "subdomain":
            return await run.subdomain_unit(*unit.payload)
        if kind == "audit":
            return await run.audit_unit(unit.payload)
        raise ValueError(f"unknown unit {unit.key!r} (not a field, subdomain or audit unit)")

    async def aclose(self) -> None:
        """Close the client (its cache included)."""
        if self._run is not None:
            await self._run.llm.aclose()
        self._run = None
