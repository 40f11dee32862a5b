"""Gold trajectories -> training conversations: OpenAI chat JSONL, ShareGPT JSON(L), Parquet.

A session becomes one conversation: the system line, then every task's utterance and its gold trajectory along the
first optimal path (the same messages the ``wtb`` history mode shows a model, so training data and evaluation agree
on what a good trajectory is): tool calls with their recorded observations, clarification questions with the user's
replies, final answers. Tools travel with each conversation in the OpenAI function format.

Role order is checked, not assumed: :func:`check_alternation` rejects a conversation that breaks the format's rules
(a tool message without the call it answers, two user turns in a row ...), so a malformed suite cannot silently
become malformed training data.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from enum import StrEnum
from pathlib import Path
from typing import Any

from toolwild.core.files import write_text_atomic
from toolwild.core.formats.openai_tools import to_openai_tool
from toolwild.core.session import Session, Suite
from toolwild.errors import DataError, MissingDependencyError
from toolwild.eval.session import gold_history

__all__ = [
    "ExportFormat",
    "check_alternation",
    "openai_chat_record",
    "sharegpt_record",
    "write_training_export",
]


class ExportFormat(StrEnum):
    """Training formats."""

    OPENAI_CHAT = "openai-chat"
    SHAREGPT = "sharegpt"
    PARQUET = "parquet"


def _messages(session: Session) -> list[dict[str, Any]]:
    return gold_history(session, len(session.tasks))


def check_alternation(messages: list[dict[str, Any]], *, where: str = "") -> None:
    """OpenAI chat order: system first; user and assistant alternate; tool messages answer the calls just made.

    Raises:
        DataError: the first message that breaks the order (index and role named).
    """
    pending: set[str] = set()
    previous = "system"
    for i, message in enumerate(messages):
        role = message.get("role")
        problem = None
        if i == 0 and role != "system":
            problem = "the first message must be the system message"
        elif i > 0 and role == "system":
            problem = "a system message after the start"
        elif role == "tool":
            if message.get("tool_call_id") not in pending:
                problem = "a tool message that answers no pending call"
            pending.discard(message.get("tool_call_id"))
        elif pending:
            problem = f"{len(pending)} tool call(s) left unanswered before a {role} message"
        elif role == "user" and previous in ("user", "tool"):
            problem = "a user message right after a " + ("user message" if previous == "user" else "tool result")
        elif role == "assistant" and previous == "assistant":
            problem = "two assistant messages in a row"
        if role == "assistant":
            pending = {c["id"] for c in message.get("tool_calls") or []}
        if problem:
            raise DataError(f"message {i} ({role}): {problem}", field=where or None)
        previous = str(role)
    if pending or previous != "assistant":
        raise DataError("the conversation must end with an assistant answer", field=where or None)


def openai_chat_record(session: Session) -> dict[str, Any]:
    """``{"id", "messages", "tools"}``: the format OpenAI fine-tuning and most trainers read."""
    messages = _messages(session)
    check_alternation(messages, where=session.id)
    return {"id": session.id, "messages": messages, "tools": [to_openai_tool(t) for t in session.tools]}


def sharegpt_record(session: Session) -> dict[str, Any]:
    """ShareGPT with tools (the LLaMA-Factory layout): ``human``/``observation`` on even turns, ``gpt``/
    ``function_call`` on odd ones; parallel calls are one ``function_call`` turn holding a JSON list, answered by one
    ``observation`` turn holding the list of results."""
    messages = _messages(session)
    check_alternation(messages, where=session.id)
    turns: list[dict[str, str]] = []
    i = 1
    while i < len(messages):
        message = messages[i]
        role = message["role"]
        if role == "user":
            turns.append({"from": "human", "value": message["content"]})
        elif role == "assistant" and message.get("tool_calls"):
            calls = [
                {"name": c["function"]["name"], "arguments": json.loads(c["function"]["arguments"])}
                for c in message["tool_calls"]
            ]
            results = []
            while i + 1 < len(messages) and messages[i + 1]["role"] == "tool":
                i += 1
                results.append(messages[i]["content"])
            turns.append({"from": "function_call", "value": json.dumps(calls[0] if len(calls) == 1 else calls)})
            turns.append({"from": "observation", "value": results[0] if len(results) == 1 else json.dumps(results)})
        else:
            turns.append({"from": "gpt", "value": message["content"]})
        i += 1
    for k, turn in enumerate(turns):
        allowed = ("human", "observation") if k % 2 == 0 else ("gpt", "function_call")
        if turn["from"] not in allowed:
            raise DataError(f"turn {k} is {turn['from']!r} where {' or '.join(allowed)} belongs", field=session.id)
    return {
        "id": session.id,
        "system": messages[0]["content"],
        "tools": json.dumps([to_openai_tool(t)["function"] for t in session.tools], ensure_ascii=False),
        "conversations": turns,
    }


def _write_lines(records: Iterable[dict[str, Any]], path: Path) -> int:
    lines = [json.dumps(record, ensure_ascii=False) + "\n" for record in records]  # a bad session raises first
    write_text_atomic(path, "".join(lines))
    return len(lines)


def _write_parquet(suite: Suite, path: Path) -> int:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise MissingDependencyError("parquet export needs pyarrow: pip install 'toolwild[parquet]'") from None
    records = [openai_chat_record(s) for s in suite.sessions]
    table = pa.table(
        {
            "id": [r["id"] for r in records],
            "messages": [json.dumps(r["messages"], ensure_ascii=False) for r in records],
            "tools": [json.dumps(r["tools"], ensure_ascii=False) for r in records],
        }
    )
    tmp = path.with_name(path.name + ".tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, path)
    return len(records)


def write_training_export(suite: Suite, path: str | Path, fmt: ExportFormat) -> int:
    """Write every session of ``suite`` as one training conversation; returns how many (atomic write).

    ``openai-chat`` and ``sharegpt`` write JSONL (one conversation per line); ``parquet`` writes columns ``id``,
    ``messages`` and ``tools`` (JSON text), the OpenAI chat layout.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if fmt is ExportFormat.PARQUET:
        return _write_parquet(suite, path)
    make = openai_chat_record if fmt is ExportFormat.OPENAI_CHAT else sharegpt_record
    return _write_lines((make(s) for s in suite.sessions), path)
