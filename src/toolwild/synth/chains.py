"""Tool chains from an environment's dependency graph, in the three multi-call topologies.

An edge ``A -> B`` says that A's result can supply one of B's arguments: B consumes an entity A produces. The
entities come from the tools' declared ``produces``/``consumes`` when there are any (synthesized environments and
Python domains declare them); otherwise they are inferred from names, which is how imported tool lists (SynthTools,
WildToolBench) compose: a key of A's ``returns`` schema that is also one of B's parameters and names an entity
(``*_id``, ``*_code``, ``*_number``, ...). A chain is only a plan; whether it works is decided by executing it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from toolwild.core.tool import Tool

__all__ = ["Edge", "Plan", "PlannedCall", "ToolGraph", "entity_keys"]

_ENTITY_SUFFIXES = ("_id", "id", "_code", "_number", "_key", "_ref", "_name", "_sku", "_token", "_uuid")
_GENERIC_KEYS = frozenset({"id", "name", "status", "type", "message", "success", "result", "data", "count", "total"})


def _entity_like(key: str) -> bool:
    low = key.lower()
    return low not in _GENERIC_KEYS and low.endswith(_ENTITY_SUFFIXES)


def entity_keys(schema: Any, depth: int = 0) -> set[str]:
    """Property names anywhere in a result schema (objects, arrays of objects), to three levels."""
    if not isinstance(schema, dict) or depth > 3:
        return set()
    out: set[str] = set()
    props = schema.get("properties")
    if isinstance(props, dict):
        for name, sub in props.items():
            out.add(str(name))
            out |= entity_keys(sub, depth + 1)
    if isinstance(schema.get("items"), dict):
        out |= entity_keys(schema["items"], depth + 1)
    return out


@dataclass(frozen=True)
class Edge:
    """``source``'s result supplies ``target``'s parameter ``param`` (the entity ``entity``)."""

    source: str
    target: str
    param: str
    entity: str


@dataclass
class PlannedCall:
    """One call of a plan: the tool, and which earlier calls of the plan feed which of its parameters."""

    tool: Tool
    feeds: dict[str, tuple[int, str]] = field(default_factory=dict)
    """Parameter -> (index of the earlier planned call, entity) whose result gives its value."""

    @property
    def deps(self) -> list[int]:
        """Indices of the planned calls this one waits for."""
        return sorted({i for i, _ in self.feeds.values()})


@dataclass
class Plan:
    """Calls in execution order; ``topology`` is ``single``, ``parallel``, ``sequential`` or ``mixed``."""

    topology: str
    calls: list[PlannedCall]


def _param_for(tool: Tool, entity: str) -> str | None:
    """The parameter of ``tool`` that takes ``entity``: same name, else a name one contains the other of."""
    props = tool.properties
    if entity in props:
        return entity
    low = entity.lower()
    for name in tool.required or list(props):
        n = name.lower()
        if n.endswith(low) or low.endswith(n):
            return name
    return None


class ToolGraph:
    """Who can feed whom among an environment's tools."""

    def __init__(self, tools: list[Tool]) -> None:
        self.tools = {t.name: t for t in tools}
        self.edges: list[Edge] = []
        declared = any(t.produces or t.consumes for t in tools)
        for a in tools:
            produced = set(a.produces) if declared else {k for k in entity_keys(a.returns) if _entity_like(k)}
            for b in tools:
                if a.name == b.name:
                    continue
                wanted = set(b.consumes) if declared else {p for p in b.required if _entity_like(p)}
                for entity in sorted(produced & wanted):
                    param = _param_for(b, entity)
                    if param is not None:
                        self.edges.append(Edge(a.name, b.name, param, entity))

    def out_edges(self, name: str) -> list[Edge]:
        """Edges leaving ``name``."""
        return [e for e in self.edges if e.source == name]

    def in_edges(self, name: str) -> list[Edge]:
        """Edges entering ``name``."""
        return [e for e in self.edges if e.target == name]

    # ------------------------------------------------------------------ plans
    def single(self, rng: random.Random) -> Plan:
        """One call of a random tool."""
        return Plan("single", [PlannedCall(self.tools[rng.choice(sorted(self.tools))])])

    def parallel(self, rng: random.Random, width: int = 2) -> Plan:
        """``width`` independent calls (different tools when there are enough, else the same tool twice)."""
        names = sorted(self.tools)
        chosen = rng.sample(names, width) if len(names) >= width else [rng.choice(names)] * width
        return Plan("parallel", [PlannedCall(self.tools[n]) for n in chosen])

    def sequential(self, rng: random.Random, length: int = 2) -> Plan | None:
        """A path of ``length`` calls, each fed by the one before; None when the graph has no such path."""
        paths = [[e] for e in self.edges]
        for _ in range(length - 2):
            paths = [
                [*p, e] for p in paths for e in self.out_edges(p[-1].target) if e.target not in {x.source for x in p}
            ]
        if not paths:
            return None
        path = rng.choice(paths)
        calls = [PlannedCall(self.tools[path[0].source])]
        for i, edge in enumerate(path):
            calls.append(PlannedCall(self.tools[edge.target], {edge.param: (i, edge.entity)}))
        return Plan("sequential", calls)

    def mixed(self, rng: random.Random) -> Plan | None:
        """Fan-out (one call feeding two), merge (two calls feeding one), or a chain beside an independent call."""
        shapes: list[Plan] = []
        for a in sorted(self.tools):
            outs = self.out_edges(a)
            targets = sorted({e.target for e in outs})
            if len(targets) >= 2:
                b, c = rng.sample(targets, 2)
                eb = next(e for e in outs if e.target == b)
                ec = next(e for e in outs if e.target == c)
                shapes.append(
                    Plan(
                        "mixed",
                        [
                            PlannedCall(self.tools[a]),
                            PlannedCall(self.tools[b], {eb.param: (0, eb.entity)}),
                            PlannedCall(self.tools[c], {ec.param: (0, ec.entity)}),
                        ],
                    )
                )
        for c in sorted(self.tools):
            ins = self.in_edges(c)
            by_param: dict[str, Edge] = {}
            for e in ins:
                by_param.setdefault(e.param, e)
            if len(by_param) >= 2:
                e1, e2 = rng.sample(sorted(by_param.values(), key=lambda e: (e.param, e.source)), 2)
                if e1.source != e2.source:
                    shapes.append(
                        Plan(
                            "mixed",
                            [
                                PlannedCall(self.tools[e1.source]),
                                PlannedCall(self.tools[e2.source]),
                                PlannedCall(self.tools[c], {e1.param: (0, e1.entity), e2.param: (1, e2.entity)}),
                            ],
                        )
                    )
        if self.edges:
            edge = rng.choice(self.edges)
            others = sorted(set(self.tools) - {edge.source, edge.target})
            if others:
                other = rng.choice(others)
                shapes.append(
                    Plan(
                        "mixed",
                        [
                            PlannedCall(self.tools[edge.source]),
                            PlannedCall(self.tools[edge.target], {edge.param: (0, edge.entity)}),
                            PlannedCall(self.tools[other]),
                        ],
                    )
                )
        return rng.choice(shapes) if shapes else None
