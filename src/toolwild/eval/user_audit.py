"""The fidelity audit of a simulated user: the oracle asks the gold's questions, code checks every reply.

The oracle agent follows the gold path, so what the user is asked is known exactly: its k-th text in a task is the
gold's k-th question (with the parameters it asks for), its last one the gold answer. Each session is run ``trials``
times (trial ``t`` seeds the simulator with ``seed + t``) in the interactive loop, the oracle's calls answered from
the gold recordings (the environment plays no part in what the user is shown). A run fails the audit when any reply:

- **withheld**: does not state a value the question asked for and the recorded reply gave there (said it does not
  know, or said something else);
- **wrong**: states another number where the asked value is a number (one not already said in the conversation);
- **leaked**: states a withheld value before the gold asks for it: one of this task's later questions, or of a later
  task (values already said in the conversation, and values the user may give by then, aside);
- **ended_early**: says the task is done at a question;
- **never_ended**: does not say the task is done after the gold answer (answers, asks, or says it does not know);
- **simulator_error**: no usable reply after the retries.

Whether a text states a value is :func:`~toolwild.eval.user.states`: the value's spellings as whole tokens
(:func:`~toolwild.core.hidden_intent.mentions`, as the reference checker finds values; numbers compared by value),
the last part of an account path ("restaurants"), a date as "March 1", or, where the recorded reply names the value
in none of these ("Last month."), all of that reply's words but filler. A reply that says the same thing in other
words ("the previous month") is counted as withholding it: the audit errs towards blaming the simulator. Not checked:
a reply that contradicts what the utterance already stated, or that adds a request of its own while still answering
(it fails only when it also withholds, gives a wrong number or leaks).

The error rate is the share of failed runs (session x trial) with a 95% Wilson score interval. Trials of one session
are not independent draws (the same session, often the same answers), so with k > 1 the interval is computed at the
effective sample size of runs clustered by session (:func:`clustered_wilson_interval`), never as if there were
sessions x trials independent runs. :func:`user_failures` lists the sessions an ``eval --exclude-user-failures`` leaves
out; :func:`user_extension` gives the audit's figures for a run's scoreboard, and which failed tasks of the run sit
where the audit found the user failing (the user's failure, not an error class of the agent's).
"""

from __future__ import annotations

import asyncio
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from toolwild.core.hidden_intent import mentions
from toolwild.core.jsonl import read_json_file, validation_to_data_error
from toolwild.core.references import same_value
from toolwild.core.session import Session, Suite
from toolwild.core.task import NodeKind
from toolwild.core.verdict import SessionVerdict
from toolwild.errors import DataError, TransientBackendError
from toolwild.eval.agents.oracle import OracleAgent
from toolwild.eval.interactive import InteractiveRun, UserTurnRecord, run_interactive_session, score_interactive_session
from toolwild.eval.metrics.accuracy import scored_verdicts
from toolwild.eval.scoring.dag import GoldDag
from toolwild.eval.user import TaskFacts, UserFact, UserSimulator, phrase_words, states, task_facts

__all__ = [
    "AuditedRun",
    "FindingKind",
    "Interval",
    "UserAuditReport",
    "UserFinding",
    "audit_user",
    "check_run",
    "clustered_wilson_interval",
    "load_user_audit",
    "user_audit_report",
    "user_extension",
    "user_failed_tasks",
    "user_failures",
    "user_summary",
    "wilson_interval",
]

FindingKind = Literal["withheld", "wrong", "leaked", "ended_early", "never_ended", "simulator_error"]
_NUMBER = re.compile(r"(?<![\w.:/-])-?\$?\d[\d,]*(?:\.\d+)?(?![\w:/-]|\.\d)")


class UserFinding(BaseModel):
    """One way a reply broke the session, in words."""

    model_config = ConfigDict(extra="forbid")

    kind: FindingKind
    task_index: int
    turn: int | None = None
    """Index of the reply among the run's user turns."""
    message: str


class AuditedRun(BaseModel):
    """One trial of one session: every user turn, what broke, and how the oracle scored with this user."""

    model_config = ConfigDict(extra="forbid")

    session_id: str
    trial: int
    findings: list[UserFinding] = Field(default_factory=list)
    turns: list[UserTurnRecord] = Field(default_factory=list)
    oracle_tasks_correct: int = 0
    tasks: int = 0
    provider_error: str | None = None
    """The provider failed after retries: the run says nothing about the simulator (left out, listed)."""

    @property
    def failed(self) -> bool:
        """The simulator broke this run."""
        return bool(self.findings)


