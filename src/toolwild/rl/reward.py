"""What an episode rewards, and when: a score per finished task from its verdict, paid per task or at the end.

Why from the verdict: the reward must be the figure ``toolwild eval --history free`` reports for the same steps, so
that a policy trained on it improves the benchmark's own numbers and nothing else. Every score lies in [0, 1].
"""

from __future__ import annotations

from enum import StrEnum

from toolwild.core.verdict import TaskVerdict

__all__ = ["RewardKind", "RewardTiming", "task_score"]


class RewardKind(StrEnum):
    """The score of one finished task."""

    TASK = "task"
    """1 when the task's label is correct (every call's name and arguments, the asks and the answer, as ``eval``
    labels it), else 0."""
    PROGRESS = "progress"
    """The task's Accomplish Progress, ``progress_complete / progress_total`` (WildToolBench's progress rate, in the
    episode's scoring mode: in ``wtb`` it counts step entries against gold nodes, so a task with parallel calls
    stays below 1 even when solved; ``strict`` counts gold nodes done and reaches 1)."""
    STATE = "state"
    """1 when the environment's state after the task equals the task's expected state, else 0 (needs a stateful
    environment and a suite that records expected states). A text reply that changes nothing scores 1 on a task
    that expects no change, whatever it says: combine with ``task`` in your own code if that matters."""


class RewardTiming(StrEnum):
    """When the scores are paid."""

    SUM = "sum"
    """Dense: each task's score on the step that finishes it; the episode's return is the sum over its tasks."""
    TERMINAL = "terminal"
    """Sparse: 0 on every step but the last, which pays the mean score over the episode's tasks (at most 1)."""


def task_score(verdict: TaskVerdict, kind: RewardKind) -> float:
    """One finished task's score in [0, 1]."""
    if kind is RewardKind.TASK:
        return 1.0 if verdict.label == "correct" else 0.0
    if kind is RewardKind.PROGRESS:
        return min(1.0, verdict.progress_complete / verdict.progress_total) if verdict.progress_total else 0.0
    return 1.0 if verdict.state_match else 0.0
