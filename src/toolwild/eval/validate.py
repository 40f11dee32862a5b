"""Checks of a suite beyond its format: gold DAGs that reference missing tools, asks without replies, and the
oracle self-check (the gold path must score 100% in both modes)."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum

from toolwild.core.session import Suite
from toolwild.core.task import NodeKind
from toolwild.core.verdict import ScoringMode
from toolwild.eval.agents.oracle import oracle_trajectory
from toolwild.eval.scoring.arguments import CORRECT, check_schema
from toolwild.eval.scoring.session import api_parameters, score_session

__all__ = ["Problem", "Severity", "SuiteSummary", "summarize_suite", "validate_suite"]

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
    unique_tools: int = 0


def summarize_suite(suite: Suite) -> SuiteSummary:
    """Count sessions, tasks, task types, subtypes and transition buckets."""
    out = SuiteSummary(sessions=len(suite.sessions))
    names: set[str] = set()
    for s in suite.sessions:
        out.tasks += len(s.tasks)
        out.transitions[s.transitions] += 1
        out.tools += len(s.tools)
        names.update(t.name for t in s.tools)
        for t in s.tasks:
            out.task_types[t.type.value] += 1
            out.subtypes[t.subtype.value] += 1
    out.unique_tools = len(names)
    return out


def validate_suite(suite: Suite, *, line_of: dict[str, int] | None = None, oracle_check: bool = True) -> list[Problem]:
    """Everything wrong with a (well-formed) suite, most serious first.

    Args:
        suite: the loaded suite.
        line_of: session id -> 1-based line in the source file, to name lines in messages.
        oracle_check: also score the gold path in both modes (every task must be correct).
    """
    problems: list[Problem] = []
    for session in suite.sessions:
        line = (line_of or {}).get(session.id)
        where = f"{session.id}" + (f" (line {line})" if line else "")
        m = _WTB_ID.match(session.id)
        if m and line is not None and int(m.group(1)) != line - 1:
            problems.append(Problem(Severity.WARNING, where, f"id number {m.group(1)} != line index {line - 1}"))
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
        if not oracle_check or any(p.severity is Severity.ERROR and p.where.startswith(where) for p in problems):
            continue
        for mode in ScoringMode:
            verdict = score_session(session, oracle_trajectory(session), mode=mode)
            for tv in verdict.tasks:
                if tv.label != "correct":
                    problems.append(
                        Problem(
                            Severity.ERROR,
                            f"{where} task {tv.task_index}",
                            f"oracle self-check fails in {mode.value} mode: {tv.error_reason}",
                        )
                    )
    problems.sort(key=lambda p: p.severity is not Severity.ERROR)
    return problems
