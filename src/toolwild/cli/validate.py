"""``toolwild validate``: load a suite, count what it holds, and list every problem found."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from toolwild.cli._common import (
    PERTURB_KINDS,
    EncoderOption,
    PerturbSeedOption,
    console,
    handled_errors,
    make_llm,
    progress_bar,
)
from toolwild.core.files import iter_text_lines
from toolwild.core.formats.wtb import load_wtb_suite
from toolwild.core.jsonl import parse_json, read_json_file, read_jsonl
from toolwild.core.quality import Example, SemanticDiversity, SuiteQuality, TextEncoder, suite_quality
from toolwild.core.session import Suite
from toolwild.errors import ConfigError, DataError
from toolwild.eval.validate import Severity, replay_skip_reason, summarize_suite, validate_suite

if TYPE_CHECKING:
    from toolwild.synth.embedding import Embedder
    from toolwild.synth.paraphrase import PerturbOutcome


def _count_table(title: str, key: str, value: str, counts: Mapping[Any, int]) -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column(key)
    table.add_column(value, justify="right")
    for name in sorted(counts):
        table.add_row(escape(str(name)), str(counts[name]))
    return table


def _of(part: int, whole: int, share: float | None) -> str:
    return f"{part:,} of {whole:,}" + (f" ({share:.1%})" if share is not None else "")


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


MAX_PROBLEMS = 20
"""Problems printed by default; the count of the rest and the totals follow (``--max-problems 0`` prints all)."""


NO_ENCODER = "none"
"""``--encoder none`` on the quality commands: no semantic figure (nothing loaded or embedded)."""


def check_encoder(name: str) -> None:
    """Refuse an unknown ``--encoder`` before a long run rather than after it."""
    from toolwild.synth.embedding import ENCODERS

    if name not in (*ENCODERS, NO_ENCODER):
        raise ConfigError(f"--encoder {name!r}: choose one of {', '.join((*ENCODERS, NO_ENCODER))}")


def quality_encoder(name: str) -> tuple[TextEncoder | None, str | None]:
    """The encoder of the semantic diversity figure for an ``--encoder`` value, or None and why.

    Never fails for a missing package (the figure is informational, and a generation run must still write its
    report): the figure is then None with the reason. An unknown name is a :class:`ConfigError`. The encoder is
    loaded only when the figure is computed (see :class:`_LoadedOnUse`).
    """
    from toolwild.synth.embedding import sentence_encoder_missing, token_encoder_missing

    check_encoder(name)
    if name == NO_ENCODER:
        return None, "not measured (--encoder none)"
    fallback = sentence_encoder_missing() if name == "auto" else None
    if fallback is not None and (no_token := token_encoder_missing()) is not None:
        return None, f"not measured: no encoder is installed ({fallback}; {no_token})"
    return _LoadedOnUse(name, fallback), None


class _LoadedOnUse:
    """An ``--encoder`` loaded when first asked to embed, with the progress bar of long commands.

    Why: the token fallback takes 15-20 s to load (most of it the PCA of the vocabulary) and cannot measure a suite
    of fewer than 200 distinct utterances anyway; the figure asks whether it is corpus-fitted first, and only then
    for vectors. Until loaded, the label is the name (with the reason for a fallback), the one a note shows.
    """

    def __init__(self, name: str, fallback: str | None) -> None:
        self._name = name
        self._fallback = fallback
        self._embedder: Embedder | None = None

    @property
    def label(self) -> str:
        if self._embedder is not None:
            return self._embedder.info.label()
        return f"token, the fallback: {self._fallback}" if self._fallback else self._name

    @property
    def corpus_fitted(self) -> bool:
        if self._embedder is not None:
            return self._embedder.info.corpus_fitted
        return self._name == "token" or self._fallback is not None

    def embed(self, texts: Sequence[str]) -> Any:
        from toolwild.synth.embedding import load_embedder

        if self._embedder is None:
            self._embedder = load_embedder(self._name)
        embedder = self._embedder
        bar = progress_bar(f"[bold]embedding utterances ({embedder.info.name})")
        task = bar.add_task("embed", total=len(texts))
        with bar:
            return embedder.embed_corpus(texts, lambda n: bar.update(task, advance=n))


def _semantic_share(semantic: SemanticDiversity) -> str:
    text = _of(semantic.near_duplicates, semantic.sampled, semantic.near_duplicate_share)
    if semantic.sampled < semantic.of:
        text += f", a sample of {semantic.of:,}"
    return text


def _paraphrase_share(semantic: SemanticDiversity) -> str:
    text = _of(semantic.near_paraphrases, semantic.utterances, semantic.near_paraphrase_share)
    if semantic.sampled < semantic.of:
        text += f", the utterances of a sample of {semantic.of:,} distinct"
    return text


_SHOWN_TURN = 40
"""Characters of the most repeated turn shown beside its count in the headline (all of it in the examples)."""


def _most_repeated(quality: SuiteQuality) -> str | Text:
    """The most repeats of one turn, with the turn as plain :class:`~rich.text.Text` (no markup, no emoji codes)."""
    repeated = quality.repeated_turns
    if not repeated.examples:
        return f"{repeated.most:,} (no turn repeats)" if repeated.most else "n/a"
    text = repeated.examples[0].text
    text = text if len(text) <= _SHOWN_TURN else text[: _SHOWN_TURN - 1] + "…"
    return Text(f"{repeated.most:,} times ({text!r}); {repeated.repeated:,} turn(s) repeat")


def _wild_rates(quality: SuiteQuality) -> str:
    if not any(rate.tasks for rate in quality.wild.values()):
        return f"none recorded ({quality.tasks:,} tasks)"
    return ", ".join(
        f"{name} {rate.tasks:,}" + (f" ({rate.share:.1%})" if rate.share is not None else "")
        for name, rate in quality.wild.items()
    )


def _semantic_rows(quality: SuiteQuality) -> list[tuple[str, str]]:
    semantic = quality.semantic
    if semantic is None:
        return [("utterances alike in meaning", escape(f"n/a ({quality.semantic_note or 'not measured'})"))]
    return [
        (f"utterances alike (cosine >= {semantic.tau})", escape(_semantic_share(semantic))),
        (f"utterances with a near-paraphrase (cosine >= {semantic.tau})", escape(_paraphrase_share(semantic))),
    ]


def _wording_rows(quality: SuiteQuality, *, details: bool) -> list[tuple[str, str | Text]]:
    """The rows on wording and answers, as rich markup (a note may quote ``pip install 'toolwild[dedup]'``, escaped
    here) or, where a user's words are quoted, plain text; ``details`` adds distinct-n and the semantic detail."""
    turns, utterances, openings = quality.user_turns, quality.utterances, quality.first_words
    answers, chats, semantic = quality.answers, quality.chat_answers, quality.semantic
    rows: list[tuple[str, str | Text]] = [
        ("distinct user turns", _of(turns.distinct, turns.count, turns.share)),
        ("distinct utterances", _of(utterances.distinct, utterances.count, utterances.share)),
        ("most repeats of one user turn", _most_repeated(quality)),
        ("distinct first four words (utterances)", _of(openings.distinct, openings.count, openings.share)),
    ]
    if details:
        for n, counted in ((2, quality.distinct_2), (3, quality.distinct_3)):
            share = f"{counted.share:.3f}" if counted.share is not None else "-"
            grams = f"{counted.distinct:,} of {counted.count:,} {n}-grams"
            rows.append((f"distinct-{n} (utterances)", f"{share} ({grams})"))
    rows += _semantic_rows(quality)
    if details and semantic is not None:
        rows.append(("mean cosine of utterance pairs", f"{semantic.mean_cosine:.3f} (lower: more varied)"))
        rows.append(("  encoder", escape(semantic.encoder)))
    return [
        *rows,
        ("tool-task answers passing the check", _of(answers.passing, answers.tool_tasks, answers.share)),
        ("distinct chat answers", _of(chats.distinct, chats.count, chats.share)),
        ("user turns copying a tool description", f"{quality.copied_description_spans.turns:,}"),
        ("tasks per wild behaviour", _wild_rates(quality)),
    ]


