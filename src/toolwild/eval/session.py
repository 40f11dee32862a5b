"""Running one session: the live loop of every task, in teacher-forced (``wtb``) or free-running (``free``) mode.

This is the pure layer (no files, no concurrency): ``run_session(session, agent)`` returns the trajectory. Each
step the agent produces is judged by :class:`~toolwild.eval.scoring.task.TaskJudge` exactly as the published
harness does, and the conversation grows the way the harness grows it: tool messages with the recorded
observations of the matched gold nodes, the gold user reply after an accepted clarification question.

In ``wtb`` mode the history of earlier tasks is the gold trajectory along the first optimal path (the model never
sees its own earlier turns). In ``free`` mode the agent keeps its own history across tasks. A *fork* of a session
(``forced_prefix`` = i, what ``--history forked`` runs once per task boundary i) teacher-forces tasks 0..i-1 (the
gold conversation, and on a live environment their gold calls replayed, so task i starts from the state the gold
leaves) and runs tasks i.. free.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from enum import StrEnum
from typing import Any, TypeVar

from toolwild.core.formats.openai_tools import to_openai_tools_for_api
from toolwild.core.session import Session
from toolwild.core.state_change import expected_state_at
from toolwild.core.task import NodeKind
from toolwild.core.tool import Effect
from toolwild.core.trajectory import (
    FailureKind,
    Step,
    TaskFailure,
    TaskTrajectory,
    ToolCall,
    Trajectory,
    state_digest,
)
from toolwild.core.verdict import ScoringMode
from toolwild.envs.base import EnvironmentBackend, Episode, Observation, ToolErrorKind, diff_states
from toolwild.errors import (
    CacheMissError,
    HarnessError,
    ModelOutputError,
    StructuredOutputError,
    TransientBackendError,
)
from toolwild.eval.agents.base import Agent, AgentContext
from toolwild.eval.clock import ProviderClock, current_clock
from toolwild.eval.scoring.dag import GoldDag
from toolwild.eval.scoring.session import api_parameters
from toolwild.eval.scoring.task import TaskJudge

__all__ = [
    "HistoryMode",
    "SessionLoop",
    "assistant_message",
    "environment_seed",
    "gold_history",
    "gold_task_messages",
    "gold_task_steps",
    "harness_guard",
    "model_failure",
    "record_state",
    "run_session",
    "run_within_limit",
    "start_state",
]

T = TypeVar("T")


def environment_seed(session: Session) -> int:
    """The seed of a session's environment episode (recorded in the suite)."""
    value = session.extra.get("env_seed", session.extra.get("ledger_seed", 0))
    return int(value) if isinstance(value, int | str) and str(value).lstrip("-").isdigit() else 0


def start_state(session: Session, episode: Episode | None) -> Any:
    """The episode's state before the session's first task, read once at reset when the suite stores expected
    states as changes (the diagnostics of a failed state check rebuild the expected state from it); else None."""
    if episode is None or not any(t.expected_state_change is not None for t in session.tasks):
        return None
    return harness_guard("reading the environment's state", episode.state)


def record_state(record: TaskTrajectory, session: Session, state: Any, start: Any) -> None:
    """Set a task record's state fields: the digest of the environment's ``state`` after the task, and, when the
    task expects a state, where the two differ (``[]`` when they do not).

    The check is by digest (exact). The differences are those of the whole expected state, rebuilt from the
    session's ``start`` state and the suite's changes, with the state reached (``diff_states``, the first 20);
    when the suite cannot rebuild it (a digest stored without its change), or the two digests differ where
    ``diff_states`` sees no difference (``1`` and ``1.0``), one entry at ``/`` names the two digests.
    """
    record.state_digest = state_digest(state)
    expected = session.tasks[record.task_index].expected_digest
    if expected is None:
        return
    if record.state_digest == expected:
        record.state_diff = []
        return
    whole = expected_state_at(session.tasks, record.task_index, start)
    diff = diff_states(whole, state)[:20] if whole is not None else []
    record.state_diff = diff or [
        {"path": "/", "before": {"sha256": expected}, "after": {"sha256": record.state_digest}}
    ]


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
    FORKED = "forked"
    """A run of every session once per task boundary i: tasks before i teacher-forced, tasks from i on free
    (``eval.runner`` runs the forks; one fork is the live loop in ``free`` mode with ``forced_prefix`` = i)."""

    @property
    def live(self) -> bool:
        """The agent's calls run on the session's environment (an agent's own history needs real observations)."""
        return self is not HistoryMode.WTB


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


