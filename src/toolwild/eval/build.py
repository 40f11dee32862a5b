"""From names and a :class:`RunConfig` to objects: the agent (and its model client) of a run."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from toolwild.core.session import Suite
from toolwild.errors import ConfigError, DataError
from toolwild.eval.agents.base import Agent
from toolwild.eval.agents.model import ModelAgent
from toolwild.eval.agents.oracle import OracleAgent
from toolwild.eval.agents.scripted import ScriptedAgent, behaviour_coverage, load_behaviours
from toolwild.eval.run_config import RunConfig
from toolwild.eval.user import UserSimulator, make_user
from toolwild.llm.cache import CacheMode, ResponseCache
from toolwild.llm.client import LLM
from toolwild.llm.registry import create_backend

__all__ = ["AGENT_FORMS", "RunClients", "build_agent", "build_run_clients", "build_simulator", "build_user"]

AGENT_FORMS = ("model", "oracle", "scripted:FILE")

log = logging.getLogger(__name__)


def _run_cache(config: RunConfig, run_dir: Path | None) -> ResponseCache | None:
    """The run's response cache (``run_dir/cache.sqlite``, created on the spot); None without a run folder yet (a
    client built to check the options before anything is written: :meth:`RunClients.open_cache` adds it)."""
    return None if run_dir is None else ResponseCache(run_dir / "cache.sqlite", mode=CacheMode(config.cache))


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


def build_agent(config: RunConfig, run_dir: Path | None, *, suite: Suite | None = None) -> tuple[Agent, LLM | None]:
    """The agent named by ``config.agent``; a model agent gets an LLM client with the run's cache (none when
    ``run_dir`` is None: nothing is written).

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
        llm = LLM(backend, cache=_run_cache(config, run_dir), prompt_mode=config.prompt_mode, max_connections=None)
        agent = ModelAgent(llm, temperature=config.temperature, seed=config.seed, max_tokens=config.max_tokens)
        return agent, llm
    raise ConfigError(f"unknown agent {config.agent!r}; use one of: {', '.join(AGENT_FORMS)}")


def build_simulator(config: RunConfig, run_dir: Path | None, agent_llm: LLM | None) -> LLM | None:
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
    return LLM(backend, cache=_run_cache(config, run_dir))


def build_user(
    config: RunConfig, run_dir: Path | None, agent_llm: LLM | None
) -> tuple[UserSimulator | None, LLM | None]:
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
        return LLM(backend, cache=_run_cache(config, run_dir))

    return make_user(config.user, client, temperature=config.user_temperature, seed=config.seed)


@dataclass
class RunClients:
    """The agent of a run and the model clients it calls (the agent's, the environment simulator's, the simulated
    user's; one object where they share a model)."""

    agent: Agent
    llm: LLM | None
    simulator: LLM | None
    user: UserSimulator | None
    user_llm: LLM | None

    @property
    def models(self) -> list[LLM]:
        """The distinct model clients."""
        return list({id(c): c for c in (self.llm, self.simulator, self.user_llm) if c is not None}.values())

    def open_cache(self, run_dir: Path, mode: CacheMode) -> None:
        """Give every client without one the run's response cache (``run_dir/cache.sqlite``): the first write into
        the run folder, made once the options have passed."""
        for client in self.models:
            if client.cache is None:
                client.cache = ResponseCache(run_dir / "cache.sqlite", mode=mode)

    async def aclose(self) -> None:
        """Close every client (and its cache)."""
        for client in self.models:
            await client.aclose()


def build_run_clients(config: RunConfig, suite: Suite) -> RunClients:
    """The agent and model clients of a run, built without writing anything (no cache yet).

    Why: building them is where a bad ``--agent``, a missing or foreign behaviour file, an unknown ``--model``,
    ``--env-model`` or ``--user`` is refused; done before the run folder is made, a refused command leaves nothing
    behind. :meth:`RunClients.open_cache` then gives them the run's cache.
    """
    agent, llm = build_agent(config, None, suite=suite)
    simulator = build_simulator(config, None, llm)
    user, user_llm = build_user(config, None, llm)
    return RunClients(agent, llm, simulator, user, user_llm)
