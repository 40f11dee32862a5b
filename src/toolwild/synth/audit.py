"""Audit of simulated tools: test calls run on the ``llm`` backend, judged against the contract; reliability per tool.

Per tool, up to four calls are made on fresh episodes:

- **valid**: required arguments filled with schema-valid examples; the answer should be a result (or an error mode
  the contract names, if the seed state makes a precondition fail);
- **schema-invalid**: a required argument dropped (or an unknown one added); the answer must be
  ``invalid_arguments``. Checked by code, not by the judge: the backend checks schemas before any model sees the
  call, so this call says whether the *schema* refuses bad input, never whether the *simulation* is reliable;
- **precondition-violating** (tools that consume an entity or state preconditions): entity references point to an
  id that does not exist; the answer should be a typed error;
- **edge**: numbers at their declared bounds, strings empty where allowed.

A judge model reads the tool's contract, the call, what was expected and the observation, and says whether the
simulation was correct. Reliability = share of the *model-judged* calls (valid, precondition, edge) judged correct;
the schema-invalid call is reported apart (``schema_check``). Counting it would add a call that passes by
construction: two right answers out of three model-judged calls would reach 3/4 = 0.75 and keep the tool. A tool is
kept when its reliability reaches the threshold and its schema check did not fail.
:func:`calibrate` measures the same judge against labelled rows (precision, recall, false-positive rate, where
"positive" means "judged correct").

Elsewhere: :class:`AuditWorker` audits one tool per unit in whatever process it runs (a Ray worker builds its own
client from an :class:`AuditSpec`); :func:`audit_remote` runs those units on an executor and puts the audits back in
tool order, the same as :func:`audit_environment` (each call's episode is seeded by its index within its tool).
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import json
from collections.abc import AsyncIterator, Awaitable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from toolwild.core.environment import Environment
from toolwild.core.jsonl import load_records, validation_to_data_error
from toolwild.core.schema import example_value, normalize_schema
from toolwild.core.tool import Tool
from toolwild.envs.base import Observation, ToolErrorKind
from toolwild.envs.simulated import SimulatedEnvironment
from toolwild.errors import StructuredOutputError, TransientBackendError
from toolwild.llm.client import LLM
from toolwild.llm.structured import InvalidReply, generate_checked
from toolwild.run import Unit

__all__ = [
    "AuditCall",
    "AuditSpec",
    "AuditWorker",
    "Calibration",
    "CallKind",
    "JudgeVerdict",
    "LabelRow",
    "RankedLimit",
    "ToolAudit",
    "audit_calls",
    "audit_environment",
    "audit_remote",
    "calibrate",
    "in_order",
    "load_labels",
]

T = TypeVar("T")

ROLE = "judge"
CallKind = Literal["valid", "schema_invalid", "precondition", "edge"]
_MISSING_ID = "does-not-exist-404"
_EXPECT: dict[str, str] = {
    "valid": "a result that fits the output schema and the contract (or an error mode the contract names, if the "
    "current state makes a precondition fail)",
    "schema_invalid": "an invalid_arguments error",
    "precondition": "a typed error (not found or precondition failed), because the referenced entity does not exist",
    "edge": "a sensible result or a typed error for values at the edge of what the parameters allow",
}


class LabelRow(BaseModel):
    """One labelled row for :func:`calibrate` (a line of a LABELS.jsonl file)."""

    model_config = ConfigDict(extra="forbid")

    tool: Tool
    arguments: dict[str, Any] = Field(default_factory=dict)
    response: Any = None
    correct: bool
    """Whether the response was right for the call (the human label)."""


def load_labels(path: str | Path) -> list[LabelRow]:
    """Read a LABELS.jsonl file.

    Raises:
        DataError: a line is not JSON or not a label row (file, line and field named).
    """

    def convert(_: int, obj: Any) -> LabelRow:
        try:
            return LabelRow.model_validate(obj)
        except ValidationError as exc:
            raise validation_to_data_error(exc) from None

    rows, _ = load_records(path, convert)
    return rows


class JudgeVerdict(BaseModel):
    """The judge's decision on one simulated call."""

    model_config = ConfigDict(extra="forbid")

    correct: bool
    reason: str = Field(default="", max_length=300)


