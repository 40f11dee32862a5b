"""Backends by name: ``local`` (the embedded model), ``openai:MODEL`` (any OpenAI-compatible endpoint).

Each factory imports its SDK lazily, so a missing optional package fails with an install hint when (and only when)
that backend is asked for.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from toolwild.errors import ConfigError
from toolwild.llm.backend import DEFAULT_REQUEST_TIMEOUT_S, Backend

if TYPE_CHECKING:
    from toolwild.llm.client import LLM

__all__ = ["create_backend", "create_llm", "describe_backends"]


def describe_backends() -> list[str]:
    """The accepted ``--model`` forms, for help texts."""
    return [
        "local",
        "local:PATH.gguf (or a `toolwild train` folder)",
        "openai:MODEL (with --base-url for vLLM, Ollama, llama.cpp server ...)",
    ]


def create_backend(
    spec: str,
    *,
    base_url: str | None = None,
    api_key_env: str = "OPENAI_API_KEY",
    request_timeout: float | None = None,
    max_connections: int = 16,
) -> Backend:
    """Build a backend from a ``--model`` value.

    Args:
        spec: ``local``, ``local:PATH.gguf`` or ``openai:NAME``.
        base_url: the ``/v1`` endpoint of an OpenAI-compatible server (``openai:`` only).
        api_key_env: the environment variable holding the key (``openai:`` only).
        request_timeout: seconds one remote call may take end to end, queueing on the server included (None:
            :data:`~toolwild.llm.backend.DEFAULT_REQUEST_TIMEOUT_S`). The in-process model has no such deadline.
        max_connections: calls in flight at once against a remote endpoint.

    Raises:
        ConfigError: an unknown form or a non-positive timeout.
        MissingDependencyError: the backend's package is not installed.
    """
    timeout = DEFAULT_REQUEST_TIMEOUT_S if request_timeout is None else float(request_timeout)
    if not timeout > 0:
        raise ConfigError(f"the request timeout must be a positive number of seconds, got {request_timeout}")
    kind, _, rest = spec.partition(":")
    if kind == "local":
        from toolwild.llm.backends.local import LocalBackend

        if not rest:
            return LocalBackend()
        path = Path(rest)
        if path.is_dir() and (path / "model.gguf").is_file():
            path = path / "model.gguf"  # a `toolwild train` run folder: its tuned model
        # named as the user named it, so a tuned model's results never read as the embedded model's
        return LocalBackend(model_path=path, model=rest)
    if kind == "openai":
        if not rest:
            raise ConfigError("--model openai:NAME needs a model name, e.g. openai:gpt-4o-mini")
        from toolwild.llm.backends.openai_compat import OpenAIBackend

        return OpenAIBackend(
            model=rest,
            base_url=base_url,
            api_key_env=api_key_env,
            timeout_s=timeout,
            max_connections=max_connections,
        )
    raise ConfigError(f"unknown model {spec!r}; use one of: {', '.join(describe_backends())}")


def create_llm(
    spec: str, *, base_url: str | None = None, cache: str | Path | None = None, max_connections: int | None = None
) -> LLM:
    """A client for a ``--model`` value: its backend (see :func:`create_backend`), with a response cache when a file
    is given. ``max_connections``: calls in flight at once against a remote endpoint (default: 16).

    Why here and not in the CLI: a worker process (another executor) builds its own clients from the same values.
    """
    from toolwild.llm.cache import ResponseCache
    from toolwild.llm.client import LLM

    extra = {"max_connections": max_connections} if max_connections is not None else {}
    backend = create_backend(spec, base_url=base_url, **extra)
    return LLM(backend, cache=ResponseCache(cache) if cache else None)
