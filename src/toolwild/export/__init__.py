"""Writing results in other tools' formats: WildToolBench's published result files (:mod:`.wtb_result`) and gold
trajectories as training conversations (:mod:`.training`). A package because each format is its own writer over the
same suites and results."""

from toolwild._exports import lazy_exports

_EXPORTS = {
    "ExportFormat": "toolwild.export.training",
    "openai_chat_record": "toolwild.export.training",
    "sharegpt_record": "toolwild.export.training",
    "write_training_export": "toolwild.export.training",
    "write_wtb_results": "toolwild.export.wtb_result",
}
"""Each public name and the module that defines it (see :mod:`toolwild._exports`)."""

__all__ = [
    "ExportFormat",
    "openai_chat_record",
    "sharegpt_record",
    "write_training_export",
    "write_wtb_results",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
