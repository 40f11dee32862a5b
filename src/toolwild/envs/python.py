"""The ``python`` backend: an environment whose tools are methods of a :class:`~toolwild.envs.toolkit.Toolkit`."""

from __future__ import annotations

from collections.abc import Callable

from toolwild.core.tool import Tool
from toolwild.envs.base import EnvironmentBackend
from toolwild.envs.toolkit import Toolkit

__all__ = ["PythonEnvironment"]


class PythonEnvironment(EnvironmentBackend):
    """Starts a fresh toolkit instance per episode, so episodes never share state.

    Args:
        env_id: the environment's id.
        toolkit: the Toolkit subclass.
        factory: builds an episode for a seed (default: ``toolkit(seed=seed)``).
    """

    def __init__(self, env_id: str, toolkit: type[Toolkit], *, factory: Callable[[int], Toolkit] | None = None) -> None:
        self.id = env_id
        self.toolkit = toolkit
        self._factory = factory or (lambda seed: toolkit(seed=seed))  # type: ignore[call-arg]

    @property
    def tools(self) -> list[Tool]:
        """The toolkit's tools."""
        return self.toolkit.tool_specs()

    def reset(self, *, seed: int = 0) -> Toolkit:
        """A new isolated episode."""
        return self._factory(seed)