def gold_task_steps(session: Session, ti: int) -> list[Step]:
    """The gold conversation of one task (:func:`gold_task_messages`) as the steps of an agent that played it: what a
    fork records for a task it teacher-forced, so its trajectory shows (and scores) the conversation the agent was
    given. Calls keep the history's ids and JSON-encoded observations; an empty text turn reads ``(answer)``, as the
    oracle's does (an empty reply would be judged as none)."""
    task = session.tasks[ti]
    steps: list[Step] = []
    for si, batch in enumerate(GoldDag.from_task(task).first_optimal_path()):
        nodes = [task.gold[i] for i in batch]
        head = nodes[0]
        if head.kind is NodeKind.CALL:
            calls = [
                ToolCall(
                    id=f"call_{ti}_{si}_{k}",
                    name=n.name,
                    arguments=json.dumps(n.action.arguments, ensure_ascii=False),
                )
                for k, n in enumerate(nodes)
            ]
            observations = [json.dumps(n.observation, ensure_ascii=False) for n in nodes]
            steps.append(Step(tool_calls=calls, observations=observations))
        else:
            reply = (head.user_input or "") if head.kind is NodeKind.ASK else None
            steps.append(Step(content=_as_text(head.observation) or "(answer)", user_reply=reply))
    return steps


def assistant_message(step: Step, ids: list[str]) -> dict[str, Any]:
    """The chat message of an agent step, its tool calls under the ids their results will answer."""
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
    time_limit_s: float | None = None,
    forced_prefix: int = 0,
) -> Trajectory:
    """Run every task of a session through the live loop and return what the agent did.

    ``forced_prefix`` = i runs one fork of the session: tasks before i are teacher-forced (recorded as their gold
    steps, the agent is not asked) and tasks from i on run free; ``history`` ``forked`` is ``free`` here.

    With ``history=FREE`` and an ``environment``, the agent's calls run on a real episode (every call the agent
    makes, even one the live loop judges wrong: a real service would have executed it), the agent sees the real
    observations, and after each task the environment's state is recorded (digest, differences from the expected
    state, write count).

    Outcomes: a task the agent fails by its own fault (it raised, wrote unusable output, ran past its step budget or
    spent the session's ``time_limit_s``) is recorded with its :class:`TaskFailure` and the session goes on. The
    provider's failure after retries (or a time limit spent mostly waiting on it) raises
    :class:`TransientBackendError`; an environment that raises or a bug in the live loop raises
    :class:`HarnessError`.
    """
    clock = ProviderClock()
    token = current_clock.set(clock)
    try:
        episode = None
        if environment is not None and history.live:
            episode = harness_guard("environment reset", lambda: environment.reset(seed=environment_seed(session)))
        write_tools = {t.name for t in environment.tools if t.effect is Effect.WRITE} if environment else set()
        run = SessionLoop(
            session, agent, history, scoring_mode, max_steps_per_task, episode, write_tools, forced_prefix=forced_prefix
        )
        try:
            await run_within_limit(run.run, run.stop_at_time_limit, clock, time_limit_s)
        finally:
            if episode is not None:
                harness_guard("environment close", episode.close)
        return Trajectory(session_id=session.id, model=agent.name, tasks=run.tasks)
    finally:
        current_clock.reset(token)


async def run_within_limit(
    run: Callable[[], Awaitable[None]],
    stop: Callable[[str], None],
    clock: ProviderClock,
    time_limit_s: float | None,
    *,
    waited_on: str = "the provider",
) -> None:
    """Run a session's loop under its time limit and, when the limit expires, say whose time it was.

    A limit spent mostly waiting on the provider (``clock``; ``waited_on`` names who was waited on) is the
    provider's failure: :class:`TransientBackendError`, the session is left out and listed. Otherwise it is the
    agent's: ``stop`` closes the running task as its timeout and the later ones as not reached. One rule for every
    live loop, so the free loop and the loop with a simulated user can never count a timeout differently.
    """
    started = time.monotonic()
    try:
        async with asyncio.timeout(time_limit_s):
            await run()
    except TimeoutError:
        # only the limit's own expiry gets here: the agent's and the environment's exceptions are caught inside
        elapsed = time.monotonic() - started
        if clock.waited_s >= elapsed / 2:
            raise TransientBackendError(
                f"session time limit of {time_limit_s:g} s reached, {clock.waited_s:.0f} s of it waiting on {waited_on}"
            ) from None
        stop(
            f"session time limit of {time_limit_s:g} s reached ({elapsed - clock.waited_s:.0f} s spent by the "
            f"agent, {clock.waited_s:.0f} s waiting on {waited_on})"
        )


