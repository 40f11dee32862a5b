"""The inventory environment."""

from __future__ import annotations

from toolwild.envs.domains.inventory.tools import InventoryEpisode
from toolwild.envs.python import PythonEnvironment

__all__ = ["inventory_environment"]


def inventory_environment() -> PythonEnvironment:
    """A fresh shop per episode, seeded."""
    return PythonEnvironment("inventory", InventoryEpisode)
