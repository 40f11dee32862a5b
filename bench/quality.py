"""Generated data as training data: the quality figures of four 256-session ``--like-published`` suites and of the
published sample.

Run: ``.venv/bin/python bench/quality.py`` (about 30 minutes on 2 cores, most of it the own-books suite; the
SynthTools part and the published sample need ../shared/fixtures).

- ``inventory``: the built-in Python domain, template wording;
- ``ledger``: the built-in Beancount domain, its scenario templates (the suite ``toolwild suite ledger`` writes);
- ``ledger, own books``: the same templates on a user's own books (``bean-example --seed 11``, beancount's example
  ledger generator; ``toolwild suite ledger --ledger FILE``);
- ``synthtools spec 43``: an environment imported from the SynthTools release (``toolwild import synthtools
  --envs-out``), simulated by the scripted stage responder (:func:`toolwild.synth.scripted.stage_responder`: an
  instant stand-in for a model, so the figures are the pipeline's, not a model's);
- ``published sample``: WildToolBench sessions 0-4 as reconstructed (20 tasks), for comparison.

Prints two markdown tables with one row per suite (the README quotes them), and how long each suite took on stderr:

- wording (issue #29's acceptance figures): distinct utterances, distinct first four words, the share of utterances
  with a near-paraphrase (another utterance at cosine >= 0.85, an exact repeat counting, over utterances: see
  :attr:`toolwild.core.quality.SemanticDiversity.near_paraphrases`), distinct chat answers, the most times one user
  turn occurs, and the share of tasks carrying each wild behaviour (:class:`toolwild.core.wild.Wild`);
- training data: distinct user turns, distinct-2/-3, distinct utterances alike in meaning and the mean cosine,
  tool-task answers passing the answer check, ambiguity, copied description spans, value-backed labels.

The semantic columns use ``--encoder`` (default ``auto``: MiniLM when the dedup extra is installed); ``--encoder none``
leaves them out.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from toolwild.core.formats.environment import write_environment
from toolwild.core.formats.synthtools import load_synthtools_dir
from toolwild.core.formats.synthtools_envs import environments_from_synthtools, load_synthtools_meta
from toolwild.core.formats.wtb import load_wtb_suite
from toolwild.core.quality import SimpleEncoder, SuiteQuality, TextEncoder, suite_quality
from toolwild.core.session import Suite
from toolwild.core.wild import Wild
from toolwild.llm.backends.scripted import ScriptedBackend
from toolwild.llm.client import LLM
from toolwild.synth.embedding import load_embedder
from toolwild.synth.providers.ledger import build_ledger_suite
from toolwild.synth.scripted import stage_responder
from toolwild.synth.sessions import SessionsConfig, load_handle, synth_sessions

N = 256
FIXTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures"
RELEASE = FIXTURES / "synthtools" / "tool_content.tar.gz"
PUBLISHED = FIXTURES / "wildtoolbench" / "sessions_0_4.reconstructed.jsonl"
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


def _pct(part: int, whole: int) -> str:
    return f"{part:,}/{whole:,} ({100 * part / whole:.1f}%)" if whole else "n/a"


WORDING_HEADER = (
    "| suite | sessions | distinct utterances | distinct first four words | utterances with a near-paraphrase "
    "(cos ≥ 0.85) | distinct chat answers | most repeats of one turn | "
    + " | ".join(w.value for w in Wild)
    + " |\n|"
    + "---|" * (7 + len(Wild))
)


def _wording_row(name: str, q: SuiteQuality) -> str:
    """Issue #29's acceptance figures (see the module docstring)."""
    s = q.semantic
    near = f"n/a ({q.semantic_note})" if s is None else _pct(s.near_paraphrases, s.utterances)
    if s is not None and s.sampled < s.of:
        near += f", sample of {s.of:,}"
    wild = " | ".join(
        f"{100 * rate.share:.1f}%" if rate.share is not None else "n/a" for rate in (q.wild[w.value] for w in Wild)
    )
    return (
        f"| {name} | {q.sessions} | {_pct(q.utterances.distinct, q.utterances.count)} | "
        f"{_pct(q.first_words.distinct, q.first_words.count)} | {near} | "
        f"{_pct(q.chat_answers.distinct, q.chat_answers.count)} | {q.repeated_turns.most:,} | {wild} |"
    )


