"""User-facing renderings of results: the terminal scoreboard (:mod:`.scoreboard`), a run's self-contained
``report.html`` (:mod:`.html`, its figures in :mod:`.figures`) and ``compare.html`` (:mod:`.compare_html`). A package
because they all render the same metrics and must never recount them."""

from toolwild._exports import lazy_exports

_EXPORTS = {
    "RunView": "toolwild.report.html",
    "load_result_view": "toolwild.report.html",
    "load_run_view": "toolwild.report.html",
    "render_scoreboard": "toolwild.report.scoreboard",
    "write_report": "toolwild.report.html",
    "write_result_report": "toolwild.report.html",
}
"""Each public name and the module that defines it (see :mod:`toolwild._exports`)."""

__all__ = [
    "RunView",
    "load_result_view",
    "load_run_view",
    "render_scoreboard",
    "write_report",
    "write_result_report",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
