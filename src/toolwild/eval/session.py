"""Running one session: the live loop of every task, in teacher-forced (``wtb``) or free-running (``free``) mode.

This is the pure layer (no files, no concurrency): ``run_session(session, agent)`` returns the trajectory. Each
step the agent produces is judged by :class:`~toolwild.eval.scoring.task.TaskJudge` exactly as the published
harness does, and the conversation grows the way the harness grows it: tool messages with the recorded
observations of the matched gold nodes, the gold user reply after an accepted clarification question.

In ``wtb`` mode the history of earlier tasks is the gold trajectory along the first optimal path (the model never
sees its own earlier turns). In ``free`` mode the agent keeps its own history across tasks.
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Any

from toolwild.core.formats.openai_tools import to_openai_tools_for_api
from toolwild.core.session import Session
from toolwild.core.task import NodeKind
from toolwild.core.tool import Effect
from toolwild.core.trajectory import Step, TaskTrajectory, ToolCall, Trajectory, state_digest
from toolwild.core.verdict import ScoringMode
from toolwild.envs.base import EnvironmentBackend, Episode, Observation, ToolErrorKind, diff_states
from toolwild.eval.agents.base import Agent, AgentContext
from toolwild.eval.scoring.dag import GoldDag
from toolwild.eval.scoring.session import api_parameters
from toolwild.eval.scoring.task import TaskJudge

__all__ = ["HistoryMode", "environment_seed", "gold_history", "gold_task_messages", "run_session"]


def environment_seed(session: Session) -> int:
    """The seed of a session's environment episode (recorded in the suite)."""
    value = session.extra.get("env_seed", session.extra.get("ledger_seed", 0))
    return int(value) if isinstance(value, int | str) and str(value).lstrip("-").isdigit() else 0


def _wrote(observation: Observation) -> bool:
    """A write that happened, or one the environment refused only because it would have doubled an earlier one."""
    return observation.ok or (observation.error is not None and observation.error.kind is ToolErrorKind.DUPLICATE)


async def _execute(episode: Episode, call: ToolCall) -> Observation:
    """Run one of the agent's calls on the environment (unparseable arguments are the agent's error to see)."""
    try:
        arguments = json.loads(call.arguments)
    except json.JSONDecodeError as exc:
        return Observation.failure(ToolErrorKind.INVALID_ARGUMENTS, f"arguments are not JSON: {exc.msg}")
    return await episode.acall(call.name, arguments if isinstance(arguments, dict) else {"_": arguments})


class HistoryMode(StrEnum):
    """How earlier tasks appear in the conversation."""

    WTB = "wtb"
    """Teacher forcing: the gold trajectory of earlier tasks (the published protocol)."""
    FREE = "free"
    """The agent's own earlier turns."""


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def gold_history(session: Session, task_index: int) -> list[dict[str, Any]]:
    """System line plus the gold conversation of tasks before ``task_index`` (first optimal path).

    As in the published harness, tool results in this history are JSON-encoded (a string observation becomes a
    quoted JSON string) and tool-call ids are assigned in order.
    """
    messages: list[dict[str, Any]] = [{"role": "system", "content": session.system_prompt}]
    for ti in range(task_index):
        messages.extend(gold_task_messages(session, ti))
    return messages


def gold_task_messages(session: Session, ti: int) -> list[dict[str, Any]]:
    """The gold conversation of one task: its utterance, then its first optimal path as assistant/tool turns."""
    task = session.tasks[ti]
    messages: list[dict[str, Any]] = [{"role": "user", "content": task.utterance}]
    for si, batch in enumerate(GoldDag.from_task(task).first_optimal_path()):
        nodes = [task.gold[i] for i in batch]
        head = nodes[0]
        if head.kind is NodeKind.ASK:
            messages.append({"role": "assistant", "content": _as_text(head.observation)})
            messages.append({"role": "user", "content": head.user_input or ""})
        elif head.kind is NodeKind.ANSWER:
            messages.append({"role": "assistant", "content": _as_text(head.observation)})
        else:
            ids = [f"call_{ti}_{si}_{k}" for k in range(len(nodes))]
            messages.append(
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [
                        {
                            "id": ids[k],
                            "type": "function",
                            "function": {
                                "name": n.name,
                                "arguments": json.dumps(n.action.arguments, ensure_ascii=False),
                            },
                        }
                        for k, n in enumerate(nodes)
                    ],
                }
            )
            for k, n in enumerate(nodes):
                messages.append(
                    {
                        "role": "tool",
                        "tool_call_id": ids[k],
                        "content": json.dumps(n.observation, ensure_ascii=False),
                    }
                )
    return messages


