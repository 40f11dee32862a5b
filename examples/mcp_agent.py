"""A worked example: evaluate an agent that talks MCP with toolwild.

The agent here is deliberately ordinary: an OpenAI-compatible chat model whose tools come from an MCP server, called
through the official ``mcp`` client. It never imports toolwild's agent or environment code; it only needs

1. the tools, served by ``toolwild serve mcp`` (one stdio server, hence one fresh episode, per session of the suite),
2. the suite's user turns (and, for a task where the user must be asked, the user's recorded reply),

and it writes down what it did: every tool call and every text reply, per task, as a behaviour file
(``{session_id: [[step, ...] per task]}``, the format of ``toolwild eval --agent scripted:FILE``).

Scoring is then toolwild's own, on what happened: ``toolwild eval --suite SUITE --agent scripted:behaviour.json
--history free`` replays exactly those calls on the same environment (the episodes start where the served ones
did, and the environments are deterministic, so every observation is the one the agent saw over MCP: the server's
``--record`` files let you check it) and judges every task with the WildToolBench labels and the expected states.

    toolwild suite ledger --sessions 8 --out suite.jsonl              # or --ledger your.beancount
    python examples/mcp_agent.py suite.jsonl --base-url http://127.0.0.1:8080/v1 --model my-model \
        --out behaviour.json --record calls/
    toolwild eval --suite suite.jsonl --agent scripted:behaviour.json --history free

Run it with the ``mcp`` extra installed (``pip install 'toolwild[mcp]'``) and a model server reachable at
``--base-url`` (llama.cpp's server, vLLM, Ollama, or OpenAI itself with OPENAI_API_KEY set).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters
from openai import AsyncOpenAI

from toolwild.core.formats.wtb import load_wtb_suite
from toolwild.core.session import Session
from toolwild.core.task import NodeKind, Task
from toolwild.eval.session import environment_seed

MAX_STEPS = 16
"""Model turns a task may take before the agent gives up on it."""


def server_for(session: Session, suite_dir: Path, record: Path | None) -> StdioServerParameters:
    """``toolwild serve mcp`` on the environment the session was recorded on, starting where its gold started
    (``record``: a folder; the server appends every call it serves to ``<session id>.jsonl`` there)."""
    ledger_file = session.extra.get("ledger_file")
    if session.environment == "ledger" and isinstance(ledger_file, str):
        target = ["ledger", "--ledger", str(suite_dir / ledger_file)]  # a suite made on someone's own books
    else:
        env = session.environment or ""
        target = [
            env if not env.endswith(".env.json") else str(suite_dir / env),
            "--seed",
            str(environment_seed(session)),
        ]
    extra = ["--record", str(record / f"{session.id}.jsonl")] if record is not None else []
    return StdioServerParameters(
        command=sys.executable, args=["-m", "toolwild.cli.main", "serve", "mcp", *target, *extra]
    )


def openai_tools(listed: Any) -> list[dict[str, Any]]:
    """MCP tool listings as OpenAI function tools."""
    return [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description or "", "parameters": t.input_schema},
        }
        for t in listed.tools
    ]


def user_replies(task: Task) -> list[str]:
    """What the user says when asked for what they left out: the suite's recorded replies, in order (the recorded
    user of toolwild's free mode; a task that needs none gets none)."""
    return [node.user_input or "" for node in task.gold if node.kind is NodeKind.ASK]


async def run_session(session: Session, model: AsyncOpenAI, model_name: str, server: StdioServerParameters) -> list:
    """One session: one MCP session (one episode), every task in turn, the agent's own history carried along."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": session.system_prompt}]
    behaviour: list[list[dict[str, Any]]] = []
    async with Client(server) as mcp:
        tools = openai_tools(await mcp.list_tools())
        for task in session.tasks:
            steps: list[dict[str, Any]] = []
            replies = user_replies(task)
            messages.append({"role": "user", "content": task.utterance})
            for _ in range(MAX_STEPS):
                response = await model.chat.completions.create(model=model_name, messages=messages, tools=tools)
                reply = response.choices[0].message
                if reply.tool_calls:
                    calls = [(c.id, c.function.name, c.function.arguments) for c in reply.tool_calls]
                    steps.append({"tool_calls": [{"name": name, "arguments": args} for _, name, args in calls]})
                    messages.append(
                        {
                            "role": "assistant",
                            "content": reply.content or "",
                            "tool_calls": [
                                {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}
                                for cid, name, args in calls
                            ],
                        }
                    )
                    for call_id, name, args in calls:
                        try:
                            arguments = json.loads(args or "{}")
                        except json.JSONDecodeError:
                            arguments = {}
                        result = await mcp.call_tool(name, arguments if isinstance(arguments, dict) else {})
                        text = "".join(getattr(block, "text", "") for block in result.content)
                        messages.append({"role": "tool", "tool_call_id": call_id, "content": text})
                    continue
                steps.append({"content": reply.content or ""})
                messages.append({"role": "assistant", "content": reply.content or ""})
                if not replies:
                    break  # the agent answered: the task is over
                messages.append({"role": "user", "content": replies.pop(0)})  # it asked: the user answers
            behaviour.append(steps)
    return behaviour


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("suite", type=Path, help="The suite (WildToolBench JSONL).")
    parser.add_argument("--base-url", required=True, help="The model's OpenAI-compatible endpoint.")
    parser.add_argument("--model", required=True, help="The model's name at that endpoint.")
    parser.add_argument("--out", "-o", type=Path, required=True, help="Where to write the behaviour file.")
    parser.add_argument("--record", type=Path, help="A folder: each session's server records the calls it serves.")
    args = parser.parse_args(argv)

    suite, _ = load_wtb_suite(args.suite)
    if args.record is not None:
        args.record.mkdir(parents=True, exist_ok=True)
    model = AsyncOpenAI(base_url=args.base_url, api_key=_api_key())
    behaviours: dict[str, list] = {}
    for session in suite.sessions:
        server = server_for(session, args.suite.parent, args.record)
        behaviours[session.id] = await run_session(session, model, args.model, server)
        print(f"{session.id}: {sum(len(t) for t in behaviours[session.id])} steps", file=sys.stderr)
    args.out.write_text(json.dumps(behaviours, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    await model.close()
    return 0


def _api_key() -> str:
    import os

    return os.environ.get("OPENAI_API_KEY", "not-needed-for-a-local-server")


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
