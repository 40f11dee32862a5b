"""The published WildToolBench result format -> `Trajectory`.

A result line is ``{"id", "model_name", "result": [per-task result, ...]}``, or ``"result"`` holds an error string
when the session's inference failed. A per-task result carries ``inference_log`` with ``step_0``, ``step_1`` ...,
each holding what the model said (``inference_output``: content, tool_calls, reasoning_content). Only what the
model said is read: labels are recomputed by toolwild's scorer, so a published file is re-scored, not trusted.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from toolwild.core.jsonl import LoadReport, load_records
from toolwild.core.trajectory import Step, TaskTrajectory, ToolCall, Trajectory, TrajectoryStatus
from toolwild.errors import DataError

__all__ = ["load_wtb_results", "trajectory_from_wtb_result"]

_STEP_KEY = re.compile(r"^step_(\d+)$")


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
    if isinstance(values, list) and i < len(values) and isinstance(values[i], int | float):
        return float(values[i])
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


def load_wtb_results(path: str | Path, *, skip_invalid: bool = False) -> tuple[list[Trajectory], LoadReport]:
    """Load a published-format result JSONL file."""
    return load_records(path, lambda _i, obj: trajectory_from_wtb_result(obj), skip_invalid=skip_invalid)
