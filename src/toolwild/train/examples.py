"""Gold sessions -> token sequences to train on, with loss on the assistant's turns only.

A session is trained on as the model is later evaluated: the OpenAI-chat conversation that ``toolwild export`` writes
(:func:`~toolwild.export.training.openai_chat_record`), rewritten by the prompt mode the embedded model is run in
(:func:`~toolwild.llm.prompt_mode.to_prompt_request`: tools described in the system line, calls and answers as the
JSON replies the model is asked for), then laid out by the model's own chat template. So the tokens the tuned model
learns to produce are exactly the replies the evaluation loop parses, after exactly the prompt it will be shown.

Labels are ``-100`` (ignored by the loss) everywhere except on each assistant reply and the end-of-turn token that
closes it: the model is taught what to say, not to predict the user, the tools' results or the tool list.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from toolwild.core.session import Session, Suite
from toolwild.core.trajectory import state_digest
from toolwild.errors import DataError
from toolwild.export.training import openai_chat_record
from toolwild.llm.prompt_mode import to_prompt_request
from toolwild.llm.types import ChatRequest

__all__ = [
    "IGNORE_INDEX",
    "Example",
    "Tokenizer",
    "overlapping_sessions",
    "prompt_mode_messages",
    "session_key",
    "tokenize_conversation",
]

IGNORE_INDEX = -100
"""The label that the causal-LM loss of transformers skips."""


class Tokenizer(Protocol):
    """What is needed of a tokenizer: its chat template and its vocabulary (a transformers tokenizer has both)."""

    eos_token_id: int | None

    def apply_chat_template(self, conversation: Any, **kwargs: Any) -> Any: ...

    def encode(self, text: str, **kwargs: Any) -> list[int]: ...


@dataclass(frozen=True)
class Example:
    """One session as training input: token ids and their labels (``IGNORE_INDEX`` where no loss is taken)."""

    session_id: str
    input_ids: list[int]
    labels: list[int]
    truncated: bool
    """The session was longer than the token limit and its end was cut off (whole turns are kept where possible)."""

    @property
    def trained_tokens(self) -> int:
        """Tokens that carry loss."""
        return sum(1 for label in self.labels if label != IGNORE_INDEX)


def prompt_mode_messages(session: Session) -> list[dict[str, str]]:
    """The session's gold conversation as the embedded model sees it: plain system/user/assistant turns, with the
    tools and the reply protocol in the system line and every assistant turn a JSON reply."""
    record = openai_chat_record(session)
    request = ChatRequest(messages=record["messages"], tools=record["tools"] or None, tool_choice="auto")
    return [{"role": m["role"], "content": m.get("content") or ""} for m in to_prompt_request(request).messages]


def _render(tokenizer: Tokenizer, messages: list[dict[str, str]], *, generation_prompt: bool) -> str:
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation_prompt)


def tokenize_conversation(
    session_id: str, messages: list[dict[str, str]], tokenizer: Tokenizer, *, max_tokens: int
) -> Example:
    """Tokens and labels of one conversation, laid out by the tokenizer's chat template.

    Each message's text is what the template adds for it (the template rendered up to and with the message, less
    the rendering before it); an assistant message is split after the template's generation prompt, so its header
    carries no loss and its reply does, up to and including the end-of-sequence token. A conversation longer than
    ``max_tokens`` keeps its first turns: it is cut before the first assistant reply that would not fit whole.

    Raises:
        DataError: the template does not render the conversation as a growing text (a template that rewrites
            earlier turns cannot be trained on turn by turn), or not even the first reply fits ``max_tokens``.
    """
    eos = tokenizer.eos_token_id
    ids: list[int] = []
    labels: list[int] = []
    rendered = ""
    truncated = False
    for i, message in enumerate(messages):
        if message["role"] == "assistant":
            header_end = _render(tokenizer, messages[:i], generation_prompt=True)
            _check_prefix(session_id, rendered, header_end)
            header = header_end[len(rendered) :]
            rendered = _render(tokenizer, messages[: i + 1], generation_prompt=False)
            _check_prefix(session_id, header_end, rendered)
            reply = _encode(tokenizer, rendered[len(header_end) :])
            cut = reply.index(eos) + 1 if eos is not None and eos in reply else len(reply)
            pieces = [(_encode(tokenizer, header), False), (reply[:cut], True), (reply[cut:], False)]
        else:
            text = _render(tokenizer, messages[: i + 1], generation_prompt=False)
            _check_prefix(session_id, rendered, text)
            pieces = [(_encode(tokenizer, text[len(rendered) :]), False)]
            rendered = text
        size = sum(len(p) for p, _ in pieces)
        if len(ids) + size > max_tokens:
            truncated = True
            break
        for tokens, trained in pieces:
            ids.extend(tokens)
            labels.extend(tokens if trained else [IGNORE_INDEX] * len(tokens))
    if not any(label != IGNORE_INDEX for label in labels):
        raise DataError(
            f"session {session_id!r}: not even its first reply fits in {max_tokens} tokens; raise --max-tokens",
            field=session_id,
        )
    return Example(session_id=session_id, input_ids=ids, labels=labels, truncated=truncated)


def _encode(tokenizer: Tokenizer, text: str) -> list[int]:
    # The template wrote the special tokens as text (<|im_start|>); encoding parses them back into their ids.
    return list(tokenizer.encode(text, add_special_tokens=False)) if text else []


def _check_prefix(session_id: str, before: str, after: str) -> None:
    if not after.startswith(before):
        raise DataError(
            f"session {session_id!r}: the chat template rewrites earlier turns when a turn is added, so the turns "
            "cannot be labelled one by one",
            field=session_id,
        )


def session_key(session: Session) -> str:
    """What makes two sessions the same for leakage: the user's words, task by task (ids and gold aside, so a
    held-out session re-generated under another id, or with other gold, still counts)."""
    return state_digest([task.utterance for task in session.tasks])


def overlapping_sessions(training: Iterable[Session], held_out: Sequence[Suite]) -> list[tuple[str, str, str]]:
    """Training sessions that also appear in a held-out suite: ``(training id, held-out suite name, held-out id)``."""
    seen: dict[str, tuple[str, str]] = {}
    for suite in held_out:
        for session in suite.sessions:
            seen.setdefault(session_key(session), (suite.name, session.id))
    return [(s.id, *seen[key]) for s in training if (key := session_key(s)) in seen]
