"""The published WildToolBench result format -> `Trajectory`.

A result line is ``{"id", "model_name", "result": [per-task result, ...]}``, or ``"result"`` holds an error string
when the session's inference failed. A per-task result carries ``inference_log`` with ``step_0``, ``step_1`` ...,
each holding what the model said (``inference_output``: content, tool_calls, reasoning_content). Only what the
model said is read: labels are recomputed by toolwild's scorer, so a published file is re-scored, not trusted.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from toolwild.core.formats.wtb import check_id
from toolwild.core.jsonl import LoadReport, load_records
from toolwild.core.session import Session, Suite
from toolwild.core.trajectory import Step, TaskTrajectory, ToolCall, Trajectory, TrajectoryStatus
from toolwild.errors import DataError, ScoringError

__all__ = ["check_result_against_suite", "load_wtb_results", "recorded_utterance", "trajectory_from_wtb_result"]

_STEP_KEY = re.compile(r"^step_(\d{1,9})$")


def _tool_calls(raw: Any) -> tuple[list[ToolCall] | None, str | None]:
    """Read the model's tool calls; a structure the harness could not read becomes a parse error, not a crash."""
    if raw is None:
        return None, None
    if not isinstance(raw, list):
        return None, f"tool_calls is a {type(raw).__name__}, not a list"
    calls = []
    for i, call in enumerate(raw):
        try:
            fn = call["function"]
            name = fn["name"]
            args = fn["arguments"]
            call_id = call.get("id")
        except (KeyError, TypeError) as exc:
            return None, f"tool_calls[{i}]: missing {exc}"
        if not isinstance(name, str):
            return None, f"tool_calls[{i}].function.name is not a string"
        if not isinstance(args, str):
            args = json.dumps(args, ensure_ascii=False)
        calls.append(ToolCall(id=call_id if isinstance(call_id, str) else None, name=name, arguments=args))
    return calls or None, None


def _task_steps(result: Any, field: str) -> list[Step]:
    if not isinstance(result, dict):
        raise DataError("per-task result must be an object", field=field)
    log = result.get("inference_log")
    if not isinstance(log, dict):
        raise DataError("missing inference_log", field=f"{field}.inference_log")
    keyed = sorted((int(m.group(1)), k) for k in log if (m := _STEP_KEY.match(k)))
    latency = result.get("latency") or []
    tokens_in = result.get("input_token_count") or []
    tokens_out = result.get("output_token_count") or []
    steps = []
    for number, key in keyed:
        entry = log[key]
        out = entry.get("inference_output") if isinstance(entry, dict) else None
        if not isinstance(out, dict):
            raise DataError("missing inference_output", field=f"{field}.inference_log.{key}.inference_output")
        calls, parse_error = _tool_calls(out.get("tool_calls"))
        content = out.get("content")
        steps.append(
            Step(
                content=content if isinstance(content, str) else None,
                tool_calls=calls,
                parse_error=parse_error,
                reasoning=out.get("reasoning_content") if isinstance(out.get("reasoning_content"), str) else None,
                latency_s=_at(latency, number),
                input_tokens=_int_at(tokens_in, number),
                output_tokens=_int_at(tokens_out, number),
            )
        )
    return steps


def _at(values: Any, i: int) -> float | None:
    """A finite number at ``values[i]``, else None (counters are informative; a bad one is dropped, not fatal)."""
    if isinstance(values, list) and i < len(values) and isinstance(values[i], int | float):
        try:
            value = float(values[i])
        except OverflowError:  # an integer beyond float range
            return None
        return value if math.isfinite(value) else None
    return None


def _int_at(values: Any, i: int) -> int | None:
    v = _at(values, i)
    return int(v) if v is not None else None


