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
from typing import Any

from toolwild.core.environment import BackendKind, Environment
from toolwild.core.tool import Contract, Effect, Tool
from toolwild.errors import StructuredOutputError
from toolwild.llm.client import LLM
from toolwild.llm.structured import generate_structured
from toolwild.synth.checks import CheckKind, contract_problems, dependency_problems, schema_problems
from toolwild.synth.dedup import Dropped, exact_dedup, tool_key
from toolwild.synth.models import FamilyList, SeedData, SubdomainList, ToolDraft, ToolDraftList, object_schema

__all__ = ["SynthConfig", "SynthResult", "synth_environments"]

ROLE = "synth"
_SYSTEM = (
    "You design realistic software services for a tool-use benchmark: their areas, the tasks users bring, and the "
    "API tools that serve them. Reply with one JSON object only, matching the requested schema."
)
_MAX_SEED_RECORDS = 5
SEMANTIC_MIN = 200

Progress = Callable[[str], None]


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


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_") or "x"


def _messages(text: str) -> list[dict[str, Any]]:
    return [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": text}]


def _tool(draft: ToolDraft, field_name: str, subdomain: str, family: str) -> Tool:
    return Tool(
        name=draft.name,
        description=draft.description,
        parameters=object_schema(draft.parameters),
        returns=object_schema(draft.returns),
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

    async def ask(self, text: str, output: type[Any]) -> Any:
        return await generate_structured(
            self.llm,
            _messages(text),
            output,
            role=ROLE,
            seed=self.config.seed,
            max_tokens=self.config.max_tokens,
        )

    async def try_ask(self, text: str, output: type[Any], what: str) -> Any:
        """Like :meth:`ask`, but a reply that never validates skips this part (recorded) instead of ending the run."""
        try:
            return await self.ask(text, output)
        except StructuredOutputError as exc:
            self.result.failed_stages.append({"stage": what, "error": " ".join(str(exc).split())[:300]})
            return None

    def drop(self, tool: Tool | str, kind: str, reasons: list[str]) -> None:
        name = tool if isinstance(tool, str) else tool_key(tool)
        self.result.dropped[kind] += 1
        self.result.drops.append({"tool": name, "check": kind, "reasons": reasons})

    async def tools_for(self, field_name: str, subdomain: Any, family: Any) -> list[Tool]:
        c = self.config
        request = (
            f"Field: {field_name}. Subdomain: {subdomain.name} ({subdomain.description}). Entity types: "
            f"{', '.join(subdomain.entities) or 'any'}.\nTask family: {family.name}: {family.description}\n"
            f"Design {c.tools_per_family} API tools for this family. Each tool: a snake_case name, a description, "
            "its parameters and returned fields (name, type, description, required; enum, format, minimum, maximum "
            "or items where they apply), preconditions, postconditions, error_modes, effect read or write, and the "
            "entity types it consumes and produces."
        )
        reply = await self.try_ask(request, ToolDraftList, f"tools: {field_name} / {subdomain.name} / {family.name}")
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
            fixed = await self.try_ask(repair, ToolDraftList, f"repair: {field_name} / {subdomain.name}")
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
        seed = await self.try_ask(request, SeedData, f"seed data: {field_name} / {subdomain.name}")
        if seed is None:
            return {}
        return {k: v[:_MAX_SEED_RECORDS] for k, v in sorted(seed.entities.items()) if isinstance(v, list)}

    async def field(self, field_name: str) -> list[Environment]:
        c = self.config
        self.progress(f"{field_name}: subdomains")
        reply = await self.try_ask(
            f"Field: {field_name}. List {c.subdomains_per_field} distinct subdomains (areas served by one "
            "software service), each with a description, its stakeholders and the entity types it manages.",
            SubdomainList,
            f"subdomains: {field_name}",
        )
        subdomains = reply.subdomains[: c.subdomains_per_field] if reply is not None else []
        environments = []
        for sub in subdomains:
            self.progress(f"{field_name} / {sub.name}: task families")
            listed = await self.try_ask(
                f"Field: {field_name}. Subdomain: {sub.name} ({sub.description}). List "
                f"{c.families_per_subdomain} families of tasks its users bring, each with a description.",
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


def _remove(run: _Run, environments: list[Environment], dropped: list[Dropped]) -> None:
    """Take dedup drops out of the environments, each recorded with the tool it duplicates."""
    by_key = {d.key: d for d in dropped}
    for env in environments:
        for tool in env.tools:
            d = by_key.get(tool_key(tool))
            if d is not None:
                cosine = f" (cosine {d.similarity})" if d.similarity is not None else ""
                run.drop(tool, "dedup", [f"{d.reason.value} of {d.duplicate_of}{cosine}"])
        env.tools = [t for t in env.tools if tool_key(t) not in by_key]


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
    _remove(run, environments, report.dropped)


async def synth_environments(
    llm: LLM, fields: list[str], config: SynthConfig | None = None, *, progress: Progress | None = None
) -> SynthResult:
    """Generate environments for ``fields`` (see the module docstring); the exact dedup runs over all of them."""
    run = _Run(llm, config or SynthConfig(), progress)
    environments: list[Environment] = []
    for field_name in fields:
        environments += await run.field(field_name)
    report = exact_dedup([t for e in environments for t in e.tools])
    _remove(run, environments, report.dropped)
    _semantic_pass(run, environments)
    if run.config.audit_threshold is not None:
        from toolwild.synth.audit import audit_environment

        for i, env in enumerate(environments):
            run.progress(f"{env.id}: audit")
            kept, audits = await audit_environment(env, llm, threshold=run.config.audit_threshold)
            for audit in audits:
                run.result.reliability[f"{env.id}/{audit.tool}"] = audit.reliability
                if audit.reliability < run.config.audit_threshold:
                    reasons = [f"{c['kind']}: {c['reason']}" for c in audit.calls if not c["correct"]]
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
