"""The check every gold final answer of a tool task passes: it tells the user what the results say, and only that.

Why: generated sessions are training data. An answer that dumps JSON teaches a model to answer users with JSON; an
answer that states a number, a date or a name the results do not hold teaches it to invent them. The check reads the
answer's text and the call results alone (no generator's notes), so any suite can be checked, and a model writer can
be told exactly what to fix. :func:`answer_problems` returns one short problem per offending token (empty: passes):

- **No raw JSON**: no ``{`` or ``}``, no ``"key":``, no ``[`` followed by a quote or a brace.
- **Numbers** (``$1,234.50``, ``-$12.00``, ``3``, ``19.5``, ``19.5%``, ``1e-05``) equal a number of the results: a
  numeric scalar, a numeric string (``"91.20"``) or a number written inside a string. The sign is the sentence's
  to say ("you paid $6.69" from a ``-6.69`` posting); a percentage may also be a fraction in the results (19.5% of
  ``0.195``); a bare year (2024) may be the year of a date in the results. Counts are not derived: "9 accounts" passes
  only when 9 is in the results.
- **Dates** (``2024-04-18``, ``April 3``, ``3 April``, ``March 20, 2024``, ``March 2024``, a bare month name ``March``)
  match a date in the results (``YYYY-MM-DD`` anywhere in a string; a bare month: some date in that month), or are
  written so in them. Times (``17:12``) are written so in them.
- **Identifiers**: tokens that mix letters and digits (``txn-0146``, ``A1``, ``v1.2.3``, ``x/ord-2``), hold ``_``,
  join digits with ``-`` or ``.`` (``555-1234``), or join words with ``:`` (``Expenses:Food:Groceries``) appear as
  tokens in the results' text. Numbers inside identifiers are not numbers; a year-month (``2024-04``) may be a
  month of a date in the results. Words joined by ``-``, ``.`` or ``/`` (``follow-up``, ``and/or``) are English, their
  capitalised parts names.
- **Names**: a capitalised word that is not sentence-initial (start, after ``.``, ``!``, ``?``, ``:`` or a line
  break), not ``I`` (``I'm``...), not a month or weekday name, appears (case-insensitive, ``'s`` aside) in the
  results' text. Lower-case words are not checked: they are the sentence's own.
- **It reports something**: for each call whose result holds a *reportable* scalar (a number, or a one-line string
  of at most 120 characters with a letter or digit and without ``"``, braces or brackets), the answer mentions at
  least one of them (:func:`toolwild.core.hidden_intent.mentions`: numbers in their usual spellings, also without
  their sign; a zero also in words: "nothing", "none", "zero", "anything").
- **Length**: not empty; at most 600 characters for one call plus 200 for each further call (a three-call task:
  1,000). A long list result is summarised (its first elements "and more"), never pasted whole.

Earlier results of the session (``earlier``) back numbers, dates and names too ("now $10.89 instead of $18.09"),
but the answer need not report them. Numbers written as words ("three") are not checked.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolwild.core.hidden_intent import mentions, scalar_values

__all__ = [
    "MAX_ANSWER_CHARS",
    "MAX_REPORTABLE_CHARS",
    "PER_EXTRA_CALL_CHARS",
    "answer_limit",
    "answer_problems",
    "decoded",
    "is_raw_json",
    "is_reportable",
    "json_problems",
    "observation_result",
]

MAX_ANSWER_CHARS = 600
"""Longest answer for a task with one call."""
PER_EXTRA_CALL_CHARS = 200
"""Extra characters allowed for each further call of the task."""
MAX_REPORTABLE_CHARS = 120
"""Longer strings (descriptions, document bodies) are not expected to be quoted in full."""

MONTHS = "january february march april may june july august september october november december".split()
_MONTH_NUMBER = {name: i + 1 for i, name in enumerate(MONTHS)}
_MONTH_NUMBER.update({name[:3]: i + 1 for i, name in enumerate(MONTHS)})
_MONTH_NUMBER["sept"] = 9
_WEEKDAYS = frozenset("monday tuesday wednesday thursday friday saturday sunday".split())
_PRONOUNS = frozenset({"i", "i'm", "i've", "i'll", "i'd"})

_ANY_MONTH = r"(?:January|February|March|April|May|June|July|August|September|October|November|December|" + (
    r"Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept|Sep|Oct|Nov|Dec)\.?"
)
_FULL_MONTH = r"(?:January|February|March|April|May|June|July|August|September|October|November|December)"
_TOKEN = re.compile(
    rf"""
    (?P<iso>(?<![\w-])(?P<iy>\d{{4}})-(?P<im>\d{{2}})-(?P<id>\d{{2}})(?:[T ]\d{{2}}:\d{{2}}(?::\d{{2}})?)?(?![\w-]))
    |(?P<mdy>(?<!\w)(?P<m1>{_ANY_MONTH})\s+(?P<d1>\d{{1,2}})(?:st|nd|rd|th)?(?:,?\s+(?P<y1>\d{{4}}))?(?![\w-]))
    |(?P<dmy>(?<![\w.-])(?P<d2>\d{{1,2}})(?:st|nd|rd|th)?\s+(?P<m2>{_ANY_MONTH})(?:,?\s+(?P<y2>\d{{4}}))?(?![\w-]))
    |(?P<my>(?<!\w)(?P<m3>{_FULL_MONTH})\s+(?P<y3>\d{{4}})(?![\w-]))
    |(?P<time>(?<![\w:.])\d{{1,2}}:\d{{2}}(?::\d{{2}})?(?![\w:]))
    |(?P<path>(?<![\w:])[A-Za-z][\w'&]*(?::[A-Za-z0-9][\w'&]*)+)
    |(?P<number>(?<![\w.$-])-?\$?-?(?:\d{{1,3}}(?:,\d{{3}})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?(?P<pct>%)?(?![\w-]|\.\d))
    |(?P<ident>(?<![\w./-])(?:[A-Za-z0-9_]+(?:[-./][A-Za-z0-9_]+)+|\w*(?:\d[A-Za-z]|[A-Za-z]\d|_)\w*)(?![\w-]))
    |(?P<word>(?<![\w'])[A-Z][A-Za-z']*)
    """,
    re.VERBOSE,
)
_ISO_DATE = re.compile(r"(?<!\d)(\d{4})-(\d{2})-(\d{2})(?!\d)")
_LETTERS_JOINED = re.compile(r"[A-Za-z]+(?:[-./][A-Za-z]+)+")
_DIGITS_HYPHENATED = re.compile(r"\d+(?:-\d+)+")
_KEY_PATTERN = re.compile(r"\"[^\"\n]{1,60}\"\s*:")
_OPEN_LIST = re.compile(r"\[\s*[\"'{\[]")
_JSON_MARKS = frozenset('"{}[]')


def observation_result(observation: Any) -> Any:
    """The result of a recorded observation: ``result`` of an ``{"ok": .., "result": ..}`` envelope, else as is."""
    if isinstance(observation, dict) and "result" in observation and set(observation) <= {"ok", "result", "error"}:
        return observation["result"]
    return observation


def decoded(value: Any) -> Any:
    """A string holding a JSON object or list (a replayed observation often is one) as that value."""
    if isinstance(value, str) and value.strip()[:1] in ("{", "["):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def json_problems(text: str) -> list[str]:
    """The raw-JSON rule: braces, ``"key":`` patterns, and lists of quoted strings or objects."""
    problems = []
    for brace in ("{", "}"):
        if brace in text:
            problems.append(f"raw JSON: {brace!r}")
    match = _KEY_PATTERN.search(text)
    if match:
        problems.append(f"raw JSON: {match.group(0)!r}")
    match = _OPEN_LIST.search(text)
    if match:
        problems.append(f"raw JSON: {match.group(0)!r}")
    return problems


def is_raw_json(text: str) -> bool:
    """Whether a text is, or holds, raw JSON (a dumped object or list, or the marks of one)."""
    stripped = text.strip()
    if stripped[:1] in ("{", "[") and isinstance(decoded(stripped), dict | list):
        return True
    return bool(json_problems(text))


def is_reportable(value: Any) -> bool:
    """Whether an answer is expected to be able to say this scalar (see the module docstring)."""
    if isinstance(value, bool) or value is None:
        return False
    if isinstance(value, int | float):
        return True
    if not isinstance(value, str):
        return False
    text = value.strip()
    return (
        0 < len(text) <= MAX_REPORTABLE_CHARS
        and " ".join(text.split()) == text
        and not _JSON_MARKS & set(text)
        and any(c.isalnum() for c in text)
    )


def answer_limit(n_calls: int) -> int:
    """The longest answer allowed for a task with ``n_calls`` calls."""
    return MAX_ANSWER_CHARS + PER_EXTRA_CALL_CHARS * max(0, n_calls - 1)


# ---------------------------------------------------------------------------------------------- evidence
@dataclass
class _Evidence:
    """What the results hold, in the forms the answer's tokens are compared with."""

    text: str = ""
    numbers: set[float] = field(default_factory=set)
    dates: set[tuple[int, int, int]] = field(default_factory=set)

    def has_text(self, token: str) -> bool:
        """``token`` as a whole token of the results' text (case-insensitive; ``/`` and ``:`` may border it)."""
        pattern = rf"(?<![A-Za-z0-9_\-]){re.escape(_normal(token).lower())}(?![A-Za-z0-9_\-]|\.\d)"
        return re.search(pattern, self.text) is not None

    def has_number(self, value: float, percent: bool = False) -> bool:
        wanted = {_key(value)} | ({_key(value / 100)} if percent else set())
        return bool(wanted & self.numbers)

    def has_date(self, year: int | None, month: int, day: int | None) -> bool:
        return any(m == month and (day is None or d == day) and (year is None or y == year) for y, m, d in self.dates)


def _key(value: float) -> float:
    return round(abs(value), 6)


def _normal(text: str) -> str:
    return text.replace("\u2019", "'").replace("\u2018", "'")


def _evidence(values: Sequence[Any]) -> _Evidence:
    ev = _Evidence()
    texts: list[str] = []
    for value in values:
        _gather(decoded(value), ev, texts)
    ev.text = _normal("\n".join(texts)).lower()
    return ev


def _gather(value: Any, ev: _Evidence, texts: list[str]) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            texts.append(str(k))
            _gather(decoded(v), ev, texts)
    elif isinstance(value, list):
        for v in value:
            _gather(decoded(v), ev, texts)
    elif isinstance(value, bool) or value is None:
        return
    elif isinstance(value, int | float):
        ev.numbers.add(_key(float(value)))
        texts.append(str(value))
    elif isinstance(value, str):
        texts.append(value)
        for y, m, d in _ISO_DATE.findall(value):
            ev.dates.add((int(y), int(m), int(d)))
        for match in _TOKEN.finditer(_normal(value)):
            if match.group("number"):
                ev.numbers.add(_key(_number(match.group("number"))))


def _number(token: str) -> float:
    """``-$1,234.50`` -> -1234.5 (a sign on either side of the ``$``)."""
    digits = token.replace("$", "").replace(",", "").replace("%", "")
    sign = -1.0 if digits.count("-", 0, 2) % 2 else 1.0
    return sign * float(digits.lstrip("-"))


# ---------------------------------------------------------------------------------------------- answer tokens
def _sentence_initial(text: str, start: int) -> bool:
    before = text[:start].rstrip(" \t\"'(*-\u2013\u2014")
    return not before or before[-1] in ".!?:\n"


def _tokens(text: str) -> Iterator[re.Match[str]]:
    return _TOKEN.finditer(text)


def _month(name: str) -> int:
    return _MONTH_NUMBER[name.rstrip(".").lower()]


def _date_problem(match: re.Match[str], ev: _Evidence) -> str | None:
    token = match.group(0)
    if ev.has_text(token):
        return None
    if match.group("iso"):
        ok = ev.has_date(int(match.group("iy")), int(match.group("im")), int(match.group("id")))
    elif match.group("mdy"):
        year = match.group("y1")
        ok = ev.has_date(int(year) if year else None, _month(match.group("m1")), int(match.group("d1")))
    elif match.group("dmy"):
        year = match.group("y2")
        ok = ev.has_date(int(year) if year else None, _month(match.group("m2")), int(match.group("d2")))
    else:
        ok = ev.has_date(int(match.group("y3")), _month(match.group("m3")), None)
    return None if ok else f"date {token!r} is not in the results"


def _ident_problem(text: str, match: re.Match[str], ev: _Evidence) -> str | None:
    token = match.group(0)
    if _LETTERS_JOINED.fullmatch(token):
        return _joined_words_problem(text, match, ev)
    if ev.has_text(token):
        return None
    if _DIGITS_HYPHENATED.fullmatch(token):
        parts = token.split("-")
        if len(parts) == 2 and len(parts[0]) == 4 and len(parts[1]) == 2 and 1 <= int(parts[1]) <= 12:
            if ev.has_date(int(parts[0]), int(parts[1]), None):
                return None
        elif all(ev.has_number(float(p)) for p in parts):
            return None
    return f"identifier {token!r} is not in the results"


def _joined_words_problem(text: str, match: re.Match[str], ev: _Evidence) -> str | None:
    """Words joined by ``-``, ``.`` or ``/`` (``follow-up``, ``e.g``, ``and/or``) are English; their capitalised
    parts are names like any other."""
    for part in re.finditer(r"[A-Za-z]+", match.group(0)):
        if part.group(0)[0].isupper():
            problem = _word_problem(text, part.group(0), match.start() + part.start(), ev)
            if problem:
                return problem
    return None


def _word_problem(text: str, word: str, start: int, ev: _Evidence) -> str | None:
    low = word.lower()
    if low in _PRONOUNS or low in _WEEKDAYS or _sentence_initial(text, start):
        return None
    if low in _MONTH_NUMBER and low in MONTHS:
        if ev.has_date(None, _MONTH_NUMBER[low], None) or ev.has_text(word):
            return None
        return f"month {word!r}: no date of that month in the results"
    stem = low[:-2] if low.endswith("'s") else low
    if ev.has_text(low) or ev.has_text(stem.rstrip("'")):
        return None
    return f"name {word!r} is not in the results"


def _token_problem(text: str, match: re.Match[str], ev: _Evidence) -> str | None:
    token = match.group(0)
    if match.group("iso") or match.group("mdy") or match.group("dmy") or match.group("my"):
        return _date_problem(match, ev)
    if match.group("time"):
        return None if ev.has_text(token) else f"time {token!r} is not in the results"
    if match.group("path"):
        return None if ev.has_text(token) else f"name {token!r} is not in the results"
    if match.group("number"):
        value = _number(token)
        if ev.has_number(value, percent=bool(match.group("pct"))):
            return None
        if value.is_integer() and 1900 <= value <= 2100 and any(y == int(value) for y, _, _ in ev.dates):
            return None
        return f"number {token!r} is not in the results"
    if match.group("ident"):
        return _ident_problem(text, match, ev)
    return _word_problem(text, token, match.start(), ev)


_ZERO_WORDS = re.compile(r"\b(?:nothing|none|zero|anything)\b", re.IGNORECASE)


def _said(answer: str, value: Any) -> bool:
    """Whether the answer says a scalar: as :func:`mentions` finds it, a number also without its sign, and a zero
    also in words ("you owe nothing", "you didn't spend anything")."""
    if mentions(answer, value):
        return True
    number = _numeric(value)
    if number is None:
        return False
    if number == 0:
        return _ZERO_WORDS.search(answer) is not None
    if number < 0:
        return mentions(answer, value.strip()[1:] if isinstance(value, str) else -value)
    return False


def _numeric(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str) and re.fullmatch(r"-?\d[\d,]*(?:\.\d+)?", value.strip()):
        return float(value.replace(",", ""))
    return None


def _reports_nothing(answer: str, observations: Sequence[Any]) -> list[str]:
    problems = []
    for i, result in enumerate(observations):
        reportable = [v for v in scalar_values(decoded(result)) if is_reportable(v)]
        if reportable and not any(_said(answer, v) for v in reportable):
            problems.append(f"reports nothing of call {i + 1}'s result (say e.g. {str(reportable[0])!r})")
    return problems


def answer_problems(answer: str, observations: list[Any], earlier: Sequence[Any] = ()) -> list[str]:
    """What is wrong with a gold final answer (empty: it passes; the rules are in the module docstring).

    Args:
        answer: the answer's text.
        observations: this task's call results, one per call (an ``{"ok":..,"result":..}`` envelope is read as its
            result; a string holding JSON as that JSON).
        earlier: results of the session's earlier tasks: they may back what the answer recalls.
    """
    text = _normal(answer)
    if not text.strip():
        return ["empty answer"]
    results = [observation_result(o) for o in observations]
    problems: list[str] = []
    limit = answer_limit(len(results))
    if len(text) > limit:
        problems.append(f"too long: {len(text)} characters (at most {limit}: summarise long lists)")
    problems += json_problems(text)
    ev = _evidence([*results, *(observation_result(e) for e in earlier)])
    for match in _tokens(text):
        problem = _token_problem(text, match, ev)
        if problem and problem not in problems:
            problems.append(problem)
    problems += _reports_nothing(text, results)
    return problems
