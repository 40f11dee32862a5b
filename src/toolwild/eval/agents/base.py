"""The agent interface: given the conversation so far and the tools, return the next assistant turn."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from toolwild.core.session import Session
from toolwild.core.trajectory import Step

__all__ = ["Agent", "AgentContext"]


@dataclass(frozen=True)
class AgentContext:
    """Everything an agent may look at for one step.

    ``messages`` and ``tools`` are in OpenAI chat format, exactly what a model would be sent. ``session`` and the
    indices are there for agents that replay fixed behaviours (oracle, scripted); a model agent ignores them.
    """

    session: Session
    task_index: int
    step_index: int
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]


class Agent(Protocol):
    """Produces one assistant step at a time."""

    name: str

    async def next_step(self, context: AgentContext) -> Step:
        """The next assistant turn (text, tool calls, or an empty step when it has nothing to say)."""
        ...
