"""The LLM layer: one Backend interface, a content-addressed cache, retries, prompt mode, usage."""
