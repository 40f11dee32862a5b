"""A fake model that plays the gold path of a suite over HTTP, for runner tests and benchmarks.

It finds the session from the first user message, the task from the last task utterance in the conversation and
the step from the assistant turns since then, and answers with the oracle's step as an OpenAI completion. Paired
with :class:`FakeOpenAI` it exercises the whole stack (runner, agent, client, real ``openai`` SDK) with known
right answers.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from fake_openai import FakeToolCall, Reply

from toolwild.core.session import Suite
from toolwild.eval.agents.oracle import oracle_steps


def gold_responder(suite: Suite) -> Callable[[dict[str, Any]], Reply]:
    """A FakeOpenAI script callable answering every request with the gold step."""
    by_first = {s.tasks[0].utterance: s for s in suite.sessions}
    steps = {(s.id, i): oracle_steps(t) for s in suite.sessions for i, t in enumerate(s.tasks)}

    def respond(body: dict[str, Any]) -> Reply:
        messages = body["messages"]
        users = [m for m in messages if m["role"] == "user"]
        session = by_first.get(users[0]["content"]) if users else None
        if session is None:  # not a session of the suite: a preflight check, say
            return Reply(text="ok")
        utterances = [t.utterance for t in session.tasks]
        last = max(i for i, m in enumerate(messages) if m["role"] == "user" and m["content"] in utterances)
        task_index = max(i for i, u in enumerate(utterances) if u == messages[last]["content"])
        step_index = sum(1 for m in messages[last + 1 :] if m["role"] == "assistant")
        gold = steps[(session.id, task_index)]
        if step_index >= len(gold):
            return Reply(text="(nothing more)")
        step = gold[step_index]
        if step.tool_calls:
            calls = tuple(
                FakeToolCall(name=c.name, arguments=c.arguments, id=f"g{k}") for k, c in enumerate(step.tool_calls)
            )
            return Reply(text=None, tool_calls=calls)
        return Reply(text=step.content)

    return respond


def body_key(body: dict[str, Any]) -> str:
    """A stable fingerprint of a request (to fail chosen requests deterministically)."""
    return json.dumps(body.get("messages"), sort_keys=True)