@dataclass(frozen=True)
class AuditCall:
    """One test call."""

    kind: CallKind
    arguments: dict[str, Any]


Judge = Literal["model", "code"]
"""Who decided a call: the judge model (or the simulator failing outright), or a deterministic check."""


@dataclass
class ToolAudit:
    """The calls made on one tool, each with its observation, judgement and who judged it (``judged_by``)."""

    tool: str
    calls: list[dict[str, Any]] = field(default_factory=list)

    def _by(self, judge_kind: Judge) -> list[dict[str, Any]]:
        return [c for c in self.calls if c.get("judged_by", "model") == judge_kind]

    @property
    def judged(self) -> int:
        """Model-judged calls that received a verdict (the reliability's denominator)."""
        return sum(1 for c in self._by("model") if c["correct"] is not None)

    @property
    def judged_correct(self) -> int:
        """Model-judged calls judged correct (the reliability's numerator)."""
        return sum(1 for c in self._by("model") if c["correct"])

    @property
    def reliability(self) -> float:
        """Share of the model-judged calls judged correct (0 when none could be judged).

        Code-checked calls are left out: they measure the schema, and one that passes by construction would lift
        every tool by a call it could not fail.
        """
        return self.judged_correct / self.judged if self.judged else 0.0

    @property
    def schema_check(self) -> bool | None:
        """Whether the schema refused the schema-invalid call (None: the schema accepts anything, no such call)."""
        checks = [c["correct"] for c in self._by("code")]
        return all(checks) if checks else None

    def passes(self, threshold: float) -> bool:
        """Kept: reliable enough, and a schema that refuses what it must (a schema that lets a call with a missing
        required argument through cannot be trusted to describe the tool)."""
        return self.reliability >= threshold and self.schema_check is not False


def _edge(schema: dict[str, Any]) -> dict[str, Any] | None:
    """Required arguments at their bounds; None when the tool has nothing with a bound to push."""
    props = normalize_schema(schema).get("properties", {})
    args = example_value(schema)
    changed = False
    for name, spec in props.items():
        if not isinstance(spec, dict) or name not in args:
            continue
        if spec.get("type") in ("integer", "number") and ("maximum" in spec or "minimum" in spec):
            args[name] = spec.get("maximum", spec.get("minimum"))
            changed = True
        elif spec.get("type") == "array" and "maxItems" in spec:
            args[name] = [example_value(spec.get("items", {}))] * int(spec["maxItems"])
            changed = True
    return args if changed else None


def _schema_invalid(tool: Tool, valid: dict[str, Any]) -> dict[str, Any] | None:
    """Arguments the schema must refuse: a required one missing, else one of the wrong type, else an unknown one
    where the schema forbids extras; None when the schema accepts anything."""
    if tool.required:
        return {k: v for k, v in valid.items() if k != tool.required[0]}
    for name, spec in tool.properties.items():
        kind = normalize_schema(spec).get("type") if isinstance(spec, dict) else None
        if kind:
            return {**valid, name: "not-a-number" if kind in ("integer", "number", "boolean") else 12345}
    if tool.parameters.get("additionalProperties") is False:
        return {**valid, "_unexpected_argument": 1}
    return None


def audit_calls(tool: Tool) -> list[AuditCall]:
    """The test calls for a tool (deterministic: derived from its schema and contract)."""
    valid = example_value(tool.parameters)
    calls = [AuditCall("valid", valid)]
    invalid = _schema_invalid(tool, valid)
    if invalid is not None:
        calls.append(AuditCall("schema_invalid", invalid))
    contract = tool.contract
    if tool.consumes or (contract is not None and contract.preconditions):
        props = tool.properties
        refs = {k: _MISSING_ID for k in valid if isinstance(props.get(k), dict) and props[k].get("type") == "string"}
        if refs:
            calls.append(AuditCall("precondition", {**valid, **refs}))
    edge = _edge(tool.parameters)
    if edge is not None:
        calls.append(AuditCall("edge", edge))
    return calls