DATA_HEADER = (
    "| suite | sessions | distinct user turns | distinct-2 / -3 | distinct utterances alike in meaning (cos ≥ 0.85) / "
    "mean cosine | tool-task answers passing | ambiguity drops / checker findings | turns copying a description | "
    "value-backed Coref · Partial · Long |\n|---|---|---|---|---|---|---|---|---|"
)


def _data_row(name: str, q: SuiteQuality) -> str:
    """The figures of the suite as training data (see the module docstring)."""
    backed = " · ".join(f"{b.value_backed}/{b.labels}" for label, b in q.subtypes.items() if label != "First Turn")
    drops = "n/a" if q.ambiguity.generation_drops is None else f"{q.ambiguity.generation_drops:,}"
    grams = " / ".join(f"{d.share:.3f}" if d.share is not None else "n/a" for d in (q.distinct_2, q.distinct_3))
    return (
        f"| {name} | {q.sessions} | {_pct(q.user_turns.distinct, q.user_turns.count)} | {grams} | {_semantic(q)} | "
        f"{_pct(q.answers.passing, q.answers.tool_tasks)} | "
        f"{drops} / {q.ambiguity.findings} | {q.copied_description_spans.turns} | {backed} |"
    )


def _semantic(q: SuiteQuality) -> str:
    s = q.semantic
    if s is None:
        return f"n/a ({q.semantic_note})"
    return f"{s.near_duplicates:,}/{s.sampled:,} ({100 * s.near_duplicate_share:.1f}%) / {s.mean_cosine:.3f}"


def _measured(name: str, started: float, q: SuiteQuality) -> tuple[str, SuiteQuality]:
    print(f"{name}: {time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)
    return name, q


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

    rows: list[tuple[str, SuiteQuality]] = []
    start = time.perf_counter()
    suite, drops = _graph("inventory")
    rows.append(_measured("inventory", start, suite_quality(suite, drops=drops, encoder=encoder)))
    start = time.perf_counter()
    ledger = build_ledger_suite(N, seed=0, like_published=True)
    rows.append(_measured("ledger", start, suite_quality(ledger, drops={}, encoder=encoder)))
    example = Path(sys.executable).parent / "bean-example"
    if example.exists():
        with tempfile.TemporaryDirectory() as tmp:
            books = Path(tmp) / "books.beancount"
            books.write_text(subprocess.run([str(example), "--seed", "11"], capture_output=True, text=True).stdout)
            start = time.perf_counter()
            own = build_ledger_suite(N, seed=0, like_published=True, ledger=books)
            rows.append(_measured("ledger, own books", start, suite_quality(own, drops={}, encoder=encoder)))
    else:
        print(f"(bean-example not found at {example}: own books skipped)", file=sys.stderr)
    if RELEASE.exists():
        with tempfile.TemporaryDirectory() as tmp:
            start = time.perf_counter()
            ref = _spec_43(Path(tmp))
            suite, drops = _graph(ref, simulator=LLM(ScriptedBackend(stage_responder)))
            rows.append(_measured(f"SynthTools {SPEC}", start, suite_quality(suite, drops=drops, encoder=encoder)))
    else:
        print(f"(SynthTools release not found at {RELEASE}: skipped)", file=sys.stderr)
    if PUBLISHED.exists():
        start = time.perf_counter()
        published, _ = load_wtb_suite(PUBLISHED)
        rows.append(_measured("published sample (sessions 0-4)", start, suite_quality(published, encoder=encoder)))
    else:
        print(f"(published sample not found at {PUBLISHED}: skipped)", file=sys.stderr)

    print(WORDING_HEADER)
    for name, q in rows:
        print(_wording_row(name, q))
    print()
    print(DATA_HEADER)
    for name, q in rows:
        print(_data_row(name, q))


if __name__ == "__main__":
    main()
