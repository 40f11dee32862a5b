"""Judging one task: the published live loop (spec §4), then the argument pass (spec §5), in either mode.

:class:`TaskJudge` is fed one assistant step at a time and says how the harness reacts (accepted as an ask, as
the answer, matched to gold nodes, or an error). The runner uses it live; scoring replays recorded steps through
the very same object, so a trajectory is always judged by one implementation.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from itertools import permutations
from typing import Any

from toolwild.core.session import Session
from toolwild.core.task import ANSWER_ACTION, ASK_ACTION, PSEUDO_ACTIONS, Task
from toolwild.core.trajectory import Step, ToolCall
from toolwild.core.verdict import ArgumentCheck, ScoringMode, StepVerdict, TaskVerdict
from toolwild.eval.scoring.arguments import CORRECT, ErrorCode, check_arguments, check_schema
from toolwild.eval.scoring.dag import GoldDag, Position
from toolwild.eval.scoring.taxonomy import classify_failure

__all__ = ["Reason", "TaskJudge", "describe_expected", "explain_check", "score_task"]


class Reason:
    """Error reasons of the live loop (the published strings, plus ours where the published harness crashes)."""

    EMPTY = "tool_calls and content are None or empty"
    PARSE = "parse tool_calls failed"
    NOT_CANDIDATE = "action name not in candidate_answer_function_list"
    TEXT_AFTER_END = "text reply after the last gold step"
    PSEUDO_CALLED = "pseudo-action called as a tool"

    @staticmethod
    def no_step(step: int) -> str:
        """The published message for a tool call after the last legal step."""
        return f"current step: {step}, idx_list is None"


class TaskJudge:
    """The live loop for one task: feed it steps, it says what the harness does with each.

    Args:
        task: the task being judged.
        parameters: tool name -> parameter schema as sent to the model (used by ``strict`` matching).
        mode: ``wtb`` (published behaviour) or ``strict`` (defects fixed).
    """

    def __init__(self, task: Task, *, parameters: dict[str, dict[str, Any]], mode: ScoringMode) -> None:
        self.task = task
        self.mode = mode
        self.parameters = parameters
        self.dag = GoldDag.from_task(task, mode=mode)
        self.positions: list[Position] = [self.dag.start]
        self.step = 0
        self.finished = False
        self.correct = False
        self.log: list[StepVerdict] = []

    # ------------------------------------------------------------------ feeding steps
    def feed(self, step: Step | None) -> StepVerdict:
        """Judge the next assistant step (None = the agent had nothing more to say: an empty reply)."""
        if self.finished:
            raise RuntimeError("task already finished")
        step = step or Step()
        if step.parse_error is not None:
            parse = f"the tool call did not parse: {step.parse_error}"
            verdict = self._fail("unparseable", f"{Reason.PARSE}, error: {step.parse_error}", parse)
        elif step.tool_calls:
            verdict = self._on_calls(step.tool_calls)
        elif step.content:
            verdict = self._on_text()
        else:
            verdict = self._fail("empty", Reason.EMPTY, "reply was empty")
        if step.tool_calls:
            verdict.called = [c.name for c in step.tool_calls]
        self.log.append(verdict)
        if verdict.name_label == "error":
            self.finished = True
        else:
            self.step += 1
        return verdict

    def _fail(self, kind: str, reason: str, what_came: str) -> StepVerdict:
        """A failing step: the published ``reason``, plus what was legal here and ``what_came``, in words."""
        expected = self._expected()
        explanation = f"expected {describe_expected(expected)}; {what_came}"
        if kind in ("empty", "unparseable"):  # what came says it all; what was due follows
            explanation = f"{what_came}; expected {describe_expected(expected)}"
        return StepVerdict(
            step=self.step,
            kind=kind,  # type: ignore[arg-type]
            name_label="error",
            error_reason=reason,
            expected=expected,
            explanation=explanation,
        )

    def _expected(self) -> list[str]:
        """Action names legal at the current position(s), in gold order: what the agent could have done here."""
        names: list[str] = []
        for pos in self.positions:
            pool = [pos.pending[0]] if pos.pending else self.dag.frontier(pos)
            for node in pool:
                if self.dag.names[node] not in names:
                    names.append(self.dag.names[node])
        return names

    def _fail_call(self, names: list[str], reason: str) -> StepVerdict:
        """A call the harness refused: names tools the session does not have, else what was due instead."""
        unknown = [n for n in dict.fromkeys(names) if n not in self.parameters and n not in PSEUDO_ACTIONS]
        if reason == Reason.PSEUDO_CALLED:
            pseudo = ", ".join(n for n in dict.fromkeys(names) if n in PSEUDO_ACTIONS)
            return self._fail("calls", reason, f"called {pseudo} as a tool (it is a text reply, not a call)")
        if unknown:
            which = "is not a tool" if len(unknown) == 1 else "are not tools"
            return self._fail("calls", reason, f"called {', '.join(unknown)}, which {which} of this session")
        return self._fail("calls", reason, f"called {', '.join(names)}")

    def _on_text(self) -> StepVerdict:
        if self.step >= self.dag.n:
            return self._fail("text", Reason.TEXT_AFTER_END, "got a text reply")
        for pos in self.positions:
            node = self.dag.first_pseudo(pos)
            if node is None:
                continue
            if self.dag.names[node] == ANSWER_ACTION:
                self.finished = True
                self.correct = True
                return StepVerdict(step=self.step, kind="text", name_label="correct", matched_nodes=[node])
            # An ask. The published loop does not prune its path list here; strict keeps the ask's branch only.
            if self.mode is ScoringMode.WTB:
                self.positions = self._dedupe(b.target for p in self.positions for b in self.dag.batches(p))
            else:
                batch = self.dag.batch_with_nodes(pos, [node])
                assert batch is not None
                self.positions = [batch.target]
            return StepVerdict(step=self.step, kind="text", name_label="correct", matched_nodes=[node])
        return self._fail("text", Reason.NOT_CANDIDATE, "got a text reply")

    def _on_calls(self, calls: list[ToolCall]) -> StepVerdict:
        names = [c.name for c in calls]
        if self.mode is ScoringMode.WTB:
            if self.step >= self.dag.n:
                return self._fail_call(names, Reason.no_step(self.step))
            chosen = None
            for pos in self.positions:
                batch = self.dag.find_batch(pos, names)
                if batch is not None:
                    chosen = batch.nodes
                    break
            if chosen is None:
                return self._fail_call(names, Reason.NOT_CANDIDATE)
            targets = []
            for pos in self.positions:
                b = self.dag.batch_with_nodes(pos, chosen)
                if b is not None:
                    targets.append(b.target)
            self.positions = self._dedupe(targets)
            return StepVerdict(
                step=self.step, kind="calls", name_label="correct", matched_nodes=self._name_sorted(chosen)
            )
        return self._on_calls_strict(calls)

    def _on_calls_strict(self, calls: list[ToolCall]) -> StepVerdict:
        """Strict: pseudo-actions are not tools; same-name nodes are chosen by their arguments."""
        names = [c.name for c in calls]
        if any(c.name in PSEUDO_ACTIONS for c in calls):
            return self._fail_call(names, Reason.PSEUDO_CALLED)
        pos = self.positions[0]
        if self.dag.is_done(pos):
            return self._fail_call(names, Reason.no_step(self.step))
        frontier = self.dag.frontier(pos)
        by_name: dict[str, list[int]] = defaultdict(list)
        for i, c in enumerate(calls):
            by_name[c.name].append(i)
        pairs: list[tuple[int, int, str]] = []
        for name, call_ids in by_name.items():
            nodes = [x for x in frontier if self.dag.names[x] == name]
            if len(nodes) < len(call_ids):
                return self._fail_call(names, Reason.NOT_CANDIDATE)
            pairs.extend(self._assign(calls, call_ids, nodes))
        batch = self.dag.batch_with_nodes(pos, [node for _, node, _ in pairs])
        if batch is None:  # pragma: no cover - any frontier subset is legal in strict mode
            return self._fail_call(names, Reason.NOT_CANDIDATE)
        self.positions = [batch.target]
        pairs.sort(key=lambda p: p[1])
        checks = [self._check(calls[ci], node, result) for ci, node, result in pairs]
        return StepVerdict(
            step=self.step,
            kind="calls",
            name_label="correct",
            matched_nodes=[node for _, node, _ in pairs],
            arguments_label="correct" if all(c.ok for c in checks) else "error",
            argument_checks=checks,
        )

    def _assign(self, calls: list[ToolCall], call_ids: list[int], nodes: list[int]) -> list[tuple[int, int, str]]:
        """Pair same-name calls with gold nodes so that as many pairs as possible pass (ties: lowest idx)."""
        results: dict[tuple[int, int], str] = {}

        def result(ci: int, node: int) -> str:
            if (ci, node) not in results:
                gold = self.task.gold[node].action.arguments
                results[ci, node] = check_arguments(self.parameters.get(calls[ci].name), calls[ci].arguments, gold)
            return results[ci, node]

        if len(nodes) <= 6:
            best: tuple[int, ...] | None = None
            best_score = -1
            for perm in permutations(nodes, len(call_ids)):
                score = sum(result(ci, node) == CORRECT for ci, node in zip(call_ids, perm, strict=True))
                if score > best_score:
                    best, best_score = perm, score
            assert best is not None
            return [(ci, node, result(ci, node)) for ci, node in zip(call_ids, best, strict=True)]
        free = list(nodes)
        out = []
        for ci in call_ids:
            node = next((x for x in free if result(ci, x) == CORRECT), free[0])
            free.remove(node)
            out.append((ci, node, result(ci, node)))
        return out

    def _check(self, call: ToolCall, node: int, result: str) -> ArgumentCheck:
        return ArgumentCheck(
            name=call.name,
            predicted=call.arguments,
            gold=self.task.gold[node].action.arguments,
            gold_idx=node,
            result=result,
        )

    def _name_sorted(self, nodes: tuple[int, ...]) -> list[int]:
        """Matched nodes in the order the harness returns their observations (stable sort by name)."""
        return sorted(nodes, key=lambda x: self.dag.names[x])

    @staticmethod
    def _dedupe(positions: Any) -> list[Position]:
        out: list[Position] = []
        seen: set[Position] = set()
        for p in positions:
            if p not in seen:
                seen.add(p)
                out.append(p)
        return out

    # ------------------------------------------------------------------ after the loop
    def _argument_pass_wtb(self, steps: list[Step]) -> tuple[str, str | None, int | None]:
        """Published ``params_checker``: check steps in order; after the first argument error, delete the next
        step entry and force the name label to correct. Returns (name label, arguments label, dropped step)."""
        name_label = "correct" if self.correct else "error"
        args_label = "correct"
        for k, verdict in enumerate(self.log):
            if args_label == "error":
                return "correct", args_label, k
            if verdict.name_label == "error":
                break
            if verdict.kind != "calls":
                continue
            gold_nodes = [self.task.gold[i] for i in verdict.matched_nodes]
            if gold_nodes[0].name in PSEUDO_ACTIONS:
                continue
            calls = steps[k].tool_calls or []
            predicted = sorted(calls, key=lambda c: (c.name, c.arguments))
            gold_sorted = sorted(gold_nodes, key=lambda g: (g.name, json.dumps(g.action.arguments, ensure_ascii=False)))
            checks = [
                self._check(p, g.idx, check_arguments(self.parameters.get(p.name), p.arguments, g.action.arguments))
                for p, g in zip(predicted, gold_sorted, strict=False)
            ]
            verdict.argument_checks = checks
            verdict.arguments_label = "correct" if all(c.ok for c in checks) else "error"
            if verdict.arguments_label == "error":
                args_label = "error"
        return name_label, args_label, None

    def _argument_pass_strict(self) -> tuple[str, str]:
        name_label = "correct" if self.correct else "error"
        args_label = "correct"
        for verdict in self.log:
            if verdict.arguments_label == "error":
                args_label = "error"
        return name_label, args_label

    def verdict(self, session: Session, task_index: int, steps: list[Step]) -> TaskVerdict:
        """The task's labels once the loop has finished (call after the last :meth:`feed`)."""
        dropped: int | None = None
        if self.mode is ScoringMode.WTB:
            name_label, args_label, dropped = self._argument_pass_wtb(steps)
            logged = len(self.log) - (1 if dropped is not None else 0)
            progress = logged
        else:
            name_label, args_label = self._argument_pass_strict()
            progress = 0
            for v in self.log:
                if v.name_label == "error" or v.arguments_label == "error":
                    break
                progress += len(v.matched_nodes)
        steps_used = len(self.log)
        label = "correct" if name_label == "correct" and args_label == "correct" else "error"
        is_optimal = label == "correct" and self.correct and steps_used == self.dag.min_length
        reason = next((v.error_reason for v in self.log if v.error_reason), None)
        if reason is None and args_label == "error":
            reason = next(c.result for v in self.log for c in v.argument_checks if not c.ok)
        self._explain_arguments()
        kept = [v for k, v in enumerate(self.log) if k != dropped]
        error_class = None
        if label == "error":
            error_class = classify_failure(session, task_index, kept, self.positions, self.dag)
        return TaskVerdict(
            session_id=session.id,
            task_index=task_index,
            task_type=self.task.type,
            subtype=self.task.subtype,
            label=label,  # type: ignore[arg-type]
            name_label=name_label,  # type: ignore[arg-type]
            # published: the arguments label exists only when the name label is correct; strict always says
            arguments_label=args_label if name_label == "correct" or self.mode is ScoringMode.STRICT else None,  # type: ignore[arg-type]
            is_optimal=is_optimal,
            steps_used=steps_used,
            min_length=self.dag.min_length,
            progress_complete=progress,
            progress_total=session.gold_size(task_index) if self.mode is ScoringMode.WTB else len(self.task.gold),
            error_reason=reason,
            error_class=error_class,
            dropped_step=dropped,
            explanation=self._task_explanation(label, steps_used),
            steps=self.log,
        )

    def _explain_arguments(self) -> None:
        """Name the failing argument of every step whose arguments failed (after the argument pass set them)."""
        for verdict in self.log:
            if verdict.arguments_label != "error" or verdict.explanation:
                continue
            check = next(c for c in verdict.argument_checks if not c.ok)
            verdict.expected = list(dict.fromkeys(self.dag.names[n] for n in verdict.matched_nodes))
            verdict.explanation = explain_check(check, self.parameters.get(check.name))

    def _task_explanation(self, label: str, steps_used: int) -> str:
        """The task's failure in words, or why a correct task is not optimal.

        The first failing step in the agent's order, names or arguments: in ``wtb`` an argument error is followed by
        the step the published pass deletes, whose own failure (often an empty reply) did not decide the label.
        """
        if label == "error":
            return next((v.explanation for v in self.log if v.explanation), "")
        extra = steps_used - self.dag.min_length
        if extra > 0:
            return f"not optimal: {extra} step{'s' if extra > 1 else ''} more than the shortest path"
        return ""


