"""`scripted:FILE` agents: replay a behaviour file to pin down exact behaviours in tests and bug reports.

The file is JSON ``{session_id: [[step, ...] per task]}``; a step is ``{"content": "text"}`` or
``{"tool_calls": [{"name": ..., "arguments": {...} or "raw text"}]}``. A task that runs out of steps gets an
empty reply (which the live loop judges as an error, like a model that returned nothing).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolwild.core.jsonl import read_json_file
from toolwild.core.session import Suite
from toolwild.core.trajectory import Step, ToolCall
from toolwild.errors import DataError
from toolwild.eval.agents.base import AgentContext

__all__ = ["BehaviourCoverage", "ScriptedAgent", "behaviour_coverage", "load_behaviours", "step_from_behaviour"]


def step_from_behaviour(obj: Any, *, field: str = "step") -> Step:
    """One behaviour step -> :class:`Step` (string arguments are sent as-is, to reproduce invalid JSON)."""
    if not isinstance(obj, dict):
        raise DataError("a step must be an object", field=field)
    unknown = set(obj) - {"content", "tool_calls"}
    if unknown:
        raise DataError(f"unknown keys {sorted(unknown)}", field=field)
    calls = obj.get("tool_calls")
    tool_calls = None
    if calls is not None:
        if not isinstance(calls, list):
            raise DataError("tool_calls must be a list", field=f"{field}.tool_calls")
        tool_calls = []
        for k, call in enumerate(calls):
            if not isinstance(call, dict) or not isinstance(call.get("name"), str):
                raise DataError("a tool call needs a string 'name'", field=f"{field}.tool_calls[{k}]")
            args = call.get("arguments", {})
            if not isinstance(args, dict | str):
                raise DataError("arguments must be an object or a string", field=f"{field}.tool_calls[{k}].arguments")
            tool_calls.append(ToolCall.of(call["name"], args, id=call.get("id")))
    content = obj.get("content")
    if content is not None and not isinstance(content, str):
        raise DataError("content must be a string", field=f"{field}.content")
    return Step(content=content, tool_calls=tool_calls or None)


def load_behaviours(path: str | Path) -> dict[str, list[list[Step]]]:
    """Read a behaviour file; errors name the file and the field (session, task, step)."""
    p = Path(path)
    data = read_json_file(p)
    if not isinstance(data, dict):
        raise DataError("a behaviour file is an object {session_id: [[step, ...] per task]}", file=p)
    out: dict[str, list[list[Step]]] = {}
    for sid, tasks in data.items():
        if not isinstance(tasks, list):
            raise DataError("expected a list of tasks", file=p, field=sid)
        out[sid] = []
        for ti, steps in enumerate(tasks):
            if not isinstance(steps, list):
                raise DataError("expected a list of steps", file=p, field=f"{sid}[{ti}]")
            try:
                out[sid].append([step_from_behaviour(s, field=f"{sid}[{ti}][{k}]") for k, s in enumerate(steps)])
            except DataError as exc:
                raise exc.located(file=p) from None
    return out


@dataclass
class BehaviourCoverage:
    """How a behaviour file lines up with a suite: which sessions it scripts and what it names that is not there."""

    scripted: list[str] = field(default_factory=list)
    """Suite sessions the file has steps for."""
    unscripted: list[str] = field(default_factory=list)
    """Suite sessions the file does not name (they get empty replies: every task fails)."""
    unknown: list[str] = field(default_factory=list)
    """Session ids of the file that the suite does not have."""
    extra_tasks: list[str] = field(default_factory=list)
    """Sessions the file gives more tasks than the suite's session has (the extra ones are never played)."""

    def notes(self) -> list[str]:
        """One line per partial-coverage finding, for a warning."""
        out = []
        if self.unscripted:
            out.append(
                f"{len(self.unscripted)} session(s) of the suite have no behaviour (they will fail): "
                f"{_first(self.unscripted)}"
            )
        if self.unknown:
            out.append(f"{len(self.unknown)} behaviour id(s) are not in the suite: {_first(self.unknown)}")
        if self.extra_tasks:
            out.append(f"more tasks scripted than the session has: {_first(self.extra_tasks)}")
        return out


def _first(ids: list[str], shown: int = 5) -> str:
    listed = ", ".join(repr(i) for i in ids[:shown])
    return listed + (f" and {len(ids) - shown} more" if len(ids) > shown else "")


def behaviour_coverage(behaviours: dict[str, list[list[Step]]], suite: Suite) -> BehaviourCoverage:
    """Compare a behaviour file's session ids and task counts with a suite's."""
    coverage = BehaviourCoverage()
    for session in suite.sessions:
        tasks = behaviours.get(session.id)
        if tasks is None:
            coverage.unscripted.append(session.id)
            continue
        coverage.scripted.append(session.id)
        if len(tasks) > len(session.tasks):
            coverage.extra_tasks.append(session.id)
    ids = {s.id for s in suite.sessions}
    coverage.unknown = [sid for sid in behaviours if sid not in ids]
    return coverage


class ScriptedAgent:
    """Replays fixed steps per session and task."""

    name = "scripted"

    def __init__(self, behaviours: dict[str, list[list[Step]]]) -> None:
        self.behaviours = behaviours

    async def next_step(self, context: AgentContext) -> Step:
        """The scripted step, or an empty one when the script for this task is exhausted."""
        tasks = self.behaviours.get(context.session.id, [])
        steps = tasks[context.task_index] if context.task_index < len(tasks) else []
        if context.step_index < len(steps):
            return steps[context.step_index].model_copy(deep=True)
        return Step()
