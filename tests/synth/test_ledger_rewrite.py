"""The ledger's model writer (``--model`` on the built-in ledger): a faithful rewording is kept and the suite still
validates and scores; one that drops a stated value, states a withheld one or breaks a reference keeps the
template's words and is counted as a fallback; without a model the sessions are the templates' to the byte; a
resumed run gives the sessions of an uninterrupted one."""

from __future__ import annotations

import asyncio
import json
import re
from collections import Counter
from collections.abc import Callable

import pytest
from fake_openai import FakeOpenAI, Reply, serve_in_thread
from typer.testing import CliRunner

from toolwild.cli.main import app
from toolwild.core.formats.wtb import session_from_wtb, session_to_wtb
from toolwild.core.session import Session, Suite
from toolwild.core.wild import wild_behaviours
from toolwild.eval.validate import validate_suite
from toolwild.llm.backends.scripted import ScriptedBackend
from toolwild.llm.client import LLM
from toolwild.llm.types import ChatRequest
from toolwild.synth.paraphrase import REWORDING_SYSTEM
from toolwild.synth.providers.ledger import LedgerTemplates, build_ledger_suite
from toolwild.synth.providers.ledger.builder import gold_findings
from toolwild.synth.providers.ledger.rewrite import KEPT_FORMS, SOURCES_KEY, ledger_rewording_problems
from toolwild.synth.session_job import fallback_rate
from toolwild.synth.sessions import SessionsConfig, load_handle, session_providers, synth_sessions

N = 12
SEED = 5
_LEADS = ("Okay, ", "So, ", "Right, ", "Quick one: ")
_CATEGORIES = ("travel", "health", "entertainment", "utilities", "rent")
"""Categories of the built-in chart (``Expenses:<Name>``) a broken reference may name instead."""

Respond = Callable[[dict], str | None]
"""A rule that breaks the rewording of a brief (returns the broken words), or None to reword it faithfully."""


def _faithful(text: str) -> str:
    """A fair rewording: a lead-in that depends on the words only (the order replies arrive in does not matter)."""
    return _LEADS[len(text) % len(_LEADS)] + text


def _record(session: Session) -> str:
    return json.dumps(session_to_wtb(session), sort_keys=True)


def _writer(breaks: Respond | None = None, broken: list[str] | None = None) -> tuple[LLM, ScriptedBackend]:
    """A scripted writer: faithful, except where ``breaks`` gives broken words (noted in ``broken`` on a first
    attempt; a retry carries the problems fed back and gets the same broken words)."""

    def respond(request: ChatRequest) -> str:
        assert request.messages[0]["content"] == REWORDING_SYSTEM
        brief = json.loads(request.messages[1]["content"])
        text = breaks(brief) if breaks is not None else None
        if text is None:
            return json.dumps({"utterance": _faithful(brief["reword"])})
        if broken is not None and len(request.messages) == 2:
            broken.append(brief["reword"])
        return json.dumps({"utterance": text})

    backend = ScriptedBackend(respond)
    return LLM(backend), backend


def _config(n: int = N) -> SessionsConfig:
    return SessionsConfig(n_sessions=n, seed=SEED, id_prefix="ledger", concurrency=8)


async def _generate(writer: LLM | None, n: int = N):
    config = _config(n)
    envs = [load_handle("ledger")]
    providers = session_providers(envs, config, writer=writer)
    assert isinstance(providers[0], LedgerTemplates) and providers[0].writer is writer
    return await synth_sessions(envs, config, writer=writer, name="ledger", providers=providers)


@pytest.fixture(scope="module")
def templates() -> Suite:
    return build_ledger_suite(N, seed=SEED)


def _offered(session: Session) -> list[bool]:
    return [not KEPT_FORMS.intersection(w) for w in wild_behaviours(session.extra, len(session.tasks))]


def _validates(suite: Suite) -> None:
    """Every check of ``validate --subtypes --grounding --replay``, and the oracle at 100% in both modes; no
    warning either (an ambiguous reference is one)."""
    assert validate_suite(suite, replay=True, subtypes=True, grounding=True) == []
    for session in suite.sessions:
        assert all(gold_findings(session, i) == [] for i in range(len(session.tasks))), session.id