class Interval(BaseModel):
    """A confidence interval of a proportion."""

    model_config = ConfigDict(extra="forbid")

    low: float
    high: float
    level: float = 0.95
    method: str = "wilson"
    effective_n: float | None = None
    """Clustered runs (``method`` ``wilson, clustered by session``): the sample size the interval was computed at,
    between the sessions and the runs (see :func:`clustered_wilson_interval`)."""


class BrokenSession(BaseModel):
    """A session the simulator broke in at least one trial, and why (first finding of each failed trial)."""

    model_config = ConfigDict(extra="forbid")

    session_id: str
    trials: list[int]
    why: list[str]


class UserAuditReport(BaseModel):
    """``audit user -o REPORT.json``: the error rate, the sessions broken, and every run with its turns."""

    model_config = ConfigDict(extra="forbid")

    format_version: int = 1
    suite: str
    suite_digest: str
    user: str
    prompt_version: str | None = None
    prompt_sha256: str | None = None
    trials: int
    temperature: float | None = None
    seed: int | None = None
    sessions: int
    """Distinct sessions audited."""
    runs: int
    """Runs counted (sessions x trials, provider errors left out)."""
    failed_runs: int
    error_rate: float | None
    interval: Interval | None
    by_kind: dict[str, int] = Field(default_factory=dict)
    """Runs failing with each kind of finding (a run can count under several)."""
    oracle_task_accuracy: float | None = None
    """The oracle's task accuracy with this user (calls and answer; no environment state): what a perfect agent
    scores when the simulator is the only source of error."""
    broken: list[BrokenSession] = Field(default_factory=list)
    provider_errors: list[str] = Field(default_factory=list)
    """``session#trial`` runs lost to the provider (not counted)."""
    usage: dict[str, Any] | None = None
    runs_detail: list[AuditedRun] = Field(default_factory=list)


# ---------------------------------------------------------------------------------------------- checks
def _text_steps(session: Session, task_index: int) -> dict[int, int | None]:
    """The oracle's text steps in a task: step index -> the gold question's position (None: the final answer)."""
    task = session.tasks[task_index]
    out: dict[int, int | None] = {}
    asks = 0
    for j, batch in enumerate(GoldDag.from_task(task).first_optimal_path()):
        kind = task.gold[batch[0]].kind
        if kind is NodeKind.ASK:
            out[j] = asks
            asks += 1
        elif kind is NodeKind.ANSWER:
            out[j] = None
    return out


def _said_forms(fact: UserFact, public: str) -> frozenset[str]:
    """The forms of a fact the conversation already holds (saying them again leaks nothing)."""
    said = {form.lower() for form in fact.forms if mentions(public, form)}
    if fact.phrase and set(fact.phrase) <= set(phrase_words(public)):
        said.add(" ".join(fact.phrase))
    return frozenset(said)


def _numeric(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int | float):
        return True
    return isinstance(value, str) and re.fullmatch(r"-?\$?\d[\d,]*(?:\.\d+)?", value.strip()) is not None


def _other_number(message: str, fact: UserFact, public: str) -> str | None:
    """A number the reply states instead of the asked one (not the value, not one already said)."""
    if not _numeric(fact.value):
        return None
    for match in _NUMBER.finditer(message):
        token = match.group(0)
        if not same_value(token.replace("$", ""), str(fact.value).replace("$", "")) and not mentions(public, token):
            return token
    return None


def _asked_findings(facts: TaskFacts, k: int, turn: UserTurnRecord, index: int, public: str) -> list[UserFinding]:
    """What is wrong with the reply to the gold's k-th question of a task: ended there, or an asked value missing."""
    where = {"task_index": turn.task_index, "turn": index}
    if turn.action == "done":
        return [UserFinding(kind="ended_early", message=f"said the task was done at question {k + 1}", **where)]
    found: list[UserFinding] = []
    for fact in facts.withheld:
        # a value given in parts is whole only with the earlier parts the conversation already holds
        said = f"{public}\n{turn.message}" if fact.parts else turn.message
        if fact.required_at == k and not states(said, fact):
            other = _other_number(turn.message, fact, public)
            kind: FindingKind = "wrong" if other and turn.action == "answer" else "withheld"
            detail = f"gave {other}" if kind == "wrong" else f"{turn.action}: {turn.message!r}"
            found.append(
                UserFinding(
                    kind=kind,
                    message=f"asked for {fact.param} ({fact.value!r}, recorded as {fact.said!r}); {detail}",
                    **where,
                )
            )
    return found


