"""``--model`` forms: ``local:DIR`` names a `toolwild train` folder's tuned model, and reports it under its own name."""

from __future__ import annotations

import pytest

from toolwild.errors import ConfigError
from toolwild.llm.registry import create_backend
from toolwild.llm.types import Completion, Usage
from toolwild.llm.usage import UsageTracker


def test_a_training_folder_is_its_model_gguf_under_the_name_given(tmp_path):
    run = tmp_path / "tuned"
    run.mkdir()
    (run / "model.gguf").write_bytes(b"GGUF")  # only its existence is checked before the first call
    backend = create_backend(f"local:{run}")
    assert backend.model_path == run / "model.gguf"
    assert backend.model == str(run)  # not the embedded model's name: results say which model made them
    # any model run in-process costs nothing, a tuned one as much as the embedded one
    usage = UsageTracker()
    completion = Completion(text="x", usage=Usage(prompt_tokens=10, completion_tokens=5), latency_s=0.1, model="m")
    usage.record_call("agent", completion, model=backend.price_key)
    assert usage.roles["agent"].unpriced_calls == 0 and usage.roles["agent"].cost_usd == 0.0


def test_a_folder_without_a_model_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="local model file not found"):
        create_backend(f"local:{tmp_path}")