def quality_headline(quality: SuiteQuality) -> list[tuple[str, str | Text]]:
    """The few quality rows worth a glance (the generator's summary table shows them too), as rich markup (a note
    may quote ``pip install 'toolwild[dedup]'``, escaped here) or, where a user's words are quoted, plain text."""
    return _wording_rows(quality, details=False)


def quality_table(quality: SuiteQuality) -> Table:
    """Every quality figure of a suite (see :mod:`toolwild.core.quality`)."""
    table = Table(title="Quality", title_justify="left", show_header=False)
    for name, value in _wording_rows(quality, details=True):
        table.add_row(name, value)
    grounding = quality.grounding
    table.add_row(
        "tool tasks with an ungrounded identifier",
        _of(
            grounding.tasks,
            grounding.tool_tasks,
            grounding.tasks / grounding.tool_tasks if grounding.tool_tasks else None,
        ),
    )
    ambiguity = quality.ambiguity
    table.add_row("ambiguous references (checker)", f"{ambiguity.findings:,} in {ambiguity.tasks:,} task(s)")
    if ambiguity.generation_drops is not None:
        table.add_row("task attempts dropped as ambiguous_reference", f"{ambiguity.generation_drops:,}")
    if quality.subtypes:
        table.add_row("value-backed labels", "")
    for label, backed in quality.subtypes.items():
        share = backed.value_backed / backed.labels if backed.labels else None
        table.add_row(f"  {escape(label)}", _of(backed.value_backed, backed.labels, share))
    return table


