"""The quality figures as table rows, and the ``--encoder`` of the commands that measure them (``toolwild validate
--quality`` and ``toolwild synth sessions``): CLI-internal, shared by both verbs.

Why a private module: the two verbs print the same rows and choose the encoder the same way, and one CLI module
must not import another for what they share. The encoder's choice itself is library
(:mod:`toolwild.synth.encoder_choice`); this adds the progress bar of long commands to its embedding.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.markup import escape
from rich.text import Text

from toolwild.cli._common import progress_bar
from toolwild.core.quality import SemanticDiversity, SuiteQuality, TextEncoder
from toolwild.synth.encoder_choice import NO_ENCODER, check_encoder
from toolwild.synth.encoder_choice import quality_encoder as _quality_encoder

__all__ = [
    "NO_ENCODER",
    "check_encoder",
    "embed_progress",
    "quality_encoder",
    "quality_headline",
    "share_of",
    "wording_rows",
]


@contextmanager
def embed_progress(label: str, total: int) -> Iterator[Callable[[int], None]]:
    """The progress bar of an embedding (:data:`toolwild.synth.encoder_choice.EmbedProgress`)."""
    bar = progress_bar(f"[bold]{label}")
    task = bar.add_task("embed", total=total)
    with bar:
        yield lambda n: bar.update(task, advance=n)


def quality_encoder(name: str) -> tuple[TextEncoder | None, str | None]:
    """:func:`toolwild.synth.encoder_choice.quality_encoder`, its embedding shown with a progress bar."""
    return _quality_encoder(name, progress=embed_progress)


def share_of(part: int, whole: int, share: float | None) -> str:
    return f"{part:,} of {whole:,}" + (f" ({share:.1%})" if share is not None else "")


def _semantic_share(semantic: SemanticDiversity) -> str:
    text = share_of(semantic.near_duplicates, semantic.sampled, semantic.near_duplicate_share)
    if semantic.sampled < semantic.of:
        text += f", a sample of {semantic.of:,}"
    return text


def _paraphrase_share(semantic: SemanticDiversity) -> str:
    text = share_of(semantic.near_paraphrases, semantic.utterances, semantic.near_paraphrase_share)
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


def wording_rows(quality: SuiteQuality, *, details: bool) -> list[tuple[str, str | Text]]:
    """The rows on wording and answers, as rich markup (a note may quote ``pip install 'toolwild[dedup]'``, escaped
    here) or, where a user's words are quoted, plain text; ``details`` adds distinct-n and the semantic detail."""
    turns, utterances, openings = quality.user_turns, quality.utterances, quality.first_words
    answers, chats, semantic = quality.answers, quality.chat_answers, quality.semantic
    rows: list[tuple[str, str | Text]] = [
        ("distinct user turns", share_of(turns.distinct, turns.count, turns.share)),
        ("distinct utterances", share_of(utterances.distinct, utterances.count, utterances.share)),
        ("most repeats of one user turn", _most_repeated(quality)),
        ("distinct first four words (utterances)", share_of(openings.distinct, openings.count, openings.share)),
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
        ("tool-task answers passing the check", share_of(answers.passing, answers.tool_tasks, answers.share)),
        ("distinct chat answers", share_of(chats.distinct, chats.count, chats.share)),
        ("user turns copying a tool description", f"{quality.copied_description_spans.turns:,}"),
        ("tasks per wild behaviour", _wild_rates(quality)),
    ]


def quality_headline(quality: SuiteQuality) -> list[tuple[str, str | Text]]:
    """The few quality rows worth a glance (the generator's summary table shows them too), as rich markup (a note
    may quote ``pip install 'toolwild[dedup]'``, escaped here) or, where a user's words are quoted, plain text."""
    return wording_rows(quality, details=False)
