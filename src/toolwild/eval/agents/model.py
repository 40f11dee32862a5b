"""The model agent: any :class:`~toolwild.llm.client.LLM` (native tool calling or prompt mode) as an agent."""

from __future__ import annotations

import asyncio
import time

from toolwild.core.trajectory import Step, ToolCall
from toolwild.errors import TransientBackendError
from toolwild.eval.agents.base import AgentContext
from toolwild.eval.clock import charge_provider
from toolwild.llm.client import LLM
from toolwild.llm.types import ChatRequest

__all__ = ["ModelAgent"]


class ModelAgent:
    """Sends the conversation and tools to a model and turns its reply into a :class:`Step`.

    Provider failures (after the client's retries) propagate as ``TransientBackendError``: the runner records the
    session as a provider error, never as a wrong answer. Unusable model output (``ModelOutputError``) propagates
    too, and fails the task. Time lost to the provider (failed attempts, back-off, a call cut off by the session's
    limit) is charged to the session's provider clock; the successful call's own latency is the model's.
    """

    def __init__(self, llm: LLM, *, temperature: float = 0.0, seed: int = 0, max_tokens: int | None = 1024) -> None:
        self.llm = llm
        self.temperature = temperature
        self.seed = seed
        self.max_tokens = max_tokens
        self.name = f"{llm.backend.kind}:{llm.backend.model}"

    async def next_step(self, context: AgentContext) -> Step:
        """One model call."""
        # built by the runner from validated data: skip re-validating a long conversation on every step
        request = ChatRequest.model_construct(
            messages=context.messages,
            tools=context.tools or None,
            tool_choice="auto",
            temperature=self.temperature,
            seed=self.seed,
            max_tokens=self.max_tokens,
        )
        started = time.monotonic()
        try:
            completion = await self.llm.complete(request, role="agent")
        except (TransientBackendError, asyncio.CancelledError):  # the provider failed, or hung until the limit
            charge_provider(time.monotonic() - started)
            raise
        charge_provider(time.monotonic() - started - completion.latency_s)
        calls = [ToolCall(id=c.id, name=c.name, arguments=c.raw) for c in completion.tool_calls]
        nameless = any(not c.name for c in completion.tool_calls)
        return Step(
            parse_error="tool call without a function name" if nameless else None,
            content=completion.text,
            tool_calls=calls or None,
            reasoning=completion.reasoning,
            latency_s=completion.latency_s,
            input_tokens=completion.usage.prompt_tokens,
            output_tokens=completion.usage.completion_tokens,
            context_dropped=completion.dropped_messages or None,
        )
