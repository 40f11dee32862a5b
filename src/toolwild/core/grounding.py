"""Whether every identifier a gold call passes is reachable by the agent.

A gold call that passes an account name, an order id or a file name the agent was never shown measures guessing,
not tool use: an agent that looks the name up first, or asks, cannot match it. So a gold identifier must be
*reachable*: written in the user's words (the task's utterance and the replies to its questions), the session's
context (the system message: :attr:`Session.env_info`), a tool schema's fixed values (``enum``, ``const``,
``default``; a description's example is not a value the agent can rely on), an observation of a call the node
depends on, or anything an earlier task put into the conversation (its words, gold calls, observations, answer).

What an *identifier* is, read from the value alone so that any suite can be checked (published ones included): a
string argument of one token (no white space) that holds a letter and is neither a date, a time nor a number.
Free text (a narration, a query, a message) has spaces and is the agent's to word; amounts and dates are derived
(from "last month", from a receipt) and are the hidden-intent checks' matter. An identifier is found as a whole
token, case-blind (:func:`toolwild.core.hidden_intent.mentions`); a hierarchical name (``Expenses:Food``) is also
reachable when a reachable name continues it (``Expenses:Food:Groceries`` shows its parent).

Generation (the ledger templates, the generic session builder) and ``toolwild validate`` share this one check.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from toolwild.core.hidden_intent import ancestors, mentions, shown_text
from toolwild.core.session import Session
from toolwild.core.task import NodeKind, Task
from toolwild.core.tool import Tool

__all__ = ["GroundingFinding", "is_identifier", "schema_values", "ungrounded_identifiers"]

_DATE_OR_TIME = re.compile(
    r"\d{4}-\d{2}(-\d{2})?([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?|\d{1,2}:\d{2}"
)
_NUMBER = re.compile(r"[-+]?[\d,]*\.?\d+%?")
_SEPARATORS = ":/."
"""What separates the parts of a hierarchical name (accounts, paths, dotted names)."""


@dataclass(frozen=True)
class GroundingFinding:
    """A gold call argument the agent cannot know: its value appears nowhere the agent can see before the call."""

    task_index: int
    node: int
    tool: str
    param: str
    value: str

    @property
    def message(self) -> str:
        return (
            f"ungrounded identifier: {self.tool}.{self.param} {self.value!r} (gold node {self.node}) appears in no "
            "user turn, context, tool schema value or earlier observation"
        )


def is_identifier(value: Any) -> bool:
    """Whether an argument value is an identifier the agent must be shown (see the module docstring)."""
    if not isinstance(value, str):
        return False
    text = value.strip()
    if not text or any(ch.isspace() for ch in text) or not any(ch.isalpha() for ch in text):
        return False
    return not (_DATE_OR_TIME.fullmatch(text) or _NUMBER.fullmatch(text))


def schema_values(tools: list[Tool]) -> list[Any]:
    """The fixed values the tool schemas offer an agent: every ``enum`` member, ``const`` and ``default``."""
    out: list[Any] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "enum" and isinstance(value, list):
                    out.extend(value)
                elif key in ("const", "default"):
                    out.append(value)
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    for tool in tools:
        walk(tool.parameters)
    return out


def _arguments(value: Any, path: str) -> list[tuple[str, Any]]:
    """``(parameter path, scalar)`` pairs of a call's arguments (list items as ``name[i]``)."""
    if isinstance(value, dict):
        return [pair for k, v in value.items() for pair in _arguments(v, f"{path}.{k}" if path else str(k))]
    if isinstance(value, list):
        return [pair for i, v in enumerate(value) for pair in _arguments(v, f"{path}[{i}]")]
    return [(path, value)]


def _reachable(text: str, value: str) -> bool:
    if mentions(text, value):
        return True
    # a parent of a shown hierarchical name: "Expenses:Food" in "Expenses:Food:Groceries"
    low = text.lower()
    return re.search(rf"(?<![\w.\-/:]){re.escape(value.lower())}[{re.escape(_SEPARATORS)}]\w", low) is not None


def _node_view(task: Task, idx: int) -> str:
    """What the agent has seen of a task by the time it makes gold call ``idx``: the user's words (utterance, the
    replies to the questions this call waits for) and the observations of the calls it depends on."""
    parts = [task.utterance]
    for a in sorted(ancestors(task, idx)):
        node = task.gold[a]
        if node.kind is NodeKind.ASK and node.user_input:
            parts.append(node.user_input)
        elif node.kind is NodeKind.CALL:
            parts.append(json.dumps(node.action.arguments, ensure_ascii=False))
            obs = node.observation
            parts.append(obs if isinstance(obs, str) else json.dumps(obs, ensure_ascii=False))
    return "\n".join(parts)


def ungrounded_identifiers(session: Session, *, only: int | None = None) -> list[GroundingFinding]:
    """Every gold call argument that is an identifier no earlier part of the conversation shows (empty when the
    session's gold is grounded); ``only``: the findings of that task alone."""
    fixed = [v for v in schema_values(session.tools) if isinstance(v, str)]
    before = [session.env_info, "\n".join(fixed)]
    findings: list[GroundingFinding] = []
    for i, task in enumerate(session.tasks):
        for node in task.call_nodes if only is None or i == only else ():
            seen = "\n".join([*before, _node_view(task, node.idx)])
            for param, value in _arguments(node.action.arguments, ""):
                if is_identifier(value) and not _reachable(seen, value.strip()):
                    findings.append(GroundingFinding(i, node.idx, node.name, param, value))
        before.append(shown_text(task))
    return findings