def quality_examples(quality: SuiteQuality) -> Table | None:
    """The kept examples behind the figures (the most repeated turns, answers that fail, ambiguous references, copied
    spans, utterances alike in meaning), or None. Their texts are plain :class:`~rich.text.Text`: neither markup nor
    emoji codes, so a ledger account such as ``Assets:Bank:Checking`` is not shown with a bank emoji."""
    kinds: list[tuple[str, list[Example]]] = [
        ("answer", quality.answers.failures),
        ("ambiguous", quality.ambiguity.examples),
        ("ungrounded", quality.grounding.examples),
        ("copied span", quality.copied_description_spans.examples),
    ]
    pairs = quality.semantic.examples if quality.semantic is not None else []
    repeats = quality.repeated_turns.examples
    if not pairs and not repeats and not any(examples for _, examples in kinds):
        return None
    table = Table(title="Quality examples (up to 5 each)", title_justify="left")
    for column in ("kind", "where", "text", "why"):
        table.add_column(column)
    for repeat in repeats:
        table.add_row("repeated turn", "", Text(repeat.text), f"{repeat.count:,} times")
    for kind, examples in kinds:
        for ex in examples:
            where = f"{ex.session} task {ex.task}"
            why = "; ".join(ex.why[:3]) + (f" (+{len(ex.why) - 3} more)" if len(ex.why) > 3 else "")
            table.add_row(kind, Text(where), Text(ex.text), Text(why))
    for pair in pairs:
        a, b = pair.first, pair.second
        where = f"{a.session} task {a.task} / {b.session} task {b.task}"
        table.add_row("alike in meaning", Text(where), Text(f"{a.text} / {b.text}"), f"cosine {pair.cosine:.3f}")
    return table


def perturbed_copy(
    suite: Suite,
    suite_path: Path,
    kinds: str,
    seed: int,
    model: str | None,
    base_url: str | None,
    cache: Path | None,
) -> PerturbOutcome:
    """The perturbed copy of ``suite`` (read from ``suite_path``, where its environment files resolve) that a
    ``--perturb`` value asks for; a model (``model``, with ``base_url`` and its response ``cache``) is built only for
    ``paraphrase`` and closed when done. ``eval --perturb`` calls it too."""
    from toolwild.cli._common import run_async
    from toolwild.core.perturb import parse_kinds
    from toolwild.synth.paraphrase import perturb_with_model

    paraphrase = any(k.name == "paraphrase" for k in parse_kinds(kinds))
    if paraphrase and model is None:
        raise ConfigError("--perturb paraphrase needs a model to reword the utterances: give --perturb-model M")
    llm = make_llm(model, base_url=base_url, cache=cache) if paraphrase and model is not None else None

    async def go() -> PerturbOutcome:
        try:
            return await perturb_with_model(suite, kinds, seed=seed, llm=llm, base_dir=suite_path.parent)
        finally:
            if llm is not None:
                await llm.aclose()

    return run_async(go())


