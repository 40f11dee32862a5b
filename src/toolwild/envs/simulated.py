"""The ``llm`` backend: tools without code, answered by a model over explicit state.

Published simulators keep "state" as the text of earlier calls and let the model do the arithmetic. Here the state
is a JSON document (seeded from the environment's ``initial_state``) and a call goes through four steps, each with
one job:

1. **Schema** (code): the arguments are validated against the tool's parameter schema, every violation reported;
   invalid arguments never reach the model.
2. **Preconditions** (model, only for tools with a contract): given the contract and the current state, does the
   call's precondition hold? If not, the answer is a typed error of the contract's kind (not found, duplicate ...).
3. **Response** (model): a result conditioned on the tool's description, contract, output schema, the seed data and
   the current state, plus a **state patch** (JSON Patch with ``increment``) saying what the call changed.
4. **Apply** (code): the result is validated against the output schema, the patch is applied to a copy of the
   state; a reply that fails either is shown to the model with the reason and retried (bounded). A read tool's
   reply may not carry a patch. If no valid reply comes, the call answers ``simulation_failed`` and the state is
   unchanged: a broken simulation is never silently written into the episode.

Every model call goes through :class:`~toolwild.llm.client.LLM` at temperature 0 with the episode's seed, so with the
cache an episode replays identically and for free.
"""

from __future__ import annotations

import copy
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from toolwild.core.environment import Environment
from toolwild.core.schema import normalize_schema, schema_errors
from toolwild.core.tool import Effect, Tool
from toolwild.envs.base import EnvironmentBackend, Episode, Observation, ToolErrorKind, precheck
from toolwild.envs.patch import PatchError, PatchOp, apply_patch
from toolwild.errors import ConfigError, StructuredOutputError
from toolwild.llm.client import LLM
from toolwild.llm.structured import InvalidReply, generate_checked, generate_structured

__all__ = ["PreconditionVerdict", "SimulatedEnvironment", "SimulatedEpisode"]

ROLE = "simulator"
"""Usage-accounting role of every simulator call."""
_RECENT_CALLS = 6
_MAX_CONTEXT_CHARS = 2000

_SYSTEM = (
    "You simulate one tool of a software service. You are given the tool's definition, the service's current "
    "state as JSON, the most recent calls, and a call's arguments. Answer as the real service would, consistent "
    "with the state and with earlier answers. Reply with one JSON object only."
)


class PreconditionVerdict(BaseModel):
    """The model's judgement of a call's preconditions against the current state."""

    model_config = ConfigDict(extra="forbid")

    holds: bool
    """True when every precondition of the contract holds for this call in this state."""
    kind: Literal["precondition_failed", "not_found", "duplicate", "rejected"] = "precondition_failed"
    message: str = ""
    """When it does not hold: the error message the service returns."""


def _compact(value: Any, limit: int = _MAX_CONTEXT_CHARS) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"), default=str)
    return text if len(text) <= limit else text[: limit - 15] + "...(truncated)"


_POINTER = r'^(/[^/"\\]{1,40}){1,6}$'
"""A JSON pointer below the root (keys up to 40 characters, 6 levels): as a grammar it keeps small models from
writing ``"path": "add"``; real states are shallower."""
_PATCH_OP_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "op": {"enum": ["add", "remove", "replace", "move", "copy", "test", "increment"]},
        "path": {"type": "string", "pattern": _POINTER},
        "value": {},
        "from": {"type": "string", "pattern": _POINTER},
    },
    "required": ["op", "path"],
    "additionalProperties": False,
}
"""Written out rather than generated from :class:`PatchOp`: grammar converters (llama.cpp's) reject the
annotations pydantic adds (``default``/``title`` on an any-value)."""


_MAX_STRING = 160
_MAX_ITEMS = 12