def _judge_messages(tool: Tool, arguments: dict[str, Any], expectation: str, response: Any) -> list[dict[str, Any]]:
    definition = {"name": tool.name, "description": tool.description, "parameters": tool.parameters}
    if tool.returns:
        definition["output_schema"] = tool.returns
    if tool.contract is not None:
        definition["contract"] = tool.contract.model_dump(exclude_defaults=True)
    text = (
        f"Tool: {json.dumps(definition, ensure_ascii=False)[:3000]}\n"
        f"Call arguments: {json.dumps(arguments, ensure_ascii=False)}\n"
        f"Expected: {expectation}\n"
        f"Simulated response: {json.dumps(response, ensure_ascii=False, default=str)[:3000]}\n"
        'Was the simulated response correct for this call? Reply {"correct": true|false, "reason": "..."}.'
    )
    system = "You review a tool simulator's answers against the tool's definition and contract. Be strict."
    return [{"role": "system", "content": system}, {"role": "user", "content": text}]


async def judge(
    llm: LLM, tool: Tool, arguments: dict[str, Any], response: Any, *, expectation: str = _EXPECT["valid"]
) -> JudgeVerdict:
    """Ask the judge model about one (call, response) pair (the verdict's schema is made once: pydantic builds it
    anew on every request otherwise, most of the harness's time per judge call)."""
    return await generate_checked(
        llm,
        _judge_messages(tool, arguments, expectation, response),
        _JUDGE_SCHEMA,
        _verdict,
        name="JudgeVerdict",
        role=ROLE,
        max_tokens=256,
    )


_JUDGE_SCHEMA = JudgeVerdict.model_json_schema()


def _verdict(text: str) -> JudgeVerdict:
    """A reply as a verdict; raw control characters inside strings are tolerated (llama.cpp grammars allow them),
    a rejection names the fields for the model to fix."""
    try:
        return JudgeVerdict.model_validate_json(text)
    except ValidationError as exc:
        try:
            return JudgeVerdict.model_validate(json.loads(text, strict=False))
        except (ValueError, ValidationError):
            lines = [f"- {'.'.join(map(str, e.get('loc', ()))) or '(root)'}: {e.get('msg')}" for e in exc.errors()[:5]]
            raise InvalidReply("\n".join(lines)) from None


async def _audit_call(
    sim: SimulatedEnvironment, judge_llm: LLM, tool: Tool, index: int, call: AuditCall
) -> dict[str, Any]:
    """One test call on a fresh episode (seeded by the call's index, so it does not depend on what ran before) and
    its judgement."""
    episode = sim.reset(seed=index)
    observation: Observation = await episode.acall(tool.name, call.arguments)
    shown = json.loads(observation.to_text())
    correct: bool | None
    judged_by: Judge = "model"
    if call.kind == "schema_invalid":  # decided by code: the schema layer must have refused it
        judged_by = "code"
        correct = observation.error is not None and observation.error.kind is ToolErrorKind.INVALID_ARGUMENTS
        reason = "rejected by schema validation" if correct else "an invalid call was not rejected"
    elif observation.error is not None and observation.error.kind is ToolErrorKind.SIMULATION_FAILED:
        correct, reason = False, "the simulator produced no valid answer"
    else:
        try:
            verdict = await judge(judge_llm, tool, call.arguments, shown, expectation=_EXPECT[call.kind])
            correct, reason = verdict.correct, verdict.reason
        except StructuredOutputError as exc:
            correct, reason = None, f"the judge gave no valid verdict: {str(exc).splitlines()[0]}"
    return {
        "kind": call.kind,
        "arguments": call.arguments,
        "observation": shown,
        "correct": correct,
        "judged_by": judged_by,
        "reason": reason,
    }


