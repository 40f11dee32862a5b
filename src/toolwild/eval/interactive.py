"""Interactive sessions: an agent, a simulated user and a live environment, and how such a session is scored.

The loop (:func:`run_interactive_session`) is not judge-driven like :func:`~toolwild.eval.session.run_session`: the
agent's calls run on the environment (free history), and every text reply goes to the user simulator, whose
:class:`~toolwild.eval.user.UserTurn` decides what happens next. A task ends when the agent replies without tool
calls and the user says it is done, or at the step budget; then the next task's utterance is sent. Without an
environment (a published suite) a call is answered by a gold recording with the same name and arguments.

Scoring (:func:`score_interactive_session`): with a user that may answer in its own order and words, the published
live loop cannot be replayed as is (it expects exactly the gold's questions at the gold's positions). A task is
correct when all three hold:

- **calls**: the agent's tool calls, judged against the gold DAG by the ``strict`` judge with questions made
  order-insensitive: a text the user answered counts as the gold's next question where one is due and is skipped
  otherwise (an extra question is not an error), and a call that comes while gold questions are still pending is
  judged as if they had been asked, provided the agent asked at least once in the task. A call made without ever
  asking, where the gold asks first, is still an error. Names, arguments (the published value rules) and the
  final text answer are judged as in ``strict`` mode.
- **state**: the environment's state after the task equals the expected state (where the suite has one).
- **answer**: the final answer of a tool task passes :func:`~toolwild.core.answers.answer_problems` against the
  results of the agent's accepted calls (not raw JSON, reports them, every number, date and name it states is in
  the results, earlier results included); a chat answer must not be raw JSON.

Outcomes follow the house rules: the agent's own failures fail its task; the user simulator's failure
(:class:`~toolwild.eval.user.UserSimulatorError`) ends the session as ``user_error`` (the simulator's, never the
agent's); a provider error after retries and a harness error propagate to the runner.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from toolwild.core.answers import answer_problems, decoded, json_problems, observation_result
from toolwild.core.formats.openai_tools import to_openai_tools_for_api
from toolwild.core.session import Session, Suite
from toolwild.core.task import NodeKind, Task
from toolwild.core.tool import Effect
from toolwild.core.trajectory import (
    FailureKind,
    Step,
    TaskFailure,
    TaskTrajectory,
    ToolCall,
    Trajectory,
    TrajectoryStatus,
)
from toolwild.core.verdict import ScoringMode, SessionVerdict, StepVerdict, TaskVerdict
from toolwild.envs.base import EnvironmentBackend, Episode, Observation, ToolErrorKind
from toolwild.envs.replay import loose_value
from toolwild.errors import (
    CacheMissError,
    HarnessError,
    ScoringError,
    TransientBackendError,
)
from toolwild.eval.agents.base import Agent, AgentContext
from toolwild.eval.clock import ProviderClock, charge_provider, current_clock
from toolwild.eval.scoring.session import (
    api_parameters,
    apply_failure,
    score_session,
    score_state,
    score_suite,
)
from toolwild.eval.scoring.task import TaskJudge
from toolwild.eval.session import (
    assistant_message,
    environment_seed,
    harness_guard,
    model_failure,
    record_state,
    run_within_limit,
    start_state,
)
from toolwild.eval.user import (
    TaskFacts,
    UserAction,
    UserMessage,
    UserSimulator,
    UserSimulatorError,
    UserView,
    task_facts,
)

__all__ = [
    "InteractiveRun",
    "UserTurnRecord",
    "final_answer_problems",
    "judged_steps",
    "run_interactive_session",
    "score_interactive_session",
    "score_interactive_suite",
    "score_with_user",
]

_QUESTION = "(a question to the user)"
"""The text fed to the judge for a gold question the agent's earlier question already covered."""


class UserTurnRecord(BaseModel):
    """One turn of the simulated user: what it replied to, and what it did (or why it could not)."""

    model_config = ConfigDict(extra="forbid")

    task_index: int
    step_index: int
    """The agent's step (within the task) the turn replies to."""
    agent_message: str
    action: UserAction | None = None
    message: str = ""
    error: str | None = None
    """The simulator's failure on this turn (then ``action`` is None and the session ended here)."""


