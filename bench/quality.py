"""Generated data as training data: the quality figures of three 256-session ``--like-published`` suites.

Run: ``.venv/bin/python bench/quality.py`` (about a minute; the SynthTools part needs ../shared/fixtures).

- ``inventory``: the built-in Python domain, template wording;
- ``ledger``: the built-in Beancount domain, its scenario templates (the suite ``toolwild suite ledger`` writes);
- ``synthtools spec 43``: an environment imported from the SynthTools release (``toolwild import synthtools
  --envs-out``), simulated by the scripted stage responder (:func:`toolwild.synth.scripted.stage_responder`: an
  instant stand-in for a model, so the figures are the pipeline's, not a model's).

Prints one markdown row per suite (the README quotes them) and how long each took. The semantic column (near-duplicate
utterances at cosine >= 0.85, and the mean cosine of all pairs) uses ``--encoder`` (default ``auto``: MiniLM when the
dedup extra is installed); ``--encoder none`` leaves it out.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

from toolwild.core.formats.environment import write_environment
from toolwild.core.formats.synthtools import load_synthtools_dir
from toolwild.core.formats.synthtools_envs import environments_from_synthtools, load_synthtools_meta
from toolwild.core.quality import SimpleEncoder, SuiteQuality, TextEncoder, suite_quality
from toolwild.core.session import Suite
from toolwild.llm.backends.scripted import ScriptedBackend
from toolwild.llm.client import LLM
from toolwild.synth.embedding import load_embedder
from toolwild.synth.providers.ledger import build_ledger_suite
from toolwild.synth.scripted import stage_responder
from toolwild.synth.sessions import SessionsConfig, load_handle, synth_sessions

N = 256
RELEASE = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "synthtools" / "tool_content.tar.gz"
SPEC = "ecommerce_and_retail_tool_spec_43"


def _graph(ref: str, simulator: LLM | None = None) -> tuple[Suite, dict[str, int]]:
    config = SessionsConfig(n_sessions=N, like_published=True)
    result = asyncio.run(synth_sessions([load_handle(ref, simulator=simulator)], config))
    return result.suite, dict(result.drops)


def _spec_43(tmp: Path) -> str:
    tools = load_synthtools_dir(RELEASE, skip_invalid=True).tools
    envs = environments_from_synthtools(tools, load_synthtools_meta(RELEASE))
    env = next(e for e in envs if e.id == SPEC)
    path = tmp / f"{SPEC}.env.json"
    write_environment(env, path)
    return str(path)


def _row(name: str, q: SuiteQuality, seconds: float) -> str:
    def pct(part: int, whole: int) -> str:
        return f"{part:,}/{whole:,} ({100 * part / whole:.1f}%)" if whole else "n/a"

    backed = " · ".join(f"{b.value_backed}/{b.labels}" for label, b in q.subtypes.items() if label != "First Turn")
    drops = "n/a" if q.ambiguity.generation_drops is None else f"{q.ambiguity.generation_drops:,}"
    return (
        f"| {name} | {q.sessions} | {pct(q.user_turns.distinct, q.user_turns.count)} | "
        f"{q.distinct_2.share:.3f} / {q.distinct_3.share:.3f} | {_semantic(q)} | "
        f"{pct(q.answers.passing, q.answers.tool_tasks)} | "
        f"{drops} / {q.ambiguity.findings} | {q.copied_description_spans.turns} | {backed} |  ({seconds:.1f} s)"
    )


def _semantic(q: SuiteQuality) -> str:
    s = q.semantic
    if s is None:
        return f"n/a ({q.semantic_note})"
    return f"{s.near_duplicates:,}/{s.sampled:,} ({100 * s.near_duplicate_share:.1f}%) / {s.mean_cosine:.3f}"


def _encoder(name: str) -> TextEncoder | None:
    if name == "none":
        return None
    embedder = load_embedder(name)
    print(f"encoder: {embedder.info.label()}", file=sys.stderr)
    return SimpleEncoder(embedder.embed_corpus, embedder.info.label(), embedder.info.corpus_fitted)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--encoder", default="auto", help="auto, minilm, e5, token or none")
    encoder = _encoder(parser.parse_args().encoder)

    print(
        "| suite | sessions | distinct user turns | distinct-2 / -3 | utterances alike in meaning (cos ≥ 0.85) / mean "
        "cosine | tool-task answers passing | ambiguity drops / checker findings | turns copying a description | "
        "value-backed Coref · Partial · Long |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    start = time.perf_counter()
    suite, drops = _graph("inventory")
    print(
        _row("inventory", suite_quality(suite, drops=drops, encoder=encoder), time.perf_counter() - start), flush=True
    )
    start = time.perf_counter()
    ledger = build_ledger_suite(N, seed=0, like_published=True)
    print(_row("ledger", suite_quality(ledger, drops={}, encoder=encoder), time.perf_counter() - start), flush=True)
    if not RELEASE.exists():
        print(f"(SynthTools release not found at {RELEASE}: skipped)", file=sys.stderr)
        return
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        ref = _spec_43(Path(tmp))
        suite, drops = _graph(ref, simulator=LLM(ScriptedBackend(stage_responder)))
        print(
            _row(f"SynthTools {SPEC}", suite_quality(suite, drops=drops, encoder=encoder), time.perf_counter() - start)
        )


if __name__ == "__main__":
    main()
