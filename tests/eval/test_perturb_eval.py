"""Perturbed suites evaluated: the oracle at 100% in both history and scoring modes on the fixture, a ledger and an
inventory suite for every kind; ``rename`` leaves no original name in what a model is sent; ``paraphrase`` falls back
(and counts it) when a rewording gives a withheld value away; and a perturbed run compares with its base run.

Suites are read back from files, as ``eval`` reads them (a file keeps no tool effects: the write tools come from
the environment), and a renamed session runs free on its environment through
:class:`toolwild.envs.renamed.RenamedEnvironment`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from toolwild.core.formats.wtb import load_wtb_suite, write_wtb_suite
from toolwild.core.perturb import parse_kinds, perturbation_of, suite_perturbation
from toolwild.core.session import Session, Suite
from toolwild.core.trajectory import Step
from toolwild.core.verdict import ScoringMode
from toolwild.envs.registry import session_environment
from toolwild.envs.renamed import RenamedEnvironment, renamed_for_session
from toolwild.eval.agents.model import ModelAgent
from toolwild.eval.agents.oracle import OracleAgent, oracle_steps
from toolwild.eval.agents.scripted import ScriptedAgent
from toolwild.eval.compare import compare_runs
from toolwild.eval.run_config import RunConfig
from toolwild.eval.runner import run_suite
from toolwild.eval.scoring.session import score_session
from toolwild.eval.session import HistoryMode, run_session
from toolwild.llm.backends.scripted import ScriptedBackend
from toolwild.llm.client import LLM
from toolwild.llm.types import ChatRequest
from toolwild.synth.paraphrase import paraphrase_suite, perturb_with_model, rewording_problems

FIXTURE = Path(__file__).resolve().parents[2].parent / "shared/fixtures/wildtoolbench/sessions_0_4.reconstructed.jsonl"
KINDS = ["distractors:3", "terse", "rename", "shuffle", "paraphrase", "distractors:2,terse:0,rename,shuffle,paraphrase"]
pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture(scope="module")
def suites(tmp_path_factory, rl_ledger_suite, rl_inventory_suite) -> dict[str, tuple[Suite, Path]]:
    """The three suites, each written to a file and read back (the folder is where environments resolve)."""
    if not FIXTURE.exists():
        pytest.skip(f"fixture not found: {FIXTURE}")
    folder = tmp_path_factory.mktemp("suites")
    out: dict[str, tuple[Suite, Path]] = {"fixture": (load_wtb_suite(FIXTURE)[0], FIXTURE.parent)}
    for name, suite in (("ledger", rl_ledger_suite), ("inventory", rl_inventory_suite.model_copy(deep=True))):
        suite.sessions = suite.sessions[:8]
        write_wtb_suite(suite, folder / f"{name}.jsonl")
        out[name] = (load_wtb_suite(folder / f"{name}.jsonl")[0], folder)
    return out


def _polite(request: ChatRequest) -> str:
    """A paraphraser that rewords by adding a lead-in (fair under every rule)."""
    brief = json.loads(request.messages[1]["content"])
    return json.dumps({"utterance": "Okay, " + brief["reword"]})


async def _perturbed(suites, name: str, kinds: str, responder=_polite, seed: int = 0):
    suite, folder = suites[name]
    llm = LLM(ScriptedBackend(responder))
    return await perturb_with_model(suite, kinds, seed=seed, llm=llm, base_dir=folder), folder


def _environment(session: Session, folder: Path, history: HistoryMode):
    if history is not HistoryMode.FREE or not session.environment:
        return None
    return renamed_for_session(session, session_environment(session, base_dir=folder))


async def _oracle_failures(suite: Suite, folder: Path) -> list[str]:
    """Every task the oracle does not get right, in each history and scoring mode (state checks included)."""
    wrong = []
    for session in suite.sessions:
        for history in HistoryMode:
            for mode in ScoringMode:
                environment = _environment(session, folder, history)
                run = await run_session(
                    session, OracleAgent(), history=history, scoring_mode=mode, environment=environment
                )
                for task in score_session(session, run, mode=mode, base_dir=folder).tasks:
                    if task.label != "correct" or task.state_match is False or task.redundant_writes:
                        wrong.append(f"{session.id}/{task.task_index} {history.value}/{mode.value}: {task}")
    return wrong


# ---------------------------------------------------------------------------------------------- the oracle
@pytest.mark.parametrize("name", ["fixture", "ledger", "inventory"])
@pytest.mark.parametrize("kinds", KINDS)
async def test_the_oracle_scores_100_percent_in_both_modes_on_every_perturbation(suites, name, kinds):
    outcome, folder = await _perturbed(suites, name, kinds)
    assert suite_perturbation(outcome.suite).kinds == [str(k) for k in parse_kinds(kinds)]
    assert await _oracle_failures(outcome.suite, folder) == []


async def test_run_suite_takes_a_perturbed_suite(suites, tmp_path):
    """The API ``eval --perturb`` calls after loading the suite: teacher-forced on the fixture with every kind, and
    free on the inventory's live environment with the kinds that keep the names."""
    for name, kinds, history in (
        ("fixture", "distractors:2,terse,rename,shuffle", HistoryMode.WTB),
        ("inventory", "distractors:2,terse,shuffle", HistoryMode.FREE),
    ):
        outcome, folder = await _perturbed(suites, name, kinds)
        path = folder / f"{name}.perturbed.jsonl"
        write_wtb_suite(outcome.suite, path)
        suite = load_wtb_suite(path)[0]
        config = RunConfig(suite=str(path), agent="oracle", history=history)
        verdicts = await run_suite(suite, OracleAgent(), config, tmp_path / name)
        assert all(t.label == "correct" and t.state_match is not False for v in verdicts for t in v.tasks)
        assert json.loads((tmp_path / name / "config.json").read_text())["suite_digest"] == suite.fingerprint()


