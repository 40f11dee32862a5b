"""`Task`: one user request, its type, and the gold DAG of actions that solves it.

The gold DAG is WildToolBench's: nodes are tool calls or one of two pseudo-actions (ask the user for missing
parameters; prepare the final answer), with explicit dependencies. Legal execution orders are derived from it by
:mod:`toolwild.eval.scoring.dag`, never stored.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer, model_validator

from toolwild.core.trajectory import state_digest

__all__ = [
    "ANSWER_ACTION",
    "ASK_ACTION",
    "PSEUDO_ACTIONS",
    "Action",
    "CoarseType",
    "GoldNode",
    "NodeKind",
    "Task",
    "TaskType",
    "TurnSubtype",
    "answer_node",
    "ask_node",
    "shape_problem",
]

ASK_ACTION = "ask_user_for_required_parameters"
"""Pseudo-action: the agent must ask the user for missing required parameters."""
ANSWER_ACTION = "prepare_to_answer"
"""Pseudo-action: the agent answers in text; always the sink node of a task."""
PSEUDO_ACTIONS = frozenset({ASK_ACTION, ANSWER_ACTION})


class TaskType(StrEnum):
    """The six task types of WildToolBench (values are the published labels)."""

    SINGLE = "Single-Tool"
    PARALLEL = "Parallel Multi-Tool"
    SEQUENTIAL = "Sequential Multi-Tool"
    MIXED = "Mixed Multi-Tool"
    CLARIFY = "Clarify"
    CHAT = "Chat"

    @property
    def coarse(self) -> CoarseType:
        """The coarse type used for instruction transitions (single / multi / clarify / chat)."""
        if self in (TaskType.PARALLEL, TaskType.SEQUENTIAL, TaskType.MIXED):
            return CoarseType.MULTI
        return {
            TaskType.SINGLE: CoarseType.SINGLE,
            TaskType.CLARIFY: CoarseType.CLARIFY,
            TaskType.CHAT: CoarseType.CHAT,
        }[self]

    @property
    def is_multi(self) -> bool:
        """True for the three multi-tool types."""
        return self.coarse is CoarseType.MULTI


class CoarseType(StrEnum):
    """The four coarse task kinds whose changes between adjacent tasks are "instruction transitions"."""

    SINGLE = "single"
    MULTI = "multi"
    CLARIFY = "clarify"
    CHAT = "chat"


class TurnSubtype(StrEnum):
    """Hidden-intent subtype of a task (the first task of a session is always ``First Turn``)."""

    FIRST = "First Turn"
    COREFERENTIAL = "Coreferential Reference"
    PARTIAL = "Partial Information"
    LONG_RANGE = "Long-Range Dependency"


class NodeKind(StrEnum):
    """What a gold node asks of the agent."""

    CALL = "call"
    ASK = "ask"
    ANSWER = "answer"


class Action(BaseModel):
    """A named action with JSON arguments (a tool call or a pseudo-action)."""

    model_config = ConfigDict(extra="forbid")

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class GoldNode(BaseModel):
    """One node of a gold DAG.

    ``observation`` is the recorded tool result for a call, the gold clarification question for an ask, and the
    gold final answer for ``prepare_to_answer``. ``user_input`` is the user's reply to an ask.
    """

    model_config = ConfigDict(extra="forbid")

    idx: int
    action: Action
    observation: Any = None
    dependency_list: list[int] = Field(default_factory=list)
    user_input: str | None = None
    extra: dict[str, Any] = Field(default_factory=dict)
    """Unmodelled fields of the source record, kept for lossless round trips."""

    @property
    def name(self) -> str:
        """The action name."""
        return self.action.name

    @property
    def kind(self) -> NodeKind:
        """Call, ask or answer."""
        if self.action.name == ASK_ACTION:
            return NodeKind.ASK
        if self.action.name == ANSWER_ACTION:
            return NodeKind.ANSWER
        return NodeKind.CALL


class Task(BaseModel):
    """A user utterance, its type and hidden-intent subtype, and the gold DAG that solves it."""

    model_config = ConfigDict(extra="forbid")

    utterance: str
    type: TaskType
    subtype: TurnSubtype = TurnSubtype.FIRST
    gold: list[GoldNode]
    expected_state: dict[str, Any] | None = None
    """For free-running evaluation on a stateful environment: the whole state the environment should end in (as
    suites written before issue #34, and hand-made tasks, give it; it wins over the two fields below)."""
    expected_state_digest: str | None = None
    """The same check as stored since issue #34: :func:`~toolwild.core.trajectory.state_digest` of the state the
    environment should end in (equal digests, equal states)."""
    expected_state_change: dict[str, Any] | None = None
    """How that state differs from the expected state after the last earlier task that has one (the session's start
    state for the first): a change of :mod:`toolwild.core.state_change`, kept to name what differs when the check
    fails. Only with ``expected_state_digest``."""

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Leave the digest and change out when unset, so that a task without them dumps (and a suite's fingerprint
        is) what it was before they existed: runs recorded against a suite still re-score against it."""
        out = handler(self)
        for key in ("expected_state_digest", "expected_state_change"):
            if out.get(key) is None:
                out.pop(key, None)
        return out

    @model_validator(mode="after")
    def _check_expected(self) -> Task:
        """A change is stored with the digest it leads to: alone it checks nothing."""
        if self.expected_state_change is not None and self.expected_state_digest is None:
            raise ValueError("expected_state_change is given without expected_state_digest")
        return self

    @property
    def checks_state(self) -> bool:
        """Whether the task says which state the environment should end in (a state check applies)."""
        return self.expected_state is not None or self.expected_state_digest is not None

    @property
    def expected_digest(self) -> str | None:
        """The digest the state check compares the environment's state with (None: no state check)."""
        if self.expected_state is not None:
            return state_digest(self.expected_state)
        return self.expected_state_digest

    @model_validator(mode="after")
    def _check_dag(self) -> Task:
        """Reject DAGs the scorer cannot interpret, with the offending node named."""
        n = len(self.gold)
        if n == 0:
            raise ValueError("gold DAG is empty")
        for pos, node in enumerate(self.gold):
            if node.idx != pos:
                raise ValueError(f"gold[{pos}].idx is {node.idx}, expected {pos} (nodes must be in idx order)")
            for dep in node.dependency_list:
                if not isinstance(dep, int) or dep < 0 or dep >= n:
                    raise ValueError(f"gold[{pos}].dependency_list names node {dep!r}, which does not exist")
                if dep == pos:
                    raise ValueError(f"gold[{pos}].dependency_list names the node itself")
        # Cycle check (Kahn): a cyclic DAG would make every execution order illegal.
        indeg = [len(set(node.dependency_list)) for node in self.gold]
        children: list[list[int]] = [[] for _ in range(n)]
        for node in self.gold:
            for dep in set(node.dependency_list):
                children[dep].append(node.idx)
        ready = [i for i in range(n) if indeg[i] == 0]
        seen = 0
        while ready:
            i = ready.pop()
            seen += 1
            for c in children[i]:
                indeg[c] -= 1
                if indeg[c] == 0:
                    ready.append(c)
        if seen != n:
            raise ValueError("gold DAG has a dependency cycle")
        return self

    @property
    def coarse_type(self) -> CoarseType:
        """single / multi / clarify / chat."""
        return self.type.coarse

    @property
    def call_nodes(self) -> list[GoldNode]:
        """The real tool calls of the gold DAG (pseudo-actions left out)."""
        return [n for n in self.gold if n.kind is NodeKind.CALL]


def shape_problem(task: Task) -> str | None:
    """Why a task's gold DAG does not have the shape its type promises, or None when it does.

    Single: one call. Parallel: two or more calls, none waiting for another. Sequential: a chain, each call after
    the first waiting for the one before. Mixed: three or more calls with some dependency and some branching (two
    roots, or one call feeding two). Clarify: asks and one call. Chat: only the answer.
    """
    calls = task.call_nodes
    asks = [n for n in task.gold if n.kind is NodeKind.ASK]
    dependent = [n for n in calls if any(task.gold[d].kind is NodeKind.CALL for d in n.dependency_list)]
    expected = {
        TaskType.SINGLE: len(calls) == 1 and not asks,
        TaskType.PARALLEL: len(calls) >= 2 and not dependent and not asks,
        TaskType.SEQUENTIAL: len(calls) >= 2 and len(dependent) == len(calls) - 1 and not asks,
        TaskType.MIXED: len(calls) >= 3 and 0 < len(dependent) and not asks,
        TaskType.CLARIFY: len(calls) == 1 and bool(asks),
        TaskType.CHAT: not calls and not asks and len(task.gold) == 1,
    }[task.type]
    if task.type is TaskType.SEQUENTIAL:
        expected = expected and all(calls[i].idx - 1 in calls[i].dependency_list for i in range(1, len(calls)))
    if task.type is TaskType.MIXED:
        roots = [n for n in calls if n not in dependent]
        expected = expected and (
            len(roots) >= 2 or any(sum(1 for m in dependent if r.idx in m.dependency_list) >= 2 for r in roots)
        )
    if expected:
        return None
    return f"a {task.type.value} task has the wrong gold shape: {[n.name for n in task.gold]}"


def ask_node(idx: int, tool_name: str, missing: list[str], question: str, reply: str, deps: list[int]) -> GoldNode:
    """A gold clarification: ask for ``missing`` parameters of ``tool_name`` with ``question``; the user answers
    ``reply`` (the published node layout)."""
    return GoldNode(
        idx=idx,
        action=Action(
            name=ASK_ACTION,
            arguments={"tool_list": [{"tool_name": tool_name, "missing_required_parameters": missing}]},
        ),
        observation=question,
        dependency_list=deps,
        user_input=reply,
    )


def answer_node(nodes: list[GoldNode], text: str) -> GoldNode:
    """The sink of a gold DAG built so far: the final answer ``text``, depending on every node nothing else depends
    on; its ``answer_type`` is ``tool`` when the task made a call, else ``chat``."""
    used = {d for node in nodes for d in node.dependency_list}
    answer_type = "tool" if any(n.kind is NodeKind.CALL for n in nodes) else "chat"
    return GoldNode(
        idx=len(nodes),
        action=Action(name=ANSWER_ACTION, arguments={"answer_type": answer_type}),
        observation=text,
        dependency_list=[n.idx for n in nodes if n.idx not in used],
    )