async def in_order(coros: Iterable[Awaitable[T]]) -> list[T]:
    """Await ``coros`` concurrently and return their results in the given order (never in completion order).

    The first failure cancels the others and is raised as itself, not wrapped in an exception group, so a caller
    can catch a :class:`~toolwild.errors.TransientBackendError` (the provider kept failing) as such; when a bug
    and a provider failure happen together, the bug is raised.
    """
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(c) for c in coros]  # type: ignore[arg-type]
    except BaseExceptionGroup as raised:
        errors = list(raised.exceptions)
        bug = next((e for e in errors if not isinstance(e, TransientBackendError)), None)
        raise bug or errors[0] from None
    return [t.result() for t in tasks]


_CHAIN_RANK: dict[str, int] = {"valid": 0, "edge": 0, "precondition": 1, "schema_invalid": 2}
"""Start order of the test calls (see :class:`RankedLimit`): the valid and edge calls usually take three model
calls (precondition, simulation, judge), a precondition-violating one two, the schema-invalid one none."""


class RankedLimit:
    """At most ``n`` holders at once; waiters get in by rank (lower first), then in order of arrival.

    Why not a plain semaphore: its queue is first come, first served, so when many environments are audited at
    once the last environment's three-call chains start last and the run ends on a few of them with the other
    slots idle. Ranked, the long chains of every environment start first and the short ones fill the end.
    """

    def __init__(self, n: int) -> None:
        if n < 1:
            raise ValueError(f"a limit must be at least 1, got {n}")
        self._free = n
        self._waiters: list[tuple[int, int, asyncio.Future[None]]] = []
        self._arrivals = itertools.count()

    @contextlib.asynccontextmanager
    async def slot(self, rank: int = 0) -> AsyncIterator[None]:
        """Hold one place for the block (waiting for it by ``rank``)."""
        if self._free > 0 and not self._waiters:
            self._free -= 1
        else:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            heapq.heappush(self._waiters, (rank, next(self._arrivals), waiter))
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():  # the place was given just before the cancel
                    self._release()
                raise
        try:
            yield
        finally:
            self._release()

    def _release(self) -> None:
        while self._waiters:
            _rank, _arrival, waiter = heapq.heappop(self._waiters)
            if not waiter.done():  # a cancelled waiter is skipped
                waiter.set_result(None)
                return
        self._free += 1


async def audit_environment(
    environment: Environment,
    simulator: LLM,
    judge_llm: LLM | None = None,
    *,
    threshold: float = 0.75,
    concurrency: int = 32,
    limit: RankedLimit | None = None,
) -> tuple[Environment, list[ToolAudit]]:
    """Audit every tool; returns the environment without the tools that fail (:meth:`ToolAudit.passes`), and the
    audits (in tool order, each tool's calls in :func:`audit_calls` order).

    Every test call of every tool (its simulation, then its judgement) runs at once, at most ``concurrency`` calls
    in flight, or under ``limit`` when given (environment synthesis shares one limit over all its stages). Each
    call runs on its own episode, so the results do not depend on the concurrency or the completion order.

    Raises:
        TransientBackendError: the provider kept failing on some call (the others are cancelled).
    """
    gate = limit if limit is not None else RankedLimit(concurrency)
    sim = SimulatedEnvironment(environment, simulator)
    judging = judge_llm or simulator

    async def one(tool: Tool, index: int, call: AuditCall) -> dict[str, Any]:
        async with gate.slot(_CHAIN_RANK[call.kind]):
            return await _audit_call(sim, judging, tool, index, call)

    audits = [ToolAudit(tool=t.name) for t in environment.tools]
    plan = [
        (audit, tool, i, call)
        for audit, tool in zip(audits, environment.tools, strict=True)
        for i, call in enumerate(audit_calls(tool))
    ]
    results = await in_order(one(tool, i, call) for _audit, tool, i, call in plan)
    for (audit, *_rest), result in zip(plan, results, strict=True):
        audit.calls.append(result)
    return _without_unreliable(environment, audits, threshold), audits


def _without_unreliable(environment: Environment, audits: list[ToolAudit], threshold: float) -> Environment:
    """The environment with only the tools whose audit passes."""
    reliable = {a.tool for a in audits if a.passes(threshold)}
    return environment.model_copy(update={"tools": [t for t in environment.tools if t.name in reliable]})