def _leaks(
    unasked: list[UserFact], given: list[UserFact], turn: UserTurnRecord, index: int, public: str
) -> list[UserFinding]:
    """Withheld values (of this task's later questions, or of later tasks) the reply states before they are asked.

    Forms already said in the conversation, and forms of values the user may give by now (``given``), are not
    counted: a later task that withholds the same value as this one is not leaked by answering this one.
    """
    allowed = {form.lower() for fact in given for form in fact.forms if states(turn.message, fact)}
    allowed |= {" ".join(fact.phrase) for fact in given if fact.phrase}
    found = []
    for fact in unasked:
        skip = _said_forms(fact, public) | allowed
        if states(turn.message, fact, skip=frozenset(skip)):
            found.append(
                UserFinding(
                    kind="leaked",
                    task_index=turn.task_index,
                    turn=index,
                    message=f"stated {fact.param} ({fact.value!r}) before it was asked: {turn.message!r}",
                )
            )
    return found


def check_run(session: Session, run: InteractiveRun) -> list[UserFinding]:
    """Every way the user broke an oracle run of a session (empty: the run passes). See the module docstring."""
    findings: list[UserFinding] = []
    public: list[str] = []
    facts = [task_facts(t) for t in session.tasks]
    steps = [_text_steps(session, i) for i in range(len(session.tasks))]
    started: set[int] = set()
    for index, turn in enumerate(run.turns):
        i = turn.task_index
        if i not in started:
            started.add(i)
            public.append(session.tasks[i].utterance)
        public.append(turn.agent_message)
        seen = "\n".join(public)
        if turn.error is not None:
            findings.append(UserFinding(kind="simulator_error", task_index=i, turn=index, message=turn.error))
            break
        position = steps[i].get(turn.step_index, -1)
        asked_up_to = len(facts[i].replies) if position is None or position < 0 else position
        if position is None and turn.action != "done":
            findings.append(
                UserFinding(
                    kind="never_ended",
                    task_index=i,
                    turn=index,
                    message=f"did not end the task after the answer ({turn.action}: {turn.message!r})",
                )
            )
        elif position is not None and position >= 0:
            findings += _asked_findings(facts[i], position, turn, index, seen)
        given = [f for f in facts[i].withheld if f.asks and min(f.asks) <= asked_up_to]
        unasked = [f for f in facts[i].withheld if f not in given]
        unasked += [f for later in facts[i + 1 :] for f in later.withheld]
        findings += _leaks(unasked, given, turn, index, seen)
        public.append(turn.message)
    if run.user_error and not any(f.kind == "simulator_error" for f in findings):
        task = max(len(run.trajectory.tasks) - 1, 0)
        findings.append(UserFinding(kind="simulator_error", task_index=task, message=run.user_error))
    return findings


# ---------------------------------------------------------------------------------------------- running it
async def _audit_one(session: Session, user: UserSimulator, trial: int, max_steps: int) -> AuditedRun:
    try:
        run = await run_interactive_session(session, OracleAgent(), user, trial=trial, max_steps_per_task=max_steps)
    except TransientBackendError as exc:
        return AuditedRun(session_id=session.id, trial=trial, provider_error=str(exc) or type(exc).__name__)
    verdict = score_interactive_session(session, run.trajectory)
    return AuditedRun(
        session_id=session.id,
        trial=trial,
        findings=check_run(session, run),
        turns=run.turns,
        oracle_tasks_correct=sum(t.label == "correct" for t in verdict.tasks),
        tasks=len(session.tasks),
    )


async def audit_user(
    sessions: Sequence[Session],
    user: UserSimulator,
    *,
    trials: int = 1,
    concurrency: int = 4,
    max_steps_per_task: int = 32,
    on_done: Callable[[AuditedRun], None] | None = None,
) -> list[AuditedRun]:
    """Run the oracle against ``user`` ``trials`` times per session and check every reply; runs in suite order.

    A provider failure after retries leaves that run out (``provider_error``); anything else a run raises (a
    harness error) propagates.
    """
    limit = asyncio.Semaphore(max(1, concurrency))

    async def one(session: Session, trial: int) -> AuditedRun:
        async with limit:
            result = await _audit_one(session, user, trial, max_steps_per_task)
        if on_done is not None:
            on_done(result)
        return result

    jobs = [one(s, t) for s in sessions for t in range(trials)]
    return list(await asyncio.gather(*jobs))


def _wilson_bounds(p: float, n: float, level: float) -> tuple[float, float]:
    """The Wilson score bounds of a proportion ``p`` observed over ``n`` (possibly effective, not whole) draws."""
    z = {0.9: 1.6448536269514722, 0.95: 1.959963984540054, 0.99: 2.5758293035489004}.get(level, 1.959963984540054)
    denominator = 1 + z * z / n
    center = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    low = 0.0 if p == 0 else max(0.0, center - half)  # exact at the ends (no rounding residue)
    high = 1.0 if p == 1 else min(1.0, center + half)
    return low, high