async def test_the_registry_runs_a_renamed_session_on_its_environment(suites, tmp_path):
    outcome, folder = await _perturbed(suites, "ledger", "rename")
    path = folder / "ledger.renamed.jsonl"
    write_wtb_suite(outcome.suite, path)
    session = load_wtb_suite(path)[0].sessions[0]
    assert isinstance(session_environment(session, base_dir=folder), RenamedEnvironment)
    config = RunConfig(suite=str(path), agent="oracle", history=HistoryMode.FREE)
    verdicts = await run_suite(load_wtb_suite(path)[0], OracleAgent(), config, tmp_path)
    assert all(t.label == "correct" and t.state_match for v in verdicts for t in v.tasks)


async def test_a_renamed_environment_answers_an_original_name_as_unknown(suites):
    outcome, folder = await _perturbed(suites, "inventory", "rename")
    session = outcome.suite.sessions[0]
    episode = renamed_for_session(session, session_environment(session, base_dir=folder)).reset(seed=0)
    rename = perturbation_of(session).rename
    assert episode.call("list_items", {}).error.kind == "unknown_tool"
    listed = episode.call(rename.tool("list_items"), {})
    assert listed.ok and listed.result
    wrong = episode.call(rename.tool("restock"), {rename.parameter("restock", "item"): listed.result[0]})
    assert wrong.error.kind == "invalid_arguments"
    assert rename.parameter("restock", "units") in wrong.error.message and "units" not in wrong.error.message


# ---------------------------------------------------------------------------------------------- what a model is sent
def _gold_player():
    """A scripted model that plays the gold path of each session in turn (the oracle, as a model)."""
    queue: list[dict[str, Any]] = []

    def load(session: Session) -> None:
        queue.clear()
        for task in session.tasks:
            for step in oracle_steps(task):
                if step.tool_calls:
                    calls = [{"name": c.name, "arguments": json.loads(c.arguments)} for c in step.tool_calls]
                    queue.append({"tool_calls": calls})
                else:
                    queue.append({"content": step.content})

    return load, (lambda request: queue.pop(0))


def _whole(name: str, text: str) -> bool:
    return re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", text) is not None


def _leaks(request: ChatRequest, originals: set[str]) -> list[str]:
    """Original tool names in a request: as a tool or call name, in a tool message, or (identifier-like names)
    anywhere at all. A one-word name that is an English word may stay a word in what the user or an answer says."""
    shown = {t["function"]["name"] for t in request.tools or []}
    called = {c["function"]["name"] for m in request.messages for c in m.get("tool_calls") or []}
    tool_text = json.dumps([m["content"] for m in request.messages if m["role"] == "tool"])
    everything = json.dumps({"messages": request.messages, "tools": request.tools})
    found = []
    for name in originals:
        if name in shown or name in called or _whole(name, tool_text) or _whole(name, json.dumps(request.tools)):
            found.append(name)
        elif ("_" in name or re.search(r"[a-z][A-Z]", name)) and _whole(name, everything):
            found.append(name)
    return found


@pytest.mark.parametrize("name", ["fixture", "ledger", "inventory"])
async def test_rename_leaves_no_original_tool_name_in_what_a_model_is_sent(suites, name):
    base, _ = suites[name]
    outcome, folder = await _perturbed(suites, name, "distractors:2,rename")
    originals = {t.name for s in base.sessions for t in s.tools} | {
        n for s in outcome.suite.sessions for n in perturbation_of(s).rename.tools
    }
    for history in HistoryMode:
        for session in outcome.suite.sessions:
            load, respond = _gold_player()
            load(session)
            backend = ScriptedBackend(respond)
            agent = ModelAgent(LLM(backend))
            run = await run_session(session, agent, history=history, environment=_environment(session, folder, history))
            verdict = score_session(session, run, base_dir=folder)
            assert all(t.label == "correct" for t in verdict.tasks), (session.id, history)
            assert backend.requests
            for request in backend.requests:
                assert _leaks(request, originals) == [], (session.id, history)