# ---------------------------------------------------------------------------------------------- a faithful model
def test_a_faithful_rewording_is_kept_and_the_suite_still_validates_and_scores(templates):
    writer, backend = _writer()
    result = asyncio.run(_generate(writer))
    made = result.suite
    assert [s.id for s in made.sessions] == [s.id for s in templates.sessions]
    offered = 0
    for before, after in zip(templates.sessions, made.sessions, strict=True):
        sources = after.extra[SOURCES_KEY]
        wanted = ["model" if o else "template" for o in _offered(before)]
        assert sources == wanted, after.id
        offered += sum(_offered(before))
        for old, new, source in zip(before.tasks, after.tasks, sources, strict=True):
            assert new.utterance == (_faithful(old.utterance) if source == "model" else old.utterance)
            # only the words change: gold (replies to asks included), labels and states are the template's
            assert new.model_copy(update={"utterance": old.utterance}) == old
        rest = {k: v for k, v in after.extra.items() if k != SOURCES_KEY}
        assert rest == before.extra and after.env_info == before.env_info
    assert 0 < offered < sum(len(s.tasks) for s in templates.sessions)  # fragments, picks ... keep their words
    assert result.utterances == Counter({"model": offered, "template": 4 * N - offered})
    assert fallback_rate(result.utterances) == 0.0
    assert len(backend.requests) == offered  # one call per offered utterance, none retried
    _validates(made)


# ---------------------------------------------------------------------------------------------- unfaithful models
def _drop_a_stated_value(brief: dict) -> str | None:
    """Says "that amount" where the original states an amount (or a payee, a date) it must keep."""
    text = brief["reword"]
    for value in brief["keep these values"]:
        forms = [f"{value:,.2f}", f"{value:.2f}", str(value)] if isinstance(value, int | float) else [str(value)]
        for form in forms:
            found = re.search(rf"(?<![\w.]){re.escape(form)}(?![\w]|\.\d)", text, flags=re.IGNORECASE)
            if found:
                return _faithful(text[: found.start()] + "that amount" + text[found.end() :])
    return None


def _state_a_withheld_value(brief: dict) -> str | None:
    """Gives away a value the original leaves to the conversation (an account by the name people use for it)."""
    for value in brief["do not say"]:
        said = re.sub(r"(?<=[a-z])(?=[A-Z])", " ", str(value).split(":")[-1]).lower()
        if said not in brief["reword"].lower() and not any(said in str(v).lower() for v in brief["keep these values"]):
            return _faithful(brief["reword"]) + f" It's {said}."
    return None


def _break_a_reference(brief: dict) -> str | None:
    """Names a category instead of saying "that category", one the conversation never had (a different one)."""
    text = brief["reword"]
    if "that category" not in text.lower():
        return None
    values = " ".join(str(v).lower() for v in [*brief["keep these values"], *brief["do not say"]])
    other = next(c for c in _CATEGORIES if c not in values and c not in text.lower())
    return _faithful(re.sub("that category", other, text, count=1, flags=re.IGNORECASE))


@pytest.mark.parametrize(
    "breaks", [_drop_a_stated_value, _state_a_withheld_value, _break_a_reference], ids=["drop", "leak", "reference"]
)
def test_a_rewording_that_changes_the_task_keeps_the_template_and_is_counted(templates, breaks):
    broken: list[str] = []
    writer, backend = _writer(breaks, broken)
    result = asyncio.run(_generate(writer))
    assert broken, "the suite has utterances this model breaks"
    fallbacks = 0
    offered = 0
    for before, after in zip(templates.sessions, result.suite.sessions, strict=True):
        sources = after.extra[SOURCES_KEY]
        for old, new, source, asked in zip(before.tasks, after.tasks, sources, _offered(before), strict=True):
            offered += asked
            if asked and old.utterance in broken:
                assert (source, new.utterance) == ("template-fallback", old.utterance), after.id
                fallbacks += 1
            elif asked:
                assert (source, new.utterance) == ("model", _faithful(old.utterance)), after.id
            else:
                assert (source, new.utterance) == ("template", old.utterance), after.id
    assert fallbacks == len(broken)
    # the report counts them: its fallback rate is the share of the offered utterances that kept the template
    assert result.utterances["template-fallback"] == fallbacks
    assert result.utterances["model"] == offered - fallbacks
    assert fallback_rate(result.utterances) == pytest.approx(fallbacks / offered)
    assert len(backend.requests) == offered + fallbacks  # each broken one was sent back once with its problems
    retried = [r for r in backend.requests if len(r.messages) > 2]
    assert all("- utterance: " in r.messages[-1]["content"] for r in retried)
    _validates(result.suite)


