"""The figures of scored sessions: the published metric JSON (:mod:`.accuracy`), bootstrap intervals (:mod:`.ci`),
pass^k and pass@k over trials (:mod:`.passk`) and a forked run's divergence figures (:mod:`.forked`)."""

from toolwild._exports import lazy_exports

_EXPORTS = {
    "compute_forked_metrics": "toolwild.eval.metrics.forked",
    "compute_metrics": "toolwild.eval.metrics.accuracy",
    "compute_trial_metrics": "toolwild.eval.metrics.passk",
    "pass_at_k": "toolwild.eval.metrics.passk",
    "pass_hat_k": "toolwild.eval.metrics.passk",
}
"""Each public name and the module that defines it (see :mod:`toolwild._exports`)."""

__all__ = [
    "compute_forked_metrics",
    "compute_metrics",
    "compute_trial_metrics",
    "pass_at_k",
    "pass_hat_k",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
