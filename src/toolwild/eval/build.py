"""From names and a :class:`RunConfig` to objects: the agent (and its model client) of a run."""

from __future__ import annotations

import logging
from pathlib import Path

from toolwild.core.session import Suite
from toolwild.errors import ConfigError, DataError
from toolwild.eval.agents.base import Agent
from toolwild.eval.agents.model import ModelAgent
from toolwild.eval.agents.oracle import OracleAgent
from toolwild.eval.agents.scripted import ScriptedAgent, behaviour_coverage, load_behaviours
from toolwild.eval.runner import RunConfig
from toolwild.eval.user import UserSimulator, make_user
from toolwild.llm.cache import CacheMode, ResponseCache
from toolwild.llm.client import LLM
from toolwild.llm.registry import create_backend

__all__ = ["AGENT_FORMS", "build_agent", "build_simulator", "build_user"]

AGENT_FORMS = ("model", "oracle", "scripted:FILE")

log = logging.getLogger(__name__)


def _scripted_agent(config: RunConfig, suite: Suite | None) -> ScriptedAgent:
    """A scripted agent whose behaviour file is checked against the suite.

    Why: a file written for another suite (or with mistyped ids) matched no session and scored 0% without a word.
    Matching no session is refused; matching only some is logged as a warning (scripting a few sessions of a
    suite is legitimate, the others then fail with empty replies).
    """
    path = config.agent.removeprefix("scripted:")
    behaviours = load_behaviours(path)
    if suite is None:
        from toolwild.core.formats.wtb import load_wtb_suite

        suite, _ = load_wtb_suite(config.suite, skip_invalid=True)
    coverage = behaviour_coverage(behaviours, suite)
    if suite.sessions and not coverage.scripted:
        named = ", ".join(repr(s) for s in list(behaviours)[:3]) or "none"
        raise DataError(
            f"the behaviour file scripts no session of the suite {config.suite} (it names {named}; the suite "
            f"has {suite.sessions[0].id!r} ...)",
            file=path,
        )
    for note in coverage.notes():
        log.warning("behaviour file %s: %s", path, note)
    return ScriptedAgent(behaviours)


def build_agent(config: RunConfig, run_dir: Path, *, suite: Suite | None = None) -> tuple[Agent, LLM | None]:
    """The agent named by ``config.agent``; a model agent gets an LLM client with the run's cache.

    ``suite``: the loaded suite, against which a scripted agent's behaviour file is checked (loaded from
    ``config.suite`` when not given).
    """
    if config.agent == "oracle":
        return OracleAgent(), None
    if config.agent.startswith("scripted:"):
        return _scripted_agent(config, suite), None
    if config.agent == "model":
        # enough connections for every session running at once (the local backend keeps its own limit of 1)
        backend = create_backend(
            config.model or "local",
            base_url=config.base_url,
            request_timeout=config.request_timeout_s,
            max_connections=max(16, config.concurrency),
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
    backend = create_backend(
        config.env_model,
        base_url=config.base_url,
        request_timeout=config.request_timeout_s,
        max_connections=max(16, config.concurrency),
    )
    return LLM(backend, cache=ResponseCache(run_dir / "cache.sqlite", mode=CacheMode(config.cache)))


def build_user(config: RunConfig, run_dir: Path, agent_llm: LLM | None) -> tuple[UserSimulator | None, LLM | None]:
    """The simulated user of a run (``config.user``) and its model client; (None, None) for ``recorded`` (the
    live loop of the published harness answers with the recorded replies itself).

    Its model's client is the agent's when it is the same model (one model in memory, one cache; the user's calls
    are accounted under their own role), else a new one on the run's cache.
    """
    if config.user == "recorded":
        return None, None

    def client(model: str) -> LLM:
        if agent_llm is not None and model == (config.model or "local"):
            return agent_llm
        backend = create_backend(
            model,
            base_url=config.base_url,
            request_timeout=config.request_timeout_s,
            max_connections=max(16, config.concurrency),
        )
        return LLM(backend, cache=ResponseCache(run_dir / "cache.sqlite", mode=CacheMode(config.cache)))

    return make_user(config.user, client, temperature=config.user_temperature, seed=config.seed)
