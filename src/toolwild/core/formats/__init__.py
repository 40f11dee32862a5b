"""Foreign formats <-> toolwild nouns (WildToolBench sessions and results, SynthTools tools, OpenAI tools)."""

from toolwild._exports import lazy_exports

_EXPORTS = {
    "append_trajectory": "toolwild.core.formats.results",
    "environment_from_mcp": "toolwild.core.formats.mcp",
    "from_openai_tool": "toolwild.core.formats.openai_tools",
    "load_environment": "toolwild.core.formats.environment",
    "load_synthtools_dir": "toolwild.core.formats.synthtools",
    "load_synthtools_tool": "toolwild.core.formats.synthtools",
    "load_trajectories": "toolwild.core.formats.results",
    "load_wtb_suite": "toolwild.core.formats.wtb",
    "to_openai_tool": "toolwild.core.formats.openai_tools",
    "tools_from_mcp": "toolwild.core.formats.mcp",
    "write_environment": "toolwild.core.formats.environment",
    "write_wtb_suite": "toolwild.core.formats.wtb",
}
"""Each public name and the module that defines it (see :mod:`toolwild._exports`)."""

__all__ = [
    "append_trajectory",
    "environment_from_mcp",
    "from_openai_tool",
    "load_environment",
    "load_synthtools_dir",
    "load_synthtools_tool",
    "load_trajectories",
    "load_wtb_suite",
    "to_openai_tool",
    "tools_from_mcp",
    "write_environment",
    "write_wtb_suite",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
