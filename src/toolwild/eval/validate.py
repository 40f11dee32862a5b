"""Checks of a suite beyond its format: gold DAGs that reference missing tools, asks without replies, the oracle
self-check (the gold path must score 100% in both modes) and, on request, a replay of the gold calls on each
session's environment (observations and states must be the recorded ones)."""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from toolwild.core.environment import BackendKind
from toolwild.core.grounding import ungrounded_identifiers
from toolwild.core.hidden_intent import check_subtypes
from toolwild.core.references import ambiguous_references
from toolwild.core.session import Session, Suite
from toolwild.core.task import NodeKind
from toolwild.core.trajectory import state_digest
from toolwild.core.verdict import ScoringMode
from toolwild.envs.base import Observation
from toolwild.envs.registry import describe_environment, session_environment
from toolwild.errors import ToolwildError
from toolwild.eval.agents.oracle import oracle_trajectory
from toolwild.eval.scoring.arguments import CORRECT, check_schema
from toolwild.eval.scoring.session import api_parameters, score_session
from toolwild.eval.session import environment_seed
from toolwild.llm.client import LLM

__all__ = [
    "Problem",
    "Severity",
    "SuiteSummary",
    "areplay_problems",
    "avalidate_session",
    "grounding_problems",
    "replay_problems",
    "replay_skip_reason",
    "summarize_suite",
    "validate_suite",
]

_WTB_ID = re.compile(r"^wild_tool_bench_(\d+)$")


class Severity(StrEnum):
    """``error`` makes a suite unusable for scoring; ``warning`` is worth a look."""

    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True)
class Problem:
    """One finding, located by session (and task/node where it applies)."""

    severity: Severity
    where: str
    message: str


@dataclass
class SuiteSummary:
    """Counts of a suite, for ``toolwild validate``."""

    sessions: int = 0
    tasks: int = 0
    task_types: Counter[str] = field(default_factory=Counter)
    subtypes: Counter[str] = field(default_factory=Counter)
    transitions: Counter[int] = field(default_factory=Counter)
    tools: int = 0
    names: set[str] = field(default_factory=set, repr=False)

    @property
    def unique_tools(self) -> int:
        """Distinct tool names over the sessions counted."""
        return len(self.names)

    def add(self, session: Session) -> None:
        """Count one more session (a streamed suite is summarised one session at a time)."""
        self.sessions += 1
        self.tasks += len(session.tasks)
        self.transitions[session.transitions] += 1
        self.tools += len(session.tools)
        self.names.update(t.name for t in session.tools)
        for t in session.tasks:
            self.task_types[t.type.value] += 1
            self.subtypes[t.subtype.value] += 1


def summarize_suite(suite: Suite) -> SuiteSummary:
    """Count sessions, tasks, task types, subtypes and transition buckets."""
    out = SuiteSummary()
    for s in suite.sessions:
        out.add(s)
    return out


def _recorded_form(observation: Observation, recorded: Any) -> Any:
    """The observation in the shape the suite recorded it: ``{"ok", "result"}`` (toolwild domains) or the bare
    result (imported recordings)."""
    if isinstance(recorded, dict) and set(recorded) <= {"ok", "result", "error"} and "ok" in recorded:
        return observation.model_dump(mode="json", include=set(recorded))
    return observation.result if observation.ok else observation.model_dump(mode="json", include={"ok", "error"})


def replay_problems(
    session: Session, *, where: str = "", base_dir: Path | None = None, simulator: LLM | None = None
) -> list[Problem]:
    """Replay the session's gold calls, in order, on a fresh episode of its environment: every observation must be
    the recorded one and every task must leave the expected state.

    Environments simulated by a model are replayed only when a ``simulator`` is given (the generation run's model
    with its cache: a replay is then answered from the cache, identically); a missing environment is an error.
    """
    return asyncio.run(areplay_problems(session, where=where, base_dir=base_dir, simulator=simulator))


