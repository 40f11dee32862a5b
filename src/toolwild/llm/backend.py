"""The `Backend` interface: one async method, plus hooks with safe defaults.

A backend only turns a :class:`ChatRequest` into a :class:`Completion` (or raises a typed
:class:`~toolwild.errors.BackendError`). Caching, retries, concurrency limits, prompt mode and usage accounting
belong to :class:`toolwild.llm.client.LLM`, so that every provider file stays small.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from toolwild.llm.types import ChatRequest, Completion

__all__ = ["DEFAULT_REQUEST_TIMEOUT_S", "Backend"]

DEFAULT_REQUEST_TIMEOUT_S = 600.0
"""Deadline of one remote call, end to end. It is the ``openai`` SDK's own default, and it has to be that long
because the clock runs while the request waits in the server's queue: a local server (``toolwild model serve``,
llama.cpp, Ollama) answers one or a few requests at a time while ``toolwild eval`` sends 8, so a request can
legitimately wait for several generations before its own starts. An unreachable endpoint is caught at once by the
preflight (:mod:`toolwild.llm.preflight`) and the connect timeout (10 s), not by this deadline."""


class Backend(ABC):
    """A chat-completion provider."""

    kind: str = "backend"
    """Registry id of the backend kind (``openai``, ``local``, ``scripted``)."""

    def __init__(self, *, model: str, base_url: str | None = None) -> None:
        self.model = model
        self.base_url = base_url

    @abstractmethod
    async def complete(self, request: ChatRequest) -> Completion:
        """Run one completion.

        Raises:
            TransientBackendError: provider trouble worth retrying (timeouts, 408/409/429/5xx, connection errors,
                malformed responses).
            PermanentBackendError: a request the provider refuses for good.
        """

    @property
    def native_tools(self) -> bool:
        """Whether the model takes ``tools`` natively; if not, the client uses prompt mode."""
        return True

    @property
    def supports_response_format(self) -> bool:
        """Whether ``response_format`` (JSON Schema) is honoured; if not, the schema goes into the prompt."""
        return True

    def max_connections(self) -> int:
        """How many calls may run at once against this backend."""
        return 16

    @property
    def abandonable(self) -> bool:
        """Whether a timed-out attempt stops costing anything. A remote call does; an in-process model keeps
        computing in its thread, so timing it out only queues the retry behind the abandoned work (the client then
        runs such a backend without a per-attempt timeout)."""
        return True

    @property
    def request_timeout(self) -> float | None:
        """The backend's own deadline for one call (None: it has none), so the client's backstop can be longer."""
        return None

    async def probe(self, timeout_s: float) -> None:  # noqa: B027 - optional hook
        """One cheap request proving the endpoint answers for this model, before a run starts.

        The default does nothing: an in-process backend cannot be unreachable. Remote backends raise
        :class:`~toolwild.errors.ConfigError` when the endpoint cannot be reached, the model is unknown or the key is
        refused (see :func:`toolwild.llm.preflight.preflight`).
        """

    @property
    def price_key(self) -> str:
        """The name its price is looked up under (:data:`~toolwild.llm.usage.DEFAULT_PRICES`): the model's."""
        return self.model

    def identity(self) -> dict[str, str | None]:
        """What identifies the model for caching (kind, model, endpoint); never a secret."""
        return {"kind": self.kind, "model": self.model, "base_url": self.base_url}

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Release connections or memory."""
