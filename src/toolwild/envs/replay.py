"""The ``replay`` backend: answers calls with recorded observations (WildToolBench's gold observations).

A recorded environment cannot compute anything new, so the question is only which recording answers a call:

- ``match="arguments"`` (default): a recording of the same tool whose arguments are the same value, where strings
  compare after lower-casing and removing whitespace and numbers compare by value (``"Las Vegas"`` ==
  ``"lasvegas"``, ``250`` == ``250.0``); an unused recording is preferred, so repeated identical calls walk through
  repeated recordings and then repeat the last answer, as a read would.
- ``match="name"``: the next unused recording of that tool, arguments ignored. This is the published harness's rule
  (the live loop matches names only, spec section 4), for reproducing its observations exactly.

A call with no recording answers a typed ``no_recording`` error; arguments are schema-checked first, as a real
service would. The state is the list of recordings used, so two episodes that made the same calls have the same
digest.
"""

from __future__ import annotations

from typing import Any, Literal

from toolwild.core.environment import Environment, Recording
from toolwild.core.tool import Tool
from toolwild.envs.base import EnvironmentBackend, Episode, Observation, ToolErrorKind, precheck

__all__ = ["ReplayEnvironment", "ReplayEpisode", "loose_value"]

MatchRule = Literal["arguments", "name"]


def loose_value(value: Any) -> Any:
    """A value with the differences a service would not care about removed (case, whitespace, int vs float)."""
    if isinstance(value, str):
        return "".join(value.split()).lower()
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, dict):
        return {str(k): loose_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [loose_value(v) for v in value]
    return value


class ReplayEnvironment(EnvironmentBackend):
    """Recorded observations of an :class:`~toolwild.core.environment.Environment`."""

    def __init__(self, environment: Environment, *, match: MatchRule = "arguments") -> None:
        self.id = environment.id
        self.environment = environment
        self.match = match
        self._tools = {t.name: t for t in environment.tools}
        self._loose = [loose_value(r.arguments) for r in environment.recordings]

    @property
    def tools(self) -> list[Tool]:
        """The environment's tools."""
        return list(self.environment.tools)

    def reset(self, *, seed: int = 0) -> ReplayEpisode:
        """A fresh episode (no recording used yet); the seed does not matter to a recording."""
        return ReplayEpisode(self)


class ReplayEpisode(Episode):
    """One run over the recordings."""

    def __init__(self, backend: ReplayEnvironment) -> None:
        self.backend = backend
        self.used: list[int] = []

    def _find(self, name: str, arguments: dict[str, Any]) -> int | None:
        recordings: list[Recording] = self.backend.environment.recordings
        same_name = [i for i, r in enumerate(recordings) if r.name == name]
        if self.backend.match == "name":
            return next((i for i in same_name if i not in self.used), None)
        wanted = loose_value(arguments)
        matches = [i for i in same_name if self.backend._loose[i] == wanted]
        if not matches:
            return None
        return next((i for i in matches if i not in self.used), matches[-1])

    def call(self, name: str, arguments: dict[str, Any]) -> Observation:
        """Answer from the recordings."""
        tool = precheck(self.backend._tools.get(name), name, arguments)
        if isinstance(tool, Observation):
            return tool
        index = self._find(name, arguments)
        if index is None:
            return Observation.failure(ToolErrorKind.NO_RECORDING, f"no recorded answer for this call of {name!r}")
        self.used.append(index)
        return Observation(ok=True, result=self.backend.environment.recordings[index].observation)

    def state(self) -> dict[str, Any]:
        """The recordings used, in order."""
        return {"replayed": list(self.used)}
