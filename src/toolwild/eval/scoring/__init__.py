"""Scoring a trajectory against its gold: legal call orders (:mod:`.dag`), the live loop's task labels
(:mod:`.task`), argument checks (:mod:`.arguments`) and a session's verdict (:mod:`.session`), in ``wtb`` and
``strict`` mode."""

from toolwild._exports import lazy_exports

_EXPORTS = {
    "GoldDag": "toolwild.eval.scoring.dag",
    "failed_session": "toolwild.eval.scoring.session",
    "score_session": "toolwild.eval.scoring.session",
    "score_suite": "toolwild.eval.scoring.session",
}
"""Each public name and the module that defines it (see :mod:`toolwild._exports`)."""

__all__ = [
    "GoldDag",
    "failed_session",
    "score_session",
    "score_suite",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
