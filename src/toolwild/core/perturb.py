"""Perturbed copies of a suite: the robustness probes of ``--perturb`` (distractors, rename, terse, shuffle).

Why: a model that learnt tool use from a narrow corpus may pick tools by their names' surface, not by what they do
(WildToolBench finds the tool-specialised models getting the function name wrong more often than general ones). A
perturbed copy asks the same questions with the tool list changed, so the accuracy delta against the unperturbed run
measures that brittleness. Each kind changes only what the agent is shown; gold calls, answers and scoring follow
the change, so the oracle still scores 100% and every delta is the agent's.

Kinds, applied in this order whatever order they are given in (``paraphrase`` needs a model and is applied first by
:mod:`toolwild.synth.paraphrase`):

- ``distractors:N``: N extra tools per session, from other environments (the ``pool`` given, e.g. the built-ins, and
  the suite's other sessions), topped up with deprecated near-synonyms of the session's gold tools when those run out;
- ``terse[:N]``: each tool description cut to the first N words of its first sentence (default 8; ``terse:0``
  removes them), every parameter description removed;
- ``rename``: tool and parameter names replaced by neutral ones (``tool_3fa9c1``, ``arg_07be``); descriptions
  kept. Gold calls, asks, observations, answers and the session's notes follow; a free-running session's calls are
  mapped back by :class:`toolwild.envs.renamed.RenamedEnvironment` (the names are kept in the session);
- ``shuffle``: the order of the tools and of each tool's parameters.

Deterministic: every choice is drawn from a generator seeded by (seed, kind, session id), and new names are digests
of (seed, name), so the same seed gives the same suite (a name is renamed alike in every session and every suite;
the distractors a session draws depend on the suite's other sessions, which are part of the pool). What was done is
recorded in every session (``Session.extra["perturbation"]``: the base suite's fingerprint, the kinds, the seed, the
name maps), which is how ``toolwild compare`` knows a perturbed run from a run of another suite.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

from toolwild.core.session import Session, Suite
from toolwild.core.task import ASK_ACTION, PSEUDO_ACTIONS, GoldNode, NodeKind
from toolwild.core.tool import Effect, Tool
from toolwild.errors import ConfigError, DataError

__all__ = [
    "KIND_NAMES",
    "PERTURBATION",
    "Kind",
    "PerturbationRecord",
    "Rename",
    "identifier_like",
    "parse_kinds",
    "perturb_suite",
    "perturbation_of",
    "suite_perturbation",
]

PERTURBATION = "perturbation"
"""The ``Session.extra`` key holding a perturbed session's :class:`PerturbationRecord`."""
KIND_NAMES = ("distractors", "terse", "rename", "shuffle", "paraphrase")
"""Every kind, in the order they are applied (paraphrase first: it rewords what the user says, the rest the tools)."""
TERSE_WORDS = 8
"""Words of a tool description ``terse`` keeps by default."""
_USAGE = "distractors:N, terse[:N], rename, shuffle, paraphrase"
_WORD_EDGE = r"A-Za-z0-9_"


