"""WildToolBench session records (``english_*`` fields) <-> `Session`.

Reading then writing a record gives back the same JSON value: fields we do not model (the other-language
``answer_list``, unknown keys) are carried in ``Session.extra`` / ``GoldNode.extra`` and restored on write.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from toolwild.core.formats.openai_tools import from_openai_tool, to_openai_tool
from toolwild.core.jsonl import LoadReport, load_records, validation_to_data_error
from toolwild.core.session import Session, Suite
from toolwild.core.state_change import change_problem
from toolwild.core.task import Action, GoldNode, Task, TaskType, TurnSubtype
from toolwild.errors import DataError

__all__ = ["WtbSuiteWriter", "check_id", "load_wtb_suite", "session_from_wtb", "session_to_wtb", "write_wtb_suite"]

_KNOWN_KEYS = (
    "id",
    "english_env_info",
    "english_tools",
    "english_tasks",
    "english_answer_list",
    "english_task_types",
    "english_turn_subtypes",
    "answer_list",
    "environment",
    "expected_states",
    "expected_state_digests",
    "expected_state_changes",
)
_NODE_KEYS = ("idx", "action", "observation", "dependency_list", "user_input")


def check_id(value: str, *, field: str = "id") -> None:
    """Refuse an id that is empty or holds a character that is not printable (a NUL, a newline, a control code).

    Why: ids end up in file names, terminal tables and log lines; a NUL byte made ``import wtb-envs`` crash, and a
    newline or an escape code would forge lines in any report.
    """
    if not value.strip():
        raise DataError("the id is empty", field=field)
    if not value.isprintable():
        bad = next(c for c in value if not c.isprintable())
        raise DataError(f"the id holds a non-printable character (U+{ord(bad):04X})", field=field)


def _require(record: dict[str, Any], key: str, kind: type | tuple[type, ...]) -> Any:
    if key not in record:
        raise DataError("missing field", field=key)
    value = record[key]
    if not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise DataError(f"expected {names}, got {type(value).__name__}", field=key)
    return value


def _node_from_wtb(obj: Any, field: str) -> GoldNode:
    if not isinstance(obj, dict):
        raise DataError("gold node must be an object", field=field)
    for key in ("idx", "action", "dependency_list"):
        if key not in obj:
            raise DataError("missing field", field=f"{field}.{key}")
    action = obj["action"]
    if not isinstance(action, dict) or not isinstance(action.get("name"), str):
        raise DataError("action must be an object with a string 'name'", field=f"{field}.action")
    arguments = action.get("arguments", {})
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError as exc:
            raise DataError(f"arguments is not JSON: {exc.msg}", field=f"{field}.action.arguments") from None
    if not isinstance(arguments, dict):
        raise DataError("arguments must be an object", field=f"{field}.action.arguments")
    deps = obj["dependency_list"]
    if not isinstance(deps, list) or not all(isinstance(d, int) and not isinstance(d, bool) for d in deps):
        raise DataError("dependency_list must be a list of node indices", field=f"{field}.dependency_list")
    user_input = obj.get("user_input")
    if user_input is not None and not isinstance(user_input, str):
        user_input = json.dumps(user_input, ensure_ascii=False)
    if not isinstance(obj["idx"], int):
        raise DataError("idx must be an integer", field=f"{field}.idx")
    extra = {k: v for k, v in obj.items() if k not in _NODE_KEYS}
    extra_action = {k: v for k, v in action.items() if k not in ("name", "arguments")}
    if extra_action:
        extra["__action_extra__"] = extra_action
    return GoldNode(
        idx=obj["idx"],
        action=Action(name=action["name"], arguments=arguments),
        observation=obj.get("observation"),
        dependency_list=list(deps),
        user_input=user_input,
        extra=extra,
    )


def _node_to_wtb(node: GoldNode) -> dict[str, Any]:
    extra = dict(node.extra)
    action: dict[str, Any] = {"name": node.action.name, "arguments": node.action.arguments}
    action.update(extra.pop("__action_extra__", {}))
    out: dict[str, Any] = {
        "idx": node.idx,
        "action": action,
        "observation": node.observation,
        "dependency_list": node.dependency_list,
    }
    if node.user_input is not None:
        out["user_input"] = node.user_input
    out.update(extra)
    return out


def session_from_wtb(record: Any, *, index: int | None = None) -> Session:
    """Convert one published session record; raises DataError naming the field on bad input.

    Args:
        record: the parsed JSON object of one line.
        index: the record's 0-based position (used only when ``id`` is missing, never to override it).
    """
    if not isinstance(record, dict):
        raise DataError("a session record must be a JSON object")
    sid = record.get("id", f"wild_tool_bench_{index}" if index is not None else None)
    if not isinstance(sid, str):
        raise DataError("missing or non-string id", field="id")
    check_id(sid)
    env_info = _require(record, "english_env_info", str)
    raw_tools = _require(record, "english_tools", list)
    utterances = _require(record, "english_tasks", list)
    answers = _require(record, "english_answer_list", list)
    types = _require(record, "english_task_types", list)
    subtypes = record.get("english_turn_subtypes", [])
    if not isinstance(subtypes, list):
        raise DataError("expected list", field="english_turn_subtypes")
    n = len(utterances)
    if len(answers) != n:
        raise DataError(f"{len(answers)} gold DAGs for {n} tasks", field="english_answer_list")
    if len(types) != n:
        raise DataError(f"{len(types)} task types for {n} tasks", field="english_task_types")
    if subtypes and len(subtypes) != max(n - 1, 0):
        raise DataError(
            f"{len(subtypes)} turn subtypes for {n} tasks (expected {n - 1})", field="english_turn_subtypes"
        )
    tools = [from_openai_tool(t, field=f"english_tools[{i}]") for i, t in enumerate(raw_tools)]
    tasks: list[Task] = []
    for i in range(n):
        if not isinstance(utterances[i], str):
            raise DataError("utterance must be a string", field=f"english_tasks[{i}]")
        try:
            ttype = TaskType(types[i])
        except ValueError:
            raise DataError(f"unknown task type {types[i]!r}", field=f"english_task_types[{i}]") from None
        if i == 0:
            subtype = TurnSubtype.FIRST
        elif subtypes:
            try:
                subtype = TurnSubtype(subtypes[i - 1])
            except ValueError:
                raise DataError(
                    f"unknown turn subtype {subtypes[i - 1]!r}", field=f"english_turn_subtypes[{i - 1}]"
                ) from None
        else:
            subtype = TurnSubtype.FIRST
        dag = answers[i]
        if not isinstance(dag, list):
            raise DataError("gold DAG must be a list", field=f"english_answer_list[{i}]")
        nodes = [_node_from_wtb(node, f"english_answer_list[{i}][{j}]") for j, node in enumerate(dag)]
        try:
            tasks.append(Task(utterance=utterances[i], type=ttype, subtype=subtype, gold=nodes))
        except ValidationError as exc:
            raise validation_to_data_error(exc, prefix=f"english_answer_list[{i}]") from None
    extra = {k: v for k, v in record.items() if k not in _KNOWN_KEYS}
    alt_sizes: list[int] | None = None
    if "answer_list" in record:
        alt = record["answer_list"]
        if not isinstance(alt, list) or not all(isinstance(a, list) for a in alt):
            raise DataError("expected a list of gold DAGs", field="answer_list")
        alt_sizes = [len(a) for a in alt]
        extra["answer_list"] = alt
    if "english_turn_subtypes" not in record:
        extra["__no_subtypes__"] = True
    if "id" not in record:
        extra["__no_id__"] = True
    if "answer_list" not in record:
        extra["__no_answer_list__"] = True
    environment = record.get("environment")
    if environment is not None:
        if not isinstance(environment, str):
            raise DataError("environment must be a string (an environment id)", field="environment")
        check_id(environment, field="environment")
    _read_expected(record, tasks)
    try:
        return Session(
            id=sid,
            env_info=env_info,
            tools=tools,
            tasks=tasks,
            environment=environment,
            alt_gold_sizes=alt_sizes,
            extra=extra,
        )
    except ValidationError as exc:
        raise validation_to_data_error(exc) from None


def _per_task(record: dict[str, Any], key: str, n: int, fits: Any, what: str) -> list[Any] | None:
    """The list under ``key`` (one entry per task, each null or what ``fits`` accepts), or None when absent."""
    values = record.get(key)
    if values is None:
        return None
    if not isinstance(values, list) or len(values) != n or not all(x is None or fits(x) for x in values):
        raise DataError(f"expected one {what} (or null) per task, {n} in all", field=key)
    return values


def _is_digest(value: Any) -> bool:
    return isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)


def _read_expected(record: dict[str, Any], tasks: list[Task]) -> None:
    """The tasks' expected states: whole states (``expected_states``, as files before issue #34 hold them) and the
    digest-and-change form (``expected_state_digests``, ``expected_state_changes``) toolwild writes since."""
    n = len(tasks)
    states = _per_task(record, "expected_states", n, lambda x: isinstance(x, dict), "state object")
    digests = _per_task(record, "expected_state_digests", n, _is_digest, "SHA-256 digest (64 hex digits)")
    changes = _per_task(record, "expected_state_changes", n, lambda x: isinstance(x, dict), "change object")
    if changes is not None:
        for i, change in enumerate(changes):
            if change is None:
                continue
            if digests is None or digests[i] is None:
                raise DataError("a change without the digest it leads to", field=f"expected_state_changes[{i}]")
            problem = change_problem(change)
            if problem:
                raise DataError(problem, field=f"expected_state_changes[{i}]")
    for i, task in enumerate(tasks):
        if states is not None:
            task.expected_state = states[i]
        if digests is not None:
            task.expected_state_digest = digests[i]
        if changes is not None:
            task.expected_state_change = changes[i]


def session_to_wtb(session: Session, *, published: bool = False) -> dict[str, Any]:
    """Write a session in the published record layout (same JSON value as the record it was read from).

    ``published``: only the published keys (no environment reference, expected states or generator notes), for
    the original harness; toolwild's own files keep them, so free-running evaluation finds the environment.
    """
    extra = dict(session.extra)
    no_subtypes = extra.pop("__no_subtypes__", False)
    no_id = extra.pop("__no_id__", False)
    no_alt = extra.pop("__no_answer_list__", False)
    alt = extra.pop("answer_list", None)
    out: dict[str, Any] = {
        "id": session.id,
        "english_env_info": session.env_info,
        "english_tools": [to_openai_tool(t) for t in session.tools],
        "english_tasks": [t.utterance for t in session.tasks],
        "english_answer_list": [[_node_to_wtb(n) for n in t.gold] for t in session.tasks],
        "english_task_types": [t.type.value for t in session.tasks],
    }
    if not no_subtypes:
        out["english_turn_subtypes"] = [t.subtype.value for t in session.tasks[1:]]
    if not no_alt:
        out["answer_list"] = alt if alt is not None else out["english_answer_list"]
    if no_id:
        del out["id"]
    if published:
        return out
    # ours, for free-running evaluation on a stateful environment (absent from published records)
    if session.environment is not None:
        out["environment"] = session.environment
    if any(t.expected_state is not None for t in session.tasks):
        out["expected_states"] = [t.expected_state for t in session.tasks]
    if any(t.expected_state_digest is not None for t in session.tasks):
        out["expected_state_digests"] = [t.expected_state_digest for t in session.tasks]
    if any(t.expected_state_change is not None for t in session.tasks):
        out["expected_state_changes"] = [t.expected_state_change for t in session.tasks]
    out.update(extra)
    return out


def load_wtb_suite(
    path: str | Path, *, skip_invalid: bool = False, name: str | None = None
) -> tuple[Suite, LoadReport]:
    """Load a WildToolBench-format JSONL suite.

    Args:
        path: the JSONL file, one session per line.
        skip_invalid: skip (and report) malformed records instead of stopping at the first.
        name: suite name (default: the file stem).
    """
    seen: set[str] = set()

    def convert(index: int, obj: Any) -> Session:
        session = session_from_wtb(obj, index=index)
        if session.id in seen:
            raise DataError(f"duplicate session id {session.id!r}", field="id")
        seen.add(session.id)
        return session

    sessions, report = load_records(path, convert, skip_invalid=skip_invalid)
    suite = Suite(name=name or Path(path).stem, source=str(path), sessions=sessions)
    return suite, report


class WtbSuiteWriter:
    """A suite file written one session at a time (as WildToolBench JSONL), to a temporary file beside it that is put
    in place only when the ``with`` block ends without an error (and removed otherwise).

    Why: a generated suite of 100,000 sessions is never held in memory, and a killed or failed write never leaves a
    half-written suite where a complete one is expected.
    """

    def __init__(self, path: str | Path, *, published: bool = False) -> None:
        self.path = Path(path)
        self.published = published
        self._tmp = self.path.with_name(self.path.name + ".tmp")
        self._handle: Any = None
        self._index = 0

    def __enter__(self) -> WtbSuiteWriter:
        self._handle = self._tmp.open("w", encoding="utf-8")
        return self

    def write(self, session: Session) -> None:
        """Append one session (see :func:`session_to_wtb`)."""
        record = session_to_wtb(session, published=self.published)
        if "id" not in record and session.id != f"wild_tool_bench_{self._index}":
            # a record read without an id got it from its line; at another line it would get another id
            record = {"id": session.id, **record}
        self._handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        self._index += 1

    def __exit__(self, exc_type: object, *_rest: object) -> None:
        self._handle.close()
        if exc_type is None:
            self._tmp.replace(self.path)
        else:
            self._tmp.unlink(missing_ok=True)


def write_wtb_suite(suite: Suite, path: str | Path, *, published: bool = False) -> None:
    """Write a suite as WildToolBench JSONL (one record per line, UTF-8, not ASCII-escaped; ``published``: see
    :func:`session_to_wtb`)."""
    with WtbSuiteWriter(path, published=published) as writer:
        for session in suite.sessions:
            writer.write(session)
