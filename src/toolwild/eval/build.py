"""From names and a :class:`RunConfig` to objects: the agent (and its model client) of a run."""

from __future__ import annotations

from pathlib import Path

from toolwild.errors import ConfigError
from toolwild.eval.agents.base import Agent
from toolwild.eval.agents.model import ModelAgent
from toolwild.eval.agents.oracle import OracleAgent
from toolwild.eval.agents.scripted import ScriptedAgent, load_behaviours
from toolwild.eval.runner import RunConfig
from toolwild.llm.cache import CacheMode, ResponseCache
from toolwild.llm.client import LLM
from toolwild.llm.registry import create_backend

__all__ = ["AGENT_FORMS", "build_agent", "build_simulator"]

AGENT_FORMS = ("model", "oracle", "scripted:FILE")


def build_agent(config: RunConfig, run_dir: Path) -> tuple[Agent, LLM | None]:
    """The agent named by ``config.agent``; a model agent gets an LLM client with the run's cache."""
    if config.agent == "oracle":
        return OracleAgent(), None
    if config.agent.startswith("scripted:"):
        return ScriptedAgent(load_behaviours(config.agent.removeprefix("scripted:"))), None
    if config.agent == "model":
        # enough connections for every session running at once (the local backend keeps its own limit of 1)
        backend = create_backend(
            config.model or "local", base_url=config.base_url, max_connections=max(16, config.concurrency)
        )
        cache = ResponseCache(run_dir / "cache.sqlite", mode=CacheMode(config.cache))
        llm = LLM(backend, cache=cache, prompt_mode=config.prompt_mode, max_connections=None)
        agent = ModelAgent(llm, temperature=config.temperature, seed=config.seed, max_tokens=config.max_tokens)
        return agent, llm
    raise ConfigError(f"unknown agent {config.agent!r}; use one of: {', '.join(AGENT_FORMS)}")


def build_simulator(config: RunConfig, run_dir: Path, agent_llm: LLM | None) -> LLM | None:
    """The model that answers model-simulated environments (``config.env_model``), or None when none is set.

    When it is the agent's own model the agent's client is shared: one local model in memory, one cache, usage
    still apart (simulator calls are accounted under their own role).
    """
    if config.env_model is None:
        return None
    if agent_llm is not None and config.env_model == (config.model or "local"):
        return agent_llm
    backend = create_backend(config.env_model, base_url=config.base_url, max_connections=max(16, config.concurrency))
    return LLM(backend, cache=ResponseCache(run_dir / "cache.sqlite", mode=CacheMode(config.cache)))