# ---------------------------------------------------------------------------------------------- paraphrase
async def test_a_rewording_that_gives_a_withheld_value_away_falls_back_and_is_counted(suites):
    suite, _ = suites["ledger"]
    leaked: list[str] = []

    def leaky(request: ChatRequest) -> str:
        """Rewords by adding a sentence; where the utterance withholds a value, the sentence gives it away."""
        brief = json.loads(request.messages[1]["content"])
        hidden = brief["do not say"]
        if hidden and len(request.messages) == 2:  # a first attempt (a retry carries the problems fed back)
            leaked.append(brief["reword"])
        return json.dumps({"utterance": brief["reword"] + (f" It is {hidden[0]}." if hidden else " Thanks.")})

    backend = ScriptedBackend(leaky)
    reworded, report = await paraphrase_suite(suite, LLM(backend))
    assert leaked, "the ledger suite has utterances that leave values to the conversation"
    assert report.fallbacks == len(leaked)
    assert report.reworded + report.fallbacks == report.utterances == sum(len(s.tasks) for s in suite.sessions)
    for before, after in zip(suite.sessions, reworded.sessions, strict=True):
        kept = report.by_session[before.id][1]
        for i, (old, new) in enumerate(zip(before.tasks, after.tasks, strict=True)):
            assert (new.utterance == old.utterance) == (i in kept)
    # a fallback is asked twice (the problems fed back), then the original is kept
    assert len(backend.requests) == report.utterances + report.fallbacks
    leaked.clear()
    outcome, _ = await _perturbed(suites, "ledger", "paraphrase", responder=leaky)
    recorded = sum(len(perturbation_of(s).fallbacks) for s in outcome.suite.sessions)
    assert recorded == outcome.paraphrase.fallbacks == report.fallbacks
    assert "kept the original" in outcome.summary()


def test_a_rewording_keeps_values_markers_and_numbers_as_the_original_has_them(suites):
    suite, _ = suites["inventory"]
    markers = ("i asked for", "came back with", "same again", "my first request", "the same")
    session, index, marker = next(
        (s, i, m) for s in suite.sessions for i, t in enumerate(s.tasks) for m in markers if m in t.utterance.lower()
    )
    original = session.tasks[index].utterance
    assert rewording_problems("Okay, " + original, original, session, index) == []
    assert any("reword it" in p for p in rewording_problems(original, original, session, index))
    added = rewording_problems(original + " Make it 12.", original, session, index)
    assert any("must not add the number '12'" in p for p in added)
    start = original.lower().index(marker)
    dropped = original[:start] + original[start + len(marker) :]
    if marker != "the same":  # a marker of core.references: its words must stay
        assert any(
            f"must keep the words '{marker}'" in p for p in rewording_problems(dropped, original, session, index)
        )
    stated = next(
        (v for n in session.tasks[index].call_nodes for v in n.action.arguments.values() if str(v) in original), None
    )
    if stated is not None:
        without = original.replace(str(stated), "it")
        assert any("must state the value" in p for p in rewording_problems(without, original, session, index))


# ---------------------------------------------------------------------------------------------- compare
async def test_compare_gives_the_perturbation_delta_against_the_unperturbed_run(suites, tmp_path):
    base, _ = suites["fixture"]
    outcome, _ = await _perturbed(suites, "fixture", "rename,terse")
    path = tmp_path / "perturbed.jsonl"
    write_wtb_suite(outcome.suite, path)
    perturbed = load_wtb_suite(path)[0]
    gold = ScriptedAgent({s.id: [[_as_step(st) for st in oracle_steps(t)] for t in s.tasks] for s in base.sessions})
    behaviour = {s.id: [[_as_step(st) for st in oracle_steps(t)] for t in s.tasks] for s in perturbed.sessions}
    for sid in ("wild_tool_bench_1", "wild_tool_bench_3"):
        behaviour[sid][0] = [Step(content="I cannot do that.")]
    await run_suite(base, gold, RunConfig(suite=str(FIXTURE), agent="scripted"), tmp_path / "base")
    config = RunConfig(suite=str(path), agent="scripted")
    await run_suite(perturbed, ScriptedAgent(behaviour), config, tmp_path / "renamed")
    comparison = compare_runs([tmp_path / "base", tmp_path / "renamed"], resamples=500)
    assert comparison.base_digest == base.fingerprint()
    assert comparison.runs[1].perturbation == "rename,terse:8 (seed 0)" and comparison.runs[0].perturbation is None
    (row,) = comparison.robustness
    assert (row.run, row.base, row.kinds) == (1, 0, ["rename", "terse:8"])
    task = next(d for d in row.deltas if d.metric == "task")
    session = next(d for d in row.deltas if d.metric == "session")
    assert task.point == pytest.approx(-2 / 20) and session.point == pytest.approx(-2 / 5)
    assert task.low < task.point < task.high <= 0 and task.sessions == 5
    # listed the other way round, the same delta, perturbed minus unperturbed
    again = compare_runs([tmp_path / "renamed", tmp_path / "base"], resamples=500)
    (flipped,) = again.robustness
    assert (flipped.run, flipped.base) == (0, 1)
    flat = [x for d in flipped.deltas for x in (d.point, d.low, d.high)]
    assert flat == pytest.approx([x for d in row.deltas for x in (d.point, d.low, d.high)])


def _as_step(step: Step) -> Step:
    return Step(content=step.content, tool_calls=step.tool_calls)