def wilson_interval(failures: int, n: int, *, level: float = 0.95) -> Interval | None:
    """The Wilson score interval of ``failures / n`` (None when n is 0); unlike the normal approximation it stays
    inside [0, 1] and is not empty at 0 or n failures."""
    if n <= 0:
        return None
    low, high = _wilson_bounds(failures / n, n, level)
    return Interval(low=low, high=high, level=level)


def clustered_wilson_interval(per_session: Sequence[tuple[int, int]], *, level: float = 0.95) -> Interval | None:
    """The Wilson interval of the pooled failure share of runs grouped in sessions, ``(failures, runs)`` per session
    (None when there is no run).

    Why not a plain Wilson over every run: the k trials of one session are not k independent draws (the same
    session, and a simulator that often answers it the same way), so counting sessions x trials as independent makes
    the interval too narrow for k > 1. The estimate stays the share of failed runs; the interval is the Wilson
    interval at the *effective sample size* n_eff = p(1 - p) / Var(p), where Var(p) is the variance of the pooled
    share with sessions as the sampling unit (the linearised variance of a ratio estimator, sum over sessions of
    (failures_i - p runs_i)^2 / runs^2). A session whose trials all agree counts about once, trials that vary as
    independent coins count about k times. n_eff is kept between the number of sessions and the number of runs;
    with no failure (or no success) at all nothing shows how alike a session's trials are, so it is the number of
    sessions (the cautious end). A session bootstrap would say the same with a seed and resamples; this is exact,
    cheap and deterministic, and with one run per session it is exactly :func:`wilson_interval`.
    """
    cells = [(f, n) for f, n in per_session if n > 0]
    runs = sum(n for _, n in cells)
    failures = sum(f for f, _ in cells)
    if runs == 0:
        return None
    if len(cells) == runs:  # one run per session: the runs are independent, nothing to adjust
        return wilson_interval(failures, runs, level=level)
    p = failures / runs
    variance = sum((f - p * n) ** 2 for f, n in cells) / (runs * runs)
    if p in (0.0, 1.0):
        effective = float(len(cells))
    elif variance == 0:  # every session failed the same share: no spread between sessions to widen by
        effective = float(runs)
    else:
        effective = min(float(runs), max(float(len(cells)), p * (1 - p) / variance))
    low, high = _wilson_bounds(p, effective, level)
    return Interval(low=low, high=high, level=level, method="wilson, clustered by session", effective_n=effective)


def user_audit_report(
    suite: Suite,
    runs: list[AuditedRun],
    *,
    user: str,
    trials: int,
    prompt: dict[str, str] | None = None,
    temperature: float | None = None,
    seed: int | None = None,
    usage: dict[str, Any] | None = None,
) -> UserAuditReport:
    """The report of an audit: error rate with its interval, findings by kind, the broken sessions and every run."""
    counted = [r for r in runs if r.provider_error is None]
    failed = [r for r in counted if r.failed]
    kinds: Counter[str] = Counter()
    for r in failed:
        kinds.update({f.kind for f in r.findings})
    broken: dict[str, BrokenSession] = {}
    for r in failed:
        entry = broken.setdefault(r.session_id, BrokenSession(session_id=r.session_id, trials=[], why=[]))
        entry.trials.append(r.trial)
        first = r.findings[0]
        entry.why.append(f"trial {r.trial}, task {first.task_index}: {first.kind}: {first.message}")
    tasks = sum(r.tasks for r in counted)
    return UserAuditReport(
        suite=suite.source or suite.name,
        suite_digest=suite.fingerprint(),
        user=user,
        prompt_version=(prompt or {}).get("user_prompt_version"),
        prompt_sha256=(prompt or {}).get("user_prompt_sha256"),
        trials=trials,
        temperature=temperature,
        seed=seed,
        sessions=len({r.session_id for r in runs}),
        runs=len(counted),
        failed_runs=len(failed),
        error_rate=len(failed) / len(counted) if counted else None,
        interval=clustered_wilson_interval(_per_session(counted)),
        by_kind=dict(sorted(kinds.items())),
        oracle_task_accuracy=sum(r.oracle_tasks_correct for r in counted) / tasks if tasks else None,
        broken=list(broken.values()),
        provider_errors=[f"{r.session_id}#{r.trial}" for r in runs if r.provider_error is not None],
        usage=usage,
        runs_detail=runs,
    )


