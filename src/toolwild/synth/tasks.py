"""Bottom-up tasks on any environment: plan a chain, fill and execute its calls one mini-task at a time on the
session's episode (state evolves, observations are real), then join them into one task with a gold DAG.

A task is built for a coarse type (single, multi, clarify, chat) and a *mode*: how it leans on the conversation
(``first``; ``coref``: a value the previous task showed; ``partial``: the same request as an earlier task with only
what changes said; ``long``: a value shown two or more tasks back). Everything that can go wrong is a
:class:`Dropped` with a reason — a gold call the environment refuses, a write that changes nothing, a dependency
whose value the parent's result does not hold, a label the values do not bear out — and the composer tries again.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from toolwild.core.answers import observation_result
from toolwild.core.grounding import ungrounded_identifiers
from toolwild.core.hidden_intent import check_subtypes, mentions, shown_text
from toolwild.core.references import AMBIGUOUS_REFERENCE, Pointer, ambiguous_references, candidates, resolve, same_value
from toolwild.core.schema import schema_errors
from toolwild.core.session import Session
from toolwild.core.state_change import expectation
from toolwild.core.task import (
    Action,
    CoarseType,
    GoldNode,
    Task,
    TaskType,
    TurnSubtype,
    answer_node,
    ask_node,
    shape_problem,
)
from toolwild.core.tool import Effect, Tool
from toolwild.envs.base import EnvironmentBackend, Episode, diff_states
from toolwild.envs.replay import loose_value
from toolwild.errors import ToolwildError
from toolwild.llm.client import LLM
from toolwild.synth.answers import capability_answer, recall_answer, template_answer, write_answer
from toolwild.synth.chains import Plan, PlannedCall, ToolGraph
from toolwild.synth.utterances import (
    Phrase,
    Wording,
    ask_again,
    ask_question,
    humanize,
    pointer_reply,
    render_value,
    template_utterance,
    topic_of,
    vague_reply,
    value_reply,
    wording_problems,
    write_utterance,
)
from toolwild.synth.values import Fact, facts_of, free_value, key_matches, leaves

__all__ = ["AMBIGUOUS", "Dropped", "EnvHandle", "SessionState", "build_task"]

_SUBTYPE = {
    "first": TurnSubtype.FIRST,
    "coref": TurnSubtype.COREFERENTIAL,
    "partial": TurnSubtype.PARTIAL,
    "long": TurnSubtype.LONG_RANGE,
}
AMBIGUOUS = AMBIGUOUS_REFERENCE
INCOHERENT = "incoherent reference"
"""Why a task attempt was dropped when it carries a value that described one thing into a call about another."""
UNGROUNDED = "ungrounded identifier"
"""Why a task attempt was dropped when a gold call passes an identifier the agent was never shown."""


class Dropped(ToolwildError):
    """A task attempt that failed; ``reason`` is a short category, ``detail`` says what exactly."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


@dataclass
class EnvHandle:
    """An environment ready for generation: its backend, tools, dependency graph and known values."""

    ref: str
    backend: EnvironmentBackend
    tools: list[Tool]
    graph: ToolGraph
    description: str = ""
    recordings: dict[str, list[dict[str, Any]]] | None = None
    """For a replay environment: the recorded arguments per tool (the only calls it can answer)."""


@dataclass
class SessionState:
    """One session being built: its episode, the gold calls so far (to rebuild the episode after a failed
    attempt), the tasks, and the facts they showed."""

    env: EnvHandle
    seed: int
    rng: random.Random
    today: date
    episode: Episode
    pool: list[Fact]
    tasks: list[Task] = field(default_factory=list)
    facts: list[Fact] = field(default_factory=list)
    calls: list[tuple[str, dict[str, Any], Any]] = field(default_factory=list)
    simulator_failures: int = 0
    """Task attempts since the last task built whose gold call the simulator could not answer."""
    mentioned: list[list[Any]] = field(default_factory=list)
    """Per task, the values its user named in passing (a first chat's entity): the subtype check may use them as
    earlier values once it has seen them in that task's words."""
    sources: list[str] = field(default_factory=list)
    """Who wrote each task's utterance: ``template``, ``model`` or ``template-fallback``."""
    answer_sources: list[str] = field(default_factory=list)
    """Who wrote each model-written tool task's answer: ``model`` or ``template-fallback`` (templates alone: empty)."""

    def repeats(self, tool: Tool, arguments: dict[str, Any]) -> bool:
        """Whether the session already made this call since its last write (a user does not ask the same thing
        twice unless something changed; a write is never repeated)."""
        for name, args, _ in reversed(self.calls):
            if name == tool.name and args == arguments:
                return True
            if tool.effect is not Effect.WRITE and self._writes(name):
                return False
        return False

    def _writes(self, name: str) -> bool:
        tool = next((t for t in self.env.tools if t.name == name), None)
        return tool is None or tool.effect is not Effect.READ

    @property
    def position(self) -> int:
        """Index of the task being built."""
        return len(self.tasks)

    def shown(self, task: int) -> str:
        """Text task ``task`` put into the conversation (the subtype check's own reading of it)."""
        return shown_text(self.tasks[task])


