"""Environment synthesis, top down: field -> subdomains -> task families -> tools (+ seed data) -> checks -> dedup.

Each stage is one structured-output call through the cached :class:`~toolwild.llm.client.LLM` (temperature 0, fixed
seed), so a second run with the same cache makes no model call and writes identical files, and a killed run
continues where it stopped: every call that finished is in the cache.

After the tools stage, deterministic checks (:mod:`toolwild.synth.checks`) judge each tool; a tool that fails is
sent back to the model with its problems (at most ``max_repairs`` rounds) and dropped with the reason if it still
fails. Seed entities are generated for the subdomain's entity types, then the dependency check drops tools that
consume an entity type nothing produces, the exact dedup pass runs over everything kept and, if asked, the audit
(:mod:`toolwild.synth.audit`) drops tools whose simulation is judged correct too rarely. One environment file
per subdomain (``llm`` backend) is written, with a report of every drop.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from toolwild.core.environment import BackendKind, Environment
from toolwild.core.tool import Contract, Effect, Tool
from toolwild.errors import StructuredOutputError
from toolwild.llm.client import LLM
from toolwild.llm.structured import InvalidReply, generate_checked
from toolwild.synth.checks import CheckKind, contract_problems, dependency_problems, schema_problems
from toolwild.synth.dedup import DedupReport, exact_dedup, tool_key
from toolwild.synth.models import (
    FamilyList,
    FieldSpec,
    SeedData,
    SubdomainList,
    ToolDraft,
    ToolDraftList,
    object_schema,
)

__all__ = ["SynthConfig", "SynthResult", "synth_environments"]

ROLE = "synth"
_SYSTEM = (
    "You design realistic software services for a tool-use benchmark: their areas, the tasks users bring, and the "
    "API tools that serve them. Reply with one JSON object only, matching the requested schema."
)
_MAX_SEED_RECORDS = 5
SEMANTIC_MIN = 200

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
    tau: float | None = None
    """Semantic dedup threshold (None: exact pass only). Applied when the run has at least :data:`SEMANTIC_MIN`
    tools: the local embedding learns its weights from the corpus it dedups, and a few dozen texts are no corpus.
    Off by default: on short, uniform texts the embedding is dominated by rare tokens (see the README)."""

    def planned_steps(self, fields: int) -> int:
        """Stage calls a run plans (for a progress bar): per field one, per subdomain families + tools + seed."""
        per_subdomain = 1 + self.families_per_subdomain + 1
        audit = self.subdomains_per_field if self.audit_threshold is not None else 0
        return fields * (1 + self.subdomains_per_field * per_subdomain + audit)


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


class _Run:
    def __init__(self, llm: LLM, config: SynthConfig, progress: Progress | None) -> None:
        self.llm = llm
        self.config = config
        self.progress = progress or (lambda _msg: None)
        self.result = SynthResult()

    async def ask(self, text: str, output: type[M], schema: dict[str, Any]) -> M:
        """One stage call: decoding follows ``schema`` (a bounded form of ``output``'s), ``output`` validates."""
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

    async def try_ask(self, text: str, output: type[M], what: str, *, schema: dict[str, Any] | None = None) -> M | None:
        """Like :meth:`ask`, but a reply that never validates skips this part (recorded) instead of ending the run.

        ``schema`` defaults to ``output``'s own, bounded (:func:`bounded_schema`), its main list capped by the count
        asked for.
        """
        if schema is None:
            top = _TOP_LISTS.get(output.__name__)
            schema = bounded_schema(output.model_json_schema(), top=(top, self._count(output)) if top else None)
        try:
            return await self.ask(text, output, schema)
        except StructuredOutputError as exc:
            self.result.failed_stages.append({"stage": what, "error": " ".join(str(exc).split())[:300]})
            return None

    def _count(self, output: type[BaseModel]) -> int:
        """How many items the stage asks for (the cap of its main list)."""
        c = self.config
        counts = {"SubdomainList": c.subdomains_per_field, "FamilyList": c.families_per_subdomain}
        return counts.get(output.__name__, c.tools_per_family)

    def drop(self, tool: Tool | str, kind: str, reasons: list[str]) -> None:
        name = tool if isinstance(tool, str) else tool_key(tool)
        self.result.dropped[kind] += 1
        self.result.drops.append({"tool": name, "check": kind, "reasons": reasons})

    async def tools_for(self, field_name: str, subdomain: Any, family: Any) -> list[Tool]:
        c = self.config
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
        reply = await self.try_ask(request, ToolDraftList, what, schema=schema)
        if reply is None:
            return []
        drafts = reply.tools[: c.tools_per_family]
        prefix = f"{_slug(field_name)}__{_slug(subdomain.name)}__"
        tools = []
        for d in drafts:
            tool = _tool(d, field_name, subdomain.name, family.name)
            tool.extra["source_id"] = prefix + d.name
            tools.append(tool)
        self.result.generated += len(tools)
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
                    self.drop(t, kinds.most_common(1)[0][0], [p for _, p in failing[id(t)]])
                break
            listing = "\n".join(
                f"- {t.name}: " + "; ".join(p for _, p in failing[id(t)]) + f"\n  current: {_tool_json(t)}"
                for t in broken
            )
            repair = f"{request}\nThese tools have problems; reply with the corrected tools only:\n{listing}"
            fixed = await self.try_ask(repair, ToolDraftList, f"repair: {field_name} / {subdomain.name}", schema=schema)
            by_name = {d.name: d for d in fixed.tools} if fixed is not None else {}
            pending = []
            for t in broken:
                draft = by_name.get(t.name)
                if draft is None:
                    self.drop(t, "repair", ["the repair reply did not include this tool"])
                    continue
                new = _tool(draft, field_name, subdomain.name, family.name)
                new.extra["source_id"] = t.extra["source_id"]
                pending.append(new)
        self.result.repaired += sum(1 for t in kept if t.name in failed_once)
        return kept

    async def seed_for(self, field_name: str, subdomain: Any, tools: list[Tool]) -> dict[str, Any]:
        types = sorted({*subdomain.entities, *(c for t in tools for c in t.consumes)})
        if not types:
            return {}
        request = (
            f"Field: {field_name}. Subdomain: {subdomain.name}. Create realistic seed records (at most "
            f"{_MAX_SEED_RECORDS} each, with ids) for these entity types: {', '.join(types)}. Reply "
            '{"entities": {"<type>": [records]}}.'
        )
        seed = await self.try_ask(
            request, SeedData, f"seed data: {field_name} / {subdomain.name}", schema=_seed_schema(types, tools)
        )
        if seed is None:
            return {}
        return {k: v[:_MAX_SEED_RECORDS] for k, v in sorted(seed.entities.items()) if isinstance(v, list)}

    async def field(self, field_name: str) -> list[Environment]:
        c = self.config
        self.progress(f"{field_name}: subdomains")
        reply = await self.try_ask(
            f"Field: {field_name}.\nList {c.subdomains_per_field} different subdomains of {field_name}, each an "
            'area served by one software service.\nFor each: "name" (2 to 4 words), "description" (one sentence), '
            '"stakeholders" (2 or 3 kinds of users), "entities" (2 or 3 kinds of records it stores, one lowercase '
            "word each).",
            SubdomainList,
            f"subdomains: {field_name}",
        )
        subdomains = reply.subdomains[: c.subdomains_per_field] if reply is not None else []
        environments = []
        for sub in subdomains:
            self.progress(f"{field_name} / {sub.name}: task families")
            listed = await self.try_ask(
                f"Field: {field_name}. Subdomain: {sub.name} ({sub.description}).\nList "
                f"{c.families_per_subdomain} families of tasks its users bring. For each: "
                '"name" (2 to 5 words) and "description" (one sentence: what the user wants done).',
                FamilyList,
                f"task families: {field_name} / {sub.name}",
            )
            families = listed.families[: c.families_per_subdomain] if listed is not None else []
            tools: list[Tool] = []
            for family in families:
                self.progress(f"{field_name} / {sub.name} / {family.name}: tools")
                tools += await self.tools_for(field_name, sub, family)
            self.progress(f"{field_name} / {sub.name}: seed data")
            seed = await self.seed_for(field_name, sub, tools)
            missing = dependency_problems(tools, seed)
            for tool in [t for t in tools if t.name in missing]:
                self.drop(tool, CheckKind.DEPENDENCY, missing[tool.name])
            tools = [t for t in tools if t.name not in missing]
            environments.append(
                Environment(
                    id=f"{_slug(field_name)}__{_slug(sub.name)}",
                    description=sub.description,
                    field=field_name,
                    subdomain=sub.name,
                    tools=tools,
                    initial_state=seed,
                    backend=BackendKind.LLM,
                    source={"format": "toolwild-synth", "stakeholders": sub.stakeholders, "seed": c.seed},
                )
            )
        return environments


def _tool_json(tool: Tool) -> str:
    return json.dumps({"name": tool.name, "parameters": tool.parameters, "returns": tool.returns}, ensure_ascii=False)[
        :1200
    ]


def _remove(run: _Run, environments: list[Environment], report: DedupReport) -> None:
    """Take dedup drops out of the environments, each recorded with the tool it duplicates.

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
                cosine = f" (cosine {d.similarity})" if d.similarity is not None else ""
                run.drop(tool, "dedup", [f"{d.reason.value} of {d.duplicate_of}{cosine}"])
        env.tools = [t for t in env.tools if id(t) in kept]


def _semantic_pass(run: _Run, environments: list[Environment]) -> None:
    tools = [t for e in environments for t in e.tools]
    if run.config.tau is None:
        return
    if len(tools) < SEMANTIC_MIN:
        run.result.notes.append(
            f"semantic dedup skipped: {len(tools)} tools (the local embedding needs at least {SEMANTIC_MIN})"
        )
        return
    from toolwild.synth.dedup import embedding_text, semantic_dedup
    from toolwild.synth.embedding import TokenEmbedder

    run.progress("semantic dedup")
    vectors = TokenEmbedder().fit_embed_texts([embedding_text(t) for t in tools])
    report = semantic_dedup(tools, vectors, tau=run.config.tau)
    _remove(run, environments, report)


async def synth_environments(
    llm: LLM, fields: list[str], config: SynthConfig | None = None, *, progress: Progress | None = None
) -> SynthResult:
    """Generate environments for ``fields`` (see the module docstring); the exact dedup runs over all of them."""
    run = _Run(llm, config or SynthConfig(), progress)
    environments: list[Environment] = []
    for field_name in fields:
        environments += await run.field(field_name)
    report = exact_dedup([t for e in environments for t in e.tools])
    _remove(run, environments, report)
    _semantic_pass(run, environments)
    if run.config.audit_threshold is not None:
        from toolwild.synth.audit import audit_environment

        for i, env in enumerate(environments):
            run.progress(f"{env.id}: audit")
            kept, audits = await audit_environment(env, llm, threshold=run.config.audit_threshold)
            for audit in audits:
                run.result.reliability[f"{env.id}/{audit.tool}"] = audit.reliability
                if not audit.passes(run.config.audit_threshold):  # the same rule that decided ``kept``
                    reasons = [f"{c['kind']}: {c['reason']}" for c in audit.calls if not c["correct"]]
                    if audit.schema_check is False:
                        reasons.insert(0, "schema check: an invalid call was not rejected")
                    run.drop(f"{env.id}/{audit.tool}", "audit", [f"reliability {audit.reliability:.0%}", *reasons])
            environments[i] = kept
    run.result.environments = _with_tools(run, environments)
    return run.result


def _with_tools(run: _Run, environments: list[Environment]) -> list[Environment]:
    """The environments that kept at least one tool; the others are named in the result (not silently lost)."""
    for env in environments:
        if not env.tools:
            run.result.empty.append(env.id)
    return [e for e in environments if e.tools]
