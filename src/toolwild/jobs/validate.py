"""Checking a suite, as one library call: :func:`check_suite` is ``toolwild validate`` without the printing.

It reads every record even after a bad one (so all problems are listed at once), counts what the suite holds,
checks the gold of every task (and, when asked, replays it, runs the oracle, checks subtypes and grounding), and
measures the wording's quality; on a perturbed copy when asked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from toolwild.core.files import iter_text_lines
from toolwild.core.formats.wtb import load_wtb_suite
from toolwild.core.jsonl import LoadReport, parse_json, read_json_file, read_jsonl
from toolwild.core.quality import SuiteQuality, TextEncoder, suite_quality
from toolwild.core.session import Suite
from toolwild.errors import DataError
from toolwild.eval.validate import Problem, Severity, SuiteSummary, replay_skip_reason, summarize_suite, validate_suite
from toolwild.llm.registry import create_llm
from toolwild.run.loop import run_async
from toolwild.synth.paraphrase import PerturbOutcome, perturbed_copy

__all__ = ["SNIFFED_LINES", "CheckOptions", "SuiteCheck", "check_suite", "not_a_suite"]


@dataclass
class SuiteCheck:
    """A suite checked: what it holds, every problem found, and the figures asked for."""

    path: Path
    suite: Suite
    """The suite checked (the perturbed copy, with ``perturb``)."""
    report: LoadReport
    """The records read and the malformed ones skipped (each an error)."""
    summary: SuiteSummary
    problems: list[Problem]
    perturbed: PerturbOutcome | None = None
    quality: SuiteQuality | None = None
    replay_skips: dict[str, str] | None = None
    """With ``replay``: the sessions not replayed, and why (None: no replay asked)."""

    @property
    def errors(self) -> int:
        """Malformed records and error-level problems: any makes the suite invalid."""
        return self.report.skipped_count + sum(p.severity is Severity.ERROR for p in self.problems)

    @property
    def warnings(self) -> int:
        """Warning-level problems."""
        return sum(p.severity is Severity.WARNING for p in self.problems)


@dataclass(frozen=True)
class CheckOptions:
    """What ``check_suite`` checks beyond the gold DAGs (``toolwild validate``'s options, with its defaults)."""

    oracle_check: bool = False
    replay: bool = False
    subtypes: bool = False
    grounding: bool = False
    env_model: str | None = None
    base_url: str | None = None
    cache: Path | None = None
    perturb: str | None = None
    perturb_seed: int = 0
    perturb_model: str | None = None
    quality: bool = False
    encoder: TextEncoder | None = None
    """The sentence encoder of the semantic figures (None: none, ``encoder_missing`` says why)."""
    encoder_missing: str | None = None


def check_suite(path: Path, options: CheckOptions | None = None) -> SuiteCheck:
    """Check the suite at ``path`` (see the module docstring). Synchronous: a replay runs its own event loop.

    Raises:
        DataError: the file is clearly not a suite (:func:`not_a_suite`).
        ConfigError: a bad ``perturb`` value, or ``paraphrase`` without a model.
    """
    opts = options or CheckOptions()
    if (wrong_file := not_a_suite(path)) is not None:
        raise wrong_file
    suite, report = load_wtb_suite(path, skip_invalid=True)
    perturbed = None
    if opts.perturb is not None:
        perturbed = run_async(
            perturbed_copy(
                suite,
                opts.perturb,
                seed=opts.perturb_seed,
                model=opts.perturb_model,
                base_url=opts.base_url,
                cache=opts.cache,
                base_dir=path.parent,
            )
        )
        suite = perturbed.suite
    line_of = {obj["id"]: n for n, obj in read_jsonl(path) if isinstance(obj, dict) and isinstance(obj.get("id"), str)}
    simulator = (
        create_llm(opts.env_model, base_url=opts.base_url, cache=opts.cache) if opts.env_model and opts.replay else None
    )
    problems = validate_suite(
        suite,
        line_of=line_of,
        oracle_check=opts.oracle_check,
        replay=opts.replay,
        base_dir=path.parent,
        simulator=simulator,
        subtypes=opts.subtypes,
        grounding=opts.grounding,
    )
    check = SuiteCheck(path, suite, report, summarize_suite(suite), problems, perturbed)
    if opts.quality:
        check.quality = suite_quality(suite, encoder=opts.encoder, encoder_missing=opts.encoder_missing)
    if opts.replay:
        check.replay_skips = {
            s.id: reason
            for s in suite.sessions
            if (reason := replay_skip_reason(s, base_dir=path.parent, simulator=simulator)) is not None
        }
    return check


SNIFFED_LINES = 5
"""Non-blank lines read to tell a file that is clearly not a suite: none of them is a JSON object."""
_BEANCOUNT = re.compile(
    r"^(\d{4}-\d{2}-\d{2}\s+(open|close|balance|pad|note|document|price|event|commodity|custom|query|txn|[*!])\b"
    r'|(option|include|plugin|pushtag|poptag)\s+")'
)
"""A line only a Beancount ledger starts with (a dated directive, or an option, include or plugin)."""


def not_a_suite(path: Path) -> DataError | None:
    """One error saying what the file is and what was expected, when it is clearly not a suite; else None.

    Why: every line of a suite is read even after a bad one, so that all problems are listed at once; a file that is
    not JSON Lines at all (a Beancount ledger, a JSON array, a CSV) then gave an error per line (5,716 for one
    ledger). A file is clearly not a suite when none of its first :data:`SNIFFED_LINES` non-blank lines is a JSON
    object; a file that starts like a suite and goes wrong later is checked line by line as before. An empty file
    is not judged here (validate says it holds no session).
    """
    lines: list[tuple[int, str | None]] = []
    for number, text in iter_text_lines(path):
        if isinstance(text, DataError):
            lines.append((number, None))
        elif not text.strip():
            continue
        else:
            lines.append((number, text))
            try:
                if isinstance(parse_json(text), dict):
                    return None
            except DataError:
                pass
        if len(lines) >= SNIFFED_LINES:
            break
    if not lines:
        return None
    expected = "expected a suite: JSON Lines (.jsonl), one WildToolBench session object per line"
    first_line, first = lines[0]
    suffix = f"a {path.suffix} file: " if path.suffix and path.suffix.lower() not in (".jsonl", ".json") else ""
    ledger = next(((n, t) for n, t in lines if t is not None and _BEANCOUNT.match(t)), None)
    if first is None:
        what = f"line {first_line} is not UTF-8 text (a binary file?)"
    elif ledger is not None or path.suffix.lower() in (".beancount", ".bean"):
        n, t = ledger or (first_line, first)
        what = (
            f"a Beancount ledger (line {n}: {_excerpt(t or '')}); to evaluate on your own books, make a suite of them: "
            f"toolwild suite ledger --ledger {path} --out SUITE.jsonl"
        )
    elif first.lstrip().startswith(("[", "{")):
        what = _json_document(path, first_line, first)
    else:
        what = f"line {first_line} is not JSON: {_excerpt(first)}"
    return DataError(f"not a suite: {suffix}{what}; {expected}", file=path)


def _excerpt(text: str, limit: int = 60) -> str:
    text = text.strip()
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


def _json_document(path: Path, first_line: int, first: str) -> str:
    """What a file that starts like JSON but holds no JSON object on a line of its own is."""
    try:
        value = read_json_file(path)
    except DataError:
        return f"line {first_line} is not a JSON object: {_excerpt(first)}"
    if isinstance(value, list):
        return "one JSON array (a suite has no brackets around it: one session object per line)"
    return "one JSON document spread over several lines (JSON, not JSON Lines)"