def score_task(
    session: Session,
    task_index: int,
    steps: list[Step],
    *,
    parameters: dict[str, dict[str, Any]],
    mode: ScoringMode = ScoringMode.WTB,
) -> TaskVerdict:
    """Replay recorded steps through the live loop and return the task's verdict.

    Steps beyond the point where the loop stops are ignored; running out of steps is an empty reply.
    """
    judge = TaskJudge(session.tasks[task_index], parameters=parameters, mode=mode)
    k = 0
    while not judge.finished:
        judge.feed(steps[k] if k < len(steps) else None)
        k += 1
    return judge.verdict(session, task_index, steps)


# ---------------------------------------------------------------------- explanations in words
def describe_expected(expected: list[str]) -> str:
    """``["get_a", "get_b"]`` -> "a call of get_a or get_b"; pseudo-actions say what they stand for."""
    if not expected:
        return "no step: the task was already complete"
    parts = []
    if ASK_ACTION in expected:
        parts.append(f"{ASK_ACTION} (a required value is missing)")
    if ANSWER_ACTION in expected:
        parts.append("a text answer")
    tools = [n for n in expected if n not in PSEUDO_ACTIONS]
    if tools:
        parts.append("a call of " + " or ".join(tools))
    return " or ".join(parts)


_LOCATION = re.compile(r" at '(?P<path>[^']*)'")
_SCORE = re.compile(r"\((?P<kind>rouge|edit) score: (?P<score>[0-9.]+)\)")
_THRESHOLD = {"rouge": "0.70", "edit": "0.80"}
_PATH_PART = re.compile(r"\[(\d+)\]|\.?([^.\[\]]+)")
_MISSING = object()