def harness_guard(what: str, action: Callable[[], T]) -> T:
    """Run a piece of the environment's own machinery; anything it raises is a harness error, not the agent's."""
    try:
        return action()
    except (TransientBackendError, HarnessError):
        raise
    except Exception as exc:
        raise HarnessError(f"{what} failed: {type(exc).__name__}: {exc}") from exc


def model_failure(exc: Exception) -> TaskFailure:
    """The failure an exception out of the agent's step stands for."""
    unusable = isinstance(exc, ModelOutputError | StructuredOutputError)
    kind = FailureKind.MODEL_OUTPUT if unusable else FailureKind.AGENT_ERROR
    text = str(exc) or "(no message)"
    return TaskFailure(kind=kind, message=f"{type(exc).__name__}: {text}"[:2000])


class SessionLoop:
    """The tasks of one session as they run: kept on the object so that a time limit can close them where they are,
    and so that a caller stepping through a session (:mod:`toolwild.rl`) can read each task's record as it ends."""

    def __init__(
        self,
        session: Session,
        agent: Agent,
        history: HistoryMode,
        scoring_mode: ScoringMode,
        max_steps_per_task: int,
        episode: Episode | None,
        write_tools: set[str],
        *,
        forced_prefix: int = 0,
    ) -> None:
        if not 0 <= forced_prefix < max(len(session.tasks), 1):
            raise ValueError(
                f"session {session.id!r} has {len(session.tasks)} task(s): no fork at task {forced_prefix}"
            )
        self.session = session
        self.agent = agent
        self.history = HistoryMode.FREE if history is HistoryMode.FORKED else history
        self.forced_prefix = forced_prefix
        """Tasks before this one are teacher-forced (a fork of ``--history forked``); 0: none."""
        self.scoring_mode = scoring_mode
        self.max_steps = max_steps_per_task
        self.episode = episode
        self.write_tools = write_tools
        self.tasks: list[TaskTrajectory] = []
        self.current_steps: list[Step] = []
        self.current_writes = 0
        self.start = start_state(session, episode)
        """The episode's state before the first task (see :func:`start_state`)."""

    def _record(self, index: int, steps: list[Step], writes: int, failure: TaskFailure | None) -> TaskTrajectory:
        record = TaskTrajectory(task_index=index, steps=steps, failure=failure)
        if self.episode is not None:
            state = harness_guard("reading the environment's state", self.episode.state)
            record_state(record, self.session, state, self.start)
            record.writes = writes
        return record

    def stop_at_time_limit(self, message: str) -> None:
        """Close the running task as the agent's timeout and every later one as not reached."""
        index = len(self.tasks)
        if index < len(self.session.tasks):
            failure = TaskFailure(kind=FailureKind.TIMEOUT, message=message)
            self.tasks.append(self._record(index, self.current_steps, self.current_writes, failure))
        for later in range(len(self.tasks), len(self.session.tasks)):
            failure = TaskFailure(kind=FailureKind.NOT_REACHED, message=f"not run: {message}")
            self.tasks.append(self._record(later, [], 0, failure))

    async def _step(self, context: AgentContext) -> Step | TaskFailure:
        """One agent step; an exception of the agent's own becomes the task's failure."""
        try:
            return await self.agent.next_step(context)
        except (TransientBackendError, HarnessError, CacheMissError):
            raise  # the provider's failure, or a replay that cannot go on: never the agent's
        except Exception as exc:  # the agent's own failure: the task fails with it, the session goes on
            return model_failure(exc)

    async def _execute(self, call: ToolCall) -> Observation:
        assert self.episode is not None
        try:
            return await _execute(self.episode, call)
        except (TransientBackendError, HarnessError):
            raise
        except Exception as exc:  # an environment must answer a bad call with an error observation, not raise
            raise HarnessError(
                f"environment raised on {call.name!r} (task {len(self.tasks)}): {type(exc).__name__}: {exc}"
            ) from exc

    async def _force_prefix(self) -> list[dict[str, Any]]:
        """Teacher-force the tasks before ``forced_prefix``: record each as its gold steps, replay its gold calls on
        the live environment, and return the system line plus their gold conversation (``gold_history``).

        Raises:
            HarnessError: a replayed task leaves the environment in another state than the suite expects: every
                later task of the fork would start from a wrong state (``validate --replay`` says where).
        """
        history: list[dict[str, Any]] = [{"role": "system", "content": self.session.system_prompt}]
        for ti in range(self.forced_prefix):
            steps = gold_task_steps(self.session, ti)
            writes = 0
            if self.episode is not None:
                for step in steps:
                    for call in step.tool_calls or []:
                        observed = await self._execute(call)
                        writes += int(call.name in self.write_tools and _wrote(observed))
            record = self._record(ti, steps, writes, None)
            if record.state_diff:
                raise HarnessError(
                    f"session {self.session.id!r}: the gold of task {ti} does not replay on its environment "
                    f"({len(record.state_diff)} difference(s) from the expected state), so the fork at task "
                    f"{self.forced_prefix} cannot start from the state it expects (toolwild validate --replay)"
                )
            self.tasks.append(record)
            history.extend(gold_task_messages(self.session, ti))
        return history

    async def run(self) -> None:
        session, history = self.session, self.history
        tools = to_openai_tools_for_api(session.tools)
        params = api_parameters(session)
        own_history = await self._force_prefix()  # the system line (and a fork's teacher-forced tasks)
        teacher_forced = list(own_history)  # grows by each task's gold conversation (built once per task)
        for ti in range(self.forced_prefix, len(session.tasks)):
            task = session.tasks[ti]
            base = teacher_forced if history is HistoryMode.WTB else own_history
            messages = [*base, {"role": "user", "content": task.utterance}]
            judge = TaskJudge(task, parameters=params, mode=self.scoring_mode)
            steps: list[Step] = []
            self.current_steps = steps
            self.current_writes = 0
            failure: TaskFailure | None = None
            while not judge.finished:
                if len(steps) >= self.max_steps:
                    failure = TaskFailure(
                        kind=FailureKind.STEP_BUDGET,
                        message=f"still going after {self.max_steps} steps (the most a task allows)",
                    )
                    break
                context = AgentContext(
                    session=session, task_index=ti, step_index=len(steps), messages=list(messages), tools=tools
                )
                outcome = await self._step(context)
                if isinstance(outcome, TaskFailure):
                    failure = outcome
                    break
                step = outcome
                verdict = harness_guard("the live judge", lambda step=step, judge=judge: judge.feed(step))
                ids = [c.id or f"call_{ti}_{len(steps)}_{k}" for k, c in enumerate(step.tool_calls or [])]
                if step.tool_calls:
                    for call, call_id in zip(step.tool_calls, ids, strict=True):
                        call.id = call_id
                steps.append(step)
                if self.episode is not None and step.tool_calls:
                    observed = [await self._execute(call) for call in step.tool_calls]
                    self.current_writes += sum(
                        1
                        for c, o in zip(step.tool_calls, observed, strict=True)
                        if c.name in self.write_tools and _wrote(o)
                    )
                    step.observations = [o.to_text() for o in observed]
                    messages.append(assistant_message(step, ids))
                    for call_id, text in zip(ids, step.observations, strict=True):
                        messages.append({"role": "tool", "tool_call_id": call_id, "content": text})
                    if verdict.name_label == "error":
                        break
                    continue
                if verdict.name_label == "error":
                    if history is HistoryMode.FREE and (step.content or step.tool_calls):
                        messages.append(assistant_message(step, ids))
                        for call_id in ids:
                            messages.append(
                                {"role": "tool", "tool_call_id": call_id, "content": '{"error": "not executed"}'}
                            )
                    break
                messages.append(assistant_message(step, ids))
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
            self.tasks.append(self._record(ti, steps, self.current_writes, failure))
            if history is HistoryMode.FREE:
                own_history = messages
            else:
                teacher_forced = [*teacher_forced, *gold_task_messages(session, ti)]
