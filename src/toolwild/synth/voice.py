"""How one user talks: a register kept through a session, and the ways a finished sentence is said in it.

Why a layer of its own: templates decide *what* a user asks and record its gold; how the words come out (an opener,
a reason from the user's day, lower case typed in a hurry, a closing thanks) must not change the request. A
:class:`Voice` therefore only ever wraps the template's sentence or touches its first letter and final mark; it
never rewrites the values inside. The caller still checks each realisation with its gold checks and falls back to the
next (the template's own sentence last), so a wrapping that happens to read as a value or a reference is never kept.

A domain supplies the content: per topic, reasons a person of that domain has for asking ("the landlord wants the
deposit soon"); the registers and their openers and closers are domain-free. Reasons carry real content on purpose:
they are what makes two requests for the same thing differ in meaning as well as in letters, which openers and
fillers do not.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["REGISTERS", "Register", "Voice"]


@dataclass(frozen=True)
class Register:
    """A way of typing: what one says first and last, and how carefully."""

    name: str
    openers: tuple[str, ...]
    """Said before the request (each a sentence or ends with a colon or dash)."""
    later: tuple[str, ...]
    """Said before a request that is not the session's first ("Okay, next thing.")."""
    closers: tuple[str, ...]
    """Said after it."""
    careless: float
    """How often the first letter stays lower case and the final mark is dropped."""
    reason: float
    """How often a reason from the user's day goes with the request."""


REGISTERS: tuple[Register, ...] = (
    Register("plain", (), (), (), 0.0, 1.0),
    Register(
        "chatty",
        (
            "Hey!",
            "Hi there!",
            "Oh, before I forget:",
            "So, a thing I keep meaning to ask:",
            "Alright, here's one.",
            "Morning!",
            "Evening! Tea in hand.",
            "Okay, money time.",
            "Right, let's do this.",
            "Good news, I finally sat down with my finances.",
        ),
        (
            "Okay, next thing.",
            "Hmm, one more for you.",
            "Right, moving on.",
            "You're being a great help today.",
            "Ha, this is the bit I always put off.",
            "Cool. Next:",
            "Oh, also:",
        ),
        ("Thanks!", "Cheers.", "You're a star.", "Appreciate it!", "Thanks a ton :)", "Much obliged."),
        0.1,
        1.0,
    ),
    Register(
        "polite",
        (
            "Hello, could you help me with something?",
            "Good morning. When you have a moment:",
            "I'd be grateful for your help with this.",
            "May I ask you something?",
            "Hi, I hope this is quick for you.",
            "Good afternoon.",
            "Hello there, I have a question.",
            "Excuse me, a request please.",
            "Would you be so kind as to help?",
            "Dear assistant, a small task for you.",
        ),
        (
            "Sorry to bother you again.",
            "If it's no trouble, one more thing.",
            "Thank you for that. Next, please:",
            "I have another request, if I may.",
        ),
        ("Thank you very much.", "Thanks so much.", "Many thanks.", "Thank you kindly.", "I appreciate the help."),
        0.0,
        1.0,
    ),
    Register(
        "hurried",
        ("quick one:", "real quick -", "fast q:", "need this asap:", "on my phone, sorry:", "between meetings here -"),
        ("ok so", "next:", "also -", "one more:", "another thing -"),
        ("thx", "ty", "asap pls", "gotta run", "thanks!!"),
        0.7,
        1.0,
    ),
    Register("terse", (), (), (), 0.85, 0.85),
)
"""The registers a session's user may have (drawn once per session; :class:`Voice`)."""

_LOWER_FIRST = re.compile(r"^(?:[A-Z][a-z']*)(?=[\s,:;?.!-])")
_GREETS = re.compile(r"^(?:hi|hello|hey)\b", re.IGNORECASE)
"""A sentence that greets already has its opener."""
_KEEP_CAPITAL = frozenset({"I", "I'm", "I've", "I'd", "I'll"})