def _assistant_message(step: Step, ids: list[str]) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "content": step.content or ""}
    if step.tool_calls:
        msg["tool_calls"] = [
            {"id": ids[k], "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for k, c in enumerate(step.tool_calls)
        ]
    return msg


async def run_session(
    session: Session,
    agent: Agent,
    *,
    history: HistoryMode = HistoryMode.WTB,
    scoring_mode: ScoringMode = ScoringMode.WTB,
    max_steps_per_task: int = 32,
    environment: EnvironmentBackend | None = None,
) -> Trajectory:
    """Run every task of a session through the live loop and return what the agent did.

    With ``history=FREE`` and an ``environment``, the agent's calls run on a real episode (every call the agent
    makes, even one the live loop judges wrong: a real service would have executed it), the agent sees the real
    observations, and after each task the environment's state is recorded (digest, differences from the expected
    state, write count).
    """
    episode = environment.reset(seed=environment_seed(session)) if environment and history is HistoryMode.FREE else None
    write_tools = {t.name for t in environment.tools if t.effect is Effect.WRITE} if environment else set()
    try:
        return await _run_tasks(session, agent, history, scoring_mode, max_steps_per_task, episode, write_tools)
    finally:
        if episode is not None:
            episode.close()


async def _run_tasks(
    session: Session,
    agent: Agent,
    history: HistoryMode,
    scoring_mode: ScoringMode,
    max_steps_per_task: int,
    episode: Episode | None,
    write_tools: set[str],
) -> Trajectory:
    tools = to_openai_tools_for_api(session.tools)
    params = api_parameters(session)
    own_history: list[dict[str, Any]] = [{"role": "system", "content": session.system_prompt}]
    teacher_forced = list(own_history)  # grows by each task's gold conversation (built once per task)
    tasks: list[TaskTrajectory] = []
    for ti, task in enumerate(session.tasks):
        base = teacher_forced if history is HistoryMode.WTB else own_history
        messages = [*base, {"role": "user", "content": task.utterance}]
        judge = TaskJudge(task, parameters=params, mode=scoring_mode)
        steps: list[Step] = []
        writes = 0
        while not judge.finished:
            if len(steps) >= max_steps_per_task:
                break
            context = AgentContext(
                session=session, task_index=ti, step_index=len(steps), messages=list(messages), tools=tools
            )
            step = await agent.next_step(context)
            verdict = judge.feed(step)
            ids = [c.id or f"call_{ti}_{len(steps)}_{k}" for k, c in enumerate(step.tool_calls or [])]
            if step.tool_calls:
                for call, call_id in zip(step.tool_calls, ids, strict=True):
                    call.id = call_id
            steps.append(step)
            if episode is not None and step.tool_calls:
                observed = [await _execute(episode, call) for call in step.tool_calls]
                writes += sum(
                    1 for c, o in zip(step.tool_calls, observed, strict=True) if c.name in write_tools and _wrote(o)
                )
                step.observations = [o.to_text() for o in observed]
                messages.append(_assistant_message(step, ids))
                for call_id, text in zip(ids, step.observations, strict=True):
                    messages.append({"role": "tool", "tool_call_id": call_id, "content": text})
                if verdict.name_label == "error":
                    break
                continue
            if verdict.name_label == "error":
                if history is HistoryMode.FREE and (step.content or step.tool_calls):
                    messages.append(_assistant_message(step, ids))
                    for call_id in ids:
                        messages.append(
                            {"role": "tool", "tool_call_id": call_id, "content": '{"error": "not executed"}'}
                        )
                break
            messages.append(_assistant_message(step, ids))
            nodes = [task.gold[i] for i in verdict.matched_nodes]
            if verdict.kind == "calls":
                # the harness pairs name-sorted observations with the model's name-sorted call ids
                order = sorted(range(len(ids)), key=lambda k: step.tool_calls[k].name if step.tool_calls else "")
                observations = [_as_text(n.observation) for n in nodes]
                step.observations = observations
                for k, obs in zip(order, observations, strict=False):
                    messages.append({"role": "tool", "tool_call_id": ids[k], "content": obs})
            elif nodes and nodes[0].kind is NodeKind.ASK:
                step.user_reply = nodes[0].user_input or ""
                messages.append({"role": "user", "content": step.user_reply})
        record = TaskTrajectory(task_index=ti, steps=steps)
        if episode is not None:
            state = episode.state()
            record.state_digest = state_digest(state)
            record.writes = writes
            if task.expected_state is not None:
                record.state_diff = diff_states(task.expected_state, state)[:20]
        tasks.append(record)
        if history is HistoryMode.FREE:
            own_history = messages
        else:
            teacher_forced = [*teacher_forced, *gold_task_messages(session, ti)]
    return Trajectory(session_id=session.id, model=agent.name, tasks=tasks)
