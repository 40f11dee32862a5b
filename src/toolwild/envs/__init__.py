"""Execution environments: tools that answer calls from explicit state. Python code (:mod:`.toolkit`, the built-in
domains), recordings (:mod:`.replay`), a simulator model (:mod:`.simulated`) or a live MCP server (:mod:`.mcp`),
all behind one interface (:mod:`.base`) and opened by reference from :mod:`.registry`."""

from toolwild._exports import lazy_exports

_EXPORTS = {
    "EnvironmentBackend": "toolwild.envs.base",
    "Episode": "toolwild.envs.base",
    "Observation": "toolwild.envs.base",
    "ToolError": "toolwild.envs.base",
    "Toolkit": "toolwild.envs.toolkit",
    "describe_environment": "toolwild.envs.registry",
    "environment_tools": "toolwild.envs.registry",
    "get_environment": "toolwild.envs.registry",
    "open_environment": "toolwild.envs.registry",
    "session_environment": "toolwild.envs.registry",
    "tool": "toolwild.envs.toolkit",
}
"""Each public name and the module that defines it (see :mod:`toolwild._exports`)."""

__all__ = [
    "EnvironmentBackend",
    "Episode",
    "Observation",
    "ToolError",
    "Toolkit",
    "describe_environment",
    "environment_tools",
    "get_environment",
    "open_environment",
    "session_environment",
    "tool",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
