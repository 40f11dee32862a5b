"""Generation: environments (:mod:`.envgen`), dedup (:mod:`.dedup`), audit (:mod:`.audit`), tasks and sessions
(:mod:`.sessions`, made by the job in :mod:`.session_job`), and perturbed copies (:mod:`.paraphrase`): the layer
between envs and eval. The whole jobs, with their files and resume, are :func:`toolwild.generate_sessions` and
:func:`toolwild.generate_environments`."""

from toolwild._exports import lazy_exports

_EXPORTS = {
    "SessionJob": "toolwild.synth.session_job",
    "SessionsConfig": "toolwild.synth.sessions",
    "SessionsResult": "toolwild.synth.sessions",
    "SynthConfig": "toolwild.synth.envgen",
    "SynthResult": "toolwild.synth.envgen",
    "audit_environment": "toolwild.synth.audit",
    "exact_dedup": "toolwild.synth.dedup",
    "load_embedder": "toolwild.synth.embedding",
    "paraphrase_suite": "toolwild.synth.paraphrase",
    "perturbed_copy": "toolwild.synth.paraphrase",
    "semantic_dedup": "toolwild.synth.dedup",
    "synth_environments": "toolwild.synth.envgen",
    "synth_sessions": "toolwild.synth.sessions",
}
"""Each public name and the module that defines it (see :mod:`toolwild._exports`)."""

__all__ = [
    "SessionJob",
    "SessionsConfig",
    "SessionsResult",
    "SynthConfig",
    "SynthResult",
    "audit_environment",
    "exact_dedup",
    "load_embedder",
    "paraphrase_suite",
    "perturbed_copy",
    "semantic_dedup",
    "synth_environments",
    "synth_sessions",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
