"""The oracle: follows the first optimal gold path of every task.

It must score 100% on any valid suite, in both modes, which makes it the self-check of a suite (and of the scorer).
"""

from __future__ import annotations

import json

from toolwild.core.session import Session
from toolwild.core.task import NodeKind, Task
from toolwild.core.trajectory import Step, TaskTrajectory, ToolCall, Trajectory
from toolwild.eval.agents.base import AgentContext
from toolwild.eval.scoring.dag import GoldDag

__all__ = ["OracleAgent", "oracle_steps", "oracle_trajectory"]


def _text(value: object) -> str:
    return value if isinstance(value, str) and value else "(answer)"


def _observation(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def oracle_steps(task: Task) -> list[Step]:
    """The gold steps of one task along its first optimal path."""
    dag = GoldDag.from_task(task)
    steps: list[Step] = []
    for batch in dag.first_optimal_path():
        nodes = [task.gold[i] for i in batch]
        if nodes[0].kind is NodeKind.CALL:
            steps.append(
                Step(
                    tool_calls=[ToolCall.of(n.name, n.action.arguments, id=f"call_{n.idx}") for n in nodes],
                    observations=[_observation(n.observation) for n in sorted(nodes, key=lambda n: n.name)],
                )
            )
        else:
            steps.append(Step(content=_text(nodes[0].observation), user_reply=nodes[0].user_input))
    return steps


def oracle_trajectory(session: Session) -> Trajectory:
    """The oracle's trajectory for a whole session."""
    return Trajectory(
        session_id=session.id,
        model="oracle",
        tasks=[TaskTrajectory(task_index=i, steps=oracle_steps(t)) for i, t in enumerate(session.tasks)],
    )


class OracleAgent:
    """The gold path as an agent: in the live loop it must score 100% on any valid suite."""

    name = "oracle"

    def __init__(self) -> None:
        self._steps: dict[tuple[str, int], list[Step]] = {}

    async def next_step(self, context: AgentContext) -> Step:
        """The next gold step of this task (an empty step past the end)."""
        key = (context.session.id, context.task_index)
        if key not in self._steps:
            self._steps[key] = oracle_steps(context.session.tasks[context.task_index])
        steps = self._steps[key]
        if context.step_index >= len(steps):
            return Step()
        step = steps[context.step_index]
        return Step(content=step.content, tool_calls=step.tool_calls)
