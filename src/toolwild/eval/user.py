"""The user of an interactive session: the recording (``--user recorded``) or a model playing it (``--user model:M``).

Why a simulator at all: in free-running mode the recorded user only answers the gold's questions in the gold's order;
an agent that asks otherwise gets the right reply by luck, and once it leaves the gold path no user answers. A model
can answer any question, but only if it can be trusted, so what it may know is fixed by code, per task, from the
gold (:func:`task_facts`):

- **stated** facts: the scalar arguments of the gold calls that the task's utterance states (the user said them);
- **withheld** facts: every parameter an ASK node of the gold says is missing, with the gold call's value and the
  recorded reply that gave it (how the user says it: "Last month." for a date range).

A :class:`UserSimulator` gets a :class:`UserView` (the utterance, those facts, the task's conversation and the
agent's latest message) and returns a :class:`UserTurn`: it answers (text), says it does not know, or says the task
is done (the loop then sends the next task's utterance). Which facts a text states is decided by :func:`states`, the
one rule the fidelity audit (:mod:`toolwild.eval.user_audit`) and the prompt's wording share.

The model's prompt is one versioned file (``prompts/user.md``): :func:`user_prompt` gives its version and sha256,
recorded in a run's config. Its replies are JSON checked by code and retried with the problem fed back; a simulator
that still fails raises :class:`UserSimulatorError`: the session is the simulator's failure, never the agent's. Every
call goes through :class:`~toolwild.llm.client.LLM` and its cache, so a second run makes no call.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from importlib import resources
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from toolwild.core.hidden_intent import ancestors, mentions
from toolwild.core.references import humanize
from toolwild.core.task import NodeKind, Task
from toolwild.errors import ConfigError, ModelOutputError, StructuredOutputError, ToolwildError
from toolwild.eval.scoring.dag import GoldDag
from toolwild.llm.client import LLM
from toolwild.llm.structured import InvalidReply, generate_checked

__all__ = [
    "REPLY_SCHEMA",
    "ROLE",
    "USER_FORMS",
    "ModelUser",
    "RecordedUser",
    "ScriptedUser",
    "TaskFacts",
    "UserAction",
    "UserFact",
    "UserMessage",
    "UserPrompt",
    "UserSimulator",
    "UserSimulatorError",
    "UserTurn",
    "UserView",
    "make_user",
    "parse_user_spec",
    "phrase_words",
    "render_view",
    "states",
    "task_facts",
    "user_prompt",
]

ROLE = "user"
"""The usage role of simulator calls (accounted apart from the agent's)."""
USER_FORMS = ("recorded", "model:M")
"""The accepted ``--user`` forms, for help texts and errors."""
MAX_MESSAGE_CHARS = 400
"""Longest reply a simulated user may write: a user answers a question in a sentence or two."""

UserAction = Literal["answer", "dont_know", "done"]
REPLY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "action": {"type": "string", "enum": ["answer", "dont_know", "done"]},
        "message": {"type": "string", "maxLength": MAX_MESSAGE_CHARS},
    },
    "required": ["action", "message"],
    "additionalProperties": False,
}
"""What a model user is asked for: both keys required (a grammar-constrained model otherwise skips the message) and
the message bounded (a small model otherwise repeats itself up to its token limit)."""


class UserSimulatorError(ToolwildError):
    """The simulated user could not produce a usable turn (no valid reply after the retries).

    Why its own type: the session then says nothing about the agent. It is counted as the simulator's error and left
    out of the agent's figures, never scored as the agent failing.
    """


# ---------------------------------------------------------------------------------------------- the prompt
@dataclass(frozen=True)
class UserPrompt:
    """The simulated user's instructions: the file's version line, the sha256 of its bytes, and the text sent."""

    version: str
    sha256: str
    text: str

    def record(self) -> dict[str, str]:
        """What a run's config keeps of it (the prompt is identified, not copied)."""
        return {"user_prompt_version": self.version, "user_prompt_sha256": self.sha256}