class InteractiveRun(BaseModel):
    """A session run with a simulated user: the agent's trajectory, every user turn, and the simulator's failure."""

    model_config = ConfigDict(extra="forbid")

    trajectory: Trajectory
    turns: list[UserTurnRecord] = Field(default_factory=list)
    user: str
    trial: int = 0
    user_error: str | None = None
    """Set when the simulator failed: the session says nothing about the agent (left out and listed)."""


# ---------------------------------------------------------------------------------------------- the live loop
def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


class _GoldReplay:
    """Calls answered by the session's gold recordings (no environment): same tool, same arguments (loosely), an
    unused recording first; anything else gets a ``no_recording`` error."""

    def __init__(self, session: Session) -> None:
        self.records = [
            (n.name, loose_value(n.action.arguments), _text(n.observation)) for t in session.tasks for n in t.call_nodes
        ]
        self.used: set[int] = set()

    def answer(self, call: ToolCall) -> str:
        try:
            arguments = json.loads(call.arguments)
        except json.JSONDecodeError as exc:
            return Observation.failure(ToolErrorKind.INVALID_ARGUMENTS, f"arguments are not JSON: {exc.msg}").to_text()
        loose = loose_value(arguments)
        found = [i for i, (name, args, _) in enumerate(self.records) if name == call.name and args == loose]
        if not found:
            return Observation.failure(
                ToolErrorKind.NO_RECORDING, f"no recorded answer for this {call.name} call"
            ).to_text()
        pick = next((i for i in found if i not in self.used), found[-1])
        self.used.add(pick)
        return self.records[pick][2]


class _UserFailed(Exception):
    """Internal: the simulator failed; the session stops where it is."""


