"""The inventory domain: the smallest complete python domain (a test fixture and a template)."""
