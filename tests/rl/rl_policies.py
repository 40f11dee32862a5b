"""Scripted policies for the RL tests: the gold path, and the gold path with one message replaced."""

from __future__ import annotations

import json
from typing import Any

from toolwild.core.session import Session
from toolwild.core.trajectory import Step
from toolwild.eval.agents.oracle import oracle_steps
from toolwild.rl import SessionEnv, StepResult

Message = dict[str, Any]


def message(step: Step) -> Message:
    """A gold step as the OpenAI assistant message a policy would write."""
    out: Message = {"role": "assistant", "content": step.content or ""}
    if step.tool_calls:
        out["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in step.tool_calls
        ]
    return out


def call(name: str, arguments: dict[str, Any], call_id: str = "call_x") -> Message:
    """An assistant message with one tool call."""
    function = {"name": name, "arguments": json.dumps(arguments)}
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": call_id, "type": "function", "function": function}],
    }


def oracle_script(session: Session) -> list[list[Message]]:
    """Per task, the gold path's messages."""
    return [[message(s) for s in oracle_steps(t)] for t in session.tasks]


def play(env: SessionEnv, script: list[list[Message]]) -> list[StepResult]:
    """Reset, then send each task's scripted messages in turn (an empty reply past a task's script) until done."""
    env.reset()
    task, k, results = env.first_task, 0, []
    while True:
        messages = script[task]
        result = env.step(messages[k] if k < len(messages) else {"role": "assistant", "content": ""})
        results.append(result)
        if result.done:
            return results
        task, k = (task, k + 1) if result.task_index == task else (result.task_index, 0)