class _Interactive:
    """The tasks of one interactive session as they run (kept on the object so a time limit can close them)."""

    def __init__(
        self,
        session: Session,
        agent: Agent,
        user: UserSimulator,
        episode: Episode | None,
        write_tools: set[str],
        max_steps: int,
        trial: int,
    ) -> None:
        self.session = session
        self.agent = agent
        self.user = user
        self.episode = episode
        self.replay = _GoldReplay(session) if episode is None else None
        self.write_tools = write_tools
        self.max_steps = max_steps
        self.trial = trial
        self.tasks: list[TaskTrajectory] = []
        self.turns: list[UserTurnRecord] = []
        self.steps: list[Step] = []
        self.writes = 0
        self.start = start_state(session, episode)
        """The episode's state before the first task (:func:`~toolwild.eval.session.start_state`)."""

    def record(self, index: int, failure: TaskFailure | None) -> None:
        """Close task ``index`` with the steps so far (and the environment's state after it)."""
        record = TaskTrajectory(task_index=index, steps=self.steps, failure=failure)
        if self.episode is not None:
            state = harness_guard("reading the environment's state", self.episode.state)
            record_state(record, self.session, state, self.start)
            record.writes = self.writes
        self.tasks.append(record)

    def stop_at_time_limit(self, message: str) -> None:
        """The running task is the agent's timeout, every later one not reached."""
        if len(self.tasks) < len(self.session.tasks):
            self.record(len(self.tasks), TaskFailure(kind=FailureKind.TIMEOUT, message=message))
        for _ in range(len(self.tasks), len(self.session.tasks)):
            self.steps, self.writes = [], 0
            self.record(len(self.tasks), TaskFailure(kind=FailureKind.NOT_REACHED, message=f"not run: {message}"))

    async def _agent_step(self, context: AgentContext) -> Step | TaskFailure:
        try:
            return await self.agent.next_step(context)
        except (TransientBackendError, HarnessError, CacheMissError):
            raise
        except Exception as exc:  # the agent's own failure: its task fails, the session goes on
            return model_failure(exc)

    async def _observe(self, call: ToolCall) -> str:
        if self.episode is None:
            assert self.replay is not None
            return self.replay.answer(call)
        try:
            arguments = json.loads(call.arguments)
        except json.JSONDecodeError as exc:
            return Observation.failure(ToolErrorKind.INVALID_ARGUMENTS, f"arguments are not JSON: {exc.msg}").to_text()
        try:
            observed = await self.episode.acall(
                call.name, arguments if isinstance(arguments, dict) else {"_": arguments}
            )
        except (TransientBackendError, HarnessError):
            raise
        except Exception as exc:  # an environment answers a bad call with an error, it does not raise
            raise HarnessError(f"environment raised on {call.name!r}: {type(exc).__name__}: {exc}") from exc
        if call.name in self.write_tools and (
            observed.ok or (observed.error is not None and observed.error.kind is ToolErrorKind.DUPLICATE)
        ):
            self.writes += 1
        return observed.to_text()

    async def _user_turn(self, view: UserView, step_index: int) -> UserTurnRecord:
        record = UserTurnRecord(task_index=view.task_index, step_index=step_index, agent_message=view.agent_message)
        started = time.monotonic()
        try:
            turn = await self.user.reply(view)
        except UserSimulatorError as exc:
            record.error = str(exc) or type(exc).__name__
            self.turns.append(record)
            raise _UserFailed(record.error) from None
        finally:  # the user's time is never the agent's: a time limit it ate is not the agent's timeout
            charge_provider(time.monotonic() - started)
        record.action, record.message = turn.action, turn.message
        self.turns.append(record)
        return record

    async def run(self) -> None:
        session = self.session
        tools = to_openai_tools_for_api(session.tools)
        history: list[dict[str, Any]] = [{"role": "system", "content": session.system_prompt}]
        for ti, task in enumerate(session.tasks):
            messages = [*history, {"role": "user", "content": task.utterance}]
            failure = await self._task(ti, task, tools, messages)
            self.record(ti, failure)
            history = messages

    async def _task(
        self, ti: int, task: Task, tools: list[dict[str, Any]], messages: list[dict[str, Any]]
    ) -> TaskFailure | None:
        """One task, until the user says it is done (``messages`` grows in place: it is the free history)."""
        self.steps, self.writes = [], 0
        facts: TaskFacts = task_facts(task)
        said = [UserMessage(role="user", content=task.utterance)]
        replies = 0
        while True:
            if len(self.steps) >= self.max_steps:
                return TaskFailure(
                    kind=FailureKind.STEP_BUDGET,
                    message=f"still going after {self.max_steps} steps (the most a task allows)",
                )
            context = AgentContext(
                session=self.session, task_index=ti, step_index=len(self.steps), messages=list(messages), tools=tools
            )
            outcome = await self._agent_step(context)
            if isinstance(outcome, TaskFailure):
                return outcome
            step = outcome
            step.user_reply = step.observations = None  # what the user and the environment say is the loop's
            ids = [c.id or f"call_{ti}_{len(self.steps)}_{k}" for k, c in enumerate(step.tool_calls or [])]
            for call, call_id in zip(step.tool_calls or [], ids, strict=True):
                call.id = call_id
            self.steps.append(step)
            if step.parse_error is not None or step.is_empty:
                return None  # judged as the agent's error when scored
            messages.append(assistant_message(step, ids))
            if step.tool_calls:
                step.observations = [await self._observe(call) for call in step.tool_calls]
                for call_id, text in zip(ids, step.observations, strict=True):
                    messages.append({"role": "tool", "tool_call_id": call_id, "content": text})
                if step.content:
                    said.append(UserMessage(role="assistant", content=step.content))
                continue
            view = UserView(
                session_id=self.session.id,
                task_index=ti,
                utterance=task.utterance,
                facts=facts,
                history=list(said),
                agent_message=step.content or "",
                turn=replies,
                trial=self.trial,
            )
            turn = await self._user_turn(view, len(self.steps) - 1)
            if turn.action == "done":
                return None
            step.user_reply = turn.message
            messages.append({"role": "user", "content": turn.message})
            said += [
                UserMessage(role="assistant", content=view.agent_message),
                UserMessage(role="user", content=turn.message),
            ]
            replies += 1


