"""Servers that expose toolwild to other programs (an OpenAI-compatible endpoint; MCP later)."""
