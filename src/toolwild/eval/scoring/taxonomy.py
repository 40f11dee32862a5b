"""Classify every failed task once, into the error columns of the WildToolBench paper (spec §7).

The first failing step decides. Action errors come from the live loop (what the agent did instead of the legal
next step); parameter errors come from the first failing argument check.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from toolwild.core.session import Session
from toolwild.core.task import ANSWER_ACTION, ASK_ACTION, TaskType
from toolwild.core.verdict import ErrorClass, StepVerdict
from toolwild.eval.scoring.arguments import ErrorCode
from toolwild.eval.scoring.dag import GoldDag, Position

__all__ = ["classify_failure", "session_context"]

_TYPE_CODES = {
    ErrorCode.JSON_DECODE,
    ErrorCode.TYPE,
    ErrorCode.NESTED_TYPE,
    ErrorCode.TYPE_INCONSISTENT,
}
_HALLUCINATION_CODES = {ErrorCode.UNDEFINED, ErrorCode.NESTED_UNDEFINED}


def session_context(session: Session, task_index: int) -> str:
    """Everything the agent could have read up to this task (lower-cased), to tell hallucinated values."""
    parts: list[str] = [session.env_info]
    for i, task in enumerate(session.tasks[: task_index + 1]):
        parts.append(task.utterance)
        for node in task.gold:
            if node.user_input:
                parts.append(node.user_input)
            if i < task_index:
                parts.append(json.dumps(node.action.arguments, ensure_ascii=False))
                parts.append(
                    node.observation
                    if isinstance(node.observation, str)
                    else json.dumps(node.observation, ensure_ascii=False)
                )
    return "\n".join(parts).lower()


def _value_in_context(value: Any, context: str) -> bool:
    """Whether the agent could have read this value. A value too deep to write out (a model's nesting run wild)
    cannot have come from the context."""
    try:
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    except (RecursionError, ValueError):
        return False
    return text.lower() in context


def _parameter_class(session: Session, task_index: int, verdict: StepVerdict) -> ErrorClass:
    check = next(c for c in verdict.argument_checks if not c.ok)
    code = check.code
    if code in _TYPE_CODES:
        return ErrorClass.PARAM_TYPE
    if code in _HALLUCINATION_CODES:
        return ErrorClass.PARAM_HALLUCINATION
    if code == ErrorCode.KEYS_MISMATCH and "extra:" in check.result and "missing:" not in check.result:
        try:
            predicted = json.loads(check.predicted)
        except (ValueError, RecursionError):  # parsed once already; the parser's depth limit depends on the stack
            return ErrorClass.PARAM_VALUE
        extra = [k for k in predicted if k not in check.gold] if isinstance(predicted, dict) else []
        context = session_context(session, task_index)
        if any(not _value_in_context(predicted[k], context) for k in extra):
            return ErrorClass.PARAM_HALLUCINATION
    return ErrorClass.PARAM_VALUE


def _action_class(
    session: Session,
    task_index: int,
    log: list[StepVerdict],
    failing: StepVerdict,
    positions: list[Position],
    dag: GoldDag,
) -> ErrorClass:
    task = session.tasks[task_index]
    reason = failing.error_reason or ""
    if failing.kind == "empty":
        return ErrorClass.EARLY_TERMINATION
    if failing.kind == "unparseable":
        return ErrorClass.CALL_ERROR
    frontier_names: Counter[str] = Counter()
    for pos in positions:
        pool = [pos.pending[0]] if pos.pending else dag.frontier(pos)
        frontier_names.update({dag.names[x] for x in pool})
    did_calls = any(v.kind == "calls" and v.name_label == "correct" for v in log)
    if failing.kind == "text":
        if reason.startswith("text reply after"):
            return ErrorClass.CALL_ERROR
        return ErrorClass.EARLY_TERMINATION if did_calls else ErrorClass.REFUSAL
    # a tool-call step that matched no legal batch
    if task.type is TaskType.CHAT:
        return ErrorClass.WRONG_REFUSAL
    tool_names = {t.name for t in session.tools}
    called = failing.called
    if any(name not in tool_names for name in called):
        return ErrorClass.WRONG_NAME_MISSING_INFO
    if ASK_ACTION in frontier_names:
        return ErrorClass.WRONG_NAME_MISSING_INFO
    remaining_calls = [x for x in range(dag.n) if dag.names[x] not in (ASK_ACTION, ANSWER_ACTION)]
    if reason.startswith("current step") or set(frontier_names) <= {ANSWER_ACTION}:
        return ErrorClass.REDUNDANT_CALL
    if Counter(called) - frontier_names == Counter() or len(called) > len(remaining_calls):
        # every called name was available, but more of them than the legal batches allow
        return ErrorClass.REDUNDANT_CALL
    return ErrorClass.CALL_ERROR


def classify_failure(
    session: Session,
    task_index: int,
    log: list[StepVerdict],
    positions: list[Position],
    dag: GoldDag,
) -> ErrorClass:
    """The one error class of a failed task."""
    for verdict in log:
        if verdict.name_label == "error":
            return _action_class(session, task_index, log, verdict, positions, dag)
        if verdict.arguments_label == "error":
            return _parameter_class(session, task_index, verdict)
    return ErrorClass.EARLY_TERMINATION