async def run_interactive_session(
    session: Session,
    agent: Agent,
    user: UserSimulator,
    *,
    environment: EnvironmentBackend | None = None,
    max_steps_per_task: int = 32,
    time_limit_s: float | None = None,
    trial: int = 0,
) -> InteractiveRun:
    """Run every task of a session with a simulated user and return the trajectory and the user's turns.

    ``environment``: the live environment (one episode for the session, seeded as the suite says); None answers
    calls from the gold recordings. ``trial`` tells the simulator which trial this is (a model user varies its seed).

    Raises:
        TransientBackendError: the provider (the agent's or the user's) failed after retries, or the time limit ran
            out mostly waiting on it.
        HarnessError: the environment raised, or a bug in the loop.
    """
    clock = ProviderClock()
    token = current_clock.set(clock)
    try:
        episode = None
        if environment is not None:
            episode = harness_guard("environment reset", lambda: environment.reset(seed=environment_seed(session)))
        writes = {t.name for t in environment.tools if t.effect is Effect.WRITE} if environment else set()
        run = _Interactive(session, agent, user, episode, writes, max_steps_per_task, trial)
        user_error = None
        try:
            await run_within_limit(
                run.run, run.stop_at_time_limit, clock, time_limit_s, waited_on="the provider and the user"
            )
        except _UserFailed as exc:
            user_error = str(exc)
            run.record(len(run.tasks), None)  # keep what the agent did in the task the simulator broke
        finally:
            if episode is not None:
                harness_guard("environment close", episode.close)
        trajectory = Trajectory(session_id=session.id, model=agent.name, tasks=run.tasks)
        return InteractiveRun(
            trajectory=trajectory, turns=run.turns, user=user.name, trial=trial, user_error=user_error
        )
    finally:
        current_clock.reset(token)


# ---------------------------------------------------------------------------------------------- scoring
def _ask_first(judge: TaskJudge) -> bool:
    """Whether the first pseudo-action the judge would accept now is a gold question."""
    node = judge.dag.first_pseudo(judge.positions[0]) if not judge.finished else None
    return node is not None and judge.task.gold[node].kind is NodeKind.ASK


def judged_steps(task: Task, steps: list[Step], parameters: dict[str, dict[str, Any]]) -> tuple[TaskJudge, list[int]]:
    """Feed a task's steps to the ``strict`` judge with questions order-insensitive (see the module docstring).

    Returns the judge (finished) and, for each entry of its log, the index of the step it judged (-1: a gold
    question covered by an earlier question of the agent; ``len(steps)``: the empty reply after the last step).
    """
    judge = TaskJudge(task, parameters=parameters, mode=ScoringMode.STRICT)
    fed: list[int] = []
    asked = False

    def feed(step: Step | None, index: int) -> None:
        judge.feed(step)
        fed.append(index)

    def cover_questions() -> None:
        while asked and _ask_first(judge):
            feed(Step(content=_QUESTION), -1)

    for k, step in enumerate(steps):
        if judge.finished:
            break
        question = (
            not step.tool_calls and step.parse_error is None and bool(step.content) and step.user_reply is not None
        )
        if question:
            if _ask_first(judge):
                feed(step, k)
            asked = True
            continue
        if step.tool_calls or step.content:
            cover_questions()
        if not judge.finished:
            feed(step, k)
    if not judge.finished:
        cover_questions()
    if not judge.finished:
        feed(None, len(steps))
    return judge, fed


def _results(steps: list[Step]) -> list[Any]:
    return [observation_result(decoded(text)) for step in steps for text in step.observations or []]


def _is_error(text: str) -> bool:
    value = decoded(text)
    return isinstance(value, dict) and value.get("ok") is False


def final_answer_problems(
    task: Task, steps: list[Step], log: list[StepVerdict], fed: list[int], earlier: list[Any]
) -> list[str]:
    """What is wrong with the final answer the judge accepted (empty: it passes, or there is none to check).

    A tool task's answer must report the results of the agent's accepted calls (not its extra reads, whose results
    back what it says all the same), per :func:`~toolwild.core.answers.answer_problems`; a chat answer must not be
    raw JSON.
    """
    answer_at = next(
        (
            fed[k]
            for k, v in enumerate(log)
            if v.kind == "text"
            and v.name_label == "correct"
            and any(task.gold[n].kind is NodeKind.ANSWER for n in v.matched_nodes)
        ),
        None,
    )
    if answer_at is None or answer_at < 0 or answer_at >= len(steps):
        return []
    answer = steps[answer_at].content or ""
    if not task.call_nodes:
        return json_problems(answer)
    accepted = {fed[k] for k, v in enumerate(log) if v.kind == "calls" and v.name_label == "correct" and fed[k] >= 0}
    reported: list[Any] = []
    backing: list[Any] = list(earlier)
    for k, step in enumerate(steps):
        for text in step.observations or []:
            value = observation_result(decoded(text))
            (reported if k in accepted and not _is_error(text) else backing).append(value)
    return answer_problems(answer, reported, backing)