def replay_skip_reason(session: Session, *, base_dir: Path | None = None, simulator: LLM | None = None) -> str | None:
    """Why the session's gold calls cannot be replayed here, or None when they can (an environment that does not load
    is not a reason to skip: replaying reports it as an error)."""
    if not session.environment:
        return "name no environment (a published suite carries none: toolwild import wtb-envs makes them)"
    try:
        described = describe_environment(session.environment, base_dir=base_dir)
    except ToolwildError:
        return None
    if described is not None and described.backend is BackendKind.LLM and simulator is None:
        return "run on a model-simulated environment (give --env-model and the generation run's --cache)"
    if described is not None and described.backend is BackendKind.MCP:
        return "run on a live MCP server (a replay would call it again, writes included; its answers need not repeat)"
    return None


async def areplay_problems(
    session: Session, *, where: str = "", base_dir: Path | None = None, simulator: LLM | None = None
) -> list[Problem]:
    """:func:`replay_problems` from async code."""
    where = where or session.id
    if replay_skip_reason(session, base_dir=base_dir, simulator=simulator) is not None:
        return []
    try:
        backend = session_environment(session, base_dir=base_dir, simulator=simulator)
    except ToolwildError as exc:
        return [Problem(Severity.ERROR, where, f"environment {session.environment!r}: {exc}")]
    problems: list[Problem] = []
    episode = backend.reset(seed=environment_seed(session))
    try:
        for ti, task in enumerate(session.tasks):
            for node in task.call_nodes:
                answer = await episode.acall(node.name, dict(node.action.arguments))
                observed = _recorded_form(answer, node.observation)
                if observed != node.observation:
                    problems.append(
                        Problem(
                            Severity.ERROR,
                            f"{where} task {ti} node {node.idx}",
                            f"replaying {node.name} gives {str(observed)[:160]}, not the recorded observation",
                        )
                    )
            expected = task.expected_digest
            if expected is not None and state_digest(episode.state()) != expected:
                problems.append(
                    Problem(Severity.ERROR, f"{where} task {ti}", "gold calls do not reach the expected state")
                )
    finally:
        episode.close()
    return problems


def validate_suite(
    suite: Suite,
    *,
    line_of: dict[str, int] | None = None,
    oracle_check: bool = True,
    replay: bool = False,
    base_dir: Path | None = None,
    simulator: LLM | None = None,
    subtypes: bool = False,
    grounding: bool = False,
) -> list[Problem]:
    """Everything wrong with a (well-formed) suite, most serious first (a suite with no session is an error).

    Args:
        suite: the loaded suite.
        line_of: session id -> 1-based line in the source file, to name lines in messages.
        oracle_check: also score the gold path in both modes (every task must be correct).
        replay: also replay every session's gold calls on its environment (see :func:`replay_problems`).
        base_dir: where relative environment-file references are resolved (the suite's folder).
        simulator: the model (with its cache) that answers environments simulated by a model, for ``replay``.
        subtypes: also check every hidden-intent label against the values (:mod:`toolwild.core.hidden_intent`).
        grounding: also check that every identifier a gold call passes is reachable by the agent
            (:mod:`toolwild.core.grounding`): one error per ungrounded argument, naming the task.
    """
    problems: list[Problem] = []
    if not suite.sessions:  # nothing to evaluate is not a valid suite, whatever else is true of it
        problems.append(Problem(Severity.ERROR, suite.source or suite.name, "the suite holds no session"))
    for session in suite.sessions:
        line = (line_of or {}).get(session.id)
        where = f"{session.id}" + (f" (line {line})" if line else "")
        m = _WTB_ID.match(session.id)
        if m and line is not None and int(m.group(1)) != line - 1:
            problems.append(Problem(Severity.WARNING, where, f"id number {m.group(1)} != line index {line - 1}"))
        found = _structure_problems(session, where)
        if not any(p.severity is Severity.ERROR for p in found):
            if subtypes:
                found += _subtype_problems(session, where)
            if grounding:
                found += grounding_problems(session, where)
            if replay:
                found += replay_problems(session, where=where, base_dir=base_dir, simulator=simulator)
            if oracle_check:
                found += _oracle_problems(session, where, base_dir)
        problems += found
    problems.sort(key=lambda p: p.severity is not Severity.ERROR)
    return problems


