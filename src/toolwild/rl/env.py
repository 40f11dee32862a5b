"""One session (or one task of it) as a reset/step environment with a reward: the live loop, driven by a policy.

Why the live loop itself: ``toolwild eval --history free`` already decides, step by step, when a task has ended,
what the user says next (the gold reply to an accepted question, the next task's utterance) and which calls run on
the environment. :class:`SessionEnv` runs that very loop with an agent whose every step is handed out to the
caller, so an episode's messages, its environment episode and its verdicts are exactly those of an evaluation of
the same steps; nothing of the WildToolBench rules is written twice.

The loop is a coroutine that asks its agent for a step; here the agent parks that request until :meth:`astep`
brings the policy's message, then waits for the loop's next request (or its end). Everything lives on one event
loop: the ``a``-methods run on the caller's, the plain ones on a private loop of the environment's own.

The loop object (``eval.session.SessionLoop``) is used directly rather than through ``run_session``: its records
of the finished tasks (steps, state digest, writes, failure) are what the verdict so far is scored from, and
``run_session`` only hands them over at the end of the session.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine, Mapping
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from toolwild.core.session import Session
from toolwild.core.tool import Effect
from toolwild.core.trajectory import Step, TaskTrajectory, Trajectory
from toolwild.core.verdict import ScoringMode, TaskVerdict
from toolwild.envs.base import EnvironmentBackend, Episode
from toolwild.envs.registry import session_environment
from toolwild.errors import ConfigError, DataError, HarnessError
from toolwild.eval.agents.base import AgentContext
from toolwild.eval.agents.oracle import OracleAgent
from toolwild.eval.scoring.session import score_session
from toolwild.eval.session import HistoryMode, SessionLoop, environment_seed
from toolwild.llm.client import LLM
from toolwild.rl.messages import assistant_step
from toolwild.rl.reward import RewardKind, RewardTiming, task_score

__all__ = ["SessionEnv", "StepResult"]

T = TypeVar("T")


class StepResult(BaseModel):
    """What one step of the policy led to."""

    model_config = ConfigDict(extra="forbid")

    messages: list[dict[str, Any]]
    """What the environment says next, in OpenAI chat format: the tool messages of the policy's calls, the user's
    reply to an accepted question, or (the task over) the next task's user message. Empty when ``done``."""
    reward: float
    done: bool
    verdict: list[TaskVerdict] = Field(default_factory=list)
    """The verdicts of the episode's finished tasks so far, as ``toolwild eval --history free`` gives them."""
    task_index: int
    """The session's task the next message belongs to (past the episode's last task once ``done``)."""


class _Handoff:
    """The live loop's agent: plays the gold path through the tasks before the episode's first, then hands every
    request to the policy and waits for its step."""

    name = "policy"

    def __init__(self, first_task: int) -> None:
        self.first_task = first_task
        self.oracle = OracleAgent()
        self.requests: asyncio.Queue[AgentContext] = asyncio.Queue()
        self.replies: asyncio.Queue[Step] = asyncio.Queue()

    async def next_step(self, context: AgentContext) -> Step:
        """The oracle's step before the episode's first task; the policy's from then on."""
        if context.task_index < self.first_task:
            return await self.oracle.next_step(context)
        self.requests.put_nowait(context)
        return await self.replies.get()