def _lower_first(text: str) -> str:
    """The text with its first word in lower case when that word is an ordinary word (not "I", not a name in the
    middle of the sentence: only the first word is ever touched, and only when it is a plain capitalised word)."""
    match = _LOWER_FIRST.match(text)
    if match is None or match.group(0) in _KEEP_CAPITAL:
        return text
    return text[:1].lower() + text[1:]


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _unpunctuated(text: str) -> str:
    return text[:-1] if text.endswith((".", "?", "!")) and not text.endswith("...") else text


_LEAD_INS = (
    "Honestly,",
    "Well,",
    "Ugh,",
    "So,",
    "Funny thing:",
    "Long story short,",
    "FYI",
    "Context:",
    "Background:",
    "Thing is,",
    "As it happens,",
    "Okay, so",
    "To be honest,",
    "Quick context:",
    "Right now",
    "Small update:",
)
"""What a person may say before the reason they give first."""

_CARRY_TAILS = (
    "Just curious.",
    "For comparison.",
    "Quickly, please.",
    "If you can.",
    "Out of interest.",
    "Thanks.",
    "Just wondering.",
    "Same deal.",
    "Cheers.",
    "For my notes.",
)
"""What a user may add after a short follow-up that takes its request from the turn before (a few words: it
stays a fragment)."""