@functools.lru_cache(maxsize=1)
def user_prompt() -> UserPrompt:
    """The prompt file ``prompts/user.md``: first line ``version: N``, then the text sent as the system message.

    Raises:
        ConfigError: the file is missing from the installation or has no version line (a packaging error).
    """
    try:
        data = resources.files("toolwild.eval").joinpath("prompts", "user.md").read_bytes()
    except OSError as exc:
        raise ConfigError(f"the user-simulator prompt is missing from the installation: {exc}") from None
    text = data.decode("utf-8")
    first, _, body = text.partition("\n")
    match = re.fullmatch(r"version:\s*(\S+)\s*", first)
    if match is None:
        raise ConfigError("prompts/user.md must start with a 'version: N' line")
    return UserPrompt(version=match.group(1), sha256=hashlib.sha256(data).hexdigest(), text=body.strip())


# ---------------------------------------------------------------------------------------------- facts
class UserFact(BaseModel):
    """One value the user of a task knows: a parameter of a gold call, how it may be written, and when it is asked."""

    model_config = ConfigDict(extra="forbid")

    tool: str
    param: str
    value: Any
    said: str = ""
    """Withheld facts: the recorded reply that gave it (how this user says it); empty for stated facts."""
    forms: list[str] = Field(default_factory=list)
    """Texts whose whole-token mention (:func:`~toolwild.core.hidden_intent.mentions`) states the value: the value
    (numbers in their usual spellings), the last part of an account path ("restaurants"), a date as "March 1"."""
    phrase: list[str] = Field(default_factory=list)
    """When the recorded reply names the value in none of ``forms`` ("Last month." for two dates): its words; a text
    holding all of them states the value."""
    asks: list[int] = Field(default_factory=list)
    """Withheld facts: the gold's questions (0-based, in the order of the first optimal path) that ask for it."""
    required_at: int | None = None
    """The first question whose recorded reply states it: a faithful user gives it there (None: no recorded reply
    states it in a form code can find, so it is not checked)."""
    parts: list[str] = Field(default_factory=list)
    """Withheld facts the user gave in parts, one reply per question ("the 23rd of... I can't read the month",
    then "March"): those replies in order (empty for a fact given at once). Its ``required_at`` is the last one's."""


class TaskFacts(BaseModel):
    """What the user of one task knows, and the gold's questions in order with their recorded replies."""

    model_config = ConfigDict(extra="forbid")

    stated: list[UserFact] = Field(default_factory=list)
    withheld: list[UserFact] = Field(default_factory=list)
    replies: list[str] = Field(default_factory=list)
    """The recorded replies to the gold's questions, in order (what ``--user recorded`` says)."""


_FILLER = frozenset(
    "a ah an and are as at be for go hmm i i'd i'll i'm in is it it's its just let's my of oh ok okay on please say "
    "should so sure thank thanks that the think to use was well with yeah yes "
    # what a generated user says around a value ("Right, last month.", "Um, 42.10 pls", "Found it: March.")
    "right um sorry pls ty thx cheers helps if checking let me check found now".split()
)
"""Words that carry no value in a reply ("Oh, use the same item as in my last request." -> same item last request;
"Right, last month, sorry." -> last month)."""
_MONTHS = "January February March April May June July August September October November December".split()
_ISO = re.compile(r"(\d{4})-(\d{2})-(\d{2})")
_WORD = re.compile(r"[a-z0-9']+")


def phrase_words(text: str) -> list[str]:
    """The words of a reply that carry its meaning ("Last month." -> last, month): lower case, filler dropped."""
    return [w for w in _WORD.findall(text.lower().replace("\u2019", "'")) if w not in _FILLER]


def _forms(value: Any) -> list[str]:
    """The texts that state ``value`` (see :attr:`UserFact.forms`)."""
    if isinstance(value, bool) or value is None or isinstance(value, dict | list):
        return []
    text = str(value).strip()
    if not text:
        return []
    out = [text]
    if ":" in text and all(part.strip() for part in text.split(":")):
        out.append(humanize(text.rsplit(":", 1)[1]))
    date = _ISO.fullmatch(text)
    if date is not None and 1 <= int(date.group(2)) <= 12:
        month, day = _MONTHS[int(date.group(2)) - 1], int(date.group(3))
        nth = f"{day}{'th' if 10 <= day % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(day % 10, 'th')}"
        out += [f"{month} {day}", f"{day} {month}", f"{month} {nth}", f"{nth} of {month}"]
    return list(dict.fromkeys(f for f in out if f))