def validate(
    suite_path: Annotated[Path, typer.Argument(metavar="SUITE.jsonl", help="A WildToolBench-format suite.")],
    oracle_check: Annotated[
        bool,
        typer.Option("--oracle-check/--no-oracle-check", help="Score the gold path in both modes (100% expected)."),
    ] = True,
    replay: Annotated[
        bool,
        typer.Option(
            "--replay/--no-replay",
            help="Replay every session's gold calls on its environment (built-in or replay file): observations and "
            "states must be the recorded ones.",
        ),
    ] = False,
    subtypes: Annotated[
        bool,
        typer.Option(
            "--subtypes/--no-subtypes",
            help="Check every hidden-intent label against the values (errors), and warn of references that more "
            'than one earlier value answers ("the same units" when 3 were asked for and 19 came back).',
        ),
    ] = False,
    grounding: Annotated[
        bool,
        typer.Option(
            "--grounding/--no-grounding",
            help="Check that every identifier a gold call passes (an account name, an id) is reachable by the agent: "
            "in the user's words, the context, a tool schema's values or an earlier observation (errors).",
        ),
    ] = False,
    quality: Annotated[
        bool,
        typer.Option(
            "--quality/--no-quality",
            help="Quality as training data: distinct user turns and utterances, the most repeated turn, distinct "
            "first four words, distinct-2/3, utterances alike in meaning and with a near-paraphrase (on --encoder), "
            "tool-task answers that pass the answer check, distinct chat answers, tasks per wild behaviour, ambiguous "
            "references, user turns copying a tool description, value-backed labels per subtype. Informational: the "
            "exit code does not depend on it.",
        ),
    ] = False,
    encoder: EncoderOption = "auto",
    env_model: Annotated[
        str | None,
        typer.Option(
            help="With --replay: the model that simulates `llm` environments (e.g. local); without it they are skipped."
        ),
    ] = None,
    base_url: Annotated[
        str | None, typer.Option(help="Base URL of an OpenAI-compatible server for --env-model.")
    ] = None,
    cache: Annotated[
        Path | None,
        typer.Option(help="The generation run's response cache: replayed simulator calls are answered from it."),
    ] = None,
    perturb: Annotated[
        str | None,
        typer.Option(
            help=f"Check a perturbed copy instead (not written): {PERTURB_KINDS} (the oracle must still score 100%).",
            rich_help_panel="Perturbation",
        ),
    ] = None,
    perturb_seed: PerturbSeedOption = 0,
    perturb_model: Annotated[
        str | None,
        typer.Option(
            help="The model that rewords utterances for --perturb paraphrase (with --base-url, --cache).",
            rich_help_panel="Perturbation",
        ),
    ] = None,
    max_problems: Annotated[
        int,
        typer.Option(
            min=0, metavar="N", help="Problems listed (errors first); the totals count every one. 0: list all."
        ),
    ] = MAX_PROBLEMS,
) -> None:
    """Check a suite: counts, type/subtype distribution, malformed records and gold-DAG problems.

    Every record is read even after a bad one, so all problems are listed at once; the exit code is 1 when any
    record is malformed or any error-level problem is found. With --perturb the checks run on a perturbed copy.
    """
    perturbed = None
    with handled_errors():
        if encoder != "auto" and not quality:
            raise ConfigError("--encoder measures the semantic diversity of --quality: give --quality too")
        if quality:
            check_encoder(encoder)
        if (wrong_file := not_a_suite(suite_path)) is not None:
            raise wrong_file
        suite, report = load_wtb_suite(suite_path, skip_invalid=True)
        if perturb is not None:
            perturbed = perturbed_copy(suite, suite_path, perturb, perturb_seed, perturb_model, base_url, cache)
            suite = perturbed.suite
        line_of = {}
        for number, obj in read_jsonl(suite_path):
            if isinstance(obj, dict) and isinstance(obj.get("id"), str):
                line_of[obj["id"]] = number
        summary = summarize_suite(suite)
        simulator = make_llm(env_model, base_url=base_url, cache=cache) if env_model and replay else None
        problems = validate_suite(
            suite,
            line_of=line_of,
            oracle_check=oracle_check,
            replay=replay,
            base_dir=suite_path.parent,
            simulator=simulator,
            subtypes=subtypes,
            grounding=grounding,
        )
        figures = None
        if quality:
            text_encoder, missing = quality_encoder(encoder)
            figures = suite_quality(suite, encoder=text_encoder, encoder_missing=missing)
        replay_skips = {
            s.id: reason
            for s in (suite.sessions if replay else [])
            if (reason := replay_skip_reason(s, base_dir=suite_path.parent, simulator=simulator)) is not None
        }

    head = Table(title=escape(str(suite_path)), title_justify="left", show_header=False)
    head.add_row("sessions", str(summary.sessions))
    head.add_row("tasks", str(summary.tasks))
    head.add_row("tool entries / unique names", f"{summary.tools} / {summary.unique_tools}")
    head.add_row("malformed records", str(report.skipped_count))
    console.print(head)
    if perturbed is not None:
        console.print(escape(perturbed.summary()))
    console.print(_count_table("Distribution", "task type", "n", summary.task_types))
    console.print(_count_table("Turn subtypes", "subtype", "n", summary.subtypes))
    console.print(_count_table("Sessions by instruction transitions", "transitions", "sessions", summary.transitions))
    if replay:  # what was replayed, and why the rest was not: a replay that checked nothing must not look clean
        done = [s for s in suite.sessions if s.id not in replay_skips]
        calls = sum(len(t.call_nodes) for s in done for t in s.tasks)
        console.print(
            f"replay: {len(done)} of {len(suite.sessions)} session(s) replayed on their environments "
            f"({calls:,} gold calls)"
        )
        for reason, n in Counter(replay_skips.values()).most_common():
            console.print(f"  [yellow]{n} not replayed: they {reason}[/]")
    if figures is not None:
        console.print(quality_table(figures))
        examples = quality_examples(figures)
        if examples is not None:
            console.print(examples)

    errors = report.skipped_count + sum(p.severity is Severity.ERROR for p in problems)
    warnings = sum(p.severity is Severity.WARNING for p in problems)
    rows = [("error", _where(exc), exc.message) for exc in report.skipped]
    rows += [(p.severity.value, p.where, p.message) for p in problems]
    rows.sort(key=lambda row: row[0] != "error")  # stable: errors first, each kind in file order
    if rows:
        shown = rows if max_problems == 0 else rows[:max_problems]
        title = "Problems" if len(shown) == len(rows) else f"Problems (the first {len(shown)} of {len(rows):,})"
        table = Table(title=title, title_justify="left")
        table.add_column("severity")
        table.add_column("where")
        table.add_column("problem")
        for severity, where, message in shown:
            style = "red" if severity == "error" else "yellow"
            table.add_row(f"[{style}]{severity}[/]", escape(where), escape(message))
        console.print(table)
        if len(shown) < len(rows):
            console.print(f"… and {len(rows) - len(shown):,} more (--max-problems 0 lists every one)")
    if errors:
        also = f", {warnings:,} warning(s)" if warnings else ""
        console.print(f"[red]{errors:,} error(s)[/]{also}")
        raise typer.Exit(1)
    console.print("[green]suite is valid[/]" + (f" ({warnings:,} warning(s))" if warnings else ""))


def _where(exc: DataError) -> str:
    """A skipped record's place: its line, and field when known (the file is the table's title)."""
    return f"line {exc.line}" + (f", field {exc.field}" if exc.field else "")
