"""A session as a Gymnasium ``Env`` (``pip install 'toolwild[rl]'``): JSON text in, JSON text out.

Why text spaces: a tool agent's observation is a conversation and its action a message, neither of which has a
fixed shape; Gymnasium's :class:`~gymnasium.spaces.Text` carries them as JSON strings, and a policy that writes
text (a language model) writes its action directly. Observations are ASCII JSON (``ensure_ascii``), so they lie in
the declared charset; actions are read as JSON whatever characters they hold.

Only this module imports gymnasium: the core :mod:`toolwild.rl` needs nothing beyond toolwild.
"""

from __future__ import annotations

import json
from typing import Any, SupportsFloat

from toolwild.core.session import Session
from toolwild.errors import MissingDependencyError
from toolwild.rl.env import SessionEnv

try:
    import gymnasium
    from gymnasium import spaces
except ImportError as exc:  # pragma: no cover - the rl extra installs it
    raise MissingDependencyError("the Gymnasium adapter needs gymnasium: pip install 'toolwild[rl]'") from exc

__all__ = ["ASCII_PRINTABLE", "GymSessionEnv"]

ASCII_PRINTABLE = "".join(chr(c) for c in range(32, 127))
"""The characters of ``json.dumps(..., ensure_ascii=True)`` output: every observation's charset."""

_MAX_OBSERVATION = 1 << 24
_MAX_ACTION = 1 << 16


def _text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=True)


class GymSessionEnv(gymnasium.Env[str, str]):
    """:class:`~toolwild.rl.SessionEnv` behind Gymnasium's API.

    - ``reset()`` returns ``'{"messages": [...], "tools": [...]}'`` and info ``{"session_id", "task_index",
      "tools"}``. Gymnasium's ``seed`` is accepted and changes nothing: a session's environment episode always
      starts from the seed its suite recorded, or its gold would not apply.
    - ``step(action)``: ``action`` is the JSON of an OpenAI-style assistant message; the observation is
      ``'{"messages": [...]}'`` (what the environment says next), the reward is the core's, ``terminated`` is the
      core's ``done``, ``truncated`` is always False (a task past its step budget fails; the episode goes on), and
      info holds ``task_index`` and ``verdict`` (the finished tasks' verdicts as JSON objects).

    Every keyword argument goes to :class:`~toolwild.rl.SessionEnv` (``reward``, ``timing``, ``scoring_mode``,
    ``task`` ...).
    """

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012 - Gymnasium's own class attribute

    def __init__(self, session: Session, **options: Any) -> None:
        self.core = SessionEnv(session, **options)
        self.observation_space = spaces.Text(_MAX_OBSERVATION, min_length=0, charset=ASCII_PRINTABLE)
        self.action_space = spaces.Text(_MAX_ACTION, min_length=0, charset=ASCII_PRINTABLE)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """A fresh episode of the session."""
        super().reset(seed=seed)
        messages, tools = self.core.reset()
        info = {"session_id": self.core.session.id, "task_index": self.core.first_task, "tools": tools}
        return _text({"messages": messages, "tools": tools}), info

    def step(self, action: str) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:
        """One assistant message (its JSON text)."""
        result = self.core.step(action)
        info = {"task_index": result.task_index, "verdict": [v.model_dump(mode="json") for v in result.verdict]}
        return _text({"messages": result.messages}), result.reward, result.done, False, info

    def close(self) -> None:
        """Release the environment episode."""
        self.core.close()