def trajectory_from_wtb_result(record: Any) -> Trajectory:
    """Convert one published result line."""
    if not isinstance(record, dict):
        raise DataError("a result record must be a JSON object")
    sid = record.get("id")
    if not isinstance(sid, str):
        raise DataError("missing or non-string id", field="id")
    check_id(sid)
    model = record.get("model_name")
    results = record.get("result")
    if isinstance(results, str):
        return Trajectory(
            session_id=sid,
            model=model if isinstance(model, str) else None,
            status=TrajectoryStatus.INFERENCE_ERROR,
            error=results,
        )
    if not isinstance(results, list):
        raise DataError("expected a list of per-task results or an error string", field="result")
    tasks = [TaskTrajectory(task_index=i, steps=_task_steps(r, f"result[{i}]")) for i, r in enumerate(results)]
    return Trajectory(session_id=sid, model=model if isinstance(model, str) else None, tasks=tasks)


def recorded_utterance(result: Any) -> str | None:
    """The user's request a per-task result says it answered, where the file records it.

    The published harness logs ``begin_of_current_task`` as the last message before the task, the user's message
    ``{"role": "user", "content": utterance}``; a ``{"messages": [...]}`` form is read through its last user message.
    """
    log = result.get("inference_log") if isinstance(result, dict) else None
    begin = log.get("begin_of_current_task") if isinstance(log, dict) else None
    if isinstance(begin, dict) and isinstance(begin.get("messages"), list):
        users = [m for m in begin["messages"] if isinstance(m, dict) and m.get("role") == "user"]
        begin = users[-1] if users else None
    if isinstance(begin, dict) and isinstance(begin.get("content"), str):
        return begin["content"]
    return None


def _same_text(a: str, b: str) -> bool:
    return " ".join(a.split()) == " ".join(b.split())


def _check_session(record: dict[str, Any], session: Session) -> None:
    results = record.get("result")
    if not isinstance(results, list):
        return  # an error string: every task failed, nothing to compare
    if len(results) != len(session.tasks):
        raise ScoringError(
            f"result for session {session.id!r} has {len(results)} tasks, the suite's session {len(session.tasks)}: "
            "is it the result of another suite?"
        )
    for i, (result, task) in enumerate(zip(results, session.tasks, strict=True)):
        log = result.get("inference_log") if isinstance(result, dict) else None
        index = log.get("task_idx") if isinstance(log, dict) else None
        if isinstance(index, int) and not isinstance(index, bool) and index != i:
            raise ScoringError(f"result for session {session.id!r}, task {i}: it says it is task {index}")
        said = recorded_utterance(result)
        if said is not None and not _same_text(said, task.utterance):
            raise ScoringError(
                f"result for session {session.id!r}, task {i} answers {said[:80]!r}, but the suite's task is "
                f"{task.utterance[:80]!r}: the result belongs to another suite"
            )


def check_result_against_suite(record: Any, suite: Suite) -> None:
    """Refuse a published result line that answers other tasks than the suite's session of the same id.

    Why: two suites can share session ids (``wild_tool_bench_0`` ...), and a result scored against the wrong one
    gives a number without a word. Checked: the number of tasks, each task's ``task_idx`` and the user request it
    recorded (whitespace aside). A result for a session the suite lacks is left to the scorer, which refuses it.

    Raises:
        ScoringError: naming the session and the task.
    """
    if not isinstance(record, dict) or not isinstance(record.get("id"), str):
        return
    session = suite.session(record["id"])
    if session is not None:
        _check_session(record, session)


def load_wtb_results(
    path: str | Path, *, skip_invalid: bool = False, suite: Suite | None = None
) -> tuple[list[Trajectory], LoadReport]:
    """Load a published-format result JSONL file.

    Args:
        path: the file.
        skip_invalid: skip (and report) malformed lines.
        suite: when given, every line is checked against it (:func:`check_result_against_suite`); a mismatch
            raises ScoringError even with ``skip_invalid`` (it is a wrong suite, not a bad record).
    """

    def convert(_index: int, obj: Any) -> Trajectory:
        trajectory = trajectory_from_wtb_result(obj)
        if suite is not None:
            check_result_against_suite(obj, suite)
        return trajectory

    return load_records(path, convert, skip_invalid=skip_invalid)