async def avalidate_session(
    session: Session,
    *,
    base_dir: Path | None = None,
    simulator: LLM | None = None,
    subtypes: bool = True,
    grounding: bool = True,
) -> list[Problem]:
    """Every check of :func:`validate_suite` (replay, oracle, subtypes and grounding included, unless turned off)
    on one session, from async code: a streamed suite is verified one session at a time, as each is made."""
    problems = _structure_problems(session, session.id)
    if not any(p.severity is Severity.ERROR for p in problems):
        if subtypes:
            problems += _subtype_problems(session, session.id)
        if grounding:
            problems += grounding_problems(session, session.id)
        problems += await areplay_problems(session, where=session.id, base_dir=base_dir, simulator=simulator)
        problems += _oracle_problems(session, session.id, base_dir)
    problems.sort(key=lambda p: p.severity is not Severity.ERROR)
    return problems


def _structure_problems(session: Session, where: str) -> list[Problem]:
    """Gold DAG shape, asks without replies, calls to tools the session does not list, arguments the schema fails."""
    problems: list[Problem] = []
    params = api_parameters(session)
    for ti, task in enumerate(session.tasks):
        at = f"{where} task {ti}"
        kinds = [n.kind for n in task.gold]
        if kinds.count(NodeKind.ANSWER) != 1:
            problems.append(Problem(Severity.ERROR, at, "gold DAG must have exactly one prepare_to_answer node"))
        else:
            ans = kinds.index(NodeKind.ANSWER)
            if any(ans in n.dependency_list for n in task.gold):
                problems.append(Problem(Severity.ERROR, at, "prepare_to_answer must be the sink node"))
        for node in task.gold:
            nat = f"{at} node {node.idx}"
            if node.kind is NodeKind.ASK and not node.user_input:
                problems.append(Problem(Severity.ERROR, nat, "ask node without user_input"))
            if node.kind is NodeKind.CALL:
                if node.name not in params:
                    problems.append(Problem(Severity.ERROR, nat, f"calls {node.name!r}, not in the tool list"))
                else:
                    status = check_schema(params[node.name], node.action.arguments)
                    if status != CORRECT:
                        problems.append(Problem(Severity.WARNING, nat, f"gold arguments fail the schema: {status}"))
    return problems


def grounding_problems(session: Session, where: str) -> list[Problem]:
    """Gold identifiers the agent was never shown (errors: such a task measures guessing)."""
    return [Problem(Severity.ERROR, f"{where} task {f.task_index}", f.message) for f in ungrounded_identifiers(session)]


def _subtype_problems(session: Session, where: str) -> list[Problem]:
    """Labels the values do not bear out (errors), and references with more than one candidate (warnings: the
    suite still scores, but its gold is a guess there)."""
    labels = [
        Problem(
            Severity.ERROR,
            f"{where} task {finding.task_index}",
            f"{finding.subtype.value} not borne out: {finding.message}",
        )
        for finding in check_subtypes(session)
    ]
    return labels + [
        Problem(Severity.WARNING, f"{where} task {finding.task_index}", f"{finding.subtype.value}: {finding.message}")
        for finding in ambiguous_references(session)
    ]


def _oracle_problems(session: Session, where: str, base_dir: Path | None) -> list[Problem]:
    """The gold path must score 100% in both modes."""
    problems = []
    for mode in ScoringMode:
        verdict = score_session(session, oracle_trajectory(session), mode=mode, base_dir=base_dir)
        for tv in verdict.tasks:
            if tv.label != "correct":
                problems.append(
                    Problem(
                        Severity.ERROR,
                        f"{where} task {tv.task_index}",
                        f"oracle self-check fails in {mode.value} mode: {tv.error_reason}",
                    )
                )
    return problems
