"""Backend implementations, one file each."""

from toolwild._exports import lazy_exports

_EXPORTS = {
    "LocalBackend": "toolwild.llm.backends.local",
    "OpenAIBackend": "toolwild.llm.backends.openai_compat",
    "ScriptedBackend": "toolwild.llm.backends.scripted",
    "default_model_path": "toolwild.llm.backends.local",
}
"""Each public name and the module that defines it (see :mod:`toolwild._exports`)."""

__all__ = [
    "LocalBackend",
    "OpenAIBackend",
    "ScriptedBackend",
    "default_model_path",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