def states(text: str, fact: UserFact, *, skip: frozenset[str] = frozenset()) -> bool:
    """Whether ``text`` states ``fact``: one of its forms as a whole token, or every word of its recorded phrase (a
    date given in parts: its day's ordinal and its month's name).

    ``skip``: forms not to count (the audit drops those already said in the conversation: repeating them leaks
    nothing).
    """
    if any(form.lower() not in skip and mentions(text, form) for form in fact.forms):
        return True
    pieces = _date_pieces(fact.value) if fact.parts else None
    if pieces is not None:  # given in parts: the day's ordinal and the month, wherever they are in the text
        return all(piece.search(text) for piece in pieces)
    if fact.phrase and " ".join(fact.phrase) not in skip:
        return set(fact.phrase) <= set(_WORD.findall(text.lower().replace("\u2019", "'")))
    return False


def _value_of(task: Task, ask_idx: int, tool: str, param: str) -> Any:
    """The value the gold gives ``param`` of ``tool`` in the call that follows the question (any call of that tool
    when none depends on it)."""
    calls = [n for n in task.call_nodes if n.name == tool]
    after = [n for n in calls if ask_idx in ancestors(task, n.idx)]
    for node in after or calls:
        if param in node.action.arguments:
            return node.action.arguments[param]
    return None


def _asked(node_arguments: dict[str, Any]) -> list[tuple[str, str]]:
    """``(tool, parameter)`` pairs an ASK node's ``tool_list`` names as missing."""
    out = []
    tool_list = node_arguments.get("tool_list")
    for entry in tool_list if isinstance(tool_list, list) else []:
        if not isinstance(entry, dict):
            continue
        missing = entry.get("missing_required_parameters")
        for param in missing if isinstance(missing, list) else []:
            out.append((str(entry.get("tool_name", "")), str(param)))
    return out


def _date_pieces(value: Any) -> tuple[re.Pattern[str], re.Pattern[str]] | None:
    """For an ISO date: what says its day as an ordinal ("23rd") and what says its month ("March"); else None."""
    date = _ISO.fullmatch(value) if isinstance(value, str) else None
    if date is None or not 1 <= int(date.group(2)) <= 12:
        return None
    day = re.compile(rf"\b{int(date.group(3))}(?:st|nd|rd|th)\b", re.IGNORECASE)
    return day, re.compile(rf"\b{_MONTHS[int(date.group(2)) - 1]}\b", re.IGNORECASE)


def _date_parts(value: Any, replies: list[str]) -> list[str]:
    """The replies that give a date in parts (the day as an ordinal in one, its month's name in a later one, and no
    one of them the whole date), or ``[]``."""
    pieces = _date_pieces(value)
    if pieces is None or len(replies) < 2:
        return []
    if any(mentions(reply, form) for reply in replies for form in _forms(value)):
        return []
    day, month = pieces
    first = next((k for k, reply in enumerate(replies) if day.search(reply)), None)
    if first is None or not any(month.search(reply) for reply in replies[first + 1 :]):
        return []
    return replies


def task_facts(task: Task) -> TaskFacts:
    """The stated and withheld facts of a task and the recorded replies to its questions (module docstring)."""
    path = GoldDag.from_task(task).first_optimal_path()
    asks = [task.gold[batch[0]] for batch in path if task.gold[batch[0]].kind is NodeKind.ASK]
    withheld: dict[tuple[str, str], UserFact] = {}
    for k, node in enumerate(asks):
        for tool, param in _asked(node.action.arguments):
            fact = withheld.get((tool, param))
            if fact is None:
                value = _value_of(task, node.idx, tool, param)
                if value is None:
                    continue
                fact = withheld[(tool, param)] = UserFact(tool=tool, param=param, value=value, forms=_forms(value))
            fact.asks.append(k)
    replies = [node.user_input or "" for node in asks]
    for f in withheld.values():
        parts = _date_parts(f.value, [replies[k] for k in f.asks])
        if parts:  # "the 23rd of... I can't read the month", then "March": the whole value only at the last
            f.parts, f.required_at, f.said = parts, f.asks[-1], parts[0]
    for k, reply in enumerate(replies):
        here = [f for f in withheld.values() if k in f.asks and not f.parts]
        found = [f for f in here if any(mentions(reply, form) for form in f.forms)]
        if not found and phrase_words(reply):
            for f in here:  # the reply names them only in its own words ("Last month.")
                f.phrase = f.phrase or phrase_words(reply)
            found = here
        for f in found:
            if f.required_at is None:
                f.required_at, f.said = k, reply
    for f in withheld.values():
        f.said = f.said or (replies[f.asks[-1]] if f.asks else "")
    keys = {(f.tool, f.param) for f in withheld.values()}
    stated = []
    for node in task.call_nodes:
        for param, value in node.action.arguments.items():
            if (node.name, param) in keys or not _forms(value) or not mentions(task.utterance, value):
                continue
            if all((s.tool, s.param, str(s.value)) != (node.name, param, str(value)) for s in stated):
                stated.append(UserFact(tool=node.name, param=param, value=value, forms=_forms(value)))
    return TaskFacts(stated=stated, withheld=list(withheld.values()), replies=replies)


