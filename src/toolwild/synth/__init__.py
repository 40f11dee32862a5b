"""Generation: environments, dedup, audit, tasks and sessions (the layer between envs and eval)."""
