"""Environment throughput: calls per second of the ``python``, ``replay`` and ``llm`` (cache-hit) backends.

Run: ``.venv/bin/python bench/simulator.py`` (about half a minute).

- ``python``: the built-in inventory domain, a read/write mix (argument validation included).
- ``replay``: a WildToolBench session's recordings (schema check and loose argument matching included), if the
  shared fixtures are present.
- ``llm`` on cache hits: an episode of the simulated-CRM kind is first played against a scripted model that answers
  from the state in its prompt (filling a SQLite cache), then replayed with the cache read-only and no model at all;
  the replay is what is timed (schema check, prompt building, cache key, SQLite read, reply validation, patch).
  The first pass's time is also printed, for the cost of a miss with an instant model.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import tempfile
import time
from pathlib import Path

from toolwild.core.environment import BackendKind, Environment
from toolwild.core.tool import Effect, Tool
from toolwild.envs.registry import get_environment
from toolwild.envs.simulated import SimulatedEnvironment
from toolwild.llm.backends.scripted import ScriptedBackend
from toolwild.llm.cache import CacheMode, ResponseCache
from toolwild.llm.client import LLM
from toolwild.llm.types import ChatRequest

FIXTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures"


def bench_python(n: int = 20_000) -> float:
    episode = get_environment("inventory").reset(seed=1)
    calls = [
        ("get_stock", {"item": "coffee"}),
        ("restock", {"item": "coffee", "units": 2}),
        ("place_order", {"item": "coffee", "units": 1}),
        ("list_items", {}),
    ]
    start = time.perf_counter()
    for i in range(n):
        name, args = calls[i % len(calls)]
        episode.call(name, args)
    return n / (time.perf_counter() - start)


def bench_replay(n: int = 20_000) -> float | None:
    suite_path = FIXTURES / "wildtoolbench" / "sessions_0_4.reconstructed.jsonl"
    if not suite_path.exists():
        return None
    from toolwild.core.formats.wtb import load_wtb_suite
    from toolwild.core.formats.wtb_envs import environment_from_session
    from toolwild.envs.replay import ReplayEnvironment

    session = load_wtb_suite(suite_path)[0].sessions[0]
    env = ReplayEnvironment(environment_from_session(session))
    calls = [(node.name, dict(node.action.arguments)) for task in session.tasks for node in task.call_nodes]
    start = time.perf_counter()
    done = 0
    while done < n:
        episode = env.reset()
        for name, args in calls:
            episode.call(name, args)
            done += 1
    return done / (time.perf_counter() - start)


TOOLS = [
    Tool(
        name="add_item",
        parameters={
            "type": "object",
            "properties": {"sku": {"type": "string"}, "qty": {"type": "integer", "minimum": 1}},
            "required": ["sku", "qty"],
        },
        effect=Effect.WRITE,
    ),
    Tool(
        name="get_item",
        parameters={"type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"]},
        returns={"type": "object", "properties": {"qty": {"type": "integer"}}, "required": ["qty"]},
        effect=Effect.READ,
    ),
]
ENV = Environment(
    id="stockroom",
    tools=TOOLS,
    backend=BackendKind.LLM,
    initial_state={"items": {f"S{i}": {"qty": i} for i in range(20)}},
)


def answer(request: ChatRequest) -> str:
    """An instant model that answers from the state and call in its prompt."""
    text = request.messages[-1]["content"]
    state = json.loads(re.search(r"^Current state: (.*)$", text, flags=re.M).group(1))
    call = json.loads(re.search(r"^Call: (.*)$", text, flags=re.M).group(1))
    sku = call["arguments"]["sku"]
    if call["name"] == "get_item":
        return json.dumps({"result": {"qty": state["items"].get(sku, {}).get("qty", 0)}})
    if sku in state["items"]:
        patch = [{"op": "increment", "path": f"/items/{sku}/qty", "value": call["arguments"]["qty"]}]
    else:
        patch = [{"op": "add", "path": f"/items/{sku}", "value": {"qty": call["arguments"]["qty"]}}]
    return json.dumps({"result": {"ok": True}, "patch": patch})


async def play(llm: LLM, n: int) -> float:
    episode = SimulatedEnvironment(ENV, llm).reset(seed=0)
    start = time.perf_counter()
    for i in range(n):
        sku = f"S{i % 25}"
        if i % 2:
            await episode.acall("get_item", {"sku": sku})
        else:
            await episode.acall("add_item", {"sku": sku, "qty": 1 + i % 3})
    return n / (time.perf_counter() - start)


async def bench_llm(n: int = 2_000) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        cache_path = Path(tmp) / "sim.sqlite"
        first = LLM(ScriptedBackend(answer), cache=ResponseCache(cache_path))
        miss_rate = await play(first, n)
        await first.aclose()
        replay = LLM(ScriptedBackend([]), cache=ResponseCache(cache_path, mode=CacheMode.READ_ONLY))
        hit_rate = await play(replay, n)
        assert replay.usage.roles["simulator"].cache_hits == n
        await replay.aclose()
    return miss_rate, hit_rate


def main() -> None:
    print(f"python backend (inventory):        {bench_python():>9,.0f} calls/s")
    replay = bench_replay()
    if replay is None:
        print("replay backend:                    (fixtures not found)", file=sys.stderr)
    else:
        print(f"replay backend (WTB session 0):    {replay:>9,.0f} calls/s")
    miss, hit = asyncio.run(bench_llm())
    print(f"llm backend, cache hits:           {hit:>9,.0f} calls/s")
    print(f"llm backend, misses (instant model):{miss:>8,.0f} calls/s")


if __name__ == "__main__":
    main()