class Kind(BaseModel):
    """One perturbation kind and its number (``distractors:3``; ``terse:8``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Literal["distractors", "terse", "rename", "shuffle", "paraphrase"]
    n: int | None = None

    def __str__(self) -> str:
        return self.name if self.n is None else f"{self.name}:{self.n}"


def parse_kinds(spec: str | Sequence[str | Kind]) -> list[Kind]:
    """The kinds of a ``--perturb`` value (``"distractors:3,rename"``), each once, in the order given.

    Raises:
        ConfigError: an unknown kind, a number missing or not a whole number, or a kind given twice (the message
            lists the kinds).
    """
    items = spec.split(",") if isinstance(spec, str) else list(spec)
    kinds: list[Kind] = []
    for item in items:
        kind = item if isinstance(item, Kind) else _parse_one(item.strip())
        if any(k.name == kind.name for k in kinds):
            raise ConfigError(f"--perturb: {kind.name} is given twice")
        kinds.append(kind)
    if not kinds:
        raise ConfigError(f"--perturb: name at least one kind ({_USAGE})")
    return kinds


def _parse_one(text: str) -> Kind:
    name, _, number = text.partition(":")
    if name not in KIND_NAMES:
        raise ConfigError(f"--perturb: unknown kind {text!r} (kinds: {_USAGE})")
    if name in ("rename", "shuffle", "paraphrase"):
        if number:
            raise ConfigError(f"--perturb: {name} takes no number ({text!r})")
        return Kind(name=name)  # type: ignore[arg-type]
    if not number:
        if name == "distractors":
            raise ConfigError("--perturb: say how many distractors (distractors:N, e.g. distractors:5)")
        return Kind(name="terse", n=TERSE_WORDS)
    if not number.isdigit() or (name == "distractors" and int(number) < 1):
        least = 1 if name == "distractors" else 0
        raise ConfigError(f"--perturb: {name}:N needs a whole number N of at least {least}, not {number!r}")
    return Kind(name=name, n=int(number))  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------- names
def identifier_like(name: str) -> bool:
    """Whether a name reads as an identifier rather than a word (``get_balance``, ``getBudgets``, ``v2``).

    Why it matters: ``rename`` replaces every identifier-like name wherever it appears, but a one-word name that is
    also an English word (``restock``, ``recategorize``) is kept where a user or an answer uses the word in a sentence:
    rewriting "please restock the coffee" to "please tool_3fa9c1 the coffee" would change the request, not its tools.
    """
    return any(c in name for c in "_-.") or bool(re.search(r"[a-z][A-Z]|\d", name))


def _digest_name(prefix: str, key: str, taken: Collection[str], length: int) -> str:
    digest = hashlib.sha256(key.encode("utf-8")).hexdigest()
    for size in range(length, len(digest) + 1, 2):
        candidate = f"{prefix}{digest[:size]}"
        if candidate not in taken:
            return candidate
    raise AssertionError("a sha256 digest ran out of prefixes")  # pragma: no cover


def _alternation(names: Iterable[str]) -> re.Pattern[str] | None:
    """A whole-token pattern matching any of ``names`` (longest first, so ``get_balance_at`` beats ``get_balance``)."""
    ordered = sorted(set(names), key=lambda n: (-len(n), n))
    if not ordered:
        return None
    body = "|".join(re.escape(n) for n in ordered)
    return re.compile(rf"(?<![{_WORD_EDGE}])(?:{body})(?![{_WORD_EDGE}])")


class Rename(BaseModel):
    """The name maps of a renamed session: what each tool and parameter is called now.

    It is the one place names are translated, both ways: the suite's own text is rewritten with it when the suite is
    perturbed, and a live environment (:class:`toolwild.envs.renamed.RenamedEnvironment`) maps an agent's calls back
    and rewrites what the environment answers with it, so a recorded observation and a live one read the same.
    """

    model_config = ConfigDict(extra="forbid")

    tools: dict[str, str] = Field(default_factory=dict)
    """Original tool name -> new name."""
    parameters: dict[str, dict[str, str]] = Field(default_factory=dict)
    """Original tool name -> (original parameter -> new parameter); top-level parameters only."""

    _patterns: dict[str, re.Pattern[str] | None] = PrivateAttr(default_factory=dict)
    _back: dict[str, str] | None = PrivateAttr(default=None)

    # ------------------------------------------------------------------ lookups
    def tool(self, name: str) -> str:
        """A tool's new name (a name not renamed stays)."""
        return self.tools.get(name, name)

    def original_tool(self, new: str) -> str | None:
        """The original name of a renamed tool, or None for a name the session does not show."""
        if self._back is None:
            self._back = {v: k for k, v in self.tools.items()}
        return self._back.get(new)

    def parameter(self, tool: str, name: str) -> str:
        """A parameter's new name (``tool`` is the original tool name)."""
        return self.parameters.get(tool, {}).get(name, name)

    def arguments_back(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """An agent's arguments with the original parameter names (names it made up are passed on as they are)."""
        back = {v: k for k, v in self.parameters.get(tool, {}).items()}
        return {back.get(k, k): v for k, v in arguments.items()}

    # ------------------------------------------------------------------ text
    def _pattern(self, key: str, names: Iterable[str]) -> re.Pattern[str] | None:
        if key not in self._patterns:
            self._patterns[key] = _alternation(n for n in names if identifier_like(n))
        return self._patterns[key]

    def text(self, text: str, tool: str | None = None) -> str:
        """Free text with every identifier-like tool name replaced (and, with ``tool``, its identifier-like
        parameter names): descriptions, observations, answers, what the user says."""
        replace = dict(self.tools)
        if tool is not None:
            replace.update(self.parameters.get(tool, {}))
        pattern = self._pattern(f"t:{tool}" if tool is not None else "t", replace)
        return pattern.sub(lambda m: replace[m.group(0)], text) if pattern is not None else text

    def error_message(self, message: str, tool: str) -> str:
        """An error message of ``tool``: names replaced as in :meth:`text`, and a parameter named as a field
        (``units: Field required``, ``…; date: not a valid date``) replaced whatever its form."""
        params = self.parameters.get(tool, {})
        if params:
            fields = _alternation(params)
            assert fields is not None
            message = re.sub(rf"(?:(?<=^)|(?<=; ))({fields.pattern})(?=[:.])", lambda m: params[m.group(1)], message)
        return self.text(message, tool)

    def value(self, value: Any, tool: str | None = None) -> Any:
        """A JSON value with :meth:`text` applied to every string in it (keys are data and stay)."""
        if isinstance(value, str):
            return self.text(value, tool)
        if isinstance(value, list):
            return [self.value(v, tool) for v in value]
        if isinstance(value, dict):
            return {k: self.value(v, tool) for k, v in value.items()}
        return value

    def observation(self, value: Any, tool: str) -> Any:
        """What ``tool`` answered (recorded or live, as JSON): strings as :meth:`value`, an error's message as
        :meth:`error_message`."""
        out = self.value(value, tool)
        error = out.get("error") if isinstance(out, dict) and out.get("ok") is False else None
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            out["error"] = {**error, "message": self.error_message(value["error"]["message"], tool)}
        return out

    # ------------------------------------------------------------------ structures
    def schema(self, tool: str, parameters: dict[str, Any]) -> dict[str, Any]:
        """A tool's parameter schema with the top-level parameters renamed (their schemas' text as :meth:`text`)."""
        out = dict(parameters)
        props = parameters.get("properties")
        if isinstance(props, dict):
            out["properties"] = {self.parameter(tool, k): _schema_text(v, self, tool) for k, v in props.items()}
        required = parameters.get("required")
        if isinstance(required, list):
            out["required"] = [self.parameter(tool, r) if isinstance(r, str) else r for r in required]
        return out

    def tool_spec(self, spec: Tool) -> Tool:
        """A tool renamed: name, parameters, and the names in its description."""
        return spec.model_copy(
            update={
                "name": self.tool(spec.name),
                "description": self.text(spec.description, spec.name),
                "parameters": self.schema(spec.name, spec.parameters),
            },
            deep=True,
        )

    def node(self, node: GoldNode) -> GoldNode:
        """A gold node renamed: a call's name and argument names, an ask's tool list, every text."""
        action = node.action
        if node.kind is NodeKind.CALL:
            tool = action.name
            arguments = {self.parameter(tool, k): v for k, v in action.arguments.items()}
            action = action.model_copy(update={"name": self.tool(tool), "arguments": arguments})
            observation = self.observation(node.observation, tool)
        else:
            if action.name == ASK_ACTION:
                action = action.model_copy(update={"arguments": self.ask_arguments(action.arguments)})
            observation = self.value(node.observation)
        reply = self.text(node.user_input) if node.user_input is not None else None
        return node.model_copy(update={"action": action, "observation": observation, "user_input": reply})

    def ask_arguments(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """An ask's ``tool_list`` with the tool and its missing parameters renamed."""
        entries = arguments.get("tool_list")
        if not isinstance(entries, list):
            return arguments
        renamed = []
        for entry in entries:
            if isinstance(entry, dict) and isinstance(entry.get("tool_name"), str):
                tool = entry["tool_name"]
                missing = entry.get("missing_required_parameters")
                entry = {**entry, "tool_name": self.tool(tool)}
                if isinstance(missing, list):
                    entry["missing_required_parameters"] = [
                        self.parameter(tool, p) if isinstance(p, str) else p for p in missing
                    ]
            renamed.append(entry)
        return {**arguments, "tool_list": renamed}

    def raw_node(self, raw: Any) -> Any:
        """A gold node in the published layout (``answer_list``'s other-language DAGs) renamed like :meth:`node`."""
        if not isinstance(raw, dict) or not isinstance(raw.get("action"), dict):
            return raw
        action = dict(raw["action"])
        name = action.get("name")
        out = dict(raw)
        if name == ASK_ACTION and isinstance(action.get("arguments"), dict):
            action["arguments"] = self.ask_arguments(action["arguments"])
        elif isinstance(name, str) and name not in PSEUDO_ACTIONS:
            if isinstance(action.get("arguments"), dict):
                action["arguments"] = {self.parameter(name, k): v for k, v in action["arguments"].items()}
            action["name"] = self.tool(name)
            if "observation" in out:
                out["observation"] = self.observation(out["observation"], name)
        if name in PSEUDO_ACTIONS:
            for key in ("observation", "user_input"):
                if key in out:
                    out[key] = self.value(out[key])
        out["action"] = action
        return out


def _schema_text(schema: Any, rename: Rename, tool: str) -> Any:
    """A parameter's schema with the names in its description rewritten (the rest of it is structure)."""
    if isinstance(schema, dict) and isinstance(schema.get("description"), str):
        return {**schema, "description": rename.text(schema["description"], tool)}
    return schema


def _rename_map(tools: Sequence[Tool], seed: int) -> Rename:
    """New names for a session's tools and their parameters, digests of (seed, name): stable per seed whatever else
    the suite holds, and never a name already in use."""
    taken = {t.name for t in tools} | set(PSEUDO_ACTIONS)
    names: dict[str, str] = {}
    params: dict[str, dict[str, str]] = {}
    for spec in tools:
        names[spec.name] = new = _digest_name("tool_", f"{seed}\x00tool\x00{spec.name}", taken, 6)
        taken.add(new)
        own = set(spec.properties)
        mapped: dict[str, str] = {}
        for param in spec.properties:
            mapped[param] = p = _digest_name("arg_", f"{seed}\x00arg\x00{spec.name}\x00{param}", own, 4)
            own.add(p)
        params[spec.name] = mapped
    return Rename(tools=names, parameters=params)


# ---------------------------------------------------------------------------------------------- the record
class PerturbationRecord(BaseModel):
    """What was done to a session (``Session.extra["perturbation"]``)."""

    model_config = ConfigDict(extra="forbid")

    base: str
    """``Suite.fingerprint()`` of the suite this is a perturbation of: the unperturbed run's ``suite_digest``."""
    kinds: list[str]
    """The kinds, as given (``["distractors:3", "rename"]``)."""
    seed: int
    rename: Rename | None = None
    distractors: list[str] = Field(default_factory=list)
    """The names (as shown) of the tools added by ``distractors``."""
    paraphrased: list[int] | None = None
    """``paraphrase``: the tasks whose utterance the model reworded (the others kept theirs: a fallback)."""
    fallbacks: list[int] | None = None
    """``paraphrase``: the tasks whose rewording broke the wording rules and kept the original utterance."""

    def label(self) -> str:
        """``rename,terse:8 (seed 0)``: how a run's perturbation is named in tables."""
        return f"{','.join(self.kinds)} (seed {self.seed})"


def perturbation_of(session: Session) -> PerturbationRecord | None:
    """A session's perturbation record, or None for a session that was not perturbed.

    Raises:
        DataError: the session holds a record that is not one (field named).
    """
    raw = session.extra.get(PERTURBATION)
    if raw is None:
        return None
    try:
        return PerturbationRecord.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        raise DataError(
            f"session {session.id!r}: not a perturbation record: {first.get('msg')}",
            field=f"{PERTURBATION}.{where}" if where else PERTURBATION,
        ) from None


def suite_perturbation(suite: Suite) -> PerturbationRecord | None:
    """The perturbation a suite is (its first session's record, name maps aside), or None when it is none.

    Raises:
        DataError: sessions perturbed differently (another base, kinds or seed), or some perturbed and some not.
    """
    records = [perturbation_of(s) for s in suite.sessions]
    first = records[0] if records else None
    for session, record in zip(suite.sessions, records, strict=True):
        same = (record is None and first is None) or (
            record is not None
            and first is not None
            and (record.base, record.kinds, record.seed) == (first.base, first.kinds, first.seed)
        )
        if not same:
            raise DataError(
                f"session {session.id!r} is perturbed differently from the suite's first session: a suite is one "
                "perturbation of one base suite",
                field=PERTURBATION,
            )
    return None if first is None else PerturbationRecord(base=first.base, kinds=first.kinds, seed=first.seed)


# ---------------------------------------------------------------------------------------------- the kinds
def _rng(seed: int, kind: str, session_id: str) -> random.Random:
    """The generator of one kind on one session (a string seed is hashed by SHA-512: the same in every process)."""
    return random.Random(f"{seed}\x00{kind}\x00{session_id}")


_SYNONYM_VERBS = {
    "get": "fetch", "fetch": "get", "retrieve": "get", "list": "show", "show": "list", "find": "search",
    "search": "find", "lookup": "find", "query": "search", "add": "create", "create": "add", "update": "modify",
    "modify": "update", "edit": "update", "set": "update", "delete": "remove", "remove": "delete", "run": "execute",
    "execute": "run", "place": "submit", "submit": "place", "check": "verify", "verify": "check", "send": "post",
    "post": "send", "cancel": "void", "book": "reserve", "reserve": "book", "restock": "replenish",
    "recategorize": "reclassify", "amend": "correct", "sync": "refresh", "customize": "configure",
}  # fmt: skip


def _synonym_name(name: str, attempt: int) -> str:
    """A near-synonym of a tool name in the same style: its verb swapped (``get_balance`` -> ``fetch_balance``,
    ``getBudgets`` -> ``fetchBudgets``), else ``legacy`` put in front; later attempts add a number."""
    camel = "_" not in name and bool(re.search(r"[a-z][A-Z]", name))
    words = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).split("_") if camel else name.split("_")
    head = words[0].lower()
    if head in _SYNONYM_VERBS:
        words = [_SYNONYM_VERBS[head], *words[1:]]
    else:
        words = ["legacy", *words]
    if attempt:
        words.append(str(attempt + 1))
    if camel:
        return words[0] + "".join(w[:1].upper() + w[1:] for w in words[1:])
    return "_".join(words)


def _near_synonyms(session: Session, count: int, taken: set[str]) -> list[Tool]:
    """``count`` deprecated look-alikes of the session's gold tools (by name order, round robin): the same
    parameters under a near-synonym name, and a description that says not to use them, so a careful agent can tell."""
    called = sorted({n.name for t in session.tasks for n in t.call_nodes})
    gold = [t for t in session.tools if t.name in called] or list(session.tools)
    out: list[Tool] = []
    attempt = 0
    while len(out) < count and gold:
        for spec in gold:
            if len(out) == count:
                break
            name = _synonym_name(spec.name, attempt)
            if name in taken:
                continue
            taken.add(name)
            description = f"Deprecated: an older version of {spec.name} that is no longer supported. {spec.description}"
            out.append(Tool(name=name, description=description.strip(), parameters=spec.parameters))
        attempt += 1
    return out


def _add_distractors(session: Session, n: int, pool: Sequence[Tool], seed: int) -> tuple[Session, list[str]]:
    """N tools the session does not have, drawn from ``pool``; near-synonyms of its gold tools when the pool is short.

    A drawn tool keeps only what an agent sees (name, description, parameters): its effect and contract belong to
    another environment.
    """
    own = {t.name for t in session.tools} | set(PSEUDO_ACTIONS)
    candidates = sorted({t.name: t for t in reversed(pool) if t.name not in own}.values(), key=lambda t: t.name)
    rng = _rng(seed, "distractors", session.id)
    drawn = rng.sample(candidates, min(n, len(candidates)))
    added = [Tool(name=t.name, description=t.description, parameters=t.parameters) for t in drawn]
    taken = own | {t.name for t in added}
    added += _near_synonyms(session, n - len(added), taken)
    tools = [*session.tools, *added]
    return session.model_copy(update={"tools": tools}), [t.name for t in added]


def _first_words(text: str, words: int) -> str:
    """The first sentence of ``text``, cut to ``words`` words (0: nothing)."""
    if words <= 0:
        return ""
    sentence = re.split(r"(?<=[.!?])\s", text.strip(), maxsplit=1)[0]
    kept = sentence.split()[:words]
    return " ".join(kept)


def _strip_descriptions(schema: Any) -> Any:
    """A JSON Schema without any ``description`` keyword, at every depth (a *property* called ``description`` is a
    parameter and stays)."""
    if isinstance(schema, list):
        return [_strip_descriptions(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "description" and isinstance(value, str):
            continue
        if key in ("properties", "$defs", "definitions", "patternProperties", "dependentSchemas") and isinstance(
            value, dict
        ):
            out[key] = {k: _strip_descriptions(v) for k, v in value.items()}
        elif key in ("items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames"):
            out[key] = _strip_descriptions(value)
        elif key in ("anyOf", "oneOf", "allOf", "prefixItems"):
            out[key] = _strip_descriptions(value)
        else:
            out[key] = value
    return out


def _terse(session: Session, words: int) -> Session:
    tools = [
        t.model_copy(
            update={"description": _first_words(t.description, words), "parameters": _strip_descriptions(t.parameters)}
        )
        for t in session.tools
    ]
    return session.model_copy(update={"tools": tools})


def _shuffle(session: Session, seed: int) -> Session:
    rng = _rng(seed, "shuffle", session.id)
    tools = list(session.tools)
    rng.shuffle(tools)
    out = []
    for spec in tools:
        params = dict(spec.parameters)
        props = params.get("properties")
        if isinstance(props, dict):
            keys = list(props)
            rng.shuffle(keys)
            params["properties"] = {k: props[k] for k in keys}
        required = params.get("required")
        if isinstance(required, list):
            required = list(required)
            rng.shuffle(required)
            params["required"] = required
        out.append(spec.model_copy(update={"parameters": params}))
    return session.model_copy(update={"tools": out})


def _rename(session: Session, seed: int, write_tools: Collection[str] | None) -> tuple[Session, Rename]:
    """Every name the agent sees replaced, and everything that holds a name made to follow (see :class:`Rename`)."""
    rename = _rename_map(session.tools, seed)
    tasks = [
        task.model_copy(update={"utterance": rename.text(task.utterance), "gold": [rename.node(n) for n in task.gold]})
        for task in session.tasks
    ]
    extra = dict(session.extra)
    if write_tools is not None:
        extra["write_tools"] = sorted(rename.tool(n) for n in write_tools)
    if isinstance(extra.get("distractors"), list):
        extra["distractors"] = [rename.tool(n) if isinstance(n, str) else n for n in extra["distractors"]]
    if isinstance(extra.get("answer_list"), list):
        extra["answer_list"] = [
            [rename.raw_node(node) for node in dag] if isinstance(dag, list) else dag for dag in extra["answer_list"]
        ]
    renamed = session.model_copy(
        update={"tools": [rename.tool_spec(t) for t in session.tools], "tasks": tasks, "extra": extra}
    )
    return renamed, rename


def _write_tools(session: Session, lookup: Callable[[Session], Collection[str] | None] | None) -> set[str] | None:
    """The session's write tools, which the scorer must know by their new names after a rename: the session's own
    note, else the caller's lookup (the environment's declarations), else the effects on its tools."""
    noted = session.extra.get("write_tools")
    if isinstance(noted, list):
        return {str(n) for n in noted}
    found = lookup(session) if lookup is not None else None
    if found is not None:
        return set(found)
    declared = {t.name for t in session.tools if t.effect is Effect.WRITE}
    return declared if declared or not session.environment else None


def perturb_session(
    session: Session,
    kinds: Sequence[Kind],
    seed: int,
    *,
    base: str,
    pool: Sequence[Tool] = (),
    write_tools: Callable[[Session], Collection[str] | None] | None = None,
    paraphrase: tuple[list[int], list[int]] | None = None,
) -> Session:
    """One session perturbed by ``kinds`` (see the module docstring), with its record."""
    by_name = {k.name: k for k in kinds}
    record = PerturbationRecord(base=base, kinds=[str(k) for k in kinds], seed=seed)
    if paraphrase is not None:
        record.paraphrased, record.fallbacks = paraphrase
    writers = _write_tools(session, write_tools) if "rename" in by_name else None
    added: list[str] = []
    if "distractors" in by_name:
        session, added = _add_distractors(session, by_name["distractors"].n or 0, pool, seed)
    if "terse" in by_name:
        session = _terse(session, by_name["terse"].n if by_name["terse"].n is not None else TERSE_WORDS)
    if "rename" in by_name:
        session, record.rename = _rename(session, seed, writers)
        added = [record.rename.tool(n) for n in added]
    if "shuffle" in by_name:
        session = _shuffle(session, seed)
    record.distractors = added
    extra = {**session.extra, PERTURBATION: record.model_dump(mode="json", exclude_none=True)}
    return session.model_copy(update={"extra": extra})


def perturb_suite(
    suite: Suite,
    kinds: str | Sequence[str | Kind],
    seed: int = 0,
    *,
    pool: Sequence[Tool] = (),
    write_tools: Callable[[Session], Collection[str] | None] | None = None,
    base: str | None = None,
    paraphrased: dict[str, tuple[list[int], list[int]]] | None = None,
) -> Suite:
    """A perturbed copy of ``suite`` (the suite itself is not changed).

    Args:
        suite: the suite to perturb (the base: its fingerprint is recorded).
        kinds: ``"distractors:3,rename"`` or the parsed kinds.
        seed: the same seed gives the same copy.
        pool: tools of other environments ``distractors`` may draw (the suite's other sessions are added to it).
        write_tools: the write tools of a session's environment (``rename`` keeps them under the new names for the
            scorer's redundant-write count, as ``Session.extra["write_tools"]``), for suites whose tools do not carry
            their effects (any suite read from a file).
        base: the fingerprint to record as the base (default: ``suite``'s own; :mod:`toolwild.synth.paraphrase`
            passes the fingerprint from before it reworded the utterances).
        paraphrased: per session id, (tasks reworded, tasks that fell back) when ``paraphrase`` was applied.

    Raises:
        ConfigError: a bad ``kinds`` value; ``paraphrase`` without its rewording (a model is needed:
            :func:`toolwild.synth.paraphrase.perturb_with_model`); a suite that is already a perturbation.
    """
    parsed = parse_kinds(kinds)
    if any(k.name == "paraphrase" for k in parsed) and paraphrased is None:
        raise ConfigError("--perturb paraphrase needs a model to reword the utterances (toolwild.synth.paraphrase)")
    for session in suite.sessions:
        done = perturbation_of(session)
        if done is not None:
            raise ConfigError(f"session {session.id!r} is already perturbed ({done.label()}): perturb its base suite")
    base = base or suite.fingerprint()
    everyone = [*pool, *(t for s in suite.sessions for t in s.tools)]
    sessions = [
        perturb_session(
            s,
            parsed,
            seed,
            base=base,
            pool=everyone,
            write_tools=write_tools,
            paraphrase=(paraphrased or {}).get(s.id, ([], [])) if paraphrased is not None else None,
        )
        for s in suite.sessions
    ]
    label = ",".join(str(k) for k in parsed)
    return suite.model_copy(update={"name": f"{suite.name}+{label}", "sessions": sessions})