# ---------------------------------------------------------------------------------------------- view and turn
class UserMessage(BaseModel):
    """One message of a task's conversation as the user saw it (tool calls and results are not shown)."""

    model_config = ConfigDict(extra="forbid")

    role: Literal["user", "assistant"]
    content: str


class UserView(BaseModel):
    """What the user knows when it replies: its request, its facts, the task so far and the agent's latest message."""

    model_config = ConfigDict(extra="forbid")

    session_id: str
    task_index: int
    utterance: str
    facts: TaskFacts
    history: list[UserMessage] = Field(default_factory=list)
    """This task's conversation before the agent's latest message (starting with the utterance)."""
    agent_message: str
    turn: int = 0
    """Replies the user has already given in this task."""
    trial: int = 0
    """Which trial of the session this is (a model user varies its seed by it)."""


class UserTurn(BaseModel):
    """What the user does: answers (``message``), says it does not know, or says the task is done."""

    model_config = ConfigDict(extra="forbid")

    action: UserAction
    message: str = ""


class UserSimulator(Protocol):
    """Plays the user of a session, one reply at a time."""

    name: str

    async def reply(self, view: UserView) -> UserTurn:
        """The user's turn after the agent's latest message.

        Raises:
            UserSimulatorError: no usable turn (the simulator's failure).
            TransientBackendError: the provider failed after retries (the session is a provider error).
        """
        ...


class RecordedUser:
    """Today's behaviour: the k-th text of the agent in a task gets the recorded reply to the gold's k-th question;
    once the recorded replies are used up, the task is done (whatever the agent said)."""

    name = "recorded"

    async def reply(self, view: UserView) -> UserTurn:
        """The next recorded reply, or done."""
        if view.turn < len(view.facts.replies):
            return UserTurn(action="answer", message=view.facts.replies[view.turn])
        return UserTurn(action="done")


class ScriptedUser:
    """A user played by a function of the view: for tests, and to pin down a simulator's behaviour in a bug report."""

    def __init__(self, play: Callable[[UserView], UserTurn | Awaitable[UserTurn]], *, name: str = "scripted") -> None:
        self.play = play
        self.name = name

    async def reply(self, view: UserView) -> UserTurn:
        """Whatever the function says."""
        turn = self.play(view)
        return await turn if isinstance(turn, Awaitable) else turn


def _fact_line(fact: UserFact, *, withheld: bool) -> str:
    value = fact.value if isinstance(fact.value, str) else json.dumps(fact.value)
    line = f"- {humanize(fact.param)}: {value}"
    if withheld and fact.parts:
        said = '", then, when asked again, "'.join(fact.parts)
        line += f' (not said yet; give it only when asked, in parts, one per question: "{said}")'
    elif withheld:
        line += f' (not said yet; give it only when asked; you would say: "{fact.said}")'
    else:
        line += " (already in your request)"
    return line


def render_view(view: UserView) -> str:
    """The per-turn message a model user reads: request, facts, the conversation, and the latest message."""
    lines = [f'Your request: "{view.utterance}"', "", "Your facts:"]
    lines += [_fact_line(f, withheld=False) for f in view.facts.stated]
    lines += [_fact_line(f, withheld=True) for f in view.facts.withheld]
    if not view.facts.stated and not view.facts.withheld:
        lines.append("- (none beyond your request)")
    lines += ["", "The conversation so far:"]
    lines += [f"{'You' if m.role == 'user' else 'Assistant'}: {m.content}" for m in view.history]
    lines += ["", f"The assistant's latest message: {view.agent_message}", "", "Your reply (one JSON object):"]
    return "\n".join(lines)


