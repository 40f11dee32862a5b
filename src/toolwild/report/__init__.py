"""User-facing renderings of results (terminal tables now; HTML reports later)."""