def _bounded(schema: Any) -> Any:
    """A copy of a schema where every string and array has a length bound.

    Why: the reply format is also a decoding grammar for local models, and a small model constrained to "any
    string" or "any array" can run until ``max_tokens`` cuts the JSON. A simulated answer never needs a 160-character
    field or a dozen list entries, so the bounds cost nothing; the result is still validated against the tool's own
    output schema.
    """
    if isinstance(schema, list):
        return [_bounded(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _bounded(v) for k, v in schema.items()}
    types = out.get("type") if isinstance(out.get("type"), list) else [out.get("type")]
    if "string" in types and "maxLength" not in out and "enum" not in out and "format" not in out:
        out["maxLength"] = _MAX_STRING
    if "array" in types and "maxItems" not in out:
        out["maxItems"] = max(_MAX_ITEMS, int(out.get("minItems", 0) or 0))
    return out


def _response_schema(tool: Tool) -> dict[str, Any]:
    """The JSON Schema of a reply: the result (of the tool's output schema), and a patch unless the tool reads."""
    result = _bounded(normalize_schema(tool.returns)) if tool.returns else {}
    properties: dict[str, Any] = {"result": result}
    required = ["result"]
    if tool.effect is not Effect.READ:
        properties["patch"] = {"type": "array", "items": _PATCH_OP_SCHEMA, "maxItems": _MAX_ITEMS}
        required.append("patch")
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


class SimulatedEnvironment(EnvironmentBackend):
    """An :class:`~toolwild.core.environment.Environment` answered by a model.

    Args:
        environment: tools, description and seed state.
        llm: the simulator model (its cache makes replays free).
        max_attempts: replies tried per step before the call fails with ``simulation_failed``.
        max_tokens: reply budget per model call.
    """

    def __init__(self, environment: Environment, llm: LLM, *, max_attempts: int = 3, max_tokens: int = 768) -> None:
        if max_attempts < 1:
            raise ConfigError(f"max_attempts must be at least 1, got {max_attempts}")
        self.id = environment.id
        self.environment = environment
        self.llm = llm
        self.max_attempts = max_attempts
        self.max_tokens = max_tokens
        self._tools = {t.name: t for t in environment.tools}
        self._schemas: dict[str, dict[str, Any]] = {}
        """Reply schemas by tool (built once: a schema is walked and bounded, about a millisecond per tool)."""

    @property
    def tools(self) -> list[Tool]:
        """The environment's tools."""
        return list(self.environment.tools)

    def tool(self, name: str) -> Tool | None:
        """A tool by name."""
        return self._tools.get(name)

    def response_schema(self, tool: Tool) -> dict[str, Any]:
        """The reply schema of a tool's simulated answers (see :func:`_response_schema`), built once per tool."""
        schema = self._schemas.get(tool.name)
        if schema is None:
            schema = self._schemas[tool.name] = _response_schema(tool)
        return schema

    def reset(self, *, seed: int = 0) -> SimulatedEpisode:
        """A fresh episode on a copy of the seed state."""
        return SimulatedEpisode(self, seed=seed)


class SimulatedEpisode(Episode):
    """One isolated run: its own state, its own recent-call memory, the model shared."""

    def __init__(self, backend: SimulatedEnvironment, *, seed: int) -> None:
        self.backend = backend
        self.seed = seed
        self._state: dict[str, Any] = copy.deepcopy(backend.environment.initial_state)
        self._recent: list[dict[str, Any]] = []

    def call(self, name: str, arguments: dict[str, Any]) -> Observation:
        """Not available: a simulated call awaits a model (use :meth:`acall`)."""
        raise ConfigError("a simulated environment answers asynchronously: use `await episode.acall(...)`")

    def state(self) -> dict[str, Any]:
        """A copy of the current state."""
        return copy.deepcopy(self._state)

    async def acall(self, name: str, arguments: dict[str, Any]) -> Observation:
        """Answer one call (see the module docstring for the steps)."""
        tool = precheck(self.backend.tool(name), name, arguments)
        if isinstance(tool, Observation):
            return tool
        try:
            observation = await self._simulate(tool, arguments)
        except StructuredOutputError as exc:
            observation = Observation.failure(ToolErrorKind.SIMULATION_FAILED, " ".join(str(exc).split()))
        self._remember(name, arguments, observation)
        return observation

    async def _simulate(self, tool: Tool, arguments: dict[str, Any]) -> Observation:
        contract = tool.contract
        if contract is not None and (contract.preconditions or contract.error_modes):
            verdict = await generate_structured(
                self.backend.llm,
                self._messages(tool, arguments, "preconditions"),
                PreconditionVerdict,
                role=ROLE,
                max_attempts=self.backend.max_attempts,
                seed=self.seed,
                max_tokens=256,
            )
            if not verdict.holds:
                return Observation.failure(
                    ToolErrorKind(verdict.kind), verdict.message or "a precondition of the call does not hold"
                )
        result, new_state = await generate_checked(
            self.backend.llm,
            self._messages(tool, arguments, "response"),
            self.backend.response_schema(tool),
            lambda text: self._check_response(tool, text),
            name=f"{tool.name} response",
            role=ROLE,
            max_attempts=self.backend.max_attempts,
            seed=self.seed,
            max_tokens=self.backend.max_tokens,
        )
        self._state = new_state
        return Observation(ok=True, result=result)

    def _check_response(self, tool: Tool, text: str) -> tuple[Any, dict[str, Any]]:
        """The result and the state after the patch, or :class:`InvalidReply` saying what to fix."""
        try:
            reply = json.loads(text, strict=False)
        except json.JSONDecodeError as exc:
            raise InvalidReply(f"- not JSON: {exc.msg}") from None
        if not isinstance(reply, dict) or "result" not in reply:
            raise InvalidReply('- the reply must be an object with a "result" member')
        result = reply["result"]
        problems = schema_errors(tool.returns, result) if tool.returns else []
        if problems:
            raise InvalidReply("\n".join(f"- result{p[1:]}" for p in problems))
        raw_patch = reply.get("patch") or []
        if not isinstance(raw_patch, list):
            raise InvalidReply('- "patch" must be an array of operations')
        if raw_patch and tool.effect is Effect.READ:
            raise InvalidReply(f"- {tool.name} only reads: its reply must not change the state (no patch)")
        try:
            ops = [PatchOp.model_validate(op) for op in raw_patch]
        except ValidationError as exc:
            err = exc.errors()[0]
            raise InvalidReply(f"- patch: {err.get('msg')} at {'.'.join(map(str, err.get('loc', ())))}") from None
        if not ops:  # a read (most calls): the state stands as it is, no copy of it is needed
            return result, self._state
        try:
            new_state = apply_patch(self._state, ops)
        except PatchError as exc:
            raise InvalidReply(f"- the patch does not apply to the current state: {exc}") from None
        if not isinstance(new_state, dict):
            raise InvalidReply("- the patch must leave the state a JSON object")
        return result, new_state

    def _messages(self, tool: Tool, arguments: dict[str, Any], step: str) -> list[dict[str, Any]]:
        env = self.backend.environment
        definition: dict[str, Any] = {"name": tool.name, "description": tool.description, "parameters": tool.parameters}
        if tool.returns:
            definition["output_schema"] = tool.returns
        if tool.contract is not None:
            definition["contract"] = tool.contract.model_dump(exclude_defaults=True)
        if tool.effect is not None:
            definition["effect"] = tool.effect.value
        parts = [
            f"Service: {env.id}" + (f" - {env.description}" if env.description else ""),
            f"Tool: {_compact(definition)}",
            f"Current state: {_compact(self._state)}",
        ]
        if self._recent:
            parts.append(f"Recent calls: {_compact(self._recent)}")
        parts.append(f"Call: {_compact({'name': tool.name, 'arguments': arguments})}")
        if step == "preconditions":
            parts.append(
                "Do the tool's preconditions hold for this call in the current state? Reply "
                '{"holds": true} or {"holds": false, "kind": ..., "message": "the error the service returns"}.'
            )
        else:
            effect = (
                'It only reads: reply {"result": ...}.'
                if tool.effect is Effect.READ
                else 'Reply {"result": ..., "patch": [...]} where patch lists the JSON Patch operations '
                "(add, remove, replace, or increment to add a number) that this call makes to the state; "
                "an empty list if it changes nothing."
            )
            parts.append(f"Answer the call. {effect}")
        return [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": "\n".join(parts)}]

    def _remember(self, name: str, arguments: dict[str, Any], observation: Observation) -> None:
        entry = {"name": name, "arguments": arguments}
        entry["result" if observation.ok else "error"] = (
            observation.result if observation.ok else observation.error.message if observation.error else ""
        )
        self._recent = [*self._recent, entry][-_RECENT_CALLS:]
