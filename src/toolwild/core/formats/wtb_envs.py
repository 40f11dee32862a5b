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
from toolwild.errors import DataError

__all__ = ["environment_from_session", "environments_from_tool_lists"]


def environment_from_session(session: Session, backend: BackendKind = BackendKind.REPLAY) -> Environment:
    """The service behind one session: its tools and what its gold calls returned."""
    recordings = [
        Recording(name=node.name, arguments=dict(node.action.arguments), observation=node.observation)
        for task in session.tasks
        for node in task.call_nodes
    ]
    llm = backend is BackendKind.LLM
    return Environment(
        id=f"wtb-session-{session.id}",
        description=f"The services of WildToolBench session {session.id} ({session.env_info}).",
        tools=list(session.tools),
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
        tools = []
        for i, item in enumerate(value):
            try:
                tools.append(from_openai_tool(item, field=f"[{i}]"))
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
