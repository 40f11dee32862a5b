"""Servers that expose toolwild to other programs: an OpenAI-compatible chat endpoint in front of any model
(:mod:`.openai_server`) and any environment's tools over MCP (:mod:`.mcp_server`). A package because both are
optional network front ends of the same library, each with its own SDK."""

from toolwild._exports import lazy_exports

_EXPORTS = {
    "McpEnvironmentServer": "toolwild.serve.mcp_server",
    "create_app": "toolwild.serve.openai_server",
    "run_server": "toolwild.serve.openai_server",
    "run_stdio": "toolwild.serve.mcp_server",
}
"""Each public name and the module that defines it (see :mod:`toolwild._exports`)."""

__all__ = [
    "McpEnvironmentServer",
    "create_app",
    "run_server",
    "run_stdio",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
