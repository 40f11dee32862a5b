"""Issue #29: the wild behaviours of the ledger's users, generated with a gold path that is the only right one.

Each behaviour (a conditional, a pick from a list, a value given in parts, a self-correction, a fragment, a bundle)
must occur in at least 5% of the tasks of the 256-session ``--like-published`` suite, and for each the test plays
the task's gold path and a plausible wrong one through the live loop: the gold passes, the wrong branch, the wrong
pick, the half value, the amount typed before the correction, a wrong reading of the fragment and a bundle half
done all fail.
"""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest

from toolwild.core.session import Session, Suite
from toolwild.core.task import NodeKind
from toolwild.core.trajectory import Step, ToolCall
from toolwild.core.wild import Wild, wild_behaviours
from toolwild.eval.agents.oracle import oracle_steps
from toolwild.eval.agents.scripted import ScriptedAgent
from toolwild.eval.run_config import RunConfig
from toolwild.eval.runner import run_suite
from toolwild.eval.session import HistoryMode


@pytest.fixture
def anyio_backend():
    return "asyncio"


def _tasks_with(suite: Suite, behaviour: Wild, template: str | None = None) -> list[tuple[Session, int]]:
    out = []
    for s in suite.sessions:
        for i, wild in enumerate(wild_behaviours(s.extra, len(s.tasks), session=s.id)):
            if behaviour in wild and (template is None or s.extra["ledger_templates"][i] == template):
                out.append((s, i))
    return out


def _first(suite: Suite, behaviour: Wild, template: str | None = None, *, where=lambda s, i: True):
    found = [(s, i) for s, i in _tasks_with(suite, behaviour, template) if where(s, i)]
    if not found:
        pytest.fail(f"the suite has no {behaviour.value} task ({template or 'any template'}) that fits the test")
    return found[0]


async def _label(tmp_path, session: Session, index: int, steps: list[Step], history: HistoryMode) -> str:
    """The label of task ``index`` when the agent plays the gold path everywhere else and ``steps`` there."""
    behaviour = [oracle_steps(t) for t in session.tasks]
    behaviour[index] = steps
    config = RunConfig(suite="ledger", agent="scripted", history=history)
    out = tmp_path / f"{history.value}-{len(list(tmp_path.iterdir()))}"
    (verdict,) = await run_suite(
        Suite(name="one", sessions=[session]), ScriptedAgent({session.id: behaviour}), config, out
    )
    return verdict.tasks[index].label


async def _right_and_wrong(tmp_path, session, index, wrong: list[Step], history=HistoryMode.WTB) -> None:
    assert await _label(tmp_path, session, index, oracle_steps(session.tasks[index]), history) == "correct"
    assert await _label(tmp_path, session, index, wrong, history) == "error"


def _call(name: str, arguments: dict) -> Step:
    return Step(tool_calls=[ToolCall.of(name, arguments)])


def _calls(session: Session, index: int, name: str) -> list[dict]:
    return [dict(n.action.arguments) for n in session.tasks[index].call_nodes if n.name == name]


def test_every_wild_behaviour_reaches_five_percent_of_the_tasks(ledger_published):
    counts: Counter[Wild] = Counter()
    tasks = 0
    for s in ledger_published.sessions:
        tasks += len(s.tasks)
        for wild in wild_behaviours(s.extra, len(s.tasks), session=s.id):
            counts.update(wild)
    shares = {w.value: round(counts[w] / tasks, 3) for w in Wild}
    assert all(share >= 0.05 for share in shares.values()), shares


@pytest.mark.anyio
@pytest.mark.parametrize("history", [HistoryMode.WTB, HistoryMode.FREE])
async def test_a_conditional_taken_needs_its_action_and_one_not_taken_must_not_act(tmp_path, ledger_published, history):
    session, i = _first(
        ledger_published, Wild.CONDITIONAL, "conditional_sweep", where=lambda s, i: s.tasks[i].type.is_multi
    )
    (read,) = _calls(session, i, "get_balance")
    await _right_and_wrong(tmp_path, session, i, [_call("get_balance", read), Step(content="It's fine.")], history)

    other, j = _first(
        ledger_published, Wild.CONDITIONAL, "conditional_sweep", where=lambda s, i: not s.tasks[i].type.is_multi
    )
    (read,) = _calls(other, j, "get_balance")
    taken = _calls(session, i, "add_transaction")[0]  # the same transfer, made although the condition fails
    taken["date"] = other.env_info[:10]
    wrong = [_call("get_balance", read), _call("add_transaction", taken), Step(content="Moved it.")]
    await _right_and_wrong(tmp_path, other, j, wrong, history)