def _short(value: Any, limit: int = 60) -> str:
    """A value as JSON, cut to ``limit`` characters: explanations are read in a terminal."""
    text = json.dumps(value, ensure_ascii=False)
    if not text.isascii() and _has_surrogate(text):  # a lone surrogate (``"\\ud800"``) cannot be written as UTF-8
        text = json.dumps(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _at(value: Any, path: str) -> Any:
    """The value at a check's location (``a.b[0]``), or ``_MISSING``."""
    for index, key in _PATH_PART.findall(path):
        if index and isinstance(value, list) and int(index) < len(value):
            value = value[int(index)]
        elif key and isinstance(value, dict) and key in value:
            value = value[key]
        else:
            return _MISSING
    return value


def explain_check(check: ArgumentCheck, parameters: dict[str, Any] | None = None) -> str:
    """A failed argument check in words: which argument, expected vs got, and the score that decided."""
    code = check.code
    if code == ErrorCode.JSON_DECODE:
        return f"{check.name}: the arguments are not valid JSON: {_short(check.predicted)}"
    if code == ErrorCode.TOOL_UNDEFINED:
        return f"called {check.name}, which is not a tool of this session"
    predicted = json.loads(check.predicted)
    schema = _schema_detail(code, predicted, parameters or {})
    if schema:
        return f"{check.name}: {schema}"
    location = _LOCATION.search(check.result)
    if location is not None:
        path = location.group("path")
        gold, got = _at(check.gold, path), _at(predicted, path)
        if gold is not _MISSING and got is not _MISSING:
            text = f"{check.name}: argument {path!r} expected {_short(gold)}, got {_short(got)}"
            score = _SCORE.search(check.result)
            if score is not None:
                kind = score.group("kind")
                text += f" ({kind} score {score.group('score')}, needs {_THRESHOLD[kind]})"
            return text
    detail = check.result[len(code) :].strip()
    what = code.split(": ", 1)[-1]
    text = f"{check.name}: {what}{' ' + detail if detail else ''}"
    return f"{text}; expected {_short(check.gold)}, got {_short(predicted)}"


def _schema_detail(code: str, predicted: Any, parameters: dict[str, Any]) -> str:
    """Top-level schema failures name their argument (the published string does not)."""
    if not isinstance(predicted, dict):
        return ""
    if code == ErrorCode.MISSING:
        missing = [r for r in parameters.get("required", []) or [] if r not in predicted]
        if missing:
            return f"required argument {', '.join(map(repr, missing))} missing"
    if code == ErrorCode.UNDEFINED:
        extra = [k for k in predicted if k not in (parameters.get("properties") or {})]
        if extra:
            return f"argument {', '.join(map(repr, extra))} is not defined by the tool"
    props = parameters.get("properties") or {}
    for key, value in predicted.items():
        spec = props.get(key) if isinstance(props.get(key), dict) else {}
        if check_schema({"properties": {key: spec}}, {key: value}) == CORRECT:
            continue
        if code == ErrorCode.ENUM:
            return f"argument {key!r} got {_short(value)}, not one of {_short(spec.get('enum'))}"
        if code == ErrorCode.TYPE:
            return f"argument {key!r} should be of type {spec.get('type', 'string')}, got {_short(value)}"
    return ""