def _score_task(
    session: Session, index: int, record: TaskTrajectory, earlier: list[Any], base_dir: Path | None
) -> TaskVerdict:
    task = session.tasks[index]
    judge, fed = judged_steps(task, record.steps, api_parameters(session))
    verdict = judge.verdict(session, index, [record.steps[k] if 0 <= k < len(record.steps) else Step() for k in fed])
    verdict.steps_used = len(record.steps)
    score_state(session, index, record, verdict, base_dir)
    apply_failure(record, verdict)
    problems = final_answer_problems(task, record.steps, judge.log, fed, earlier) if verdict.label == "correct" else []
    if verdict.label == "correct" and verdict.state_match is False:
        verdict.label = "error"
        first = record.state_diff[0]["path"] if record.state_diff else "?"
        verdict.error_reason = "state: the environment's state after the task is not the expected one"
        verdict.explanation = (
            f"the state after the task differs from the expected state in {len(record.state_diff or [])} place(s) "
            f"(first: {first})"
        )
    elif verdict.label == "correct" and problems:
        verdict.label = "error"
        verdict.error_reason = f"final answer: {problems[0]}"
        verdict.explanation = "the final answer breaks the answer rules: " + "; ".join(problems[:3])
    verdict.is_optimal = verdict.label == "correct" and len(record.steps) == verdict.min_length
    if verdict.label == "correct":
        verdict.explanation = (
            ""
            if verdict.is_optimal
            else f"not optimal: {len(record.steps) - verdict.min_length} step(s) more than the shortest path"
        )
    return verdict


def score_interactive_session(
    session: Session, trajectory: Trajectory, *, base_dir: Path | None = None
) -> SessionVerdict:
    """Score a session run with a simulated user (module docstring); labels are computed in ``strict`` mode.

    A trajectory that is not ``ok`` (provider or harness error) is left to the runner's usual verdicts; this scores
    what the agent did.

    Raises:
        ScoringError: the trajectory is not this session's, or has more tasks than it.
    """
    if trajectory.session_id != session.id:
        raise ScoringError(f"trajectory {trajectory.session_id!r} does not belong to session {session.id!r}")
    if len(trajectory.tasks) > len(session.tasks):
        raise ScoringError(
            f"session {session.id!r}: trajectory has {len(trajectory.tasks)} tasks, the session {len(session.tasks)}"
        )
    by_index = {t.task_index: t for t in trajectory.tasks}
    tasks: list[TaskVerdict] = []
    earlier: list[Any] = []
    for i in range(len(session.tasks)):
        record = by_index.get(i) or TaskTrajectory(task_index=i)
        tasks.append(_score_task(session, i, record, earlier, base_dir))
        earlier += _results(record.steps)
    return SessionVerdict(session_id=session.id, mode=ScoringMode.STRICT, transitions=session.transitions, tasks=tasks)


def score_with_user(session: Session, trajectory: Trajectory, *, base_dir: Path | None = None) -> SessionVerdict:
    """A session of a run with a simulated user: a finished one by :func:`score_interactive_session`, one that
    ended otherwise (the provider's, the harness's or the simulator's failure) as :func:`score_session` lists it."""
    if trajectory.status is TrajectoryStatus.OK:
        return score_interactive_session(session, trajectory, base_dir=base_dir)
    return score_session(session, trajectory, mode=ScoringMode.STRICT, base_dir=base_dir)


def score_interactive_suite(
    suite: Suite,
    trajectories: Iterable[Trajectory],
    *,
    missing_as_failed: bool = True,
    base_dir: Path | None = None,
) -> list[SessionVerdict]:
    """:func:`~toolwild.eval.scoring.session.score_suite` for a run with a simulated user (re-scoring reads it)."""
    return score_suite(
        suite,
        trajectories,
        mode=ScoringMode.STRICT,
        missing_as_failed=missing_as_failed,
        base_dir=base_dir,
        scorer=lambda session, trajectory, folder: score_with_user(session, trajectory, base_dir=folder),
    )
