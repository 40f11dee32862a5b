"""WildToolBench tool lists -> :class:`~toolwild.core.environment.Environment` files.

Two sources, two uses:

- a **session** of a suite: its tools plus the recorded observation of every gold call. As ``replay`` it answers
  exactly what the benchmark recorded (free-running evaluation without a model behind the tools); as ``llm`` the
  recordings become the seed state's ``known_answers``, so a simulated service stays consistent with them while
  also answering calls the benchmark never recorded.
- a **tool list** (``tools_en.jsonl``, one JSON array of OpenAI tools per line): tools only, ``llm`` backend.
"""

from __future__ import annotations

from pathlib import Path

from toolwild.core.environment import BackendKind, Environment, Recording
from toolwild.core.formats.openai_tools import from_openai_tool
from toolwild.core.jsonl import read_jsonl
from toolwild.core.session import Session
from toolwild.core.tool import Tool
from toolwild.errors import DataError

__all__ = ["environment_from_session", "environments_from_tool_lists", "unique_tools"]


def unique_tools(tools: list[Tool], *, field: str = "tools") -> list[Tool]:
    """The tools with exact repeats dropped (a published list can hold one tool twice: tools_en.jsonl line 193 lists
    four tools twice over); two different tools of one name are an error, since a call could not say which it means.

    Raises:
        DataError: two different definitions share a name (the second one's position named).
    """
    kept: dict[str, Tool] = {}
    for i, tool in enumerate(tools):
        first = kept.get(tool.name)
        if first is None:
            kept[tool.name] = tool
        elif first != tool:
            raise DataError(f"two different tools are called {tool.name!r}", field=f"{field}[{i}]")
    return list(kept.values())


def environment_from_session(session: Session, backend: BackendKind = BackendKind.REPLAY) -> Environment:
    """The service behind one session: its tools (exact repeats dropped) and what its gold calls returned.

    Raises:
        DataError: two different tools of the session share a name.
    """
    recordings = [
        Recording(name=node.name, arguments=dict(node.action.arguments), observation=node.observation)
        for task in session.tasks
        for node in task.call_nodes
    ]
    llm = backend is BackendKind.LLM
    return Environment(
        id=f"wtb-session-{session.id}",
        description=f"The services of WildToolBench session {session.id} ({session.env_info}).",
        tools=unique_tools(list(session.tools), field="english_tools"),
        backend=backend,
        recordings=[] if llm else recordings,
        initial_state={"known_answers": [r.model_dump() for r in recordings]} if llm else {},
        source={"format": "wildtoolbench", "session": session.id},
    )


def environments_from_tool_lists(path: str | Path) -> list[Environment]:
    """One ``llm`` environment per line of a WildToolBench tool-list file.

    Raises:
        DataError: a line is not JSON or not an array of tools (file, line and field named).
    """
    environments = []
    for number, value in read_jsonl(path):
        if isinstance(value, DataError):
            raise value
        if not isinstance(value, list):
            raise DataError("expected a JSON array of tools", file=path, line=number)
        try:
            tools = unique_tools([from_openai_tool(item, field=f"[{i}]") for i, item in enumerate(value)], field="")
        except DataError as exc:
            raise exc.located(file=path, line=number) from None
        environments.append(
            Environment(
                id=f"wtb-tools-{number - 1}",
                tools=tools,
                backend=BackendKind.LLM,
                source={"format": "wildtoolbench-tools", "line": number},
            )
        )
    return environments