class SessionEnv:
    """A session of a suite (or its task ``task``) as a reset/step environment.

    Args:
        session: the session.
        environment: the environment its calls run on (default: the session's own, ``session_environment``; a
            session that names none runs on its recorded observations, as ``eval --history free`` does).
        reward: each finished task's score (:class:`RewardKind`).
        timing: when scores are paid (:class:`RewardTiming`).
        scoring_mode: ``wtb`` (the published labels) or ``strict``.
        task: run only this task of the session; the tasks before it are played along their gold path first (the
            environment is then in the state the task expects, and the conversation holds their gold turns).
        max_steps_per_task: the live loop's step budget per task (a task still going after it fails).
        simulator: the model of a model-simulated environment (its calls go through this client and its cache).
        base_dir: the suite's folder, where the session's environment file resolves.

    Episodes are isolated: each :meth:`reset` starts a fresh episode of the environment that only this object
    calls. It stays open after ``done`` (:meth:`state` reads the final state) until the next :meth:`reset` or
    :meth:`close` (or the end of a ``with`` block) releases it.

    Raises:
        ConfigError: ``task`` out of range, a step budget below 1, a ``state`` reward on a session without an
            environment or without an expected state for a task, or an unknown environment.
    """

    def __init__(
        self,
        session: Session,
        *,
        environment: EnvironmentBackend | None = None,
        reward: RewardKind | str = RewardKind.TASK,
        timing: RewardTiming | str = RewardTiming.SUM,
        scoring_mode: ScoringMode | str = ScoringMode.WTB,
        task: int | None = None,
        max_steps_per_task: int = 32,
        simulator: LLM | None = None,
        base_dir: Path | None = None,
    ) -> None:
        if task is not None and not 0 <= task < len(session.tasks):
            raise ConfigError(f"session {session.id!r} has {len(session.tasks)} tasks: no task {task}")
        if max_steps_per_task < 1:
            raise ConfigError(f"max_steps_per_task must be at least 1, got {max_steps_per_task}")
        self.session = session
        self.reward_kind = RewardKind(reward)
        self.timing = RewardTiming(timing)
        self.scoring_mode = ScoringMode(scoring_mode)
        self.first_task = task or 0
        self.last_task = task if task is not None else len(session.tasks) - 1
        self.max_steps_per_task = max_steps_per_task
        self.base_dir = base_dir
        if environment is None and session.environment:
            environment = session_environment(session, simulator=simulator, base_dir=base_dir)
        self.environment = environment
        self._check_reward()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._private_loop: asyncio.AbstractEventLoop | None = None
        self._run: SessionLoop | None = None
        self._agent: _Handoff | None = None
        self._runner: asyncio.Task[None] | None = None
        self._episode: Episode | None = None
        self._context: AgentContext | None = None
        self._verdicts: list[TaskVerdict] = []
        self._done = False

    def _check_reward(self) -> None:
        """A state reward needs a state to compare and an expected state for every task the episode scores."""
        if self.reward_kind is not RewardKind.STATE:
            return
        if self.environment is None:
            raise ConfigError(f"session {self.session.id!r} runs on no environment: a 'state' reward needs one")
        for i in range(self.first_task, self.last_task + 1):
            if not self.session.tasks[i].checks_state:
                raise ConfigError(
                    f"session {self.session.id!r}, task {i}: no expected state in the suite, so no 'state' reward "
                    "(use reward='task' or 'progress')"
                )

    # ------------------------------------------------------------------ public figures
    @property
    def max_return(self) -> float:
        """The most an episode can earn: the number of its tasks (``sum``) or 1 (``terminal``)."""
        return float(self.last_task - self.first_task + 1) if self.timing is RewardTiming.SUM else 1.0

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The whole conversation as the policy's next request shows it: its own turns as the loop recorded them
        (call ids it left out are filled in as ``call_<task>_<step>_<k>``) and everything said since."""
        return list(self._context.messages) if self._context is not None else []

    @property
    def tools(self) -> list[dict[str, Any]]:
        """The session's tools in OpenAI function format, as a model is sent them."""
        return list(self._context.tools) if self._context is not None else []

    @property
    def verdict(self) -> list[TaskVerdict]:
        """The verdicts of the episode's finished tasks."""
        return list(self._verdicts)

    @property
    def done(self) -> bool:
        """True once the episode's last task has finished."""
        return self._done

    def state(self) -> dict[str, Any] | None:
        """The environment episode's current state, also after ``done`` (None without an environment, or once
        closed)."""
        return self._episode.state() if self._episode is not None else None

    # ------------------------------------------------------------------ async API
    async def areset(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Start a fresh episode: the system message and the first user message, and the tools.

        Raises:
            DataError: ``task`` is set and the gold of an earlier task does not replay on the environment (the
                task could not start from the state it expects).
        """
        await self.aclose()
        self._loop = asyncio.get_running_loop()
        self._done = False
        self._verdicts = []
        if self.environment is not None:
            self._episode = self.environment.reset(seed=environment_seed(self.session))
        self._agent = _Handoff(self.first_task)
        self._run = SessionLoop(
            session=self.session,
            agent=self._agent,
            history=HistoryMode.FREE,
            scoring_mode=self.scoring_mode,
            max_steps_per_task=self.max_steps_per_task,
            episode=self._episode,
            write_tools=self._write_tools(),
        )
        self._runner = asyncio.ensure_future(self._run.run())
        context = await self._next_request()
        if context is None:  # pragma: no cover - every task asks its agent at least once
            raise HarnessError(f"session {self.session.id!r}: the live loop ended without asking for a step")
        self._context = context
        try:
            self._check_prefix()
        except DataError:
            await self.aclose()
            raise
        return self.messages, self.tools

    async def astep(self, assistant_message: Mapping[str, Any] | str) -> StepResult:
        """Run the policy's message: its calls on the environment, the judge on the step; what follows.

        ``assistant_message`` is an OpenAI-style assistant message (``content`` and/or ``tool_calls``) or its JSON
        text. What cannot be used (no JSON, a call without a name) fails the task as unusable model output does in
        ``eval``, and the episode goes on.

        Raises:
            RuntimeError: before :meth:`reset`, after ``done``, or on another event loop than the reset's.
            DataError: ``assistant_message`` is neither a mapping nor a string.
            HarnessError: the environment raised instead of answering (the episode is closed).
        """
        agent, before = self._live()
        step = assistant_step(assistant_message)
        agent.replies.put_nowait(step)
        context = await self._next_request()
        new = self._finish_tasks()
        self._done = context is None or context.task_index > self.last_task
        if self._done:
            await self._stop_loop()
            return StepResult(
                messages=[], reward=self._reward(new), done=True, verdict=self.verdict, task_index=self.last_task + 1
            )
        assert context is not None
        self._context = context
        said = context.messages[len(before.messages) :]
        if said and said[0].get("role") == "assistant":  # the policy's own turn, as the loop recorded it
            said = said[1:]
        return StepResult(
            messages=said, reward=self._reward(new), done=False, verdict=self.verdict, task_index=context.task_index
        )

    async def aclose(self) -> None:
        """Stop the live loop where it waits and release the environment episode (safe to call twice)."""
        await self._stop_loop()
        episode, self._episode = self._episode, None
        if episode is not None:
            episode.close()

    # ------------------------------------------------------------------ sync API
    def reset(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """:meth:`areset` for synchronous code (runs on the environment's private event loop)."""
        return self._sync(self.areset())

    def step(self, assistant_message: Mapping[str, Any] | str) -> StepResult:
        """:meth:`astep` for synchronous code."""
        return self._sync(self.astep(assistant_message))

    def close(self) -> None:
        """:meth:`aclose` for synchronous code; also closes the private event loop.

        Raises:
            RuntimeError: an episode started by :meth:`areset` is still running (close it with :meth:`aclose`).
        """
        if self._private_loop is not None:
            self._sync(self.aclose())
            self._private_loop.close()
            self._private_loop = None
            return
        if self._runner is not None and not self._runner.done():
            raise RuntimeError("an episode started with areset() closes with aclose()")
        self._runner = None
        episode, self._episode = self._episode, None
        if episode is not None:
            episode.close()

    def __enter__(self) -> SessionEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> SessionEnv:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def _sync(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine on the private loop; refused inside a running loop, where it would block it."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            coro.close()
            raise RuntimeError("SessionEnv.reset/step/close block: in async code use areset/astep/aclose")
        if self._private_loop is None:
            self._private_loop = asyncio.new_event_loop()
        return self._private_loop.run_until_complete(coro)

    # ------------------------------------------------------------------ the loop's bookkeeping
    async def _stop_loop(self) -> None:
        """Cancel the live loop where it waits for a step (a task episode ends before its session does)."""
        runner, self._runner = self._runner, None
        if runner is not None and not runner.done():
            runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await runner

    def _write_tools(self) -> set[str]:
        """The environment's write tools: the live loop counts their writes (redundant writes in the verdict)."""
        if self.environment is None:
            return set()
        return {t.name for t in self.environment.tools if t.effect is Effect.WRITE}

    def _live(self) -> tuple[_Handoff, AgentContext]:
        if self._agent is None or self._context is None or self._runner is None:
            raise RuntimeError("call reset() before step()" if not self._done else "the episode is done: reset()")
        if asyncio.get_running_loop() is not self._loop:
            raise RuntimeError("an episode steps on the event loop that reset it")
        return self._agent, self._context

    async def _next_request(self) -> AgentContext | None:
        """The loop's next request for a step, or None once it has run every task.

        An exception out of the loop (an environment that raised: a harness error) closes the episode and is
        raised here.
        """
        assert self._agent is not None and self._runner is not None
        request = asyncio.ensure_future(self._agent.requests.get())
        try:
            await asyncio.wait({request, self._runner}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:  # the caller cancelled the step: its episode can no longer keep pace with the loop
            request.cancel()
            self._done, self._agent = True, None
            raise
        if request.done():
            return request.result()
        request.cancel()
        error = self._runner.exception()
        if error is not None:
            self._done = True
            await self.aclose()
            raise error
        return None

    def _finish_tasks(self) -> list[TaskVerdict]:
        """Judge the tasks the loop finished since the last step, exactly as ``eval`` scores a trajectory."""
        assert self._run is not None
        judged = self.first_task + len(self._verdicts)
        records = [t for t in self._run.tasks if judged <= t.task_index <= self.last_task]
        new = self._score(records) if records else []
        self._verdicts.extend(new)
        return new

    def _score(self, records: list[TaskTrajectory]) -> list[TaskVerdict]:
        """The verdicts of these finished tasks (a task's verdict depends on its own record only)."""
        trajectory = Trajectory(session_id=self.session.id, model="policy", tasks=records)
        verdict = score_session(self.session, trajectory, mode=self.scoring_mode, base_dir=self.base_dir)
        wanted = {r.task_index for r in records}
        return [v for v in verdict.tasks if v.task_index in wanted]

    def _check_prefix(self) -> None:
        """The gold of the tasks before the episode's first must replay, or that task starts from a wrong state."""
        if self.first_task == 0:
            return
        assert self._run is not None
        for v in self._score(self._run.tasks[: self.first_task]):
            if v.label != "correct" or v.state_match is False:
                why = v.explanation or "the state after it is not the expected one"
                raise DataError(
                    f"session {self.session.id!r}: the gold of task {v.task_index} does not replay on its environment "
                    f"({why}), so task {self.first_task} cannot start from the state it expects",
                    field=f"tasks[{v.task_index}]",
                )

    def _reward(self, new: list[TaskVerdict]) -> float:
        if self.timing is RewardTiming.SUM:
            return sum(task_score(v, self.reward_kind) for v in new)
        if not self._done or not self._verdicts:
            return 0.0
        return sum(task_score(v, self.reward_kind) for v in self._verdicts) / len(self._verdicts)
