"""Execution environments: tools that answer calls from explicit state (Python code now; LLM-simulated later)."""
