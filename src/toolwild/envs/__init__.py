"""Execution environments: tools that answer calls from explicit state. Python code (:mod:`.toolkit`, the built-in
domains), recordings (:mod:`.replay`), a simulator model (:mod:`.simulated`) or a live MCP server (:mod:`.mcp`),
all behind one interface (:mod:`.base`) and opened by reference from :mod:`.registry`."""