def test_the_ledger_rules_catch_what_the_paraphrase_rules_miss(templates):
    """An account named by the words people use ("groceries") is a value the paraphrase rules (verbatim values)
    do not see; the ledger's rules do, and a dropped pointing noun or number is caught too."""
    session, index = next(
        (s, i) for s in templates.sessions for i, t in enumerate(s.tasks) if "that category" in t.utterance.lower()
    )
    original = session.tasks[index].utterance
    assert ledger_rewording_problems(_faithful(original), session, index) == []
    values = " ".join(str(v).lower() for n in session.tasks[index].call_nodes for v in n.action.arguments.values())
    other = next(c for c in _CATEGORIES if c not in values and c not in original.lower())
    renamed = re.sub("that category", other, original, count=1, flags=re.IGNORECASE)
    problems = ledger_rewording_problems(renamed, session, index)
    assert any(f"must not name {other!r}" in p for p in problems), problems
    assert any("point at the earlier thing" in p for p in problems), problems
    number = re.search(r"\d+(?:\.\d+)?", original)
    if number:
        dropped = _faithful(original.replace(number.group(0), "some", 1))
        assert any(repr(number.group(0)) in p for p in ledger_rewording_problems(dropped, session, index))


# ---------------------------------------------------------------------------------------------- no model
def test_without_a_model_the_sessions_are_the_templates_to_the_byte(templates):
    result = asyncio.run(_generate(None, n=6))
    assert [_record(s) for s in result.suite.sessions] == [_record(s) for s in templates.sessions[:6]]
    assert all(SOURCES_KEY not in s.extra for s in result.suite.sessions)
    assert result.utterances == Counter() and fallback_rate(result.utterances) is None


# ---------------------------------------------------------------------------------------------- resume
def test_a_resumed_provider_gives_the_sessions_of_an_uninterrupted_run():
    async def made(provider: LedgerTemplates, indices: list[int]) -> dict[int, str]:
        outcomes = await asyncio.gather(*(provider.make(i) for i in indices))
        return {i: _record(o.session) for i, o in zip(indices, outcomes, strict=True)}

    n, kept = 8, 3
    writer, whole_backend = _writer(_drop_a_stated_value)
    whole = asyncio.run(made(LedgerTemplates(seed=SEED, writer=writer), list(range(n))))
    writer, backend = _writer(_drop_a_stated_value)
    resumed = LedgerTemplates(seed=SEED, writer=writer)
    for i in range(kept):  # what the log of the killed run holds, read back
        resumed.restore(i, session_from_wtb(json.loads(whole[i])))
    rest = asyncio.run(made(resumed, list(reversed(range(kept, n)))))
    assert {**{i: whole[i] for i in range(kept)}, **rest} == whole
    assert 0 < len(backend.requests) < len(whole_backend.requests)  # the restored sessions were not reworded again


# ---------------------------------------------------------------------------------------------- the command
def test_synth_sessions_with_a_model_reports_the_ledger_fallback_rate(tmp_path):
    """``synth sessions --env ledger --model M``: the writer is asked, the suite verifies, and the report (file and
    table) states the utterance sources and the fallback rate."""

    def reply(body: dict) -> Reply:
        brief = json.loads(body["messages"][1]["content"])
        text = _drop_a_stated_value(brief) or _faithful(brief["reword"])
        return Reply(text=json.dumps({"utterance": text}))

    out = tmp_path / "suite.jsonl"
    fake = FakeOpenAI(reply)
    with serve_in_thread(fake) as base_url:
        result = CliRunner().invoke(
            app,
            ["synth", "sessions", "--env", "ledger", "--n", "4", "--out", str(out), "--model", "openai:writer",
             "--base-url", base_url],
            env={"COLUMNS": "200"},
        )  # fmt: skip
    assert result.exit_code == 0, result.output
    report = json.loads(out.with_name(out.name + ".report.json").read_text())
    sources = Counter(report["utterances"])
    assert sources["model"] > 0 and sources["template-fallback"] > 0 and fake.calls > 0
    assert report["utterance_fallback_rate"] == pytest.approx(fallback_rate(sources))
    assert report["problems"] == []
    assert f"fallback rate {fallback_rate(sources):.1%}" in result.output
