"""The inventory domain: the smallest complete python domain (a test fixture and a template)."""

from toolwild._exports import lazy_exports

_EXPORTS = {
    "InventoryEpisode": "toolwild.envs.domains.inventory.tools",
    "InventoryState": "toolwild.envs.domains.inventory.tools",
    "inventory_environment": "toolwild.envs.domains.inventory.environment",
}
"""Each public name and the module that defines it (see :mod:`toolwild._exports`)."""

__all__ = ["InventoryEpisode", "InventoryState", "inventory_environment"]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