class Voice:
    """One user's voice for a session: a register drawn once, and realisations of each sentence in it."""

    def __init__(
        self,
        rng: random.Random,
        reasons: Mapping[str, Sequence[str]],
        *,
        register: Register | None = None,
    ) -> None:
        """``rng``: the session's seeded stream; ``reasons``: per topic, reasons the domain's users give (each a
        clause without end mark, e.g. "the landlord wants the deposit soon"); ``register``: forced (None: drawn)."""
        self.rng = rng
        self.reasons = reasons
        self.register = register if register is not None else rng.choice(REGISTERS)
        self._said: set[str] = set()

    def realisations(
        self,
        sentence: str,
        topic: str,
        *,
        fragments: Sequence[str] = (),
        carry: bool = False,
        first: bool = False,
        terse: float | None = None,
    ) -> list[str]:
        """Ways to say ``sentence`` in this voice, best first; the sentence itself always last (the caller's
        fallback). ``fragments``: terse forms of the same request, preferred by the terse and hurried registers;
        ``carry``: the sentence is a fragment that takes its request from the turn before ("And savings?"), so
        nothing goes in front of it and it stays short; ``first``: the session's first request (no "next thing");
        ``terse``: the chance of a fragment (None: the register's own)."""
        out: list[str] = []
        chance = {"terse": 0.9, "hurried": 0.5}.get(self.register.name, 0.2) if terse is None else terse
        if fragments and self.rng.random() < chance:
            frag = self.rng.choice(list(fragments))
            frag = self._careless(frag) if self.rng.random() < self.register.careless else frag
            if self.rng.random() < 0.5:  # a fragment may still get a word after it ("balance? thx")
                frag = f"{frag} {self.rng.choice(self.register.closers or _CARRY_TAILS)}"
            out.append(frag)
        if carry:
            out += self._carried(sentence, topic)
        else:
            out += self._wrapped(sentence, topic, first)
        out.append(sentence)
        seen: set[str] = set()
        return [t for t in out if not (t in seen or seen.add(t))]  # type: ignore[func-returns-value]

    def reply(self, text: str) -> list[str]:
        """Ways to say a short reply to a question (a value: "last month.", "checking"), best first, the reply
        itself last."""
        bare = _unpunctuated(text.strip())
        forms = [
            f"{_lower_first(bare)}",
            f"{_capital(bare)}, please.",
            f"Oh, {_lower_first(bare)}.",
            f"{_capital(bare)}, sorry.",
            f"Um, {_lower_first(bare)}",
            f"{_capital(bare)} - thanks.",
            f"{_capital(bare)}!",
            f"Sorry, {_lower_first(bare)}.",
            f"{_lower_first(bare)} pls",
            f"Right, {_lower_first(bare)}.",
            f"Let me check... {_lower_first(bare)}.",
            f"Yes - {_lower_first(bare)}.",
            f"OK: {_lower_first(bare)}.",
            f"{_capital(bare)}, if that helps.",
            f"{_capital(bare)} :)",
            f"Ah, {_lower_first(bare)}.",
            f"{_capital(bare)}. Thanks for checking.",
        ]
        self.rng.shuffle(forms)
        return [*forms[:2], text]

    def remember(self, text: str) -> None:
        """Note a realisation that was kept (the voice avoids saying the same reason twice in a session)."""
        self._said.add(text)

    # ------------------------------------------------------------------ internals
    def _careless(self, text: str) -> str:
        return _unpunctuated(_lower_first(text))

    def _reason(self, topic: str) -> str | None:
        pool = [r for r in self.reasons.get(topic, ()) if r not in self._said] or list(self.reasons.get(topic, ()))
        if not pool:
            return None
        reason = self.rng.choice(pool)
        self._said.add(reason)
        return reason

    def _carried(self, sentence: str, topic: str) -> list[str]:
        """A fragment that takes its request from the turn before stays a fragment; an aside may come first."""
        out = []
        if self.rng.random() < self.register.reason:
            reason = self._reason(topic)
            if reason is not None:
                out.append(f"{_capital(reason)}. {sentence}")
        if self.rng.random() < self.register.careless:
            out.append(self._careless(sentence))
        if self.register.closers and self.rng.random() < 0.4:
            out.append(f"{sentence} {self.rng.choice(self.register.closers)}")
        if self.rng.random() < 0.6:
            out.append(f"{sentence} {self.rng.choice(_CARRY_TAILS)}")
        return out

    def _wrapped(self, sentence: str, topic: str, first: bool) -> list[str]:
        """Two different wrappings of a whole sentence (each may be rejected by the caller's checks)."""
        out = []
        for _ in range(2):
            text = sentence
            reg = self.register
            if self.rng.random() < reg.reason:
                reason = self._reason(topic)
                if reason is not None:
                    text = self._with_reason(text, reason, after=bool(_GREETS.match(sentence)))
            openers = () if _GREETS.match(sentence) else reg.openers if first else reg.openers + reg.later
            if openers and self.rng.random() < 0.3:
                opener = self.rng.choice(openers)
                lower = opener.endswith((":", "-")) or opener[-1].isalpha()
                text = f"{opener} {_lower_first(text) if lower else text}"
            if reg.closers and self.rng.random() < 0.45:
                text = f"{text} {self.rng.choice(reg.closers)}"
            if self.rng.random() < reg.careless:
                text = self._careless(text)
            out.append(text)
        return out

    def _with_reason(self, sentence: str, reason: str, *, after: bool = False) -> str:
        """The sentence with a reason before or after it (``after``: after only, as a greeting comes first), in one
        of several shapes; a reason said first may come with a lead-in ("Thing is, ...")."""
        shape = self.rng.choice((2, 3, 5)) if after else self.rng.choice((0, 0, 0, 1, 1, 1, 4, 4, 2, 3, 5))
        if shape in (0, 1) and self.rng.random() < 0.5:
            reason = f"{self.rng.choice(_LEAD_INS)} {reason}"
        if shape == 0:
            return f"{_capital(reason)}, so {_lower_first(sentence)}"
        if shape == 1:
            return f"{_capital(reason)}. {sentence}"
        if shape == 2:
            return f"{sentence} {_capital(reason)}."
        if shape == 3:
            return f"{sentence} ({reason})"
        if shape == 4:
            return f"Since {reason}: {_lower_first(sentence)}"
        return f"{_unpunctuated(sentence)} - {reason}."