def _per_session(runs: Sequence[AuditedRun]) -> list[tuple[int, int]]:
    """``(failed runs, runs)`` of each session, in order of first appearance: the clusters of the interval."""
    counts: dict[str, list[int]] = {}
    for r in runs:
        cell = counts.setdefault(r.session_id, [0, 0])
        cell[0] += r.failed
        cell[1] += 1
    return [(f, n) for f, n in counts.values()]


def user_failures(report: UserAuditReport) -> set[str]:
    """The sessions the simulator broke in any trial: what ``eval --exclude-user-failures`` leaves out."""
    return {b.session_id for b in report.broken}


def user_failed_tasks(
    report: UserAuditReport, verdicts: Iterable[SessionVerdict], *, count_provider_errors: bool = False
) -> dict[str, Any]:
    """The failed tasks of a run that sit where its user audit found the simulated user failing, by error class.

    Why: when the user ends a task at the agent's question, withholds the value asked for or leaks one, the task
    fails, and the scorer, which judges the agent's steps, files it under one of the agent's error classes (mostly
    Early Termination). The audit ran the oracle against the same user, so a task where it found the user failing
    is a task this user breaks whatever the agent does; such a failure is the user's, and so is a failure after it
    in the session (a task the user ended early leaves the history and the books without its work, and the tasks
    after it inherit that): what ``--exclude-user-failures`` leaves out whole. The failed tasks from the first task
    the audit found broken on are counted, over the verdicts the figures count
    (:func:`~toolwild.eval.metrics.accuracy.scored_verdicts`), every trial pooled as the error taxonomy pools them;
    a broken session whose audit runs were not kept counts from its first task.

    Returns:
        ``{"tasks": n, "by_class": {error class: n}}``: the failed tasks that are the user's, and the part of each
        error class's count that is (a task that failed only a state check has no class, and counts in ``tasks``).
    """
    broken = user_failures(report)
    first: dict[str, int] = {}
    for run in report.runs_detail:
        for finding in run.findings:
            first[run.session_id] = min(first.get(run.session_id, finding.task_index), finding.task_index)
    by_class: Counter[str] = Counter()
    tasks = 0
    for verdict in scored_verdicts(list(verdicts), count_provider_errors=count_provider_errors):
        if verdict.session_id not in broken:
            continue
        start = first.get(verdict.session_id, 0)
        for task in verdict.tasks:
            if task.label == "error" and task.task_index >= start:
                tasks += 1
                if task.error_class is not None:
                    by_class[task.error_class.value] += 1
    return {"tasks": tasks, "by_class": dict(sorted(by_class.items()))}


def user_extension(
    report: UserAuditReport, verdicts: Iterable[SessionVerdict], *, count_provider_errors: bool = False
) -> dict[str, Any]:
    """The audit's part of a run's ``extensions.user``: what the scoreboard's headline shows beside the accuracy
    (error rate, interval, runs), the sessions it broke, and the run's failed tasks that are the user's
    (:func:`user_failed_tasks`)."""
    return {
        "audit_error_rate": report.error_rate,
        "audit_interval": report.interval.model_dump() if report.interval else None,
        "audit_runs": report.runs,
        "audit_failed_runs": report.failed_runs,
        "audit_broken_sessions": sorted(b.session_id for b in report.broken),
        "audit_failed_tasks": user_failed_tasks(report, verdicts, count_provider_errors=count_provider_errors),
    }


def load_user_audit(path: str | Path) -> UserAuditReport:
    """Read an ``audit user -o`` report.

    Raises:
        DataError: the file is not such a report (names the file and the field).
    """
    data = read_json_file(Path(path))
    try:
        return UserAuditReport.model_validate(data)
    except ValidationError as exc:
        error = validation_to_data_error(exc)
        raise DataError(f"not a user-audit report: {error.message}", file=path, field=error.field) from None


def user_summary(report: UserAuditReport, *, user_errors: int = 0, excluded: int | None = None) -> str:
    """One line for a run's scoreboard: the simulator's audit error rate with its interval, the sessions it failed
    in the run itself, and the sessions ``--exclude-user-failures`` left out (None: not asked)."""
    rate = "n/a" if report.error_rate is None else f"{report.error_rate:.1%}"
    if report.interval is not None:
        rate += f", 95% CI {report.interval.low:.1%}\u2013{report.interval.high:.1%}"
    version = f" (prompt v{report.prompt_version})" if report.prompt_version else ""
    line = f"user {report.user}{version}: its audit broke {report.failed_runs} of {report.runs} session(s) ({rate})"
    if user_errors:
        line += f"; {user_errors} session(s) lost to its errors (left out)"
    if excluded is not None:
        line += f"; {excluded} session(s) left out by --exclude-user-failures"
    return line
