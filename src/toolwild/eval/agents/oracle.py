"""The oracle: follows the first optimal gold path of every task.

It must score 100% on any valid suite, in both modes, which makes it the self-check of a suite (and of the scorer).
"""

from __future__ import annotations

import json

from toolwild.core.session import Session
from toolwild.core.task import NodeKind, Task
from toolwild.core.trajectory import Step, TaskTrajectory, ToolCall, Trajectory
from toolwild.eval.scoring.dag import GoldDag

__all__ = ["oracle_steps", "oracle_trajectory"]


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
