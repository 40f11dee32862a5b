"""A run's settings: what ``config.json`` holds, everything needed to reproduce the run (never a secret).

Why a module of its own: the objects a run is built from (:mod:`toolwild.eval.build`), the runner that plays it
and the run directory that keeps it all read the config; below all three, it lets them import one another in one
direction only.
"""

from __future__ import annotations

from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from toolwild.core.verdict import ScoringMode
from toolwild.eval.session import HistoryMode

__all__ = ["RunConfig"]


class RunConfig(BaseModel):
    """Everything needed to reproduce a run (saved as ``config.json``; never holds a secret)."""

    model_config = ConfigDict(extra="forbid")

    format_version: int = 1
    suite: str
    """Absolute path of the suite file."""
    suite_digest: str | None = None
    """``Suite.fingerprint()`` of the suite the run used: re-scoring refuses any other suite."""
    agent: str = "model"
    model: str | None = None
    base_url: str | None = None
    prompt_mode: bool | None = None
    history: HistoryMode = HistoryMode.WTB
    mode: ScoringMode = ScoringMode.WTB
    concurrency: int = Field(default=8, ge=1)
    session_timeout_s: float | None = Field(default=1800.0, gt=0)
    request_timeout_s: float | None = Field(default=None, gt=0)
    """Per-request limit of the model client (None: the client's default)."""
    max_steps_per_task: int = Field(default=32, ge=1)
    temperature: float = 0.0
    seed: int = 0
    """The model's request seed of trial 0; trial t sends ``seed + t``."""
    trials: int = Field(default=1, ge=1)
    """Times every session is run (``--trials``). Left out of ``config.json`` when 1, so a one-trial run's file is
    the one written before trials existed."""
    max_tokens: int | None = 1024
    count_provider_errors: bool = Field(
        default=False, validation_alias=AliasChoices("count_provider_errors", "count_infra_errors")
    )
    cache: str = "read-write"
    env_model: str | None = None
    """The model that simulates ``llm`` environments (free mode), if the suite uses any."""
    user: str = "recorded"
    """Who answers the agent: ``recorded`` (the suite's recorded replies to the gold's questions, the published
    protocol) or ``model:M`` (a simulated user, :mod:`toolwild.eval.user`: free history, scored by
    :func:`~toolwild.eval.interactive.score_interactive_session` in ``strict`` mode)."""
    user_temperature: float = 0.0
    """Sampling temperature of a simulated user (trial t seeds it with ``seed + t``)."""
    user_prompt_version: str | None = None
    user_prompt_sha256: str | None = None
    """A simulated user's prompt file (``prompts/user.md``): its version line and the sha256 of its bytes."""
    exclude_user_failures: bool = False
    """Leave out the sessions the run's user audit (:data:`USER_AUDIT`) found the simulated user breaking."""

    @model_serializer(mode="wrap")
    def _one_trial_is_implied(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """``trials`` is written only when it is not 1 (see the field), the simulated user's fields only when there
        is one: a run of before either is written as it was."""
        data = handler(self)
        if self.trials == 1:
            data.pop("trials", None)
        if self.user == "recorded":
            for key in (
                "user",
                "user_temperature",
                "user_prompt_version",
                "user_prompt_sha256",
                "exclude_user_failures",
            ):
                data.pop(key, None)
        return data