def _check_turn(text: str) -> UserTurn:
    """A model's reply as a turn, or :class:`InvalidReply` saying what to fix (shown to the model)."""
    try:
        turn = UserTurn.model_validate_json(text)
    except ValidationError as exc:
        try:
            turn = UserTurn.model_validate(json.loads(text, strict=False))
        except (ValueError, ValidationError):
            detail = exc.errors()[0].get("msg", "not valid") if exc.errors() else "not valid"
            raise InvalidReply(
                f'- reply: not the JSON object asked for ({detail}); write {{"action": "answer" | "dont_know" | '
                '"done", "message": "..."}'
            ) from None
    message = " ".join(turn.message.split())
    if turn.action != "done" and not message:
        raise InvalidReply(f"- message: empty; with action {turn.action!r} say something to the assistant")
    if len(message) > MAX_MESSAGE_CHARS:
        raise InvalidReply(f"- message: {len(message)} characters; answer in at most {MAX_MESSAGE_CHARS}")
    if message.startswith(("{", "[")):
        raise InvalidReply("- message: write plain words to the assistant, not JSON")
    return UserTurn(action=turn.action, message=message)


class ModelUser:
    """A model plays the user, with the versioned prompt, from the view's facts only.

    Its reply must be JSON of :class:`UserTurn` and pass :func:`_check_turn` (an answer says something, briefly, in
    words); a reply that does not is fed back with its problem, ``max_attempts`` times in all, then the turn fails as
    :class:`UserSimulatorError`. Trial ``t`` of a session uses seed ``seed + t``.
    """

    def __init__(
        self,
        llm: LLM,
        *,
        temperature: float = 0.0,
        seed: int = 0,
        max_tokens: int = 200,
        max_attempts: int = 3,
    ) -> None:
        self.llm = llm
        self.temperature = temperature
        self.seed = seed
        self.max_tokens = max_tokens
        self.max_attempts = max_attempts
        self.prompt = user_prompt()
        self.name = f"model:{llm.backend.kind}:{llm.backend.model}"

    async def reply(self, view: UserView) -> UserTurn:
        """One checked turn (cached like every model call)."""
        messages = [{"role": "system", "content": self.prompt.text}, {"role": "user", "content": render_view(view)}]
        try:
            return await generate_checked(
                self.llm,
                messages,
                REPLY_SCHEMA,
                _check_turn,
                name="user turn",
                role=ROLE,
                max_attempts=self.max_attempts,
                temperature=self.temperature,
                seed=self.seed + view.trial,
                max_tokens=self.max_tokens,
            )
        except StructuredOutputError as exc:
            raise UserSimulatorError(f"no usable user turn after {exc.attempts} attempts: {exc}") from None
        except ModelOutputError as exc:
            raise UserSimulatorError(f"the user model's output was unusable: {exc}") from None


def parse_user_spec(spec: str) -> str | None:
    """The model of a ``--user`` value (``model:openai:gpt-4o-mini`` -> ``openai:gpt-4o-mini``), None for
    ``recorded``.

    Raises:
        ConfigError: any other form.
    """
    if spec == "recorded":
        return None
    kind, _, model = spec.partition(":")
    if kind == "model" and model:
        return model
    raise ConfigError(f"--user {spec!r}: use one of {', '.join(USER_FORMS)} (e.g. model:local)")


def make_user(
    spec: str, client: Callable[[str], LLM], *, temperature: float = 0.0, seed: int = 0
) -> tuple[UserSimulator, LLM | None]:
    """The simulator a ``--user`` value names, and its model client (None for ``recorded``).

    ``client(model)`` builds the client: the runner gives the agent's own when it is the same model (one model in
    memory, one cache; simulator calls are still accounted apart under the ``user`` role), else a new one on the
    run's cache.

    Raises:
        ConfigError: an unknown ``--user`` form.
    """
    model = parse_user_spec(spec)
    if model is None:
        return RecordedUser(), None
    llm = client(model)
    return ModelUser(llm, temperature=temperature, seed=seed), llm
