"""Environments by id, imported lazily so one domain's dependencies never burden another."""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module

from toolwild.envs.base import EnvironmentBackend
from toolwild.errors import ConfigError

__all__ = ["ENVIRONMENTS", "get_environment"]

ENVIRONMENTS: dict[str, str] = {
    "ledger": "toolwild.envs.domains.ledger.environment:ledger_environment",
    "inventory": "toolwild.envs.domains.inventory.environment:inventory_environment",
}
"""Environment id -> ``module:factory`` (a factory takes no arguments and returns an EnvironmentBackend)."""

_cache: dict[str, EnvironmentBackend] = {}


def get_environment(env_id: str) -> EnvironmentBackend:
    """The environment with this id (built once per process; episodes are isolated, the backend is shared)."""
    if env_id not in _cache:
        target = ENVIRONMENTS.get(env_id)
        if target is None:
            raise ConfigError(f"unknown environment {env_id!r}; known: {', '.join(sorted(ENVIRONMENTS))}")
        module, _, name = target.partition(":")
        factory: Callable[[], EnvironmentBackend] = getattr(import_module(module), name)
        _cache[env_id] = factory()
    return _cache[env_id]
