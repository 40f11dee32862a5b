"""The LLM layer: one Backend interface, a content-addressed cache, retries, prompt mode, usage."""

from toolwild._exports import lazy_exports

_EXPORTS = {
    "Backend": "toolwild.llm.backend",
    "CacheMode": "toolwild.llm.cache",
    "ChatRequest": "toolwild.llm.types",
    "Completion": "toolwild.llm.types",
    "LLM": "toolwild.llm.client",
    "ResponseCache": "toolwild.llm.cache",
    "Usage": "toolwild.llm.types",
    "UsageTracker": "toolwild.llm.usage",
    "create_backend": "toolwild.llm.registry",
    "create_llm": "toolwild.llm.registry",
    "describe_backends": "toolwild.llm.registry",
    "generate_checked": "toolwild.llm.structured",
    "generate_structured": "toolwild.llm.structured",
}
"""Each public name and the module that defines it (see :mod:`toolwild._exports`)."""

__all__ = [
    "LLM",
    "Backend",
    "CacheMode",
    "ChatRequest",
    "Completion",
    "ResponseCache",
    "Usage",
    "UsageTracker",
    "create_backend",
    "create_llm",
    "describe_backends",
    "generate_checked",
    "generate_structured",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
