"""Foreign formats <-> toolwild nouns (WildToolBench sessions and results, SynthTools tools, OpenAI tools)."""
