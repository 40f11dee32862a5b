"""Sessions made in any process: the values a run is made from (:class:`SessionSpec`) and the worker that builds
its environments, clients and job from them (:class:`SessionWorker`).

Why apart from the job itself (:mod:`toolwild.synth.session_job`): the worker builds the job from the generation
modules (:mod:`toolwild.synth.sessions`), which use the job for their in-memory run; the job below both keeps that
a line, not a circle.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from toolwild.core.session import Session
from toolwild.run import Unit, UnitRecord
from toolwild.synth.providers.base import SessionProvider
from toolwild.synth.session_job import (
    SessionJob,
)
from toolwild.synth.sessions import SessionsConfig, load_handle, session_providers

__all__ = [
    "SessionSpec",
    "SessionWorker",
]


SpecVerify = Callable[..., Awaitable[list[dict[str, Any]]]]
"""``verify(session, provider, *, simulator, base_dir)``: a module-level function (it travels to worker processes by
reference)."""


@dataclass
class SessionSpec:
    """Everything a process needs to make the sessions of a run: the values of the command line, not objects.

    Why: with a distributed executor the sessions are made in other processes (other hosts), which build their own
    environments and model clients from this.
    """

    refs: list[str]
    """The environments as given (built-in ids or files)."""
    suite_refs: list[str]
    """How the suite names them (files relative to the suite's folder)."""
    config: SessionsConfig
    builder: str = "auto"
    writer: str | None = None
    """The utterance writer's ``--model`` (None: templates)."""
    env_model: str | None = None
    base_url: str | None = None
    cache: str | None = None
    """The response cache file (on a cluster: a path every worker can open, see the README)."""
    max_connections: int | None = None
    verify: SpecVerify | None = None
    base_dir: str = "."
    restored: list[dict[str, Any]] = field(default_factory=list)
    """Unit records of a resumed run the providers need before making more (see :meth:`SessionJob.restore`)."""


class SessionWorker:
    """Makes sessions from a :class:`SessionSpec`, building its clients on first use in whatever process it runs
    (the local executor runs it in the driver; a Ray shard in a worker). Picklable: only the spec travels."""

    def __init__(self, spec: SessionSpec) -> None:
        self.spec = spec
        self.job: SessionJob | None = None
        self.llms: dict[str, Any] = {}

    def __getstate__(self) -> dict[str, Any]:
        return {"spec": self.spec}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["spec"])

    async def aopen(self) -> SessionJob:
        """Build the environments, clients, providers and the job (once)."""
        if self.job is not None:
            return self.job
        from toolwild.llm.registry import create_llm

        spec = self.spec
        connections = {"base_url": spec.base_url, "cache": spec.cache, "max_connections": spec.max_connections}
        simulator = create_llm(spec.env_model, **connections) if spec.env_model else None
        writer = create_llm(spec.writer, **connections) if spec.writer else None
        self.llms = {name: llm for name, llm in (("simulator", simulator), ("writer", writer)) if llm is not None}
        handles = [
            load_handle(ref, simulator=simulator, suite_ref=suite_ref)
            for ref, suite_ref in zip(spec.refs, spec.suite_refs, strict=True)
        ]
        providers = session_providers(handles, spec.config, writer=writer, builder=spec.builder)
        verify = None
        if spec.verify is not None:
            check, base = spec.verify, spec.base_dir

            async def verify(session: Session, provider: SessionProvider) -> list[dict[str, Any]]:
                return await check(session, provider, simulator=simulator, base_dir=base)

        self.job = SessionJob(providers, [h.ref for h in handles], spec.config.n_sessions, verify=verify)
        if spec.restored:
            self.job.restore(UnitRecord.model_validate(r) for r in spec.restored)
        return self.job

    async def __call__(self, unit: Unit[int]) -> dict[str, Any]:
        job = await self.aopen()
        return await job.make(unit)

    async def aclose(self) -> None:
        """Close the clients (their caches included)."""
        for llm in self.llms.values():
            await llm.aclose()
        self.llms = {}
        self.job = None

    def usage(self) -> dict[str, Any]:
        """Model usage of the clients this worker built (the local executor's; a Ray run's stays in its workers)."""
        return {name: llm.usage.as_dict() for name, llm in self.llms.items()}
