"""Trajectories + verdicts -> the published WildToolBench result format, for comparison with the paper's tooling.

Each line is ``{"id", "model_name", "result": [...]}`` (or ``"result": "<error>"`` for a failed session); each task
result carries the labels and an ``inference_log`` whose ``step_k`` entries hold what the model said, the name
label of the step and the gold candidate it matched, which is what the published argument checker reads. The full
per-step message history of the published files is left out (it is recomputable and large).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from toolwild.core.formats.openai_tools import to_openai_tools_for_api
from toolwild.core.session import Session, Suite
from toolwild.core.trajectory import Trajectory, TrajectoryStatus
from toolwild.core.verdict import SessionVerdict

__all__ = ["session_result_to_wtb", "write_wtb_results"]


def _tool_calls(step: Any) -> list[dict[str, Any]] | None:
    if not step.tool_calls:
        return None
    return [
        {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
        for c in step.tool_calls
    ]


def session_result_to_wtb(
    session: Session, trajectory: Trajectory, verdict: SessionVerdict, *, model_name: str
) -> dict[str, Any]:
    """One published-format result line."""
    if trajectory.status is not TrajectoryStatus.OK:
        return {"id": session.id, "model_name": model_name, "result": trajectory.error or trajectory.status.value}
    tools = to_openai_tools_for_api(session.tools)
    results = []
    steps_by_task = {t.task_index: t.steps for t in trajectory.tasks}
    for tv in verdict.tasks:
        task = session.tasks[tv.task_index]
        steps = steps_by_task.get(tv.task_index, [])
        log: dict[str, Any] = {
            "task_idx": tv.task_index,
            "begin_of_current_task": {"role": "user", "content": task.utterance},
        }
        for sv in tv.steps:
            step = steps[sv.step] if sv.step < len(steps) else None
            output: dict[str, Any] = {
                "reasoning_content": step.reasoning if step else None,
                "content": step.content if step else None,
                "tool_calls": _tool_calls(step) if step else None,
                "current_action_name_label": sv.name_label,
            }
            if sv.error_reason:
                output["error_reason"] = sv.error_reason
            if sv.arguments_label is not None:
                output["current_action_arguments_label"] = sv.arguments_label
            entry: dict[str, Any] = {"inference_input": {"tools": tools}, "inference_output": output}
            if sv.matched_nodes:
                gold = [task.gold[i] for i in sv.matched_nodes]
                answer: dict[str, Any] = {
                    "action": [
                        {"arguments": json.dumps(g.action.arguments, ensure_ascii=False), "name": g.name} for g in gold
                    ]
                }
                if gold[0].name in ("ask_user_for_required_parameters", "prepare_to_answer"):
                    answer["observation"] = gold[0].observation
                if gold[0].user_input is not None:
                    answer["user_input"] = gold[0].user_input
                entry["inference_answer"] = {"candidate_0_answer_function_list": answer}
            log[f"step_{sv.step}"] = entry
        result: dict[str, Any] = {
            "action_name_label": tv.name_label,
            "is_optimal": tv.is_optimal,
            "inference_log": log,
            "latency": [s.latency_s or 0.0 for s in steps],
            "input_token_count": [s.input_tokens or 0 for s in steps],
            "output_token_count": [s.output_tokens or 0 for s in steps],
        }
        if tv.arguments_label is not None and tv.name_label == "correct":
            result = {"action_name_label": tv.name_label, "action_arguments_label": tv.arguments_label, **result}
        results.append(result)
    return {"id": session.id, "model_name": model_name, "result": results}


def write_wtb_results(
    path: str | Path,
    suite: Suite,
    trajectories: list[Trajectory],
    verdicts: list[SessionVerdict],
    *,
    model_name: str,
) -> int:
    """Write the published result file (sessions in suite order); returns the number of lines."""
    by_traj = {t.session_id: t for t in trajectories}
    by_verdict = {v.session_id: v for v in verdicts}
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_suffix(p.suffix + ".tmp")
    n = 0
    with tmp.open("w", encoding="utf-8") as fh:
        for session in suite.sessions:
            traj = by_traj.get(session.id)
            verdict = by_verdict.get(session.id)
            if traj is None or verdict is None:
                continue
            fh.write(
                json.dumps(session_result_to_wtb(session, traj, verdict, model_name=model_name), ensure_ascii=False)
            )
            fh.write("\n")
            n += 1
    tmp.replace(p)
    return n
