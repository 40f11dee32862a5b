"""Servers that expose toolwild to other programs: an OpenAI-compatible chat endpoint in front of any model
(:mod:`.openai_server`) and any environment's tools over MCP (:mod:`.mcp_server`). A package because both are
optional network front ends of the same library, each with its own SDK."""
