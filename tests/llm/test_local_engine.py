"""The local backend's own decoding loop against the real SmolLM2-135M model (issue 34).

What it must keep: the tokens. Prefix reuse of the KV cache, the one-token grammar check of greedy decoding and the
loop itself are speed-ups only, so each is checked against the reply made without it: the same request answered
from an empty KV cache, and llama-cpp-python's own ``create_chat_completion`` on a second copy of the model. What it
adds: bounded replies, so a reply to a schema closes within ``max_tokens`` even when the model loops.

Slow (the model is loaded once per module); skipped only when llama-cpp-python or the GGUF wheel is missing.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from typing import Any

import pytest

from toolwild.core.formats.openai_tools import to_openai_tool
from toolwild.envs.registry import environment_tools
from toolwild.errors import MissingDependencyError
from toolwild.llm.backends.local import _SAMPLING, LocalBackend, default_model_path
from toolwild.llm.prompt_mode import from_prompt_reply, reply_schema, to_prompt_request
from toolwild.llm.types import ChatRequest, Completion

pytestmark = [pytest.mark.slow, pytest.mark.anyio]

SYSTEM = {"role": "system", "content": "You manage the user's Beancount ledger. Today is 2024-03-05."}
TURNS = [
    "How much did I spend on food last month?",
    "Also add today's Whole Foods receipt: 42.10 USD, groceries.",
    "Make it 47.23, not 42.",
    "Is that category right?",
    "What is my checking balance?",
    "Thanks. List my accounts.",
]
LOOPING = "Add a receipt: Whole Foods, 42.10 USD, groceries, today, tags food and weekly."
"""A request SmolLM2 answers with a tags array it never closes (the demo's failure)."""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def tools() -> list[dict[str, Any]]:
    return [to_openai_tool(tool) for tool in environment_tools("ledger")]


@pytest.fixture(scope="module")
def backend() -> Iterator[LocalBackend]:
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama-cpp-python is not installed (pip install llama-cpp-python)")
    try:
        default_model_path()
    except MissingDependencyError as exc:
        pytest.skip(str(exc))
    yield LocalBackend(n_ctx=2048)


async def _answer(backend: LocalBackend, request: ChatRequest, *, reuse: bool) -> tuple[Completion, int]:
    """The reply, and the prompt tokens evaluated for it."""
    backend.reuse_prefix = reuse
    before = backend.evaluated_prompt_tokens
    try:
        completion = await backend.complete(request)
    finally:
        backend.reuse_prefix = True
    return completion, backend.evaluated_prompt_tokens - before


def _grow(messages: list[dict[str, Any]], reply: Completion) -> None:
    """Append a reply the way an agent does: calls with a result each, or text."""
    if reply.tool_calls:
        calls = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.raw}} for c in reply.tool_calls
        ]
        messages.append({"role": "assistant", "content": None, "tool_calls": calls})
        messages += [{"role": "tool", "tool_call_id": c.id, "content": '{"ok": true, "count": 0}'} for c in calls]
    else:
        messages.append({"role": "assistant", "content": reply.text or ""})


# Greedy with the tools' grammar (what the eval loop sends) and seeded sampling without one; seeded sampling under
# the grammar is the interleaved test's case.
@pytest.mark.parametrize(("temperature", "with_tools"), [(0.0, True), (0.8, False)])
async def test_prefix_reuse_gives_the_same_tokens(
    backend: LocalBackend, tools: list[dict[str, Any]], temperature: float, with_tools: bool
) -> None:
    """A growing conversation: each call answered after the previous one (reusing its KV cache) and again from an
    empty cache. The prompts cross llama.cpp's 512-token batches, so the reused prefix and the new part are
    evaluated in other batches than a fresh prompt is; the replies must not change, and reuse must evaluate less."""
    messages: list[dict[str, Any]] = [SYSTEM]
    reused_total = fresh_total = 0
    last_prompt = 0
    for i, turn in enumerate(TURNS):
        messages.append({"role": "user", "content": turn})
        request = ChatRequest(
            messages=messages, tools=tools if with_tools else None, temperature=temperature, seed=i, max_tokens=32
        )
        sent = to_prompt_request(request) if with_tools else request
        reused, evaluated = await _answer(backend, sent, reuse=True)
        fresh, full = await _answer(backend, sent, reuse=False)
        assert reused.text == fresh.text, f"call {i}"
        assert reused.usage == fresh.usage and full >= fresh.usage.prompt_tokens  # more if a hard retry ran
        if i > 0:
            assert evaluated < full / 2
        reused_total, fresh_total, last_prompt = reused_total + evaluated, fresh_total + full, fresh.usage.prompt_tokens
        _grow(messages, from_prompt_reply(fresh) if with_tools else fresh)
    if with_tools:
        assert last_prompt > 512  # the conversation crossed a batch boundary
    # The target: a session evaluates at most 1.3x its final context (the first call is evaluated whole).
    assert reused_total <= 1.3 * last_prompt < fresh_total


async def test_interleaved_conversations_keep_their_prefixes(
    backend: LocalBackend, tools: list[dict[str, Any]]
) -> None:
    """Sessions run concurrently share the model, so calls of two conversations alternate. Each continues from a
    snapshot of its own KV cache, not from scratch, and still gets the replies a fresh evaluation gives (seeded
    sampling under the tools' grammar)."""
    conversations: list[list[dict[str, Any]]] = [
        [SYSTEM],
        [{"role": "system", "content": "You manage the user's Beancount ledger. Today is 2025-11-30."}],
    ]
    fresh = LocalBackend(n_ctx=2048, reuse_prefix=False)
    evaluated = finals = 0
    try:
        for turn in TURNS[:3]:
            for i, messages in enumerate(conversations):
                messages.append({"role": "user", "content": turn})
                request = to_prompt_request(
                    ChatRequest(messages=messages, tools=tools, temperature=0.8, seed=i, max_tokens=32)
                )
                reused, count = await _answer(backend, request, reuse=True)
                assert (await fresh.complete(request)).text == reused.text, (turn, i)
                evaluated += count
                finals += reused.usage.prompt_tokens if turn == TURNS[2] else 0
                _grow(messages, from_prompt_reply(reused))
    finally:
        await fresh.aclose()
    assert backend._snapshots  # the other conversation waits in a snapshot
    assert evaluated <= 1.3 * finals


