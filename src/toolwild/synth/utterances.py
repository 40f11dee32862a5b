"""What the user says: template wording of generated tasks, and model-written wording checked against the gold.

A task's wording has hard rules, whoever writes it: every value the user supplies is stated (the agent cannot guess
it), and every value the task leaves to the conversation (a reference, an omission, a withheld parameter that an ask
must recover) is *not* stated. A reference names its source when the generator says the name alone is ambiguous
(:class:`~toolwild.core.references.Pointer`: "the units I asked for", "the units it came back with", "the restock"),
and no span of six or more words is copied from a tool's description. Templates meet the rules by construction (a
draw that breaks one, say a template word that happens to be a hidden value, is drawn again); a model's utterance is
checked against them (:func:`wording_problems`) and retried, and a run falls back to the template when the model
cannot meet them, counting how often.

The templates are a phrasing layer, not one sentence with slots: a training set in which the same sentence comes back
a hundred times teaches the sentence, not the task. Each intent (a read, a write, a lookup-then-act, a repeat with a
change, a chat, a reply to a question) has many realisations in the user's voice:

- a *register* (terse, plain, chatty, polite, hurried) picks the frame, the greeting, the sign-off and how sloppily
  the user types (lower case, no final stop, "pls");
- a call is said the way a person says it, never as the tool's name used as a verb with ``key: value`` slots: "top
  up tea by 3 units", "how much rice is left?", "put through a sale of 2 units of the item I asked for just now";
  a value is said bare or with its noun ("3 units"), always in the case the gold passes;
- an everyday *context clause* says why the user asks ("a delivery just came in", "I'm between meetings"): it holds
  no number, no entity name, no date and no marker word of a reference, so no checker reads a value into it.

No template word is a digit, so a template never states a number by accident.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from toolwild.core.grounding import schema_values
from toolwild.core.hidden_intent import mentions, scalar_values
from toolwild.core.overlap import copied_description_spans
from toolwild.core.references import ARG_MARKERS, FIRST_MARKERS, RESULT_MARKERS, Pointer, humanize, singular
from toolwild.core.tool import Effect, Tool
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
    "topic_of",
    "vague_reply",
    "value_reply",
    "wording_problems",
    "write_utterance",
]

_VERBS = frozenset(
    "add analyze apply approve assign block book borrow calculate cancel change check close compare compute confirm "
    "convert create delete detect download edit estimate export fetch find generate get import inspect issue lend list "
    "lookup monitor move notify open order pay place post predict process publish query rate record refund "
    "register reject remove renew rent report reserve reset restock retrieve return review schedule search send set "
    "share start stop submit track transfer update upgrade upload validate verify".split()
)
_LOOKUP_VERBS = frozenset("get fetch retrieve lookup query read show view check find".split())
_ADD_VERBS = frozenset("add restock create register import upload record post open issue book reserve".split())
_TRIES = 24
"""Draws of a template before giving up on it (a draw fails only when a template word collides with a value)."""
_PLAIN_AFTER = 12
"""Draws after which a template leaves out its context clause and sign-off (fewer words that can collide)."""
_SAME_AGAIN = "same again"
"""The words a repeat of an earlier request must keep (one of the checker's ARG markers)."""
_SHOP_WORDS = frozenset("stock stocks inventory restock shop store warehouse".split())
"""Words of an environment's tools that make it a shop (its users speak of deliveries, shelves and customers)."""


# ---------------------------------------------------------------------------------------------- registers
# A register is a frame for the request (``{x}`` is what to do, a verb phrase), greetings that open it, sign-offs,
# how often the user says why, and how sloppily they type. Leads end in ", " / " " after a word that goes on in lower
# case, or in ". " / "! " (the next word starts a sentence). None holds a marker phrase of core.references, a digit,
# or a colon followed by a word (that is how ``key: value`` slots read).
_LEADS = (
    "", "", "", "", "", "Okay, ", "Right, ", "Alright, ", "So, ", "Next, ", "Hmm, ", "Good. ", "Great, ", "Listen, ",
    "OK so ", "Also, ", "Oh, another thing. ", "Another thing, ", "Oh, ", "Well, ",
)  # fmt: skip
_FRAMES = (
    "Please {x}.", "Can you {x}?", "Could you {x}?", "I need you to {x}.", "Go ahead and {x}.", "Would you {x}?",
    "I'd like you to {x}.", "{x}, please.", "Let's {x}.", "Could you please {x}?", "Do me a favour and {x}.",
    "I want you to {x}.", "Help me {x}, would you?", "Are you able to {x}?", "Can you quickly {x}?", "We need to {x}.",
    "Time to {x}.", "{x} for me, please.", "Can we {x}?", "Can you {x} when you get a chance?",
    "Could you {x} if you can?",
)  # fmt: skip
_CLOSERS = ("", "", "", "", " Thanks.", " Thank you.", " Cheers.", " Thanks in advance.", " Appreciate it.")
_CHATTY_LEADS = (
    "Hi! ", "Hey there! ", "Morning! ", "Hello, ", "Hey, ", "Hi again, ", "Oh hey, ", "Hiya! ", "Afternoon! ",
    "Evening! ", "Hi there. ", "Hey you. ", "Hello hello! ",
)  # fmt: skip
_CHATTY_FRAMES = (
    "Would you {x} for me?", "Any chance you could {x}?", "I'd love it if you could {x}.",
    "Could you be a star and {x}?", "Think you could {x}?", "Mind helping me {x}?", "Can I get you to {x}?",
    "If you could {x}, that'd be great.", "Would you be a dear and {x}?", "Fancy helping me {x}?",
    "I was hoping you could {x}.", "Could you do me a quick favour and {x}?", "Be a star and {x}.",
    "I'd be thrilled if you could {x}.",
)  # fmt: skip
_CHATTY_CLOSERS = (
    " Thanks so much!", " You're a lifesaver.", " Cheers!", " Appreciate it!", " Thanks a bunch.", " Thank you!", "",
    " Much obliged!", " You're the best.", " Owe you one!", " Thanks, friend.",
)  # fmt: skip
_POLITE_LEADS = (
    "", "", "Hello. ", "Good morning. ", "Hi, ", "Excuse me, ", "Sorry to bother you, ", "Hello there, ",
    "Pardon me, ", "Good afternoon. ",
)  # fmt: skip
_POLITE_FRAMES = (
    "Would you please {x}?", "Could I ask you to {x}?", "If it's no trouble, could you {x}?",
    "When you have a moment, please {x}.", "I would be grateful if you could {x}.", "Kindly {x}.",
    "May I ask you to {x}?", "Would it be possible to {x}?", "I'd appreciate it if you would {x}.",
    "Would you be so kind as to {x}?", "If you don't mind, please {x}.", "I wonder if you could {x}.",
)  # fmt: skip
_POLITE_CLOSERS = (
    " Thank you very much.", " Many thanks.", " Much appreciated.", " Thank you kindly.", " Thank you.", "",
    " With thanks.", " Grateful as always.",
)  # fmt: skip
_TERSE_LEADS = ("", "", "", "", "ok ", "hey ", "right ", "so ", "k ", "hi ", "oh and ", "also ", "yo ")
_TERSE_FRAMES = (
    "{x}", "{x}", "{x}", "{x} pls", "{x} please", "{x} thx", "pls {x}", "need to {x}", "gotta {x}", "just {x}",
    "can u {x}", "{x} for me", "could u {x}", "{x} ok?",
)  # fmt: skip
_TERSE_CLOSERS = ("", "", "", "", " thx", " ty", " cheers", " ta")
_HURRIED_LEADS = (
    "", "", "Quick favour. ", "Sorry, in a hurry. ", "Hey, quickly. ", "Rushing here, ", "No time to chat, ",
    "Busy busy. ",
)  # fmt: skip
_HURRIED_FRAMES = (
    "{x}, quick!", "Quickly {x}.", "Asap please, {x}.", "Need you to {x} fast.", "Hurry please, {x}.", "{x} asap.",
    "Can you {x} right away?", "{x}, and fast please.", "Please {x}, I'm in a rush.", "Can you {x} real quick?",
    "Just {x}, quick.",
)  # fmt: skip
_HURRIED_CLOSERS = ("", "", "", " Thanks!", " Ta.", " Thx!", " Go go go.")
# How a question (a read put as one: "how much tea is left?") opens, whatever the register's lead.
_QUESTION_LEADS = (
    "", "", "", "", "Quick question, ", "Hmm, ", "Tell me, ", "Out of curiosity, ", "Just wondering, ",
    "Wait, ", "Honest question, ",
)  # fmt: skip


@dataclass(frozen=True)
class _Voice:
    """A register's banks, how often its user says why (``context``) and how often they type sloppily."""

    leads: tuple[str, ...]
    frames: tuple[str, ...]
    closers: tuple[str, ...]
    context: float
    sloppy: float


_VOICES = {
    "plain": _Voice(_LEADS, _FRAMES, _CLOSERS, 0.8, 0.1),
    "chatty": _Voice(_CHATTY_LEADS, _CHATTY_FRAMES, _CHATTY_CLOSERS, 0.95, 0.05),
    "polite": _Voice(_POLITE_LEADS, _POLITE_FRAMES, _POLITE_CLOSERS, 0.85, 0.0),
    "terse": _Voice(_TERSE_LEADS, _TERSE_FRAMES, _TERSE_CLOSERS, 0.6, 0.9),
    "hurried": _Voice(_HURRIED_LEADS, _HURRIED_FRAMES, _HURRIED_CLOSERS, 0.85, 0.35),
}
_VOICE_WEIGHTS = {"plain": 0.3, "chatty": 0.2, "polite": 0.15, "terse": 0.2, "hurried": 0.15}

# ---------------------------------------------------------------------------------------------- context clauses
# Why the user asks: a clause in lower case without a final stop. None holds a number (in digits or words), an
# entity's name, a date word ("today", a weekday, a month), a reference's marker, or a tool's name.
_SHOP_CONTEXTS = {
    "add": (
        "a delivery just came in", "the supplier dropped off a few boxes", "the wholesaler's van just left",
        "we found an unopened case in the back room", "the supplier truck came early",
        "a pallet arrived while I was on my break", "I just finished unpacking the morning delivery",
        "my colleague signed for a delivery", "the wholesaler sent a bit extra this time", "we got a shipment in",
        "a customer brought back some unopened packs", "the cash and carry run went well",
        "the farm shop down the road sold us their surplus", "the courier left boxes at the back door",
        "I picked some up on the way in", "the supplier made good on the last shortfall",
        "the new shelving is up and needs filling", "the storeroom turned up more than we thought",
        "the driver just got the last crates off the van", "our standing order finally turned up",
        "the boxes have been sitting by the door all morning", "my partner brought a carload from the market",
    ),
    "sell": (
        "a customer is waiting at the till", "a regular just phoned in an order", "the café next door wants some",
        "someone is standing at the counter", "a school called for a bulk order", "a caterer is picking up soon",
        "we have an online order to fill", "the restaurant across the street ran out",
        "a lady at the counter is in a hurry",
        "a customer wants it bagged up to go", "the market stall needs supplies",
        "the office upstairs is ordering again",
        "a regular of ours is back", "a tour group just walked in", "a neighbour asked for some",
        "the deli wants some for their lunch menu", "a guy from the gym is waiting outside",
        "the church fete asked for supplies", "a customer already paid and is waiting",
        "the food bank volunteers came by", "a student is buying for the whole flat",
    ),
    "read": (
        "I'm deciding whether to reorder", "a customer asked if we have enough", "I'm planning the weekend shelves",
        "I don't want to promise what we don't have", "I'm writing the shopping list for the supplier",
        "the shelf looked a bit empty when I walked past", "the owner asked me how we're doing",
        "I'm putting together the weekly order", "I want to know before the lunch rush",
        "a caterer might place a big order", "I have a feeling we're running low", "I'm about to call the supplier",
        "the shelf label looks off to me", "someone on the phone is asking", "I need it for the stock sheet",
        "I'm double-checking before I close up", "the manager wants a quick count", "I'm trying to plan a promotion",
        "it sold fast lately", "I think someone miscounted", "the supplier is asking what we need",
    ),
    "list": (
        "I'm redoing the price board", "a new hire asked what we carry", "I'm updating the website",
        "someone on the phone asked what we sell", "I'm doing a stock take", "I want a product list for the counter",
        "the landlord wants to know what we keep here", "I'm writing the new menu board",
        "a supplier asked which lines we carry", "I'm training the weekend staff", "I'm putting together a flyer",
        "I can never remember everything we carry", "a customer asked for a full list",
        "I'm setting up the online shop", "our accountant asked for a product overview",
    ),
    "chain": (
        "I don't want to sell what we haven't got", "what I do next depends on what's there",
        "I'd rather look before I act", "the last count was off", "I want to be careful with the numbers",
        "I want the figures straight before the supplier calls", "a customer is waiting on the answer",
        "the shelf and the system never seem to agree",
    ),
    "any": (
        "it's been a busy morning at the shop", "we open soon", "the manager is coming by later",
        "I'm closing up soon", "the weekend rush is coming", "I'm doing the books after closing",
        "I'm alone in the shop",
        "the till is acting up again", "I'm covering for a colleague", "the boss is on holiday",
        "it's my first week running the shop", "the shop's been quiet", "I'm trying to get ahead of the lunch crowd",
        "we're short-staffed", "I'm on the shop floor with my phone", "the owner left me in charge",
        "I'm between customers", "there's a queue building", "the stockroom is a mess",
        "I'm finishing the end-of-day checks", "the heating's broken and I'm working fast",
    ),
}  # fmt: skip
_CONTEXTS = {
    "write": (
        "it has to be done before the end of the day", "I promised I'd sort this out", "someone's waiting on it",
        "my manager asked me to take care of it", "I want to get this off my plate", "the team is waiting on me",
        "it's been on my list all week", "a colleague is counting on it", "I'd like it in before the meeting",
        "the client is waiting", "I told them it would be done by lunch", "it keeps slipping my mind",
    ),
    "read": (
        "I need it for a report", "I'm double-checking something before I decide", "I'd like to see where things stand",
        "my manager asked me for an update", "I'm preparing for a meeting", "a colleague asked me about it",
        "I want to be sure before I go ahead", "I'm putting together a summary", "the client asked for details",
        "something didn't look right", "I'm checking my notes against the system",
    ),
    "chain": (
        "what I do next depends on what you find", "I'd rather look before I act", "each step depends on the last",
    ),
    "any": (
        "I'm between meetings", "I'm on my phone so keeping it short", "I'm catching up on a backlog",
        "it's been a hectic morning", "I'm about to head out", "I'm working from home", "I'm trying to clear my list",
        "things have been busy", "I've got a few minutes before my next call", "I'm covering for a colleague",
        "I'm new to this system", "I'm picking this up from a colleague",
    ),
}  # fmt: skip
# Who wants something of the user, and what ("the owner is on the phone"): the everyday reason, composed.
_SHOP_WHO = (
    "the owner", "my manager", "the delivery driver", "a regular", "the supplier", "my colleague on the late shift",
    "the new hire", "the accountant", "the bakery next door", "our weekend helper", "the area manager",
    "the landlord", "my business partner", "the café owner across the road", "the lady from the florist",
    "a customer on the phone",
)  # fmt: skip
_WHO = (
    "my manager", "a colleague", "the team lead", "a client", "my business partner", "the auditor", "our accountant",
    "a coworker", "the project lead", "my boss", "someone from finance", "the person I'm covering for",
)  # fmt: skip
_DOES = (
    "is asking about it", "wants an answer soon", "keeps asking me", "is on the phone", "is waiting for my call",
    "needs the figure for the books", "asked me to look into it", "will be in shortly",
    "wants it sorted before closing",
    "is coming by after lunch", "left me a note about it", "sent me a message about it", "is standing right here",
    "wants it done properly this time", "is fussing about it", "brought it up at the meeting",
)  # fmt: skip
# How a context clause sits around the request ({C}: the clause as a sentence, {c}: going on; {R}: the request,
# {r}: the request going on after a comma; {S}: the request, a statement without its final stop).
_PLACINGS = ("{C}. {R}", "{C}, so {r}", "{R} {C}.", "{C}. Anyway, {r}", "{R} ({C}.)")
_STATEMENT_PLACINGS = ("{S}, since {c}.", "{S} because {c}.", "{S}, as {c}.", "{S}; {c}.")
_TERSE_PLACINGS = ("{c}, {r}", "{r}, {c}", "{c} so {r}", "{c}. {r}")

# ---------------------------------------------------------------------------------------------- calls
# Realisations of a call, by the tool's name in words: ``named`` use the name's own words (never as a bare verb with
# slots: "get the stock for tea", "do a restock of tea"), ``other`` say what it does in other words, ``ask`` put a read
# as a question. ``{o}`` is the thing acted on (a value, or a phrase pointing at one), ``{O}`` the same where only a
# value said outright reads well, ``{n}`` a quantity said outright ("3 units"). A realisation without ``{o}`` serves
# when the user leaves the thing out (the assistant must ask for it).
_KNOWN: dict[str, dict[str, tuple[str, ...]]] = {
    "get stock": {
        "named": (
            "get the stock for {o}", "get me the stock of {o}", "get the current stock of {o}",
            "get the stock level on {o}", "get a stock figure for {o}", "get the latest stock for {o}",
            "get the stock count of {o}", "get the stock numbers for {o}", "get the stock", "get me a stock level",
        ),
        "other": (
            "check how much {O} we have", "see how much {O} is left", "find out how much {O} we've got",
            "look up what we have of {o}", "check the shelves for {o}", "count what's left of {o}",
            "tell me how much {O} is on hand", "see where we stand on {o}", "check our {O} levels",
            "look at the numbers for {o}", "pull up the count for {o}", "check how we're doing on {o}",
            "check the stock levels", "look up a stock count", "see how much is left on the shelf",
        ),
        "ask": (
            "how much {O} do we have?", "how much {O} is left?", "how much {O} have we got?",
            "what's the stock on {o}?",
            "how's our {O} looking?", "how many units of {O} are there?", "what does the count for {o} look like?",
            "is there much {O} left?", "where are we at with {o}?", "do we still have {O} on the shelves?",
            "how low are we on {O}?", "how much is left?", "what's the count on the shelf?",
        ),
    },
    "list items": {
        "named": (
            "list the items", "list all the items", "list the items we stock", "list every item we have",
            "list the items on file", "list the items in the shop", "list out the items",
        ),
        "other": (
            "show me everything we carry", "tell me what's on the shelves", "go over our product range",
            "run through what we sell", "give me a rundown of what we stock", "remind me which products we have",
            "pull up the full product list", "tell me which products we carry", "show me the whole range",
        ),
        "ask": (
            "what do we carry?", "what's on the shelves?", "which products do we stock?",
            "what are we selling these days?",
            "what's in our range?", "what do we have in the shop?", "which lines do we keep?",
        ),
    },
    "restock": {
        "named": (
            "do a restock of {o}", "do a restock of {n} for {o}", "log a restock of {n} of {o}",
            "put in a restock for {o}",
            "put through a restock of {n} of {O}", "enter a restock of {o}", "record a restock of {n} of {o}",
            "book a restock for {o}", "do a restock", "log a restock of {n}", "put in a restock",
        ),
        "other": (
            "top up {o} by {n}", "add {n} of {O} to the stock", "bring in {n} of {o}",
            "put {n} of {O} back on the shelves",
            "book in {n} of {o}", "log {n} of {O} as received", "increase {o} by {n}", "top up {o}",
            "add some {O} to the stock", "refill the {O} shelf", "stock up on {o}", "top up the stock by {n}",
            "add {n} to the stock", "log a delivery of {n}", "top up the stock", "add {n} more of {O}",
            "put {n} of {o} into the system",
        ),
    },
    "place order": {
        "named": (
            "place an order for {n} of {o}", "place an order for {o}", "place a new order for {n} of {o}",
            "place an order of {n} for {o}", "place a customer order for {n} of {o}", "place a quick order for {O}",
            "place an order for {n}", "place an order", "place an order for some {O}",
        ),
        "other": (
            "sell {n} of {o}", "ring up {n} of {O}", "put through a sale of {n} of {o}",
            "take {n} of {O} off the shelf for a customer", "book a sale of {n} of {o}", "make a sale of {o}",
            "sell some {O}", "put through an order for {o}", "ring up a sale of {n}", "sell {n}", "ring up a sale",
            "sell {n} of {O} to a customer", "let a customer have {n} of {o}", "take an order for {n} of {o}",
        ),
    },
}  # fmt: skip
_NAMED_VERB = ("{v} the {r} {h}", "{v} the {r}")
"""A name that starts with a verb, said with an article: "get the user info for U-7" (``{h}``: the thing acted on
after its preposition, see :data:`_HEAD_PREPS`)."""
_HEAD_PREPS = {
    "": ("for {o}", "for {o}", "of {o}"),
    "name": ("called {O}", "named {O}", "for {o}"),
    "same": ("{O}", "{O}", "for {o}"),
}
"""How the thing acted on follows a noun: in general; a name ("the member called Ada Lovelace"); an identifier of
the noun itself ("the book B-103")."""
_NAMED_BARE_VERB = ("do {a} {v} for {o}", "run {a} {v} on {o}", "put through {a} {v} for {o}", "do {a} {v}")
"""A name that is a verb alone, said as a noun: "run a search on tea"."""
_NAMED_NOUN = (
    "run our {w} on {o}", "use our {w} for {o}", "put {o} through our {w}", "have our {w} look at {o}", "run our {w}",
    "use our {w}",
)  # fmt: skip
"""A name that is no verb: the tool as a noun (never "the {w}": that is how a reference names an earlier call)."""
_OTHER = ("{s} {h}", "{s}")
_ASK_LOOKUP = (
    "what's the {r} for {o}?", "what is the {r} of {o}?", "how does the {r} look for {o}?", "what's the {r}?",
)  # fmt: skip
# An ambiguous request says what the user wants without the tool's name: verb synonyms, nouns swapped.
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
_COUNT_NOUNS = frozenset("quantity qty count number amount".split())
"""Last words of a count parameter that is no plural noun ("quantity"): said "a quantity of 3"."""
# How a value other than the thing acted on is said: ``{p}`` the parameter in words, ``{v}`` the value.
_VALUE_SAID = (
    "{p} {v}", "the {p} {v}", "{v} as the {p}", "{v} for the {p}", "a {p} of {v}", "{p} set to {v}", "the {p} at {v}",
)  # fmt: skip
_COUNT_SAID = ("{v} {p}", "{v} {p}", "{v} {p}", "{v} {p}", "{v} {p}", "{v} {p} in all", "{v} {p} altogether")
_AMOUNT_SAID = ("a {p} of {v}", "{p} {v}", "{v} for the {p}", "the {p} at {v}")
_TAIL_INTROS = (" with ", ", ", " with ", " - ", ", using ")
_TAIL_INTROS_MANY = (" with ", " using ", " and ")
"""How the rest of a call's values follow it (in a request of several calls: no comma of its own)."""
# A value a call takes from an earlier call of the same request ("the item from the first step"): ``{e}`` the entity.
_FED_NEXT = ("that same {e}", "the same {e}", "that {e}", "the {e} from that", "whatever {e} that turns up")
_FED_NEXT_HEAD = ("it", "it", "that same {e}", "the same {e}", "that {e}", "the {e} you find")
_FED_FAR = ("the {e} from the {o} step", "the {e} from the {o} one", "that {e} from the {o} part")
_ORDINAL = ("first", "second", "third", "fourth", "fifth")
_TOGETHER = (
    ", and also ", " and ", ", plus ", "; also ", ", and while you're at it, ", ", and at the same time ",
    ", and on top of that ", " as well as ", ", oh and ", ", and also quickly ",
)  # fmt: skip
_THEN = (
    ", then ", ", and then ", ", and after that ", "; once that's done, ", ", and when that's finished, ", ", next ",
    ", and right after that ", " and then ",
)  # fmt: skip
_FIRSTLY = ("", "", "", "first ")
_FIRSTLY_OPENING = ("", "", "first ", "first of all, ", "to start, ", "step one, ")
"""How a request of steps in order may start (the second bank only where the request opens the sentence)."""
_INNER = (
    "", "", "", "", "", "", " when you get a chance", " if you can", " right away", " before I forget",
    " while I think of it", " if that's okay",
)  # fmt: skip
"""What a request of one call may end with before the frame closes it."""

# ---------------------------------------------------------------------------------------------- repeats
# Partial repeats: "same again" and the tool's words after "the", contiguous (the checker matches them). ``{c}`` is
# what changes.
_PARTIALS = (
    "the same again for the {t}, but with {c}", "the same again on the {t}, only {c} this time",
    "the same again with the {t}, but {c} instead", "the same again, the {t} one, but with {c}",
    "the same again on the {t}, this time with {c}", "the same again for the {t}, just with {c}",
    "the same again on the {t}, except with {c}", "the same again for the {t} but make it {c}",
    "the same again on the {t}, swapping in {c}", "the same again for the {t}, changing it to {c}",
    "the same again with the {t}, {c} this time round", "the same again as the {t} request, but {c}",
)  # fmt: skip
_PARTIAL_FRAMES = (
    "{x}.", "{x}.", "Could you do {x}?", "Let's have {x}.", "{x}, please.", "Can we do {x}?", "I'd like {x}.",
    "Can I have {x}?", "Do {x}, please.", "{x}, if you would.", "{x} pls", "Could we get {x}?",
)  # fmt: skip
_PARTIAL_HEAD_SAID = ("{v}", "{v}", "{p} {v}")
"""How a changed value of the thing acted on is said in a repeat ("only tea this time")."""

# ---------------------------------------------------------------------------------------------- chat
# A first chat names an entity in passing; a recall asks for an earlier value back.
_GREETINGS = (
    "Hi!", "Hello!", "Hey there.", "Good morning.", "Hi there.", "Hello,", "Hey!", "Afternoon!", "Morning!",
    "Hiya.", "Evening!", "Hey,", "Hello again.", "Hi hi.",
)  # fmt: skip
_SHOP_INTROS = (
    "we've been selling a lot of {v} lately", "I look after the {v} shelf here", "{v} keeps running out on us",
    "customers keep asking about {v}", "I'm trying to get a handle on our {v}", "the {v} situation has me worried",
    "I'm in charge of {v} this week", "I just took over ordering {v}", "I think we've been overstocking {v}",
    "a regular keeps asking for {v}", "{v} has been flying off the shelves", "I'm thinking of a promotion on {v}",
    "I want to keep a closer eye on {v}", "the supplier changed the packaging on {v}", "{v} is my headache this week",
    "I'm rearranging the shelf where {v} goes", "our {v} never seems to add up", "the owner asked me to watch {v}",
    "we had a complaint about {v}", "I'm thinking of dropping {v} from the range", "{v} sells out every weekend",
    "I keep forgetting to check on {v}", "a café wants to buy {v} from us in bulk", "the {v} delivery was late again",
    "I'm new and was put in charge of {v}", "I'm moving {v} to a better spot near the door",
    "we might switch suppliers for {v}", "the {v} display needs a rethink", "my notes on {v} are a mess",
    "a school asked whether we stock {v}", "I spilled a box of {v} this morning", "the {v} price went up again",
)  # fmt: skip
_INTROS = (
    "I'm looking into {kv}", "I have some questions about {kv}", "{kv} is on my plate this week",
    "I'm dealing with {kv} at the moment", "I'm sorting out {kv}", "my focus is {kv}",
    "I've been asked to handle {kv}", "I was handed {kv}", "I'm working on {kv}",
    "I keep thinking about {kv}", "I've got {kv} on my mind", "I'll be busy with {kv} for a bit",
    "my manager asked me about {kv}", "a client keeps asking about {kv}", "I'm taking over {kv}",
    "I need to get to the bottom of {kv}", "there's some confusion about {kv}", "I'm new here and inherited {kv}",
    "I'm preparing a review of {kv}", "{kv} came up in a meeting", "I'm tidying up the records on {kv}",
    "a colleague left me {kv} to look after",
)  # fmt: skip
_CAPABILITY = (
    "What can you help me with?", "What sorts of things can you do?", "What are you able to do for me?",
    "How can you help?", "What can you do here?", "What kinds of things can you handle?", "Where can you help out?",
    "What are my options with you?", "What's in your toolbox?", "What can I ask you to do?",
    "What jobs can I hand over to you?", "What exactly do you do?", "Which tasks can you take on?",
    "What could you help me with here?", "What are you good for?", "Can you tell me what you're able to do?",
    "What do you handle?", "Walk me through what you can do?", "So what can you do?", "How do you work, exactly?",
)  # fmt: skip
_CHAT_FIRST = (
    "{I}. {Q}", "{I}. {Q}", "{Q} {I}.", "{I}, so {q}", "{Q} Asking because {i}.", "{I}, and I'm new to this. {Q}",
    "Quick intro, {i}. {Q}", "So, {i}. {Q}",
)  # fmt: skip
_RECALL_LEADS = (
    "", "", "", "Thanks. ", "Thanks! ", "Okay. ", "Hmm, ", "Sorry, ", "Wait, ", "Quick check. ", "Oh, ", "Hang on. ",
    "Right. ", "Got it. ", "One thing, ", "Hmm. ",
)  # fmt: skip
_RECALLS = (
    "what {be} {n}?", "remind me, what {be} {n}?", "can you tell me {n} again?", "I lost track of {n}. What {be} {it}?",
    "just so I have it right, what {be} {n}?", "what did we have for {n}?", "could you repeat {n}?",
    "I forgot {n}, what {be} {it}?", "what {be} {n} again?", "I didn't write down {n}. What {be} {it}?",
    "sorry, what {be} {n}?", "can you remind me of {n}?", "I need {n} again, what {be} {it}?",
    "tell me {n} once more?", "my memory's gone, what {be} {n}?", "remind me of {n}, please?",
    "before I forget, what {be} {n}?", "could you look back and tell me {n}?", "I had {n} in my head and lost {them}.",
    "I scribbled {n} somewhere and can't find {them}. What {be} {it}?",
    "do you still have {n}? What {be} {it}?", "help me out, {n}, what {be} {it} again?",
    "I'm blanking on {n}. Can you say {them} again?", "one more time, what {be} {n}?", "any idea what {n} {be}?",
    "I should have noted {n}. What {be} {it}?", "could you read me back {n}?", "say again, what {be} {n}?",
)  # fmt: skip
_RECALL_PLACINGS = ("{T} {W}.", "{W}, so {q}", "{W}. {Q}", "{T} ({W}.)", "{T} Asking because {w}.")
_SHOP_RECALL_WHY = (
    "I'm filling in the order sheet", "my colleague just asked me", "I want to note it on the shelf label",
    "I'm updating the whiteboard in the back", "the supplier is on the phone", "I'm writing up the day's notes",
    "I'm about to tell the owner", "a customer wants to know", "I'm doing the handover for the late shift",
    "the accountant wants it for the books", "I'm writing the delivery note", "I'm labelling the boxes",
    "I need it for the reorder form", "I'm texting the owner", "the driver is asking", "I'm filling in the logbook",
    "I'm putting it on the sticky note by the till", "my partner wants to double-check", "I'm making the price tags",
    "the new hire is asking me", "I want it on the end-of-day report", "I'm restacking the shelf",
)  # fmt: skip
_RECALL_WHY = (
    "I want to note it down", "a colleague just asked me", "I need it for my summary", "I'm writing up my notes",
    "I'm about to send an update", "I want to double-check my notes", "my manager is asking", "I'm filling in a form",
    "I need it for an email", "I'm putting it in the report", "the client is on the line", "I'm updating the tracker",
    "I'm preparing the handover", "I need it for the minutes",
)  # fmt: skip
_FOLLOW_UPS = (
    "and the {k}?", "what about the {k}?", "and what {be} the {k} there?", "and the {k} for that one?",
    "how about the {k}?", "and which {k} {be} it?", "what {be} the {k} on that, then?", "and the {k} on that?",
    "also, the {k}?", "and the {k}, remind me?", "plus the {k}?", "oh, and the {k}?", "the {k} too, please?",
)  # fmt: skip

# ---------------------------------------------------------------------------------------------- references
# References: a head (naming the channel when the pointer says so) + when (+ the earlier call's tool). The ``n``
# heads say a count ("the same number of units as just now"); a recall (a question) uses its own heads.
_HEADS = {
    "": ("the same {p} as {w}", "the {p} we had {w}", "the {p} we used {w}", "the very same {p} as {w}"),
    "arg": ("the {p} I asked for {w}", "the same {p} I asked for {w}", "the {p} I gave {w}", "the {p} I wanted {w}"),
    "result": (
        "the {p} it came back with {w}", "the {p} you got back {w}", "the {p} it reported {w}",
        "the {p} it returned {w}",
    ),
    "n": ("the same number of {p} as {w}", "as many {p} as we had {w}", "the same {p} as {w}", "the {p} we had {w}"),
    "n-arg": ("as many {p} as I asked for {w}", "the number of {p} I asked for {w}", "the {p} I asked for {w}"),
    "n-result": (
        "as many {p} as it came back with {w}", "the number of {p} it reported {w}", "the {p} it returned {w}",
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
    "coref": ("just now", "a moment ago", "a minute ago", "in my last request", "a second ago", "in the last one"),
    "long": ("earlier", "earlier on", "a while back", "earlier in our chat", "some time ago", "a bit further back"),
    "first": ("in my first request", "back in my first request", "way back in my first request"),
}
_TOOL_WHEN = (
    "on the {t} {w}", "for the {t} {w}", "in the {t} {w}", "from the {t} {w}", "on the {t} call {w}",
    "from the {t} request {w}",
)  # fmt: skip

# ---------------------------------------------------------------------------------------------- replies
# Replies to asks: lead-in + core + tail + ending.
_REPLY_LEADS = (
    "", "", "", "Oh, ", "Right, ", "Sorry, ", "Hmm, ", "Ah, ", "Okay, ", "Yes, ", "Well, ", "Oops, ", "My bad, ",
    "Oh sorry, ", "Good point, ", "Ah right, ", "Uh, ",
)  # fmt: skip
_VALUE_CORES = (
    "{v}", "{v}, please", "let's go with {v}", "make it {v}", "make it {v} this time", "{v} would be great",
    "use {v}", "I'd say {v}", "go with {v}", "it's {v}", "the {p} {be} {v}", "{v} for the {p}", "definitely {v}",
    "let's say {v}", "{v} is the one", "{v}, I think", "put down {v}", "{v} works", "should've said, {v}",
    "forgot to mention, {v}", "I meant {v}", "{v}, sorry for leaving that out", "oh it's {v}",
)  # fmt: skip
_COUNT_CORES = (
    "{v} {p}", "{v} {p}, please", "make it {v} {p}", "{v} of them", "just {v}", "{v} in total", "{v} {p} should do",
    "let's do {v}", "{v} {p} this time",
)  # fmt: skip
_REPLY_TAILS = ("", "", "", "", " for now", " this time", " if that works", " to start with", " for the moment")
_REPLY_ENDS = (".", ".", "!", ". Thanks!", ", thanks.", ". Thank you.", ". Cheers.", "", " thx", ". Ta.")
_VAGUE_CORES = (
    "whichever you think is best", "not sure, the usual one I guess", "you pick, I don't mind", "surprise me",
    "whatever makes sense to you", "I don't really mind", "any of them is fine", "up to you",
    "I haven't decided, you choose", "it doesn't matter much to me", "whatever's typical", "your call",
    "I'm not fussy", "I'll leave that to you", "pick whatever seems right", "no preference, really",
    "dealer's choice", "whatever you'd normally do", "honestly no idea, you decide", "the usual, whatever that is",
    "hmm, can you just pick one", "I trust you on that",
)  # fmt: skip
_VAGUE_ENDS = (".", "!", "...", ", honestly.", ". Whatever works.", ". Anything is fine.", "", " lol")
_POINTER_REPLIES = (
    "{n}", "{n}, please", "use {n}", "just use {n}, please", "let's go with {n}", "take {n}", "{n}, if that works",
    "I mean {n}", "go with {n}", "same as before, {n}",
)  # fmt: skip
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
# Small imperfections of a sloppy typist (word for word, never inside a value).
_THANKS = re.compile(r"\b(thx|thanks|thank|ty|ta|cheers|appreciate|appreciated|grateful|obliged)\b")
_SLOPPY = {"please": "pls", "thanks": "thx", "I'm": "im", "don't": "dont", "that's": "thats", "what's": "whats"}


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


def topic_of(tools: Iterable[Tool]) -> str:
    """What a set of tools is about, for the user's everyday context: ``shop`` when a tool's name or description
    speaks of stock, an inventory, a shop or a warehouse; else empty (contexts that fit any service)."""
    for tool in tools:
        words = set(humanize(tool.name).split()) | set(re.findall(r"[a-z]+", (tool.description or "").lower()))
        if words & _SHOP_WORDS:
            return "shop"
    return ""


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
    topic: str = ""
    """What the user's everyday context is about (:func:`topic_of`); empty: contexts that fit any service."""

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
    """``text`` after a lead-in: a new sentence after a stop, going on in lower case after a comma or a word."""
    if not lead:
        return _opening(text)
    return lead + (_opening(text) if lead.rstrip()[-1:] in ".!?" else _continuing(text))


def _join(parts: Sequence[str], last: str) -> str:
    if len(parts) <= 1:
        return "".join(parts)
    return ", ".join(parts[:-1]) + last + parts[-1]


def _plural(words: str) -> bool:
    last = words.split()[-1] if words.split() else words
    return last.endswith("s") and not last.endswith(("ss", "us", "is"))


def _one(words: str) -> str:
    """``units`` -> ``unit`` (the last word in the singular: "1 unit")."""
    parts = words.split()
    return " ".join([*parts[:-1], singular(parts[-1])]) if parts else words


def _split(words: list[str]) -> tuple[str | None, list[str]]:
    """A tool name's verb and object words: ``get stock`` -> (get, [stock]); a name that ends in an agent noun of a
    known verb -> that verb (``amount checker`` -> (check, [amount]), ``return status tracker`` -> (track, [return,
    status])); a name without a verb -> (None, all words)."""
    last = words[-1]
    if len(words) > 1 and last.endswith(("er", "or")):
        for stem in (last[:-2], last[:-1], last[:-2] + "e", last[:-3] + "y"):
            if stem in _SYNONYMS or stem in _VERBS:
                return stem, words[:-1]
    if words[0] in _SYNONYMS or words[0] in _VERBS:
        return words[0], words[1:]
    return None, words


def _article(template: str, noun: str) -> str:
    """``a {p}`` as ``an {p}`` before a vowel."""
    return template.replace("a {p}", "an {p}") if noun[:1] in ("a", "e", "i", "o", "u") else template


def _said(value: Any, rng: random.Random) -> str:
    """The thing a call acts on as the user types it: exactly as the gold passes it. (A name in another case,
    "Tea" for ``tea``, reads naturally but the environments look names up as given: free-running, the gold would be
    one reading among two.)"""
    return render_value(value)


# ---------------------------------------------------------------------------------------------- one call
@dataclass
class _Slot:
    """One argument as the user gives it: a value said outright, a pointer to an earlier one, or a value an earlier
    call of the same request gives."""

    param: str
    value: Any = None
    pointer: Pointer | None = None
    fed: tuple[int, str] | None = None

    @property
    def said(self) -> bool:
        return self.pointer is None and self.fed is None


def _schema_type(tool: Tool, param: str) -> Any:
    schema = tool.properties.get(param, {})
    kind = schema.get("type") if isinstance(schema, dict) else None
    return kind[0] if isinstance(kind, list) and kind else kind


def _is_count(tool: Tool, slot: _Slot) -> bool:
    """Whether an argument is a count said with its noun ("3 units") or as "a quantity of 3"."""
    words = humanize(slot.param).split()
    if not words:
        return False
    if slot.said:
        whole = isinstance(slot.value, int) and not isinstance(slot.value, bool)
    else:
        whole = _schema_type(tool, slot.param) == "integer"
    return whole and (words[-1] in _COUNT_NOUNS or _plural(words[-1]))


def _is_head(tool: Tool, slot: _Slot) -> bool:
    """Whether an argument can be the thing a call acts on ("tea" in "top up tea"): a name or an identifier."""
    if slot.said:
        return isinstance(slot.value, str)
    return _schema_type(tool, slot.param) in (None, "string")


def _roles(phrase: Phrase) -> tuple[_Slot | None, _Slot | None, list[_Slot]]:
    """A call's arguments by role: the thing acted on, a count, and the rest (in the schema's order)."""
    order = dict.fromkeys([*phrase.tool.properties, *phrase.stated, *phrase.refer, *phrase.fed])
    slots = []
    for param in order:
        if param in phrase.stated:
            slots.append(_Slot(param, value=phrase.stated[param]))
        elif param in phrase.refer:
            slots.append(_Slot(param, pointer=pointer_of(phrase.refer[param])))
        elif param in phrase.fed:
            slots.append(_Slot(param, fed=phrase.fed[param]))
    count = next((s for s in slots if _is_count(phrase.tool, s)), None)
    head = next((s for s in slots if s is not count and _is_head(phrase.tool, s)), None)
    return head, count, [s for s in slots if s is not head and s is not count]


def _label(param: str) -> str:
    """The noun an identifier goes by ("order" for ``order_id``), or empty for a plain name."""
    words = humanize(param).split()
    if len(words) > 1 and words[-1] in ("id", "code", "number", "ref", "key", "sku"):
        return " ".join(words[:-1])
    return ""


def _fed_text(slot: _Slot, index: int, rng: random.Random, *, head: bool) -> str:
    assert slot.fed is not None
    parent, entity = slot.fed
    if parent != index - 1:
        return rng.choice(_FED_FAR).format(e=humanize(entity), o=_ORDINAL[min(parent, len(_ORDINAL) - 1)])
    return rng.choice(_FED_NEXT_HEAD if head else _FED_NEXT).format(e=humanize(entity))


def _pointed(slot: _Slot, wording: Wording, rng: random.Random, *, count: bool = False) -> str:
    assert slot.pointer is not None
    return pointer_phrase(slot.param, slot.pointer, rng, first=wording.first(slot.pointer), count=count)


def _head_text(slot: _Slot, wording: Wording, index: int, rng: random.Random) -> str:
    if slot.pointer is not None:
        return _pointed(slot, wording, rng)
    if slot.fed is not None:
        return _fed_text(slot, index, rng, head=True)
    label = _label(slot.param)
    said = _said(slot.value, rng)
    return f"{label} {said}" if label and rng.random() < 0.5 else said


def _count_text(slot: _Slot, wording: Wording, index: int, rng: random.Random) -> str:
    if slot.pointer is not None:
        return _pointed(slot, wording, rng, count=_plural(humanize(slot.param)))
    if slot.fed is not None:
        return _fed_text(slot, index, rng, head=False)
    words = humanize(slot.param)
    if words.split()[-1] in _COUNT_NOUNS:
        return _article(rng.choice(_AMOUNT_SAID), words).format(p=words, v=render_value(slot.value))
    if slot.value == 1:
        return f"{render_value(slot.value)} {_one(words)}"
    return rng.choice(_COUNT_SAID).format(p=words, v=render_value(slot.value))


def _value_text(slot: _Slot, wording: Wording, index: int, rng: random.Random) -> str:
    if slot.pointer is not None:
        return _pointed(slot, wording, rng)
    if slot.fed is not None:
        return _fed_text(slot, index, rng, head=False)
    words = humanize(slot.param)
    return _article(rng.choice(_VALUE_SAID), words).format(p=words, v=render_value(slot.value))


def _generic_acts(
    tool: Tool, ambiguous: bool, question: bool, head: _Slot | None, rng: random.Random
) -> tuple[str, ...]:
    """Realisations of a call of any tool, from its name's words (see :data:`_KNOWN` for the form)."""
    words = humanize(tool.name)
    parts = words.split() or ["tool"]
    verb, rest = _split(parts)
    named_by_verb = verb == parts[0]  # not "return status tracker", whose verb is its last word's
    obj = " ".join(rng.choice(_NOUNS[w]) if ambiguous and w in _NOUNS else w for w in rest)
    if question:
        reads = tool.effect is Effect.READ or (tool.effect is None and verb in _LOOKUP_VERBS)
        return tuple(t.replace("{r}", obj) for t in _ASK_LOOKUP) if reads and verb in _LOOKUP_VERBS and obj else ()
    kind = ""
    if head is not None:
        said = humanize(head.param).split()
        kind = "name" if said[-1:] in (["name"], ["title"]) else "same" if _label(head.param) == " ".join(rest) else ""
    preps = _HEAD_PREPS[kind]
    if ambiguous:
        if verb in _SYNONYMS:
            said_verb = rng.choice(_SYNONYMS[verb])
            doing = f"{said_verb} the {obj}" if obj else said_verb
        else:
            doing = rng.choice(_GENERIC).format(o=obj or words)
        templates = [t.replace("{s}", doing) for t in _OTHER]
    elif named_by_verb and parts[0] in _VERBS and len(parts) > 1:
        templates = [t.replace("{v}", parts[0]).replace("{r}", " ".join(parts[1:])) for t in _NAMED_VERB]
    elif named_by_verb and parts[0] in _VERBS:
        article = "an" if parts[0][0] in "aeiou" else "a"
        return tuple(t.replace("{v}", parts[0]).replace("{a}", article) for t in _NAMED_BARE_VERB)
    else:
        return tuple(t.replace("{w}", words) for t in _NAMED_NOUN)
    return tuple(dict.fromkeys(t.replace("{h}", prep) for t in templates for prep in preps))


def _usable(template: str, head: _Slot | None, count: _Slot | None) -> bool:
    """Whether a realisation fits the call: it places the thing acted on exactly when there is one (a value where it
    asks for ``{O}``), and a quantity only where one is said outright."""
    places = "{o}" in template or "{O}" in template
    if places != (head is not None):
        return False
    if "{O}" in template and (head is None or not head.said):
        return False
    return "{n}" not in template or (count is not None and count.said)


def _clause(phrase: Phrase, index: int, wording: Wording, rng: random.Random, *, question: bool = False) -> str:
    """One call in words (empty when it cannot be put as a question). In a request of several calls a clause holds
    no comma of its own, so the joiners between calls stay readable."""
    head, count, rest = _roles(phrase)
    known = _KNOWN.get(humanize(phrase.tool.name), {})
    bank = known.get("ask", ()) if question else known.get("other" if wording.ambiguous else "named", ())
    acts = [t for t in bank if _usable(t, head, count)]
    if not acts:
        generic = _generic_acts(phrase.tool, wording.ambiguous, question, head, rng)
        acts = [t for t in generic if _usable(t, head, count)]
    if not acts and question:
        return ""
    template = rng.choice(acts or ["see to {o}" if head else "see to it"])
    tail = [_value_text(s, wording, index, rng) for s in rest]
    if count is not None and "{n}" not in template:
        tail.append(_count_text(count, wording, index, rng))
    if question and tail:
        return ""
    text = template.format(
        o=_head_text(head, wording, index, rng) if head else "",
        O=_said(head.value, rng) if head and head.said else "",
        n=_count_text(count, wording, index, rng) if count and count.said else "",
    )
    if tail:
        rng.shuffle(tail)
        many = len(wording.phrases) > 1
        text += rng.choice(_TAIL_INTROS_MANY if many else _TAIL_INTROS) + _join(tail, " and ")
    return text


def _intent(phrase: Phrase) -> str:
    """What a call does, for the user's reason: ``read``, ``list`` (a read of everything), ``add`` or ``sell``."""
    tool = phrase.tool
    verb = _split(humanize(tool.name).split() or ["tool"])[0]
    reads = tool.effect is Effect.READ if tool.effect is not None else verb in _LOOKUP_VERBS | {"list", "search"}
    if reads:
        return "read" if tool.properties else "list"
    return "add" if verb in _ADD_VERBS else "sell"


def _context(wording: Wording, rng: random.Random) -> str:
    """Why the user asks: a clause of the register's topic and the request's intent, holding no value of the task
    and no member of an enum its tools take."""
    intents = [_intent(p) for p in wording.phrases] or ["any"]
    key = "chain" if any(p.fed for p in wording.phrases) and rng.random() < 0.4 else rng.choice(intents)
    if wording.topic == "shop":
        banks = _SHOP_CONTEXTS
    else:
        banks = _CONTEXTS
        key = {"add": "write", "sell": "write", "list": "read"}.get(key, key)
    pool = banks.get(key, ())
    draw = rng.random()
    if not pool or draw < 0.2:
        pool = banks["any"]
    elif draw < 0.45:
        who = _SHOP_WHO if wording.topic == "shop" else _WHO
        pool = tuple(f"{rng.choice(who)} {rng.choice(_DOES)}" for _ in range(4))
    elif wording.topic and draw < 0.5:
        pool = _CONTEXTS["any"]
    avoid = scalar_values([*wording.stated, *wording.hidden, *schema_values([p.tool for p in wording.phrases])])
    fits = [c for c in pool if not any(mentions(c, v) for v in avoid)]
    return rng.choice(fits) if fits else ""


def _sloppy(text: str, wording: Wording, rng: random.Random) -> str:
    """Small imperfections: lower case, no final stop, "pls" (never inside a value, never a marker)."""
    values = [render_value(v).lower() for v in [*wording.stated, *wording.hidden]]
    for word, short in _SLOPPY.items():
        if rng.random() < 0.6 and not any(word.lower() in v for v in values):
            text = re.sub(rf"(?<![\w']){re.escape(word)}(?![\w'])", short, text)
            text = re.sub(rf"(?<![\w']){re.escape(_opening(word))}(?![\w'])", _opening(short), text)
    if rng.random() < 0.3 and not any(re.search(r"\bi\b", v) for v in values):
        text = re.sub(r"\bI\b", "i", text)
    if rng.random() < 0.6 and not any(text.lower().startswith(v) for v in values if v):
        text = text[:1].lower() + text[1:]
    if rng.random() < 0.5:
        text = text.rstrip(".!")
    return text


def _closer(text: str, closers: Sequence[str], rng: random.Random) -> str:
    """A sign-off, unless it would thank twice ("thx thx")."""
    closer = rng.choice(closers)
    if _THANKS.search(closer.lower()) and _THANKS.search(text.lower()):
        return ""
    return closer


def _voice(rng: random.Random) -> _Voice:
    name = rng.choices(list(_VOICE_WEIGHTS), weights=list(_VOICE_WEIGHTS.values()), k=1)[0]
    return _VOICES[name]


def _finish(core: str, wording: Wording, voice: _Voice, rng: random.Random, *, plain: bool) -> str:
    """A request (a sentence) with the register's lead-in, maybe a context clause, a sign-off and sloppiness."""
    text = core
    context = "" if plain or rng.random() >= voice.context else _context(wording, rng)
    if context:
        terse = voice is _VOICES["terse"]
        if terse:
            core = core.rstrip(".!?")
        placings = _TERSE_PLACINGS if terse else _PLACINGS + (_STATEMENT_PLACINGS if core.endswith(".") else ())
        text = rng.choice(placings).format(
            C=_opening(context), c=context, R=_opening(core), r=_continuing(core), S=_opening(core)[:-1]
        )
    text = _lead(rng.choice(voice.leads), text)
    if not plain:
        text += _closer(text, voice.closers, rng)
    if rng.random() < voice.sloppy:
        text = _sloppy(text, wording, rng)
    return text


def pointer_phrase(
    param: str,
    pointer: Pointer,
    rng: random.Random,
    *,
    first: bool = False,
    recall: bool = False,
    count: bool = False,
) -> str:
    """A noun phrase pointing at an earlier value: ``the same units as just now``, ``the units I asked for
    earlier``, ``the units it came back with on the restock just now``, ``the item from my first request``.

    It holds the parameter's words, the channel marker of ``pointer.source``, the tool's words when
    ``pointer.tool`` is set, and a first-task marker when ``first``; a recall (a question) avoids "the same", a
    ``count`` may say "as many units as".
    """
    reach = "first" if first else "long" if pointer.how == "long" else "coref"
    when = rng.choice(_WHEN[reach])
    if pointer.tool:
        when = rng.choice(_TOOL_WHEN).format(t=humanize(pointer.tool), w=when)
    if recall:
        heads = _RECALL_HEADS[pointer.source]
    else:
        heads = _HEADS[pointer.source] + (_HEADS["n-" + pointer.source if pointer.source else "n"] if count else ())
    return rng.choice(heads).format(p=humanize(param), w=when)


# ---------------------------------------------------------------------------------------------- by kind
def _chat_first(wording: Wording, rng: random.Random, plain: bool) -> str:
    greeting, question = rng.choice(_GREETINGS), rng.choice(_CAPABILITY)
    if wording.recall is None:
        context = "" if plain or rng.random() < 0.5 else _context(wording, rng)
        body = f"{_opening(context)}. {question}" if context else question
        return _lead(greeting + " ", body)
    key, value = wording.recall
    words = humanize(key)
    shop = wording.topic == "shop" and singular(words.split()[-1] if words else "") in ("item", "product")
    named = value if words.split()[-1:] in (["name"], ["title"]) else f"{words} {value}"
    intro = rng.choice(_SHOP_INTROS if shop else _INTROS).format(v=value, kv=named)
    form = rng.choice(_CHAT_FIRST)
    if not plain and rng.random() < 0.5:
        context = _context(wording, rng)
        intro += f", and {context}" if context and rng.random() < 0.5 else (f". {_opening(context)}" if context else "")
    text = form.format(I=_opening(intro), i=intro, Q=question, q=_continuing(question))
    if rng.random() < 0.7:
        text = _lead(greeting + " ", text)
    if not plain and rng.random() < 0.3:
        text += rng.choice(_CLOSERS)
    return text


def _chat_recall(wording: Wording, rng: random.Random, plain: bool) -> str:
    assert wording.recall is not None
    key = wording.recall[0]
    words = humanize(key)
    be, it, them = ("were", "they", "them") if _plural(words) else ("was", "it", "it")
    pointer = wording.recall_pointer or pointer_of(wording.recall[1])
    lead = rng.choice(_RECALL_LEADS)
    if pointer.how == "partial" and not (pointer.source or pointer.tool):
        question = rng.choice(_FOLLOW_UPS).format(k=words, be=be)
    else:
        named = pointer_phrase(key, pointer, rng, first=wording.first(pointer), recall=True)
        question = rng.choice(_RECALLS).format(n=named, be=be, it=it, them=them)
    text = _lead(lead, question)
    if not plain and rng.random() < 0.8:
        why = rng.choice(_SHOP_RECALL_WHY if wording.topic == "shop" else _RECALL_WHY)
        if rng.random() < 0.5:
            why = f"{rng.choice(_SHOP_WHO if wording.topic == 'shop' else _WHO)} {rng.choice(_DOES)}"
        if not any(mentions(why, v) for v in [*wording.stated, *wording.hidden]):
            text = rng.choice(_RECALL_PLACINGS).format(
                T=text, W=_opening(why), w=why, Q=_opening(question), q=_continuing(question)
            )
    if not plain:
        text += rng.choice(_CLOSERS)
    return text


def _partial(wording: Wording, rng: random.Random, plain: bool) -> str:
    phrase = wording.phrases[0]
    head, count, rest = _roles(phrase)
    parts = []
    if head is not None:
        if head.said:
            parts.append(rng.choice(_PARTIAL_HEAD_SAID).format(v=_said(head.value, rng), p=humanize(head.param)))
        else:
            parts.append(_head_text(head, wording, 0, rng))
    if count is not None:
        parts.append(_count_text(count, wording, 0, rng))
    parts += [_value_text(s, wording, 0, rng) for s in rest]
    rng.shuffle(parts)
    core = rng.choice(_PARTIALS).format(t=humanize(phrase.tool.name), c=_join(parts, " and "))
    frame = rng.choice(_PARTIAL_FRAMES)
    if frame.startswith("{x}") and rng.random() < 0.5:
        core = core.removeprefix("the ")  # "Same again for the restock, ..."
    text = frame.format(x=_opening(core) if frame.startswith("{x}") else core)
    return _finish(text, wording, _voice(rng), rng, plain=plain)


def _calls(wording: Wording, rng: random.Random, plain: bool) -> str:
    voice = _voice(rng)
    phrases = wording.phrases
    if len(phrases) == 1 and rng.random() < 0.4:
        question = _clause(phrases[0], 0, wording, rng, question=True)
        if question:
            core = _lead(rng.choice(_QUESTION_LEADS), question)
            return _finish(core, wording, voice, rng, plain=plain)
    clauses = [_clause(p, i, wording, rng) for i, p in enumerate(phrases)]
    body = clauses[0]
    for phrase, clause in zip(phrases[1:], clauses[1:], strict=True):
        body += rng.choice(_THEN if phrase.fed else _TOGETHER) + clause
    frame = rng.choice(voice.frames)
    if wording.kind == "sequential":
        body = rng.choice(_FIRSTLY_OPENING if frame.startswith("{x}") else _FIRSTLY) + body
    elif len(phrases) == 1 and frame.endswith(("{x}", "{x}.", "{x}?")):
        body += rng.choice(_INNER)
    core = frame.format(x=_opening(body) if frame.startswith("{x}") else body)
    return _finish(core, wording, voice, rng, plain=plain)


def _compose(wording: Wording, rng: random.Random, *, plain: bool = False) -> str:
    if wording.kind == "chat-first":
        return _chat_first(wording, rng, plain)
    if wording.kind == "chat-recall":
        return _chat_recall(wording, rng, plain)
    if wording.kind == "partial":
        return _partial(wording, rng, plain)
    return _calls(wording, rng, plain)


def template_utterance(wording: Wording, rng: random.Random) -> str:
    """The template wording of a task (meets the rules of :func:`wording_problems` by construction).

    Takes one draw from ``rng`` whatever the banks hold, so growing a bank never shifts the rest of a session.
    """
    local = random.Random(rng.getrandbits(64))
    text = ""
    for attempt in range(_TRIES):
        text = _compose(wording, local, plain=attempt >= _PLAIN_AFTER)
        if not wording_problems(text, wording):
            return text
    return text


# ---------------------------------------------------------------------------------------------- asks and replies
def _fits(text: str, must: Any, avoid: Sequence[Any]) -> bool:
    return (must is None or mentions(text, must)) and not any(mentions(text, v) for v in avoid if v != must)


def _reply(core: str, lead: str, ends: Sequence[str], rng: random.Random) -> str:
    """A reply from its core: going on in lower case after a lead-in, else as a sentence."""
    return (lead + _continuing(core) if lead else _opening(core)) + rng.choice(ends)


def value_reply(param: str, value: Any, rng: random.Random, avoid: Sequence[Any] = ()) -> str:
    """The user's answer to "which ``param``?": states ``value`` (and none of ``avoid``)."""
    words = humanize(param)
    count = isinstance(value, int) and not isinstance(value, bool) and _plural(words)
    cores = _VALUE_CORES + (_COUNT_CORES if count else ())
    noun = _one(words) if count and value == 1 else words
    for _ in range(_TRIES):
        core = rng.choice(cores)
        body = core.format(v=_said(value, rng), p=noun, be="are" if _plural(noun) else "is")
        body += rng.choice(_REPLY_TAILS)
        lead = rng.choice(_REPLY_LEADS)
        if core.startswith("{v}"):
            text = lead + body + rng.choice(_REPLY_ENDS)  # the value first keeps its own case
        else:
            text = _reply(body, lead, _REPLY_ENDS, rng)
        if _fits(text, value, avoid):
            return text
    return f"{render_value(value)}."


def vague_reply(rng: random.Random, avoid: Sequence[Any] = ()) -> str:
    """A reply that leaves the choice to the assistant (states none of ``avoid``)."""
    text = "Up to you."
    for _ in range(_TRIES):
        text = _reply(rng.choice(_VAGUE_CORES), rng.choice(_REPLY_LEADS), _VAGUE_ENDS, rng)
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
        core = rng.choice(_POINTER_REPLIES).format(n=named)
        text = _reply(core, rng.choice(_REPLY_LEADS), _REPLY_ENDS[:3], rng)
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
