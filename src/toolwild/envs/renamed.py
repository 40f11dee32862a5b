"""A renamed session's environment: the agent calls tools by their new names, the environment runs the originals.

Why a wrapper and not a hook in the live loop: every caller that runs a session's calls (the free-running loop,
``validate --replay``, the RL environment) gets its environment from one place, the registry's
``session_environment``; wrapping what it returns there makes a renamed session run everywhere, and the live loop
never learns that names were changed. The names come from the session itself (``Session.extra["perturbation"]``,
written by :func:`toolwild.core.perturb.perturb_suite`), so a perturbed suite file carries all it needs.

What the agent sees stays renamed: tools are listed under their new names; an answer (result or error) has its
tool and parameter names rewritten by the same :class:`~toolwild.core.perturb.Rename` that rewrote the recorded
observations, so a replayed gold call reads exactly as recorded. A call under a name the session does not show
(an original name, a distractor from another environment) is answered ``unknown_tool`` without reaching the
environment.
"""

from __future__ import annotations

from typing import Any

from toolwild.core.perturb import Rename, perturbation_of
from toolwild.core.session import Session
from toolwild.core.tool import Tool
from toolwild.envs.base import EnvironmentBackend, Episode, Observation, ToolErrorKind

__all__ = ["RenamedEnvironment", "RenamedEpisode", "renamed_for_session"]


class RenamedEpisode(Episode):
    """One episode of the environment underneath, spoken to in the session's new names."""

    def __init__(self, inner: Episode, rename: Rename, known: set[str]) -> None:
        self.inner = inner
        self.rename = rename
        self.known = known
        """Original names of the tools the environment underneath has."""

    def _route(self, name: str, arguments: Any) -> tuple[str, Any] | Observation:
        """The original tool and arguments of a call, or the answer of a call that cannot reach the environment."""
        original = self.rename.original_tool(name)
        if original is None or original not in self.known:
            return Observation.failure(ToolErrorKind.UNKNOWN_TOOL, f"no tool {name!r}")
        if isinstance(arguments, dict):
            arguments = self.rename.arguments_back(original, arguments)
        return original, arguments

    def _answer(self, observation: Observation, tool: str) -> Observation:
        return Observation.model_validate(self.rename.observation(observation.model_dump(mode="json"), tool))

    def call(self, name: str, arguments: dict[str, Any]) -> Observation:
        """Run one call under its original name; answer in the new names."""
        routed = self._route(name, arguments)
        if isinstance(routed, Observation):
            return routed
        original, args = routed
        return self._answer(self.inner.call(original, args), original)

    async def acall(self, name: str, arguments: dict[str, Any]) -> Observation:
        """:meth:`call` from async code (a simulated environment awaits its model here)."""
        routed = self._route(name, arguments)
        if isinstance(routed, Observation):
            return routed
        original, args = routed
        return self._answer(await self.inner.acall(original, args), original)

    def state(self) -> dict[str, Any]:
        """The state underneath, as it is (states hold data, not tool names: expected states were not renamed)."""
        return self.inner.state()

    def close(self) -> None:
        """Close the episode underneath."""
        self.inner.close()


class RenamedEnvironment(EnvironmentBackend):
    """An environment whose tools are shown and called under a session's new names."""

    def __init__(self, inner: EnvironmentBackend, rename: Rename) -> None:
        self.inner = inner
        self.rename = rename
        self.id = inner.id
        self.observable_state = inner.observable_state

    @property
    def tools(self) -> list[Tool]:
        """The environment's tools under their new names (write effects kept, so writes are still counted)."""
        return [self.rename.tool_spec(t) for t in self.inner.tools]

    def reset(self, *, seed: int = 0) -> RenamedEpisode:
        """A fresh episode underneath, wrapped."""
        known = {t.name for t in self.inner.tools}
        return RenamedEpisode(self.inner.reset(seed=seed), self.rename, known)


def renamed_for_session(session: Session, backend: EnvironmentBackend) -> EnvironmentBackend:
    """The backend a session's calls run on: ``backend`` itself, or wrapped in its name maps when the session was
    renamed (``--perturb rename``). Idempotent: an already wrapped backend is returned as it is.

    Raises:
        DataError: the session's perturbation record is malformed.
    """
    record = perturbation_of(session)
    if record is None or record.rename is None or isinstance(backend, RenamedEnvironment):
        return backend
    return RenamedEnvironment(backend, record.rename)