@dataclass
class Calibration:
    """The judge against labels; positive = "judged correct"."""

    tp: int = 0
    fp: int = 0
    tn: int = 0
    fn: int = 0
    unjudged: int = 0

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 0.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 0.0

    @property
    def false_positive_rate(self) -> float:
        return self.fp / (self.fp + self.tn) if self.fp + self.tn else 0.0

    @property
    def accuracy(self) -> float:
        total = self.tp + self.fp + self.tn + self.fn
        return (self.tp + self.tn) / total if total else 0.0


async def calibrate(llm: LLM, rows: Iterable[LabelRow]) -> Calibration:
    """Judge each labelled row and count agreements with its label."""
    result = Calibration()
    for row in rows:
        label = row.correct
        try:
            predicted = (await judge(llm, row.tool, row.arguments, row.response)).correct
        except StructuredOutputError:
            result.unjudged += 1
            continue
        if predicted and label:
            result.tp += 1
        elif predicted:
            result.fp += 1
        elif label:
            result.fn += 1
        else:
            result.tn += 1
    return result


@dataclass(frozen=True)
class AuditSpec:
    """What a process needs to audit tools of an environment: the environment and the model's plain values (the
    base URL travels in memory only; ``cache``, when given, must be a path every worker can open)."""

    environment: Environment
    model: str
    base_url: str | None = None
    cache: str | None = None
    concurrency: int = 32


class AuditWorker:
    """Audits one tool per unit (its payload: the tool's index), building its client on first use in whatever
    process it runs. Picklable: only the spec travels. Simulator and judge are the one model, as in the CLI."""

    def __init__(self, spec: AuditSpec) -> None:
        self.spec = spec
        self._opened: tuple[LLM, SimulatedEnvironment, RankedLimit] | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"spec": self.spec}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["spec"])

    async def aopen(self) -> tuple[LLM, SimulatedEnvironment, RankedLimit]:
        """The client, the simulated environment and the limit on calls in flight (built once)."""
        if self._opened is None:
            from toolwild.llm.registry import create_llm

            spec = self.spec
            llm = create_llm(spec.model, base_url=spec.base_url, cache=spec.cache, max_connections=spec.concurrency)
            self._opened = (llm, SimulatedEnvironment(spec.environment, llm), RankedLimit(spec.concurrency))
        return self._opened

    async def __call__(self, unit: Unit[int]) -> ToolAudit:
        llm, sim, gate = await self.aopen()
        tool = self.spec.environment.tools[unit.payload]

        async def one(index: int, call: AuditCall) -> dict[str, Any]:
            async with gate.slot(_CHAIN_RANK[call.kind]):
                return await _audit_call(sim, llm, tool, index, call)

        calls = await in_order(one(i, call) for i, call in enumerate(audit_calls(tool)))
        return ToolAudit(tool=tool.name, calls=calls)

    async def aclose(self) -> None:
        """Close the client (its cache included)."""
        if self._opened is not None:
            await self._opened[0].aclose()
        self._opened = None


async def audit_remote(
    executor: Any, worker: AuditWorker, *, threshold: float = 0.75
) -> tuple[Environment, list[ToolAudit]]:
    """:func:`audit_environment` on an executor (e.g. a :class:`~toolwild.run.ray_executor.RayExecutor`), one unit
    per tool; the audits come back here and are put in tool order, so the result is the local one.

    Raises:
        TransientBackendError (or any error of a unit): the provider kept failing; the other units are cancelled.
    """
    environment = worker.spec.environment
    units = [Unit(f"tool:{i}:{t.name}", i, i) for i, t in enumerate(environment.tools)]
    found: dict[int, ToolAudit] = {}

    def done(unit: Unit[int], audit: ToolAudit) -> None:
        found[unit.order] = audit

    await executor.map(units, worker, on_done=done)
    audits = [found[i] for i in range(len(units))]
    return _without_unreliable(environment, audits, threshold), audits