async def test_the_decoding_loop_matches_llama_cpp_python(backend: LocalBackend, tools: list[dict[str, Any]]) -> None:
    """The same requests through llama-cpp-python's create_chat_completion (what this backend called before it ran
    its own loop), on a second copy of the model: greedy and seeded, with the tools' grammar and without."""
    import llama_cpp
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter, chat_formatter_to_chat_completion_handler

    from toolwild.llm.backends.local import _import_llama_cpp, _token_text, _without_extra_buffer_types

    with _without_extra_buffer_types(_import_llama_cpp()):
        bare = llama_cpp.Llama(model_path=str(backend.model_path), n_ctx=2048, n_threads=1, verbose=False)
    eos, bos = bare.token_eos(), bare.token_bos()
    formatter = Jinja2ChatFormatter(
        template=bare.metadata["tokenizer.chat_template"],
        eos_token=_token_text(bare, eos),
        bos_token=_token_text(bare, bos),
        stop_token_ids=[eos],
    )
    bare.chat_handler = chat_formatter_to_chat_completion_handler(formatter)
    unbounded = LocalBackend(n_ctx=2048, bounded_replies=False)
    try:
        for temperature, seed in [(0.0, 0), (0.9, 5)]:
            for with_tools in (True, False):
                request = ChatRequest(
                    messages=[SYSTEM, {"role": "user", "content": TURNS[1]}],
                    tools=tools if with_tools else None,
                    temperature=temperature,
                    seed=seed,
                    max_tokens=40,
                )
                sent = to_prompt_request(request) if with_tools else request
                kwargs: dict[str, Any] = {}
                if sent.response_format is not None:
                    kwargs["response_format"] = {"type": "json_object", "schema": sent.response_format}
                bare.reset()
                expected = bare.create_chat_completion(
                    messages=sent.messages, temperature=temperature, seed=seed, max_tokens=40, **_SAMPLING, **kwargs
                )
                ours = await unbounded.complete(sent)
                assert isinstance(expected, dict)
                assert ours.text == expected["choices"][0]["message"]["content"], (temperature, with_tools)
                assert ours.usage.completion_tokens == expected["usage"]["completion_tokens"]
    finally:
        bare.close()
        await unbounded.aclose()


async def test_a_looping_tool_call_still_closes(backend: LocalBackend, tools: list[dict[str, Any]]) -> None:
    """The demo's failure: a tags array the model never closes, cut at max_tokens and scored as text. Unbounded, it
    still happens (so this test can fail); bounded, the reply is a call of a known tool with the tool's arguments."""
    request = to_prompt_request(
        ChatRequest(messages=[SYSTEM, {"role": "user", "content": LOOPING}], tools=tools, max_tokens=160)
    )
    unbounded = LocalBackend(n_ctx=2048, bounded_replies=False)
    try:
        cut = await unbounded.complete(request)
    finally:
        await unbounded.aclose()
    assert cut.finish_reason == "length" and not from_prompt_reply(cut).tool_calls
    reply = from_prompt_reply(await backend.complete(request))
    assert reply.tool_calls
    by_name = {t["function"]["name"]: t["function"]["parameters"] for t in tools}
    for call in reply.tool_calls:
        assert call.error is None and call.arguments is not None
        params = by_name[call.name]
        assert set(params.get("required", [])) <= set(call.arguments) <= set(params["properties"])


@pytest.mark.parametrize("max_tokens", [64, 160])
async def test_every_reply_to_a_schema_closes_within_max_tokens(
    backend: LocalBackend, tools: list[dict[str, Any]], max_tokens: int
) -> None:
    """Sampling hot (temperature 1.5) to shake the model out of its habits: whatever it writes, the reply parses,
    within max_tokens per decoding pass."""
    for seed in range(4):
        request = ChatRequest(
            messages=[SYSTEM, {"role": "user", "content": LOOPING}],
            tools=tools,
            tool_choice="required",
            temperature=1.5,
            seed=seed,
            max_tokens=max_tokens,
        )
        completion = await backend.complete(to_prompt_request(request))
        assert completion.usage.completion_tokens <= 2 * max_tokens  # a soft pass and a hard one at most
        json.loads(completion.text or "", strict=False)


async def test_reply_grammars_build_for_any_budget(backend: LocalBackend, tools: list[dict[str, Any]]) -> None:
    """llama.cpp refuses some grammars it is given (a 1,024-character string bound, for one): every budget gets a
    soft and a hard grammar that it parses, or falls back to the schema as given."""
    await backend.load()
    llm = backend._llm
    assert llm is not None
    for choice, max_tokens, count in [("auto", 16, 2), ("required", 16, 1), ("required", 64, 2)] + [
        ("auto", n, 2) for n in (256, 1024, 2000)
    ]:
        grammars = backend._reply_grammars(llm, reply_schema(tools, choice), max_tokens)
        assert all(grammar is not None and backend._parses(llm, grammar) for grammar in grammars)
        assert len(grammars) == count, (choice, max_tokens)  # no hard grammar where not even one call fits