# ---------------------------------------------------------------------------------------------- calls
class _Builder:
    """Executes one attempt's gold calls and records its nodes."""

    def __init__(self, state: SessionState) -> None:
        self.state = state
        self.nodes: list[GoldNode] = []
        self.results: list[Any] = []

    async def call(self, tool: Tool, arguments: dict[str, Any], deps: list[int]) -> int:
        problems = schema_errors(tool.parameters, arguments)
        if problems:
            raise Dropped("arguments fail the schema", f"{tool.name}: {'; '.join(problems)[:200]}")
        watched = tool.effect is Effect.WRITE and self.state.env.backend.observable_state
        before = self.state.episode.state() if watched else None
        observation = await self.state.episode.acall(tool.name, arguments)
        if not observation.ok:
            kind = observation.error.kind.value if observation.error else "error"
            message = observation.error.message if observation.error else ""
            raise Dropped(f"gold call failed ({kind})", f"{tool.name}({arguments}): {message[:160]}")
        if before is not None and not diff_states(before, self.state.episode.state()):
            raise Dropped("a write changed nothing", f"{tool.name}({arguments})")
        idx = len(self.nodes)
        self.nodes.append(
            GoldNode(
                idx=idx,
                action=Action(name=tool.name, arguments=arguments),
                observation=observation.model_dump(mode="json", include={"ok", "result"}),
                dependency_list=deps,
            )
        )
        self.results.append(observation.result)
        return idx

    def ask(self, tool: Tool, missing: str, question: str, reply: str, deps: list[int]) -> int:
        self.nodes.append(ask_node(len(self.nodes), tool.name, [missing], question, reply, deps))
        return len(self.nodes) - 1

    def answer(self, text: str) -> None:
        self.nodes.append(answer_node(self.nodes, text))


