"""What the user says: template wording of generated tasks, and model-written wording checked against the gold.

A task's wording has hard rules, whoever writes it: every value the user supplies is stated (the agent cannot guess
it), and every value the task leaves to the conversation (a reference, an omission, a withheld parameter that an ask
must recover) is *not* stated. A reference names its source when the generator says the name alone is ambiguous
(:class:`~toolwild.core.references.Pointer`: "the units I asked for", "the units it came back with", "the restock"),
and no span of six or more words is copied from a tool's description. Templates meet the rules by construction (a
draw that breaks one, say a template word that happens to be a hidden value, is drawn again); a model's utterance is
checked against them (:func:`wording_problems`) and retried, and a run falls back to the template when the model
cannot meet them, counting how often.

Templates are combinatorial on purpose: a training set in which the same sentence comes back a hundred times teaches
the sentence, not the task. Every utterance is a lead-in x a request frame x clause phrasings x a closer, and the
replies to asks (short, so they repeat most) are a lead-in x a core x an ending. No template word is a digit, so a
template never states a number by accident.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from toolwild.core.hidden_intent import mentions, scalar_values
from toolwild.core.overlap import copied_description_spans
from toolwild.core.references import ARG_MARKERS, FIRST_MARKERS, RESULT_MARKERS, Pointer, humanize
from toolwild.core.tool import Tool
from toolwild.llm.client import LLM
from toolwild.llm.structured import write_checked

__all__ = [
    "Phrase",
    "Wording",
    "ask_again",
    "ask_question",
    "humanize",
    "pointer_of",
    "pointer_phrase",
    "pointer_reply",
    "render_value",
    "template_utterance",
    "vague_reply",
    "value_reply",
    "wording_problems",
    "write_utterance",
]

_VERBS = frozenset(
    "add analyze apply approve assign block book borrow calculate cancel change check close compare compute confirm "
    "convert create delete detect download edit estimate export fetch find generate get import issue lend list "
    "lookup monitor move notify open order pay place post predict process publish query rate record refund "
    "register reject remove renew rent reserve reset restock retrieve return review schedule search send set "
    "share start stop submit track transfer update upgrade upload validate verify".split()
)
_TRIES = 24
"""Draws of a template before giving up on it (a draw fails only when a template word collides with a value)."""
_SAME_AGAIN = "same again"
"""The words a repeat of an earlier request must keep (one of the checker's ARG markers)."""


# ---------------------------------------------------------------------------------------------- banks
# Utterances: lead-in + request frame (``{x}`` is the clauses) + closer. Leads end in ", " / ": " (the frame goes on
# in lower case) or in ". " / "! " (it starts a sentence). None holds a marker phrase of core.references.
_LEADS = (
    "", "", "", "Hi! ", "Hey, ", "Okay, ", "Right, ", "Alright, ", "Quick one: ", "So, ", "Hello. ", "Hey there. ",
    "Next, ", "Hmm, ", "Good. ", "Great, ", "Now, ", "Listen, ", "OK so ", "Morning! ",
)  # fmt: skip
_FRAMES = (
    "Please {x}.", "Can you {x}?", "Could you {x}?", "I need you to {x}.", "Go ahead and {x}.", "Would you {x}?",
    "I'd like you to {x}.", "{x}, please.", "Can I get you to {x}?", "Let's {x}.", "Could you please {x}?",
    "Time to {x}.", "Do me a favour and {x}.", "I want you to {x}.", "Would you {x}, if you don't mind?",
    "I'd love it if you could {x}.",
    "Help me {x}, would you?", "Are you able to {x}?", "Be a star and {x}.", "Can you quickly {x}?",
)  # fmt: skip
_INNER = ("", "", "", " for me", " when you get a chance", " if you can", " right away", " today", " now")
_CLOSERS = (
    "", "", "", " Thanks!", " Thank you.", " Cheers.", " Much appreciated.", " No rush.", " Thanks in advance.",
    " Appreciate it.", " That would help a lot.", " Thanks a bunch.",
)  # fmt: skip
# How the values of a call are said: ``{p}`` the parameter in words, ``{v}`` the value.
_ARG_STYLES = ("{p} {v}", "{p} {v}", "{p}: {v}", "{v} as the {p}", "{p} set to {v}", "the {p} {v}")
_ARG_INTROS = (" for ", " with ", ", with ", ", for ", " using ")
_FED = (
    "using the {e} from the {o} step", "with the {e} that the {o} step gives", "taking the {e} from the {o} step",
    "with the {e} you find in the {o} step", "feeding in the {e} from the {o} step",
)  # fmt: skip
_ORDINAL = ("first", "second", "third", "fourth", "fifth")
_TOGETHER = (
    ", and also ", " and ", ", plus ", "; also ", ", and while you're at it, ", ", and at the same time ",
    ", and on top of that ", " as well as ",
)  # fmt: skip
_THEN = (
    ", then ",
    ", and then ",
    ", and after that ",
    "; once that's done, ",
    ", and when that's finished, ",
    ", next ",
)
_EXPLICIT_NOUN = ("run our {w}", "use our {w}", "run {w}", "use {w}")
"""A tool named without "the": "the <tool words>" is how a reference names an earlier call."""
# An ambiguous request says what the user wants without the tool's name: whole names first, then verb synonyms.
_WHOLE = {
    "place order": ("put in an order", "ring up a sale", "make a sale", "put through an order", "sell some stock"),
    "restock": ("top up the stock", "bring in more stock", "stock up", "refill the shelves", "add to the stock"),
    "list items": ("show me everything we carry", "tell me what we have on the shelves", "go over our product range"),
}
_SYNONYMS = {
    "get": ("look up", "find out", "check", "pull up"), "fetch": ("look up", "pull up", "grab"),
    "retrieve": ("pull up", "look up", "dig out"), "find": ("track down", "look for", "hunt down"),
    "search": ("look for", "hunt for", "dig around for"), "lookup": ("look up", "check"),
    "query": ("ask about", "look up"),
    "list": ("show me all", "go through all", "run through all", "give me a rundown of all"),
    "create": ("set up", "make", "put together"), "add": ("put in", "include", "slot in"),
    "update": ("change", "adjust", "tweak"), "edit": ("change", "rework", "tweak"), "set": ("change", "adjust"),
    "change": ("adjust", "alter"), "delete": ("get rid of", "remove", "throw away"),
    "remove": ("get rid of", "take out"),
    "cancel": ("call off", "scrap", "drop"), "check": ("look into", "double-check", "have a look at"),
    "verify": ("double-check", "confirm"), "validate": ("double-check", "make sure of"),
    "send": ("send off", "get out"),
    "book": ("reserve", "lock in"), "reserve": ("hold", "put aside"), "schedule": ("plan", "line up", "pencil in"),
    "calculate": ("work out", "figure out"), "compute": ("work out", "figure out"), "estimate": ("guess", "gauge"),
    "predict": ("forecast", "project"), "track": ("keep an eye on", "follow"), "monitor": ("watch", "keep tabs on"),
    "transfer": ("shift", "move over"), "move": ("shift", "relocate"), "pay": ("settle", "cover"),
    "refund": ("reimburse", "give back the money for"), "register": ("sign up", "enrol"),
    "submit": ("send in", "hand in"),
    "approve": ("sign off on", "okay"), "reject": ("turn down", "decline"), "generate": ("produce", "put together"),
    "analyze": ("dig into", "look closely at"), "record": ("log", "note down"), "start": ("kick off", "begin"),
    "stop": ("halt", "end"), "open": ("open up", "start"), "close": ("close out", "wrap up"),
    "review": ("go over", "look over"),
    "export": ("get out a copy of", "pull out"), "import": ("bring in", "load in"), "issue": ("hand out", "put out"),
    "convert": ("turn over", "switch over"), "compare": ("weigh up", "put side by side"),
    "notify": ("alert", "let know"),
    "upload": ("put up", "send up"), "download": ("pull down", "grab a copy of"), "assign": ("hand", "give"),
    "renew": ("extend", "keep going"), "reset": ("clear", "start over on"), "confirm": ("lock in", "make sure of"),
    "publish": ("put out", "release"), "rate": ("score", "give a rating to"), "share": ("pass on", "send around"),
    "upgrade": ("bump up", "improve"), "return": ("bring back", "give back"), "apply": ("put through", "use"),
    "block": ("shut off", "stop"), "process": ("handle", "run through"), "post": ("put up", "enter"),
    "order": ("buy", "get in"), "restock": ("top up", "refill"), "detect": ("spot", "pick up on"),
    "borrow": ("take out", "check out"), "lend": ("loan out", "hand over"), "rent": ("hire", "lease"),
}  # fmt: skip
_NOUNS = {
    "stock": ("stock level", "inventory", "stock"), "item": ("product", "article"), "items": ("products", "goods"),
    "order": ("purchase", "sale"), "orders": ("purchases", "sales"), "price": ("cost",), "status": ("state",),
    "invoice": ("bill",), "customer": ("client",), "customers": ("clients",), "details": ("info", "specifics"),
    "info": ("details",), "information": ("details",), "record": ("entry",), "records": ("entries",),
    "booking": ("reservation",), "reservation": ("booking",), "report": ("summary", "write-up"), "message": ("note",),
    "appointment": ("booking", "slot"), "user": ("person",), "users": ("people",), "balance": ("money left",),
}  # fmt: skip
_GENERIC = ("take care of the {o}", "deal with the {o}", "sort out the {o}", "see to the {o}", "handle the {o}")
# Partial repeats: "same again" and the tool's words, contiguous (the checker matches them as substrings).
_PARTIALS = (
    "the same again for the {t}, but with {c}", "the same again on the {t}, only with {c} this time",
    "the same again with the {t}, but {c} instead", "the same again, the {t} one, but with {c}",
    "the same again on the {t}, this time with {c}", "the same again for the {t}, just with {c}",
    "the same again on the {t}, except with {c}", "the same again for the {t} but with {c}",
)  # fmt: skip
_PARTIAL_FRAMES = (
    "{x}.", "{x}.", "Could you do {x}?", "Let's have {x}.", "{x}, please.", "Can we do {x}?", "I'd like {x}.",
    "Can I have {x}?", "Now {x}.",
)  # fmt: skip
# Chat: a first chat names an entity in passing; a recall asks for an earlier value back.
_GREETINGS = ("Hi!", "Hello!", "Hey there.", "Good morning.", "Hi there.", "Hello,", "Hey!", "Afternoon!")
_CONTEXTS = (
    "I'm sorting out {k} {v} today.", "I'm dealing with {k} {v} at the moment.", "I've got {k} {v} on my mind.",
    "I'm working on {k} {v} this morning.", "My focus today is {k} {v}.", "I have some questions about {k} {v}.",
    "I'll be busy with {k} {v} for a bit.",
)  # fmt: skip
_CAPABILITY = (
    "What can you help me with?", "What sorts of things can you do?", "What are you able to do for me?",
    "How can you help?", "What can you do here?", "What kinds of things can you handle?", "Where can you help out?",
    "What are my options with you?", "What's in your toolbox?",
)  # fmt: skip
_RECALL_LEADS = (
    "",
    "Thanks. ",
    "Thanks! ",
    "Okay. ",
    "Hmm, ",
    "Sorry, ",
    "Wait, ",
    "Quick check: ",
    "Oh, ",
    "Hang on. ",
)
_RECALLS = (
    "what was {n}?", "remind me, what was {n}?", "can you tell me {n} again?", "I lost track of {n}. What was it?",
    "just so I have it right, what was {n}?", "what did we have for {n}?", "could you repeat {n}?",
    "I forgot {n}, what was it?", "what was {n} again?",
)  # fmt: skip
_FOLLOW_UPS = (
    "and the {k}?", "what about the {k}?", "and what was the {k} there?", "and the {k} for that one?",
    "how about the {k}?", "and which {k} was it?", "what was the {k} on that, then?",
)  # fmt: skip
# References: a head (naming the channel when the pointer says so) + when (+ the earlier call's tool).
_HEADS = {
    "": ("the same {p} as {w}", "the {p} we had {w}", "the {p} we used {w}", "the very same {p} as {w}"),
    "arg": ("the {p} I asked for {w}", "the same {p} I asked for {w}", "the {p} I gave {w}", "the {p} I wanted {w}"),
    "result": (
        "the {p} it came back with {w}", "the {p} you got back {w}", "the {p} it reported {w}",
        "the {p} it returned {w}",
    ),
}  # fmt: skip
_RECALL_HEADS = {
    "": ("the {p} {w}", "the {p} we had {w}", "the {p} that came up {w}", "the {p} mentioned {w}"),
    "arg": ("the {p} I asked for {w}", "the {p} I gave {w}", "the {p} I wanted {w}"),
    "result": (
        "the {p} it came back with {w}", "the {p} you got back {w}", "the {p} it reported {w}",
        "the {p} it returned {w}",
    ),
}  # fmt: skip
_WHEN = {
    "coref": ("just now", "a moment ago", "a minute ago", "in my last request"),
    "long": ("earlier", "earlier on", "a while back", "earlier in our chat", "some time ago"),
    "first": ("in my first request", "back in my first request", "way back in my first request"),
}
_TOOL_WHEN = ("on the {t} {w}", "for the {t} {w}", "in the {t} {w}", "from the {t} {w}")
# Replies to asks: lead-in + core + ending.
_REPLY_LEADS = ("", "", "Oh, ", "Right, ", "Sorry, ", "Hmm, ", "Ah, ", "Okay, ", "Yes, ", "Well, ")
_VALUE_CORES = (
    "{v}", "{v}", "{v}, please", "let's go with {v}", "make it {v}", "make it {v} this time", "{v} would be great",
    "use {v}", "I'd say {v}", "go with {v}", "it's {v}", "the {p} is {v}", "{v} for the {p}", "definitely {v}",
    "let's say {v}", "{v} is the one", "{v}, I think", "put down {v}", "{v} works",
)  # fmt: skip
_REPLY_ENDS = (".", ".", "!", ". Thanks!", ", thanks.", ". Thank you.", ". Cheers.")
_VAGUE_CORES = (
    "whichever you think is best", "not sure, the usual one I guess", "you pick, I don't mind", "surprise me",
    "whatever makes sense to you", "I don't really mind", "any of them is fine", "up to you",
    "I haven't decided, you choose",
    "it doesn't matter much to me", "whatever's typical", "your call", "I'm not fussy", "I'll leave that to you",
    "pick whatever seems right", "no preference, really", "dealer's choice",
)  # fmt: skip
_VAGUE_ENDS = (".", "!", "...", ", honestly.", ". Whatever works.", ". Anything is fine.")
_POINTER_REPLIES = (
    "{n}",
    "{n}, please",
    "use {n}",
    "just use {n}, please",
    "let's go with {n}",
    "take {n}",
    "{n}, if that works",
)
_ASK_LEADS = ("Sure.", "Happy to.", "Of course.", "Okay.", "Got it.", "I can do that.", "Certainly.")
_ASKS = (
    "Which {p} should I use?", "What {p} would you like?", "Could you tell me the {p}?", "What should the {p} be?",
    "I just need the {p}: what is it?", "Which {p} is it?",
)  # fmt: skip
_POINTER_ASKS = ("Which {p} do you mean?", "Which {p} are you referring to?", "Which {p} is that?")
_AGAIN_LEADS = (
    "I can't pick that for you",
    "I'd rather not guess",
    "That's yours to decide",
    "I need a definite answer",
)
_AGAINS = (": which {p} exactly?", ". Which {p} should it be?", "; could you name the {p}?", ". What {p} do you want?")


# ---------------------------------------------------------------------------------------------- values
def render_value(value: Any) -> str:
    """A value as a user would type it."""
    if isinstance(value, list):
        return ", ".join(render_value(v) for v in value)
    if isinstance(value, dict):
        return " and ".join(f"{humanize(str(k))} {render_value(v)}" for k, v in value.items())
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def pointer_of(how: Pointer | str) -> Pointer:
    """A reference as a :class:`Pointer` (a bare string, the older form, is its reach: ``coref`` / ``long`` /
    ``partial``)."""
    if isinstance(how, Pointer):
        return how
    if how not in ("coref", "long", "partial"):
        raise ValueError(f"unknown reference reach {how!r}")
    return Pointer(how=how)  # type: ignore[arg-type]


@dataclass
class Phrase:
    """One call of a task as the user asks for it."""

    tool: Tool
    stated: dict[str, Any] = field(default_factory=dict)
    """Arguments whose values the user says."""
    refer: dict[str, Pointer | str] = field(default_factory=dict)
    """Arguments the user points to instead of stating: parameter -> how (:class:`Pointer`; a bare ``coref`` /
    ``long`` / ``partial`` string is read as ``Pointer(how=...)``)."""
    fed: dict[str, tuple[int, str]] = field(default_factory=dict)
    """Arguments taken from an earlier call of the same task: parameter -> (call position, entity)."""


@dataclass
class Wording:
    """Everything needed to word a task, and the rules any wording must keep."""

    kind: str
    """``single``, ``parallel``, ``sequential``, ``mixed``, ``clarify``, ``chat-first``, ``chat-recall``,
    ``partial`` (the same tool as an earlier task, with only the changed values said)."""
    phrases: list[Phrase] = field(default_factory=list)
    hidden: list[Any] = field(default_factory=list)
    """Values the wording must not state (references, omissions, withheld parameters)."""
    ambiguous: bool = False
    """Say what the user wants without the tools' names (from their names' words, never their descriptions)."""
    recall: tuple[str, str] | None = None
    """For ``chat-recall``: (the key asked about, ``coref`` / ``long`` / ``partial``); for ``chat-first``: (the key,
    the value) the user names in passing."""
    recall_pointer: Pointer | None = None
    """For ``chat-recall``: how the question points at the value (source markers, tool); else ``recall``'s reach."""
    first_reference: bool = False
    """A long-range reference that points at the first task (worded "my first request")."""

    @property
    def stated(self) -> list[Any]:
        """Values the wording must state."""
        named = [self.recall[1]] if self.kind == "chat-first" and self.recall else []
        return named + [v for p in self.phrases for v in scalar_values(p.stated)]

    def pointers(self) -> list[tuple[str, Pointer]]:
        """Every (parameter or key, pointer) the wording must word as a reference."""
        out = [(param, pointer_of(how)) for phrase in self.phrases for param, how in phrase.refer.items()]
        if self.kind == "chat-recall" and self.recall is not None:
            out.append((self.recall[0], self.recall_pointer or pointer_of(self.recall[1])))
        return out

    def first(self, pointer: Pointer) -> bool:
        """Whether a long-range pointer is worded as pointing at the first task."""
        return pointer.how == "long" and (pointer.first or self.first_reference)


# ---------------------------------------------------------------------------------------------- pieces
def _opening(text: str) -> str:
    """``text`` as the start of a sentence."""
    return text[:1].upper() + text[1:]


def _continuing(text: str) -> str:
    """``text`` going on after a comma or colon (lower case, but "I" stays)."""
    return text if re.match(r"I\b", text) else text[:1].lower() + text[1:]


def _lead(lead: str, text: str) -> str:
    if not lead:
        return _opening(text)
    return lead + (_continuing(text) if lead.rstrip()[-1:] in ",:" or lead.endswith("so ") else _opening(text))


def _verb(tool: Tool, ambiguous: bool, rng: random.Random) -> str:
    """How the user names what a tool does: by its name's words (explicit) or without them (ambiguous)."""
    words = humanize(tool.name)
    if ambiguous:
        return _indirect(words, rng)
    return words if words.split()[0] in _VERBS else rng.choice(_EXPLICIT_NOUN).format(w=words)


def _split(words: list[str]) -> tuple[str | None, list[str]]:
    """A tool name's verb and object words: ``get stock`` -> (get, [stock]); ``amount checker`` -> (check,
    [amount]); a name without a verb -> (None, all words)."""
    if words[0] in _SYNONYMS or words[0] in _VERBS:
        return words[0], words[1:]
    last = words[-1]
    for stem in (last[:-2], last[:-1], last[:-2] + "e"):
        if len(words) > 1 and last.endswith(("er", "or")) and stem in _SYNONYMS:
            return stem, words[:-1]
    return None, words


def _indirect(words: str, rng: random.Random) -> str:
    """What a tool does, in other words: a whole-name paraphrase, else a verb synonym with the object's words (nouns
    swapped for a synonym where one is known), else a generic phrase about the object."""
    if words in _WHOLE:
        return rng.choice(_WHOLE[words])
    verb, rest = _split(words.split())
    obj = " ".join(rng.choice(_NOUNS[w]) if w in _NOUNS else w for w in rest)
    if verb in _SYNONYMS:
        said = rng.choice(_SYNONYMS[verb])
        return f"{said} the {obj}" if obj else said
    return rng.choice(_GENERIC).format(o=obj or words)


def _join(parts: Sequence[str], last: str) -> str:
    if len(parts) <= 1:
        return "".join(parts)
    return ", ".join(parts[:-1]) + last + parts[-1]


def _values(stated: dict[str, Any], rng: random.Random) -> list[str]:
    style = rng.choice(_ARG_STYLES)
    return [style.format(p=humanize(p), v=render_value(v)) for p, v in stated.items()]


def pointer_phrase(
    param: str, pointer: Pointer, rng: random.Random, *, first: bool = False, recall: bool = False
) -> str:
    """A noun phrase pointing at an earlier value: ``the same units as just now``, ``the units I asked for
    earlier``, ``the units it came back with on the restock just now``, ``the item from my first request``.

    It holds the parameter's words, the channel marker of ``pointer.source``, the tool's words when
    ``pointer.tool`` is set, and a first-task marker when ``first``; a recall (a question) avoids "the same".
    """
    reach = "first" if first else "long" if pointer.how == "long" else "coref"
    when = rng.choice(_WHEN[reach])
    if pointer.tool:
        when = rng.choice(_TOOL_WHEN).format(t=humanize(pointer.tool), w=when)
    heads = (_RECALL_HEADS if recall else _HEADS)[pointer.source]
    return rng.choice(heads).format(p=humanize(param), w=when)


def _args(phrase: Phrase, wording: Wording, rng: random.Random) -> list[str]:
    parts = _values(phrase.stated, rng)
    for param, how in phrase.refer.items():
        pointer = pointer_of(how)
        parts.append(pointer_phrase(param, pointer, rng, first=wording.first(pointer)))
    rng.shuffle(parts)
    return parts


def _clause(phrase: Phrase, wording: Wording, rng: random.Random) -> str:
    """One call in words. In a request of several calls a clause holds no comma of its own, so the joiners between
    calls stay readable."""
    alone = len(wording.phrases) == 1
    text = _verb(phrase.tool, wording.ambiguous, rng)
    args = _args(phrase, wording, rng)
    fed = [rng.choice(_FED).format(e=humanize(entity), o=_ORDINAL[i]) for i, entity in phrase.fed.values()]
    joined = _join(args, rng.choice((" and ", ", and "))) if alone else " and ".join(args)
    if fed:
        text += " " + " and ".join(fed)
        return text + (f"{', ' if alone else ' '}with {joined}" if args else "")
    if args:
        text += rng.choice(_ARG_INTROS if alone else _ARG_INTROS[:2]) + joined
    return text


def _request(body: str, rng: random.Random) -> str:
    frame = rng.choice(_FRAMES)
    inner = rng.choice(_INNER)
    x = body + inner
    text = frame.format(x=_opening(x) if frame.startswith("{x}") else x)
    return _lead(rng.choice(_LEADS), text) + rng.choice(_CLOSERS)


# ---------------------------------------------------------------------------------------------- by kind
def _chat_first(wording: Wording, rng: random.Random) -> str:
    greeting, question = rng.choice(_GREETINGS), rng.choice(_CAPABILITY)
    if wording.recall is None:
        return f"{greeting} {question}"
    key, value = wording.recall
    context = rng.choice(_CONTEXTS).format(k=humanize(key), v=value)
    if greeting.endswith(","):
        return f"{greeting} {_continuing(context)} {question}"
    return f"{greeting} {context} {question}"


def _chat_recall(wording: Wording, rng: random.Random) -> str:
    assert wording.recall is not None
    key = wording.recall[0]
    pointer = wording.recall_pointer or pointer_of(wording.recall[1])
    lead = rng.choice(_RECALL_LEADS)
    if pointer.how == "partial" and not (pointer.source or pointer.tool):
        return _lead(lead, rng.choice(_FOLLOW_UPS).format(k=humanize(key)))
    named = pointer_phrase(key, pointer, rng, first=wording.first(pointer), recall=True)
    return _lead(lead, rng.choice(_RECALLS).format(n=named)) + rng.choice(_CLOSERS[:6])


def _partial(wording: Wording, rng: random.Random) -> str:
    phrase = wording.phrases[0]
    changed = _join(_args(phrase, wording, rng), " and ")
    core = rng.choice(_PARTIALS).format(t=humanize(phrase.tool.name), c=changed)
    frame = rng.choice(_PARTIAL_FRAMES)
    if frame.startswith("{x}") and rng.random() < 0.5:
        core = core.removeprefix("the ")  # "Same again for the restock, ..."
    text = frame.format(x=_opening(core) if frame.startswith("{x}") else core)
    return _lead(rng.choice(_LEADS[:12]), text) + rng.choice(_CLOSERS)


def _calls(wording: Wording, rng: random.Random) -> str:
    clauses = [_clause(p, wording, rng) for p in wording.phrases]
    if wording.kind == "sequential":
        steps = clauses[0] + "".join(rng.choice(_THEN) + c for c in clauses[1:])
        return _request(("first " if rng.random() < 0.3 else "") + steps, rng)
    return _request(_join(clauses, rng.choice(_TOGETHER)), rng)


def _compose(wording: Wording, rng: random.Random) -> str:
    if wording.kind == "chat-first":
        return _chat_first(wording, rng)
    if wording.kind == "chat-recall":
        return _chat_recall(wording, rng)
    if wording.kind == "partial":
        return _partial(wording, rng)
    return _calls(wording, rng)


def template_utterance(wording: Wording, rng: random.Random) -> str:
    """The template wording of a task (meets the rules of :func:`wording_problems` by construction).

    Takes one draw from ``rng`` whatever the banks hold, so growing a bank never shifts the rest of a session.
    """
    local = random.Random(rng.getrandbits(64))
    text = ""
    for _ in range(_TRIES):
        text = _compose(wording, local)
        if not wording_problems(text, wording):
            return text
    return text


# ---------------------------------------------------------------------------------------------- asks and replies
def _fits(text: str, must: Any, avoid: Sequence[Any]) -> bool:
    return (must is None or mentions(text, must)) and not any(mentions(text, v) for v in avoid if v != must)


def value_reply(param: str, value: Any, rng: random.Random, avoid: Sequence[Any] = ()) -> str:
    """The user's answer to "which ``param``?": states ``value`` (and none of ``avoid``)."""
    said = render_value(value)
    for _ in range(_TRIES):
        core = rng.choice(_VALUE_CORES)
        lead = rng.choice(_REPLY_LEADS)
        body = core.format(v=said, p=humanize(param))
        if lead:
            body = lead + _continuing(body)
        elif not core.startswith("{v}"):
            body = _opening(body)
        text = body + rng.choice(_REPLY_ENDS)
        if _fits(text, value, avoid):
            return text
    return f"{said}."


def vague_reply(rng: random.Random, avoid: Sequence[Any] = ()) -> str:
    """A reply that leaves the choice to the assistant (states none of ``avoid``)."""
    text = "Up to you."
    for _ in range(_TRIES):
        lead = rng.choice(_REPLY_LEADS)
        core = rng.choice(_VAGUE_CORES)
        text = (lead + _continuing(core) if lead else _opening(core)) + rng.choice(_VAGUE_ENDS)
        if _fits(text, None, avoid):
            return text
    return text


def pointer_reply(
    param: str, pointer: Pointer | str, rng: random.Random, *, first: bool = False, avoid: Sequence[Any] = ()
) -> str:
    """The user's answer to "which ``param`` do you mean?" when it is an earlier value: a reference, never the
    value (so the reply keeps the pointer's markers, like an utterance would)."""
    ref = pointer_of(pointer)
    text = ""
    for _ in range(_TRIES):
        named = pointer_phrase(param, ref, rng, first=first and ref.how == "long")
        lead = rng.choice(_REPLY_LEADS)
        core = rng.choice(_POINTER_REPLIES).format(n=named)
        text = (lead + _continuing(core) if lead else _opening(core)) + rng.choice(_REPLY_ENDS[:3])
        if _fits(text, None, avoid) and not _pointer_problems(text, param, ref, first=first and ref.how == "long"):
            return text
    return text


def ask_question(param: str, rng: random.Random, *, pointer: bool = False) -> str:
    """The assistant's question for a missing value (``pointer``: the user referred to it, so which one is meant)."""
    asks = _POINTER_ASKS if pointer else _ASKS
    return f"{rng.choice(_ASK_LEADS)} {rng.choice(asks).format(p=humanize(param))}"


def ask_again(param: str, rng: random.Random) -> str:
    """The assistant's second question after a vague reply: it will not choose for the user."""
    return rng.choice(_AGAIN_LEADS) + rng.choice(_AGAINS).format(p=humanize(param))


# ---------------------------------------------------------------------------------------------- rules
def _pointer_problems(text: str, param: str, pointer: Pointer, *, first: bool) -> list[str]:
    """What a wording of a reference misses: the name, the channel marker, the tool's words, the first-task marker;
    or markers of both channels at once (which name no channel)."""
    low = text.lower()
    words = humanize(param)
    problems = []
    if not any(word in low for word in words.split()):
        problems.append(f"- utterance: must say which {words} is meant (e.g. 'the same {words} as before')")
    has_arg, has_result = any(m in low for m in ARG_MARKERS), any(m in low for m in RESULT_MARKERS)
    if pointer.source == "arg" and (not has_arg or has_result):
        problems.append(f"- utterance: must point at the {words} I asked for (say 'the {words} I asked for')")
    if pointer.source == "result" and (not has_result or has_arg):
        problems.append(f"- utterance: must point at the {words} it came back with (say 'it came back with')")
    if pointer.tool and humanize(pointer.tool) not in low:
        problems.append(f"- utterance: must name the {humanize(pointer.tool)} when pointing at the {words}")
    if first and not any(m in low for m in FIRST_MARKERS):
        problems.append(f"- utterance: must say the {words} is from my first request")
    return problems


def wording_problems(text: str, wording: Wording) -> list[str]:
    """What an utterance gets wrong: a stated value missing, a hidden value given away, a reference that does not
    say which value it means, a description copied, or a bad length."""
    problems = []
    if not text.strip() or len(text) > 600:
        problems.append("- utterance: must be one to a few sentences (1-600 characters)")
    for value in wording.stated:
        if not mentions(text, value):
            problems.append(f"- utterance: must state the value {render_value(value)!r} exactly")
    for value in wording.hidden:
        if mentions(text, value):
            problems.append(f"- utterance: must not state {render_value(value)!r} (the assistant must infer it)")
    low = text.lower()
    if any(voice in low for voice in ("the user", "the assistant", "no tool")):
        problems.append("- utterance: write as the user, in the first person (not about 'the user')")
    for param, pointer in wording.pointers():
        problems += _pointer_problems(text, param, pointer, first=wording.first(pointer))
    if wording.kind == "partial" and wording.phrases:
        tool = humanize(wording.phrases[0].tool.name)
        if _SAME_AGAIN not in low or tool not in low:
            problems.append(f"- utterance: a repeat must say 'the same again' and name the {tool}")
    for span in copied_description_spans(text, [p.tool for p in wording.phrases]):
        problems.append(f"- utterance: must not copy the tool description ({span!r}); say it in your own words")
    return problems


# ---------------------------------------------------------------------------------------------- model writer
class _Utterance(BaseModel):
    model_config = ConfigDict(extra="forbid")

    utterance: str = Field(description="What the user types, in their own words.")


_SYSTEM = (
    "You write what a user types to an assistant that can call tools. Write one natural request in the user's voice. "
    "State every value listed under 'say' exactly as given. Never state the values listed under 'do not say': the "
    "user expects the assistant to take them from the conversation or to ask. Where a call lists 'point to', refer "
    "to that value instead and keep the example's marker words (they say which earlier value is meant). Never copy "
    "the tool descriptions. Reply with JSON only."
)


def _brief_call(phrase: Phrase, wording: Wording) -> dict[str, Any]:
    call: dict[str, Any] = {
        "tool": phrase.tool.name,
        "what it does": phrase.tool.description,
        "say": {k: render_value(v) for k, v in phrase.stated.items()},
    }
    if phrase.refer:
        example = random.Random(0)
        call["point to"] = {
            p: pointer_phrase(p, pointer_of(h), example, first=wording.first(pointer_of(h)))
            for p, h in phrase.refer.items()
        }
    return call


def _brief(wording: Wording, history: list[str], template: str, service: str) -> dict[str, Any]:
    calls = [_brief_call(p, wording) for p in wording.phrases]
    brief: dict[str, Any] = {
        "the service": service or "an assistant with tools",
        "conversation so far (user turns)": history,
        "the request asks for": calls or "no tool: a question the assistant answers from the conversation",
        "do not say": [render_value(v) for v in wording.hidden],
        "a correct example": template,
    }
    if wording.kind == "partial" and wording.phrases:
        brief["keep the words"] = [f"the {_SAME_AGAIN}", humanize(wording.phrases[0].tool.name)]
    if wording.kind == "chat-first" and wording.recall is not None:
        brief["say in passing"] = {wording.recall[0]: wording.recall[1]}
    for key, pointer in wording.pointers() if wording.kind == "chat-recall" else []:
        example = random.Random(0)
        brief["the question asks about"] = pointer_phrase(
            key, pointer, example, first=wording.first(pointer), recall=True
        )
    return brief


async def write_utterance(
    llm: LLM, wording: Wording, history: list[str], template: str, *, service: str = "", seed: int = 0
) -> tuple[str, bool]:
    """A model-written utterance that keeps the wording's rules, or the template when the model cannot.

    ``history`` is the session's earlier user turns (so references are to what was really said), ``service`` what
    the environment is. Returns (text, written by the model).
    """
    messages = [
        {"role": "system", "content": _SYSTEM},
        {"role": "user", "content": json.dumps(_brief(wording, history, template, service), ensure_ascii=False)},
    ]

    return await write_checked(
        llm,
        messages,
        _Utterance,
        "utterance",
        lambda text: wording_problems(text, wording),
        template,
        name="utterance",
        role="user-writer",
        seed=seed,
        max_tokens=200,
    )
