"""`scripted:FILE` agents: replay a behaviour file to pin down exact behaviours in tests and bug reports.

The file is JSON ``{session_id: [[step, ...] per task]}``; a step is ``{"content": "text"}`` or
``{"tool_calls": [{"name": ..., "arguments": {...} or "raw text"}]}``. A task that runs out of steps gets an
empty reply (which the live loop judges as an error, like a model that returned nothing).

For runs of several trials (``eval --trials k``) the file may script each trial apart:
``{"trials": [{session_id: [[step, ...] per task]}, ...]}``, one object per trial (trial 0 first), so a test can
pin down known per-trial outcomes. It must script at least the run's k trials (fewer is refused before the run
starts); a session a trial does not name gets empty replies in that trial. The one-object form plays every trial
alike. The forms are told apart by shape: the per-trial form is an object whose only key is ``trials`` holding a
list of objects (a session named ``trials`` holds a list of task lists).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolwild.core.jsonl import read_json_file
from toolwild.core.session import Suite
from toolwild.core.trajectory import Step, ToolCall
from toolwild.errors import ConfigError, DataError
from toolwild.eval.agents.base import AgentContext

__all__ = [
    "BehaviourCoverage",
    "Behaviours",
    "ScriptedAgent",
    "behaviour_coverage",
    "load_behaviours",
    "step_from_behaviour",
]


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


class Behaviours(dict[str, list[list[Step]]]):
    """A behaviour file read: the mapping of trial 0 (``{session_id: [[step, ...] per task]}``), and in ``trials``
    the mapping of every trial the file scripts (one, the same mapping, for the one-object form)."""

    def __init__(self, trials: list[dict[str, list[list[Step]]]], *, per_trial: bool = False) -> None:
        super().__init__(trials[0])
        self.trials = trials
        self.per_trial = per_trial
        """Whether the file scripts each trial apart (its ``trials`` form)."""


def _is_per_trial(data: dict[str, Any]) -> bool:
    trials = data.get("trials")
    return set(data) == {"trials"} and isinstance(trials, list) and all(isinstance(t, dict) for t in trials)


def load_behaviours(path: str | Path) -> Behaviours:
    """Read a behaviour file (either form); errors name the file and the field (trial, session, task, step)."""
    p = Path(path)
    data = read_json_file(p)
    if not isinstance(data, dict):
        raise DataError("a behaviour file is an object {session_id: [[step, ...] per task]}", file=p)
    if _is_per_trial(data):
        if not data["trials"]:
            raise DataError("a per-trial behaviour file scripts at least one trial", file=p, field="trials")
        mappings = [_sessions(trial, p, prefix=f"trials[{t}].") for t, trial in enumerate(data["trials"])]
        return Behaviours(mappings, per_trial=True)
    return Behaviours([_sessions(data, p)])


def _sessions(data: dict[str, Any], p: Path, prefix: str = "") -> dict[str, list[list[Step]]]:
    """One ``{session_id: [[step, ...] per task]}`` mapping."""
    out: dict[str, list[list[Step]]] = {}
    for sid, tasks in data.items():
        if not isinstance(tasks, list):
            raise DataError("expected a list of tasks", file=p, field=f"{prefix}{sid}")
        out[sid] = []
        for ti, steps in enumerate(tasks):
            if not isinstance(steps, list):
                raise DataError("expected a list of steps", file=p, field=f"{prefix}{sid}[{ti}]")
            try:
                out[sid].append(
                    [step_from_behaviour(s, field=f"{prefix}{sid}[{ti}][{k}]") for k, s in enumerate(steps)]
                )
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
    """Compare a behaviour file's session ids and task counts with a suite's (over every trial of a per-trial
    file: a session is scripted when some trial scripts it)."""
    trials = behaviours.trials if isinstance(behaviours, Behaviours) else [behaviours]
    coverage = BehaviourCoverage()
    for session in suite.sessions:
        scripted = [t[session.id] for t in trials if session.id in t]
        if not scripted:
            coverage.unscripted.append(session.id)
            continue
        coverage.scripted.append(session.id)
        if any(len(tasks) > len(session.tasks) for tasks in scripted):
            coverage.extra_tasks.append(session.id)
    ids = {s.id for s in suite.sessions}
    coverage.unknown = list(dict.fromkeys(sid for t in trials for sid in t if sid not in ids))
    return coverage


class ScriptedAgent:
    """Replays fixed steps per session and task (of trial 0; :meth:`for_trial` gives another trial's agent)."""

    name = "scripted"

    def __init__(self, behaviours: dict[str, list[list[Step]]]) -> None:
        self.behaviours = behaviours

    def for_trial(self, trial: int) -> ScriptedAgent:
        """The agent of trial ``trial``: a per-trial file's own script for it, or this one for a one-object file.

        Raises:
            ConfigError: a per-trial file that scripts fewer trials than the run asks for.
        """
        if not isinstance(self.behaviours, Behaviours) or not self.behaviours.per_trial:
            return self
        scripted = self.behaviours.trials
        if trial >= len(scripted):
            raise ConfigError(
                f"the behaviour file scripts {len(scripted)} trial(s) and the run asks for trial {trial}: give one "
                "object per trial in its 'trials' list, or run fewer --trials"
            )
        return ScriptedAgent(scripted[trial])

    async def next_step(self, context: AgentContext) -> Step:
        """The scripted step, or an empty one when the script for this task is exhausted."""
        tasks = self.behaviours.get(context.session.id, [])
        steps = tasks[context.task_index] if context.task_index < len(tasks) else []
        if context.step_index < len(steps):
            return steps[context.step_index].model_copy(deep=True)
        return Step()