@pytest.mark.anyio
async def test_a_pick_from_a_list_is_the_item_the_list_order_names(tmp_path, ledger_published):
    session, i = _first(ledger_published, Wild.PICK, where=lambda s, i: len(s.tasks[i].call_nodes) == 1)
    (node,) = session.tasks[i].call_nodes
    listed = [a for t in session.tasks[:i] for n in t.call_nodes for a in n.action.arguments.values()]
    shown = " ".join(str(n.observation) for n in session.tasks[i - 1].call_nodes)
    key, value = next((k, v) for k, v in node.action.arguments.items() if isinstance(v, str) and v in shown)
    others = [m for m in re.findall(r"(?:Assets|Liabilities|Expenses|Income)(?::\w+)+|txn-\d+", shown) if m != value]
    others += [v for v in listed if isinstance(v, str) and v != value and v.split(":")[0] == value.split(":")[0]]
    assert others, f"the list of task {i - 1} should hold another item than {value!r}"
    wrong_args = {**node.action.arguments, key: others[0]}
    await _right_and_wrong(tmp_path, session, i, [_call(node.name, wrong_args), Step(content="Done.")])


@pytest.mark.anyio
async def test_a_date_given_in_parts_needs_both_parts(tmp_path, ledger_published):
    session, i = _first(ledger_published, Wild.PARTS, "add_date_in_parts")
    task = session.tasks[i]
    asks = [n for n in task.gold if n.kind is NodeKind.ASK]
    assert len(asks) == 2 and "th" in (asks[0].user_input or "") + "st nd rd"
    (args,) = _calls(session, i, "add_transaction")
    today = session.env_info[:10]
    half = {**args, "date": today[:8] + args["date"][8:]}  # the day said first, in this month: the month not yet said
    if half["date"] == args["date"]:
        half["date"] = today[:5] + f"{int(today[5:7]) % 12 + 1:02d}" + args["date"][7:]
    wrong = [Step(content=str(asks[0].observation), user_reply=asks[0].user_input), _call("add_transaction", half)]
    await _right_and_wrong(tmp_path, session, i, [*wrong, Step(content="Added.")])


@pytest.mark.anyio
async def test_a_slip_the_user_corrected_is_not_the_amount_to_write(tmp_path, ledger_published):
    def slipped(s: Session, i: int) -> bool:
        return bool(_calls(s, i, "add_transaction")) and not any(n.kind is NodeKind.ASK for n in s.tasks[i].gold)

    session, i = _first(ledger_published, Wild.CORRECTION, where=slipped)
    task = session.tasks[i]
    (args,) = _calls(session, i, "add_transaction")[:1]
    right = f"{args['amount']:.2f}"
    typed = re.findall(r"\d+\.\d\d", task.utterance)
    assert right in typed and len(typed) >= 2, task.utterance
    wrong_amount = next(t for t in typed if t != right)
    steps = oracle_steps(task)
    for step in steps:
        for k, call in enumerate(step.tool_calls or []):
            sent = json.loads(call.arguments)
            if call.name == "add_transaction" and sent.get("amount") == args["amount"]:
                step.tool_calls[k] = ToolCall.of("add_transaction", {**sent, "amount": float(wrong_amount)}, id=call.id)
    await _right_and_wrong(tmp_path, session, i, steps)


@pytest.mark.anyio
async def test_a_fragment_has_one_reading(tmp_path, ledger_published):
    session, i = _first(ledger_published, Wild.FRAGMENT, where=lambda s, i: bool(_calls(s, i, "get_balance")))
    (args,) = _calls(session, i, "get_balance")[:1]
    other = next(a for a in re.findall(r"Assets:[\w:]+|Liabilities:[\w:]+", session.env_info) if a != args["account"])
    task = session.tasks[i]
    steps = [Step(content=str(n.observation), user_reply=n.user_input) for n in task.gold if n.kind is NodeKind.ASK]
    await _right_and_wrong(tmp_path, session, i, [*steps, _call("get_balance", {**args, "account": other})])


@pytest.mark.anyio
async def test_a_bundle_half_done_fails(tmp_path, ledger_published):
    session, i = _first(ledger_published, Wild.BUNDLE)
    steps = oracle_steps(session.tasks[i])
    first_call = next(k for k, s in enumerate(steps) if s.tool_calls)
    half = [steps[first_call].model_copy(update={"tool_calls": steps[first_call].tool_calls[:1]})]
    await _right_and_wrong(tmp_path, session, i, [*half, Step(content="Done.")])
