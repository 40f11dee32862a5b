"""The published metric JSON (spec §6), computed from session verdicts, plus our extensions under ``extensions``."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from toolwild.core.task import TaskType, TurnSubtype
from toolwild.core.verdict import ErrorClass, Metrics, ScoringMode, SessionVerdict
from toolwild.eval.metrics.ci import bootstrap_accuracy

__all__ = ["compute_metrics", "scored_verdicts"]


def _leaf() -> dict[str, Any]:
    return {"correct_count": 0, "total_count": 0}


def _finish(info: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Put ``accuracy`` first in every leaf, as the published file does."""
    out = {}
    for key, leaf in info.items():
        total = leaf["total_count"]
        out[key] = {"accuracy": leaf["correct_count"] / total if total else 0.0, **leaf}
    return out


def _finish_rate(info: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out = {}
    for key, leaf in info.items():
        total = leaf["total_step"]
        out[key] = {"rate": leaf["complete_step"] / total if total else 0.0, **leaf}
    return out


def _add(leaf: dict[str, Any], correct: bool) -> None:
    leaf["total_count"] += 1
    if correct:
        leaf["correct_count"] += 1


def scored_verdicts(verdicts: Sequence[SessionVerdict], *, count_provider_errors: bool = False) -> list[SessionVerdict]:
    """The sessions the figures count: never a harness error nor one the simulated user broke; a provider error only
    when asked to count it."""
    return [
        v
        for v in verdicts
        if v.harness_error is None and v.user_error is None and (count_provider_errors or not v.provider_error)
    ]


def _by_session(
    ids: Sequence[str], per_run: Sequence[tuple[int, int]], ratios: Sequence[dict[str, tuple[int, int]]]
) -> tuple[list[tuple[int, ...]], list[dict[str, tuple[int, int]]]]:
    """The runs of a trial run summed per session (in order of first appearance): the bootstrap's unit is the
    session with all its trials, as ``(correct tasks, tasks, correct runs, runs)`` and summed ratios."""
    sums: dict[str, list[int]] = {}
    summed: dict[str, dict[str, tuple[int, int]]] = {}
    for sid, (c, t), extra in zip(ids, per_run, ratios, strict=True):
        acc = sums.setdefault(sid, [0, 0, 0, 0])
        for k, x in enumerate((c, t, int(c == t and t > 0), 1)):
            acc[k] += x
        mine = summed.setdefault(sid, {})
        for key, (part, whole) in extra.items():
            old = mine.get(key, (0, 0))
            mine[key] = (old[0] + part, old[1] + whole)
    return [tuple(v) for v in sums.values()], list(summed.values())


def compute_metrics(
    verdicts: Sequence[SessionVerdict],
    *,
    model_name: str,
    mode: ScoringMode = ScoringMode.WTB,
    count_provider_errors: bool = False,
    resamples: int = 1000,
    seed: int = 0,
    trial_of: Sequence[int] | None = None,
) -> Metrics:
    """Aggregate session verdicts into the published metric structure.

    Args:
        verdicts: one per session (in a trial run, one per session and trial: see ``trial_of``).
        model_name: recorded in the file.
        mode: recorded under ``extensions``.
        count_provider_errors: count sessions lost to provider failures as failed (default: leave them out).
            Harness-error sessions are never counted (they say nothing about the agent) and always listed.
        resamples: bootstrap resamples for the confidence intervals (0 turns them off).
        seed: bootstrap seed (recorded).
        trial_of: the trial of each verdict, for a run of several trials: every figure then pools the trials (a
            task run k times counts k times), the bootstrap draws a session with all its trials, and the listed
            sessions read ``<session id>@<trial>`` (harness errors carry a ``trial`` key).
    """
    trial_at = dict(zip(map(id, verdicts), trial_of, strict=True)) if trial_of is not None else {}

    def named(v: SessionVerdict) -> str:
        return f"{v.session_id}@{trial_at[id(v)]}" if trial_at else v.session_id

    scored = scored_verdicts(verdicts, count_provider_errors=count_provider_errors)
    total = {"task": _leaf(), "session": _leaf()}
    types = {
        k: _leaf()
        for k in (
            "Single-Tool",
            "Multi-Tool",
            "Parallel Multi-Tool",
            "Sequential Multi-Tool",
            "Mixed Multi-Tool",
            "Clarify",
            "Chat",
        )
    }
    layers: dict[str, dict[str, Any]] = {}
    subtypes = {
        k: _leaf()
        for k in (
            "First Turn",
            "Subsequent Turn",
            "Coreferential Reference",
            "Partial Information",
            "Long-Range Dependency",
        )
    }
    optimal = {k: _leaf() for k in ("Total", "Parallel Multi-Tool", "Mixed Multi-Tool")}
    progress = {
        k: {"complete_step": 0, "total_step": 0}
        for k in (
            "Total",
            "Sequential Multi-Tool",
            "Mixed Multi-Tool",
        )
    }
    transitions: dict[str, dict[str, dict[str, Any]]] = {
        str(k): {"session": _leaf(), "task": _leaf()} for k in range(4)
    }
    taxonomy: Counter[str] = Counter()
    state = {"task": _leaf(), "final": _leaf()}
    redundant = {"writes": 0, "tasks": 0, "sessions": 0}
    failures: Counter[str] = Counter()
    truncated = {"tasks": 0, "messages_dropped": 0}
    per_session: list[tuple[int, int]] = []
    ratios: list[dict[str, tuple[int, int]]] = []
    """Per session, the other headline figures as (part, whole): their bootstrap intervals draw the same sessions."""
    for sv in scored:
        _add(total["session"], sv.correct)
        bucket = transitions.setdefault(str(sv.transitions), {"session": _leaf(), "task": _leaf()})
        _add(bucket["session"], sv.correct)
        n_correct = 0
        for tv in sv.tasks:
            ok = tv.label == "correct"
            n_correct += ok
            _add(total["task"], ok)
            _add(bucket["task"], ok)
            _add(types[tv.task_type.value], ok)
            if tv.task_type.is_multi:
                _add(types["Multi-Tool"], ok)
            _add(layers.setdefault(str(tv.task_index), _leaf()), ok)
            if tv.task_index == 0:
                _add(subtypes["First Turn"], ok)
            else:
                _add(subtypes["Subsequent Turn"], ok)
                if tv.subtype is not TurnSubtype.FIRST:
                    _add(subtypes[tv.subtype.value], ok)
            if tv.task_type in (TaskType.PARALLEL, TaskType.MIXED):
                _add(optimal["Total"], tv.is_optimal)
                _add(optimal[tv.task_type.value], tv.is_optimal)
            if tv.task_type in (TaskType.SEQUENTIAL, TaskType.MIXED):
                for key in ("Total", tv.task_type.value):
                    progress[key]["complete_step"] += tv.progress_complete
                    progress[key]["total_step"] += tv.progress_total
            if not ok and tv.error_class is not None:
                taxonomy[tv.error_class.value] += 1
            if tv.failure is not None:
                failures[tv.failure.value] += 1
            if tv.context_dropped:
                truncated["tasks"] += 1
                truncated["messages_dropped"] += tv.context_dropped
        per_session.append((n_correct, len(sv.tasks)))
        matched = [tv.state_match for tv in sv.tasks if tv.state_match is not None]
        with_paths = [tv for tv in sv.tasks if tv.task_type in (TaskType.PARALLEL, TaskType.MIXED)]
        stepped = [tv for tv in sv.tasks if tv.task_type in (TaskType.SEQUENTIAL, TaskType.MIXED)]
        ratios.append(
            {
                "optimal": (sum(tv.is_optimal for tv in with_paths), len(with_paths)),
                "progress": (sum(tv.progress_complete for tv in stepped), sum(tv.progress_total for tv in stepped)),
                "task_state": (sum(bool(ok) for ok in matched), len(matched)),
                "final_state": (int(bool(matched[-1])), 1) if matched else (0, 0),
            }
        )
        for ok in matched:
            _add(state["task"], ok)
        if matched:
            _add(state["final"], matched[-1])
        extra = [tv.redundant_writes for tv in sv.tasks if tv.redundant_writes]
        redundant["writes"] += sum(extra)
        redundant["tasks"] += len(extra)
        redundant["sessions"] += bool(extra)
    for k in ("0", "1", "2", "3"):
        layers.setdefault(k, _leaf())
    failed = sum(taxonomy.values())
    extensions: dict[str, Any] = {
        "mode": mode.value,
        "sessions_scored": len(scored),
        "provider_error_sessions": [named(v) for v in verdicts if v.provider_error],
        "provider_errors_counted": count_provider_errors,
        "harness_error_sessions": [
            {"session_id": v.session_id, "error": v.harness_error, **({"trial": trial_at[id(v)]} if trial_at else {})}
            for v in verdicts
            if v.harness_error is not None
        ],
        "figures_complete": not any(v.harness_error is not None for v in verdicts),
        "inference_error_sessions": [named(v) for v in verdicts if v.inference_error and not v.excluded],
        "model_failures": {"tasks": sum(failures.values()), "by_kind": dict(sorted(failures.items()))},
        "context_truncation": truncated,
        "transition_info": {
            k: {kk: _finish({kk: vv})[kk] for kk, vv in v.items()} for k, v in sorted(transitions.items())
        },
        "error_taxonomy": {
            cls.value: {
                "family": cls.family,
                "count": taxonomy.get(cls.value, 0),
                "share": taxonomy.get(cls.value, 0) / failed if failed else 0.0,
            }
            for cls in ErrorClass
        },
    }
    user_broken = [
        {"session_id": v.session_id, "error": v.user_error, **({"trial": trial_at[id(v)]} if trial_at else {})}
        for v in verdicts
        if v.user_error is not None
    ]
    if user_broken:  # only runs with a simulated user have the key (the metrics of other runs are unchanged)
        extensions["user_error_sessions"] = user_broken
    if state["task"]["total_count"] or any(tv.redundant_writes is not None for sv in scored for tv in sv.tasks):
        extensions["state_info"] = {
            "task_state": _finish({"x": state["task"]})["x"],
            "final_state": _finish({"x": state["final"]})["x"],
            "redundant_writes": redundant,
        }
    if resamples > 0 and per_session:
        units: list[tuple[int, ...]] = list(per_session)
        if trial_at:
            units, ratios = _by_session([v.session_id for v in scored], per_session, ratios)
        extensions["confidence_intervals"] = bootstrap_accuracy(units, resamples=resamples, seed=seed, ratios=ratios)
    return Metrics(
        model_name=model_name,
        total_info=_finish(total),
        task_type_info=_finish(types),
        layer_info=_finish(dict(sorted(layers.items(), key=lambda kv: int(kv[0])))),
        turn_subtype_info=_finish(subtypes),
        optimal_info=_finish(optimal),
        progress_info=_finish_rate(progress),
        extensions=extensions,
    )
