"""`scripted:FILE` agents: replay a behaviour file to pin down exact behaviours in tests and bug reports.

The file is JSON ``{session_id: [[step, ...] per task]}``; a step is ``{"content": "text"}`` or
``{"tool_calls": [{"name": ..., "arguments": {...} or "raw text"}]}``. A task that runs out of steps gets an
empty reply (which the live loop judges as an error, like a model that returned nothing).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from toolwild.core.trajectory import Step, ToolCall
from toolwild.errors import DataError
from toolwild.eval.agents.base import AgentContext

__all__ = ["ScriptedAgent", "load_behaviours", "step_from_behaviour"]


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
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise DataError(f"cannot read behaviour file: {exc.strerror or exc}", file=p) from None
    except json.JSONDecodeError as exc:
        raise DataError(f"invalid JSON: {exc.msg}", file=p, line=exc.lineno) from None
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