def _compact(result: Any, limit: int = 240) -> str:
    text = json.dumps(result, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ---------------------------------------------------------------------------------------------- references
@dataclass
class _Reference:
    """What a later task leans on: a fact (coref/long), or an earlier call to repeat with changes (partial)."""

    mode: str
    fact: Fact | None = None
    repeat: GoldNode | None = None
    repeat_task: int = 0


def _references(state: SessionState, mode: str) -> list[_Reference]:
    i = state.position
    if mode == "first":
        return [_Reference("first")]
    if mode == "partial":  # "the same again for the restock" is the latest restock, never an older one
        out, seen = [], set()
        for j in range(i - 1, -1, -1):
            for node in reversed(state.tasks[j].call_nodes):
                if node.name not in seen and len(node.action.arguments) >= 2:
                    out.append(_Reference("partial", repeat=node, repeat_task=j))
                seen.add(node.name)
        return out
    if mode == "coref":
        facts = [f for f in state.facts if f.task == i - 1]
    else:
        previous = state.shown(i - 1)
        facts = [f for f in state.facts if f.task <= i - 2 and not mentions(previous, f.value)]
    unique = {(f.key, repr(f.value)): f for f in facts}
    return [_Reference(mode, fact=f) for f in unique.values()]


def _param_for_fact(tool: Tool, fact: Fact) -> str | None:
    for name in tool.required or list(tool.properties):
        if key_matches(fact.key, name) and _types_agree(tool.properties.get(name, {}), fact.value):
            return name
    return None


def _types_agree(schema: Any, value: Any) -> bool:
    if not isinstance(schema, dict):
        return True
    errors = schema_errors({"type": "object", "properties": {"v": schema}}, {"v": value})
    return not errors


def _pointer(state: SessionState, how: str, fact: Fact, name: str) -> Pointer:
    """The plainest wording of a reference to ``fact`` (filling ``name``) that only one value answers.

    The reference points at the previous task (coref) or at tasks two or more back (long; the first task alone when
    the fact is from it). Among the values shown there under the same name (or under any key the fact's value stands
    under), the plain name must single out the fact's value; else the wording names its source (what the user asked
    for, or what came back), then the call's tool, then both. When nothing singles it out, the attempt is dropped:
    a gold value that a careful reader could take for another is a guess, not a reference.
    """
    i = state.position
    first = how == "long" and fact.task == 0
    span = [i - 1] if how == "coref" else [0] if first else list(range(max(0, i - 1)))
    tools = {t.name: t for t in state.env.tools}
    pool = [c for j in span for c in candidates(state.tasks[j], j, tools)]
    names = {name} | {c.key for c in pool if same_value(c.value, fact.value)}
    kind = "coref" if how == "coref" else "long"
    options = [Pointer(kind, first=first)]
    if fact.channel in ("arg", "result"):
        options.append(Pointer(kind, source=fact.channel, first=first))
    if fact.tool:
        options.append(Pointer(kind, tool=fact.tool, first=first))
        if fact.channel in ("arg", "result"):
            options.append(Pointer(kind, source=fact.channel, tool=fact.tool, first=first))
    for pointer in options:
        meant = resolve(
            pool,
            names,
            channels={pointer.source} if pointer.source else set(),
            tools={pointer.tool} if pointer.tool else set(),
        )
        if not meant or (len(meant) == 1 and same_value(meant[0], fact.value)):
            return pointer  # nothing else there goes by that name (a value named in passing: words, not data)
    shown = ", ".join(repr(v) for v in resolve(pool, names)[:5])
    raise Dropped(AMBIGUOUS, f"{name} {fact.value!r} among {shown} in task(s) {span}")


# ---------------------------------------------------------------------------------------------- filling
def _fill(
    state: SessionState, call: PlannedCall, fixed: dict[str, Any], rng: random.Random, *, optional: bool = True
) -> dict[str, Any]:
    """Arguments for a planned call: the fixed ones (fed, referred), the rest from the environment or the schema."""
    tool = call.tool
    if state.env.recordings is not None:
        return _from_recordings(state, tool, fixed, rng)
    args = dict(fixed)
    pool = state.pool + [f for f in state.facts if f.task >= 0]
    for name in tool.required:
        if name not in args:
            args[name] = free_value(name, tool.properties.get(name, {}), rng, pool, state.today)
    if optional:
        for name, schema in tool.properties.items():
            if name not in args and rng.random() < 0.3 and any(key_matches(f.key, name) for f in state.pool):
                args[name] = free_value(name, schema, rng, state.pool, state.today)
    return args


def _from_recordings(state: SessionState, tool: Tool, fixed: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    recorded = (state.env.recordings or {}).get(tool.name, [])
    fits = [r for r in recorded if all(loose_value(r.get(k)) == loose_value(v) for k, v in fixed.items())]
    if not fits:
        raise Dropped("no recording fits", f"{tool.name} with {fixed}")
    return dict(rng.choice(fits))


def _fed_value(result: Any, entity: str, param: str) -> Any:
    """The value a dependent call takes from its parent's result ("the item from the first step"): the one value
    the result holds under that name, or a drop (a listed set has no "the item": taking one would be a guess)."""
    values = [v for k, v in leaves(result, entity) if key_matches(k, entity) or key_matches(k, param)]
    if not values:
        raise Dropped("the parent's result does not hold the value", f"no {entity!r} in {_compact(result, 120)}")
    distinct: list[Any] = []
    for v in values:
        if not any(same_value(v, d) for d in distinct):
            distinct.append(v)
    if len(distinct) > 1:
        raise Dropped(AMBIGUOUS, f"the {entity} from the step before is one of {len(distinct)} values")
    return values[0]


# ---------------------------------------------------------------------------------------------- plans
def _plan(state: SessionState, coarse: CoarseType, multi: TaskType | None, max_calls: int) -> Plan:
    graph, rng = state.env.graph, state.rng
    if coarse is not CoarseType.MULTI:
        return graph.single(rng)
    if multi is TaskType.SEQUENTIAL:
        plan = graph.sequential(rng, length=rng.randint(2, max(2, min(3, max_calls))))
        plan = plan or graph.sequential(rng, length=2)
    elif multi is TaskType.MIXED:
        plan = graph.mixed(rng)
    else:
        plan = graph.parallel(rng, width=rng.randint(2, max(2, max_calls)) if len(graph.tools) > 2 else 2)
    if plan is None:
        raise Dropped(f"no {multi.value if multi else 'multi'} chain in the dependency graph")
    return plan


def _fitting_plan(
    state: SessionState, coarse: CoarseType, multi: TaskType | None, max_calls: int, ref: _Reference
) -> Plan:
    """A plan whose first call can take the reference's value (a few draws; single calls pick a fitting tool)."""
    if ref.fact is None:
        return _plan(state, coarse, multi, max_calls)
    if coarse is not CoarseType.MULTI:
        fitting = [t for t in state.env.tools if _param_for_fact(t, ref.fact)]
        if not fitting:
            raise Dropped("no tool takes the referenced value", ref.fact.key)
        return Plan("single", [PlannedCall(state.rng.choice(fitting))])
    for _ in range(12):
        plan = _plan(state, coarse, multi, max_calls)
        if _param_for_fact(plan.calls[0].tool, ref.fact):
            return plan
    raise Dropped("no chain starts with a tool that takes the referenced value", ref.fact.key)


async def build_task(
    state: SessionState,
    coarse: CoarseType,
    mode: str,
    *,
    multi: TaskType | None = None,
    ambiguous: bool = False,
    vague: bool = False,
    max_calls: int = 3,
    writer: LLM | None = None,
) -> Task:
    """Build one task at the session's next position, executing its gold calls on the session's episode.

    Raises:
        Dropped: the attempt failed (the episode may have changed: the caller rebuilds it).
    """
    rng = state.rng
    i = state.position
    before = state.episode.state()  # the previous task's end state (the session's start for the first)
    refs = _references(state, mode)
    if not refs:
        raise Dropped(f"nothing for a {mode} reference to point at")
    b = _Builder(state)
    if coarse is CoarseType.CHAT:
        wording, answer, introduced = _chat(state, refs, rng)
        b.answer(answer)
        answer_calls = []
        task_type = TaskType.CHAT
    else:
        ref = rng.choice(refs)
        plan = _fitting_plan(state, coarse, multi, max_calls, ref)
        wording = await _calls(state, b, plan, ref, coarse, vague, rng)
        wording.ambiguous = ambiguous
        task_type = {
            "single": TaskType.SINGLE,
            "parallel": TaskType.PARALLEL,
            "sequential": TaskType.SEQUENTIAL,
            "mixed": TaskType.MIXED,
        }[plan.topology]
        if coarse is CoarseType.CLARIFY:
            task_type = TaskType.CLARIFY
        calls = [n for n in b.nodes if n.kind.value == "call"]
        answer_calls = [(_tool(state, n.name), n.action.arguments, r) for n, r in zip(calls, b.results, strict=True)]
        # its own random stream: the answer's wording must not shift any later choice of the session
        b.answer(template_answer(answer_calls, random.Random(f"{state.seed}:{i}:answer")))
    wording.topic = topic_of(state.env.tools)
    template = template_utterance(wording, rng)
    broken = wording_problems(template, wording)
    if broken:
        raise Dropped("the template cannot word this task", broken[0])
    utterance, by_model = template, False
    answer_source = ""
    if writer is not None:
        history = [t.utterance for t in state.tasks]
        utterance, by_model = await write_utterance(
            writer, wording, history, template, service=state.env.description, seed=state.seed * 100 + i
        )
        if answer_calls:
            earlier = [observation_result(n.observation) for t in state.tasks for n in t.call_nodes]
            text, answer_by_model = await write_answer(
                writer,
                answer_calls,
                b.nodes[-1].observation,
                seed=state.seed * 100 + i,
                request=utterance,
                earlier=earlier,
            )
            b.nodes[-1] = b.nodes[-1].model_copy(update={"observation": text})
            answer_source = "model" if answer_by_model else "template-fallback"
    task = Task(
        utterance=utterance,
        type=task_type,
        subtype=_SUBTYPE[mode],
        gold=b.nodes,
        **expectation(before, state.episode.state()),
    )
    problem = shape_problem(task)
    if problem:
        raise Dropped("wrong gold shape", problem)
    provisional = Session(
        id="check",
        env_info="",
        tools=state.env.tools,
        tasks=[*state.tasks, task],
        extra={"mentioned_values": state.mentioned},
    )
    ungrounded = [f for f in ungrounded_identifiers(provisional) if f.task_index == i]
    if ungrounded:
        raise Dropped(UNGROUNDED, ungrounded[0].message[:200])
    findings = [f for f in check_subtypes(provisional) if f.task_index == i]
    if findings:
        raise Dropped("subtype not borne out by the values", findings[0].message[:200])
    unclear = [f for f in ambiguous_references(provisional) if f.task_index == i]
    if unclear:
        raise Dropped(AMBIGUOUS, unclear[0].message[:200])
    if coarse is CoarseType.CHAT:
        state.facts.extend(introduced)
        state.mentioned.append([f.value for f in introduced if wording.kind == "chat-first"])
    else:
        state.mentioned.append([])
    for k, node in enumerate(n for n in task.gold if n.kind.value == "call"):
        state.facts.extend(facts_of(i, _tool(state, node.name), node.action.arguments, b.results[k]))
        state.calls.append((node.name, node.action.arguments, node.observation))
    state.tasks.append(task)
    state.sources.append("model" if by_model else ("template-fallback" if writer is not None else "template"))
    if answer_source:
        state.answer_sources.append(answer_source)
    return task


def _tool(state: SessionState, name: str) -> Tool:
    return next(t for t in state.env.tools if t.name == name)


def _check_coherent(fact: Fact, args: dict[str, Any]) -> None:
    """Refuse a reference that carries a value a call gave back about one thing into a call about another: "order
    coffee, as many units as the stock I just checked" (of sugar) is no request a person makes.

    Raises:
        Dropped: (:data:`INCOHERENT`) the call names, under a key the fact's source call was asked about, another
            value.
    """
    if fact.channel != "result":
        return
    for key, value in fact.about:
        clash = [v for p, v in args.items() if key_matches(key, p) and isinstance(v, str) and not same_value(v, value)]
        if clash:
            raise Dropped(
                INCOHERENT, f"{fact.key} {fact.value!r} is {key} {value!r}'s; this call is about {clash[0]!r}"
            )


async def _calls(
    state: SessionState, b: _Builder, plan: Plan, ref: _Reference, coarse: CoarseType, vague: bool, rng: random.Random
) -> Wording:
    """Fill and execute the plan's calls (each a mini-task), returning how the user asks for them."""
    phrases: list[Phrase] = []
    hidden: list[Any] = []
    kind = plan.topology
    first_reference = False
    call_nodes: list[int] = []
    done: list[dict[str, Any]] = []
    if ref.mode == "partial" and coarse is CoarseType.CLARIFY:
        raise Dropped("partial information is not worded for clarify tasks")
    for k, call in enumerate(plan.calls):
        fixed: dict[str, Any] = {}
        phrase = Phrase(tool=call.tool)
        if k == 0 and ref.mode in ("coref", "long"):
            assert ref.fact is not None
            param = _param_for_fact(call.tool, ref.fact)
            if param is None:
                raise Dropped("the chosen tool takes no such value", f"{call.tool.name} <- {ref.fact.key}")
            fixed[param] = ref.fact.value
            phrase.refer[param] = _pointer(state, ref.mode, ref.fact, param)
            hidden.append(ref.fact.value)
            first_reference = ref.fact.task == 0
        if k == 0 and ref.mode == "partial":
            assert ref.repeat is not None
            if len(plan.calls) != 1:
                raise Dropped("partial information is worded for one call")
            call = PlannedCall(_tool(state, ref.repeat.name))
            phrase.tool = call.tool
            old = dict(ref.repeat.action.arguments)
            change = rng.choice(sorted(old))
            kept = {p: v for p, v in old.items() if p != change}
            fixed.update(kept)
            hidden.extend(v for v in kept.values() if not isinstance(v, dict | list))
            kind = "partial"
        deps: list[int] = []
        for param, (parent, entity) in call.feeds.items():
            fixed[param] = _fed_value(b.results[parent], entity, param)
            phrase.fed[param] = (parent, entity)
            deps.append(call_nodes[parent])
        args = _fill(state, call, fixed, rng, optional=ref.mode != "partial")
        if k == 0 and ref.fact is not None and ref.mode in ("coref", "long"):
            _check_coherent(ref.fact, args)
        if any(c.tool.name == call.tool.name and c_args == args for c, c_args in zip(plan.calls, done, strict=False)):
            raise Dropped("the same call twice in one task", call.tool.name)
        if state.repeats(call.tool, args):
            raise Dropped("the session already made this call", call.tool.name)
        done.append(args)
        if ref.mode == "partial" and k == 0:
            changed = {p: v for p, v in args.items() if p not in fixed}
            if not changed or all(args.get(p) == v for p, v in ref.repeat.action.arguments.items()):  # type: ignore[union-attr]
                raise Dropped("partial repeat changes nothing")
        phrase.stated = {
            p: v for p, v in args.items() if p not in phrase.refer and p not in phrase.fed and p not in fixed
        }
        if coarse is CoarseType.CLARIFY:
            deps = _clarify(b, call.tool, args, phrase, hidden, ref, vague, rng)
        call_nodes.append(await b.call(call.tool, args, sorted(set(deps))))
        phrases.append(phrase)
    if coarse is CoarseType.CLARIFY:
        kind = "single" if kind != "partial" else "partial"
    for value in hidden:
        if any(mentions(str(v), value) for p in phrases for v in p.stated.values()):
            raise Dropped("a hidden value is also stated", render_value(value))
    return Wording(kind=kind, phrases=phrases, hidden=hidden, first_reference=first_reference)


def _clarify(
    b: _Builder,
    tool: Tool,
    args: dict[str, Any],
    phrase: Phrase,
    hidden: list[Any],
    ref: _Reference,
    vague: bool,
    rng: random.Random,
) -> list[int]:
    """Withhold one required value the user would state; the gold asks for it (twice after a vague reply).

    A referred value can be withheld too: the user's reply is then the reference, with the pointer's markers. The
    asks and replies are worded from a generator of their own (one draw of ``rng``), so the size of the banks never
    shifts the rest of the session.
    """
    stated = [p for p in tool.required if p in phrase.stated and not isinstance(args[p], dict | list)]
    if stated:
        missing = rng.choice(stated)
        words = random.Random(rng.getrandbits(64))
        value = phrase.stated.pop(missing)
        hidden.append(value)
        question = ask_question(missing, words)
        reply = value_reply(missing, value, words, avoid=hidden)
        if vague:
            first = b.ask(tool, missing, question, vague_reply(words, avoid=hidden), [])
            return [b.ask(tool, missing, ask_again(missing, words), reply, [first])]
        return [b.ask(tool, missing, question, reply, [])]
    referred = [p for p in phrase.refer if p in tool.required]
    if not referred:
        raise Dropped("nothing to clarify", f"{tool.name} has no required value the user states")
    missing = referred[0]
    words = random.Random(rng.getrandbits(64))
    pointer = phrase.refer.pop(missing)
    first = ref.fact is not None and ref.fact.task == 0
    reply = pointer_reply(missing, pointer, words, first=first, avoid=hidden)
    return [b.ask(tool, missing, ask_question(missing, words, pointer=True), reply, [])]


def _chat(state: SessionState, refs: list[_Reference], rng: random.Random) -> tuple[Wording, str, list[Fact]]:
    """A task answered from the conversation (or, first, from what the assistant can do): no tool call.

    Returns the wording, the gold answer, and the facts the task puts into the conversation (a first chat names a
    real entity of the environment, so later tasks have something to refer to).
    """
    ref = rng.choice(refs)
    i = state.position
    # the answer's wording has a stream of its own: it must not shift any later choice of the session
    words = random.Random(f"{state.seed}:{i}:chat")
    if ref.mode == "first":
        names = ", ".join(humanize(t.name) for t in state.env.tools[:8])
        named = [f for f in state.pool if isinstance(f.value, str) and 2 < len(f.value) < 40]
        if not named:
            return Wording(kind="chat-first"), capability_answer(names, words), []
        fact = rng.choice(named)
        wording = Wording(kind="chat-first", recall=(fact.key, render_value(fact.value)))
        answer = capability_answer(names, words, fact.key, render_value(fact.value))
        return wording, answer, [Fact(i, fact.key, fact.value)]
    fact = ref.fact
    if ref.mode == "partial":
        facts = [f for f in state.facts if f.task == i - 1]
        fact = rng.choice(facts) if facts else None
    if fact is None:
        raise Dropped("nothing to recall")
    pointer = _pointer(state, "long" if ref.mode == "long" else "coref", fact, fact.key)
    if ref.mode == "partial":  # a follow-up on the previous task ("and the units?"), its markers kept
        pointer = Pointer("partial", source=pointer.source, tool=pointer.tool)
    wording = Wording(
        kind="chat-recall",
        hidden=[fact.value],
        recall=(fact.key, ref.mode),
        recall_pointer=pointer,
        first_reference=fact.task == 0,
    )
    return wording, recall_answer(fact.key, render_value(fact.value), words), [Fact(i, fact.key, fact.value)]
