"""The ledger templates as a session provider: same sessions as the suite builder whatever order units start in,
blocks of 256 independent of each other, a resumed provider continuing exactly, a lost session not stopping the
rest."""

from __future__ import annotations

import asyncio
import json
import random

import pytest

from toolwild.core.formats.wtb import session_from_wtb, session_to_wtb
from toolwild.core.session import Session
from toolwild.core.task import CoarseType, TaskType
from toolwild.errors import DataError
from toolwild.synth.providers.base import SessionProvider
from toolwild.synth.providers.ledger import BLOCK, GenerationError, LedgerTemplates, build_ledger_suite
from toolwild.synth.providers.ledger import builder as ledger_builder
from toolwild.synth.providers.ledger.scenario import Option

N = 10


def _record(session: Session | None) -> str | None:
    return None if session is None else json.dumps(session_to_wtb(session), sort_keys=True)


def _round_trip(session: Session) -> Session:
    """The session as a resumed run reads it back from its log."""
    return session_from_wtb(json.loads(json.dumps(session_to_wtb(session))))


async def _make_all(provider: LedgerTemplates, indices: list[int]) -> dict[int, str | None]:
    """Start one task per index, in the given order, all at once (as a pool of workers would)."""
    outcomes = await asyncio.gather(*(provider.make(i) for i in indices))
    return {i: _record(o.session) for i, o in zip(indices, outcomes, strict=True)}


@pytest.fixture(scope="module")
def reference() -> list[str]:
    return [_record(s) for s in build_ledger_suite(N, seed=3).sessions]  # type: ignore[misc]


def test_is_a_session_provider():
    provider: SessionProvider = LedgerTemplates(seed=0)
    assert provider.name == "ledger-templates"


def test_made_in_order_equals_the_suite_builder(reference):
    made = asyncio.run(_make_all(LedgerTemplates(seed=3), list(range(N))))
    assert [made[i] for i in range(N)] == reference


def test_started_in_shuffled_order_gives_the_same_sessions(reference):
    """Units may start in any order under concurrency: each waits for the earlier ones of its block."""
    for shuffle_seed in (1, 2):
        order = list(range(N))
        random.Random(shuffle_seed).shuffle(order)
        assert order != sorted(order)
        made = asyncio.run(_make_all(LedgerTemplates(seed=3), order))
        assert [made[i] for i in range(N)] == reference


def test_restore_then_make_equals_uninterrupted(reference):
    """A resumed run hands over the sessions already made (as read back from its log); what it makes next is
    what an uninterrupted run made."""
    made = build_ledger_suite(N, seed=3).sessions
    provider = LedgerTemplates(seed=3)
    for i in range(6):
        provider.restore(i, _round_trip(made[i]))
    rest = asyncio.run(_make_all(provider, [9, 7, 6, 8]))
    assert [rest[i] for i in range(6, N)] == reference[6:]


def test_restore_with_a_gap_counts_later_sessions_only_once_reached(reference):
    """A log may hold later sessions but not an earlier one (finished out of order before a kill): the missing one
    is made as if the later ones did not exist yet (here 250 of them, all alike, would skew it if counted), and the
    next one after them is what an uninterrupted run made."""
    made = build_ledger_suite(N, seed=3).sessions
    provider = LedgerTemplates(seed=3)
    for i in (0, 2, 1, 4):
        provider.restore(i, _round_trip(made[i]))
    for i in range(6, 256):
        provider.restore(i, _round_trip(made[0]))
    assert _record(provider.build(3).session) == reference[3]
    with pytest.raises(ValueError, match="already made"):
        provider.build(6)

    uninterrupted = LedgerTemplates(seed=3)
    for i in range(5):
        uninterrupted.restore(i, _round_trip(made[i]))
    assert _record(provider.build(5).session) == _record(uninterrupted.build(5).session) == reference[5]


def test_a_restored_session_must_say_its_templates():
    session = build_ledger_suite(1, seed=3).sessions[0]
    session.extra.pop("ledger_templates")
    with pytest.raises(DataError, match="ledger_templates"):
        LedgerTemplates(seed=3).restore(0, session)


def test_an_index_is_made_once_and_only_by_its_owner():
    provider = LedgerTemplates(seed=3, stride=2, offset=1)
    assert [i for i in range(6) if provider.owns(i)] == [1, 3, 5]
    with pytest.raises(ValueError, match="not the ledger's"):
        provider.build(2)
    with pytest.raises(ValueError, match="before session 1"):
        provider.build(3)
    provider.restore(1, None)
    provider.build(3)
    with pytest.raises(ValueError, match="already made"):
        provider.build(3)
    with pytest.raises(ValueError, match="already made"):
        provider.restore(1, None)


def test_an_owned_stride_is_made_in_any_start_order():
    """Mixed environments: the ledger owns every second index and waits only for those."""
    in_order = asyncio.run(_make_all(LedgerTemplates(seed=3, stride=2, offset=1), [1, 3, 5, 7]))
    shuffled = asyncio.run(_make_all(LedgerTemplates(seed=3, stride=2, offset=1), [7, 3, 5, 1]))
    assert shuffled == in_order
    assert all(json.loads(r)["id"] == f"ledger_{i}" for i, r in in_order.items() if r)


def test_blocks_of_256_are_independent():
    """The balance restarts at index 256: what came before (here, 255 copies of one session, a balance as skewed
    as it gets) changes the last session of block 0 but not the first of block 1."""
    first = build_ledger_suite(1, seed=3).sessions[0]
    skewed = LedgerTemplates(seed=3)
    empty = LedgerTemplates(seed=3)
    for i in range(BLOCK - 1):
        skewed.restore(i, first)
        empty.restore(i, None)
    assert _record(skewed.build(BLOCK - 1).session) != _record(empty.build(BLOCK - 1).session)
    fresh = LedgerTemplates(seed=3)  # nothing of block 0 made at all
    assert _record(skewed.build(BLOCK).session) == _record(fresh.build(BLOCK).session)
    assert _record(skewed.build(BLOCK + 1).session) == _record(fresh.build(BLOCK + 1).session)


def _broken(ctx) -> list[Option]:
    """A template whose gold call fails (an unknown account): a template bug."""
    return [
        Option(
            template="broken",
            type=TaskType.SINGLE,
            utterance="What's in Nope?",
            mode="first",
            ref=None,
            build=lambda rec: str(rec.call("get_balance", {"account": "Nope:Nothing"})),
        )
    ]


@pytest.mark.parametrize("options", [lambda ctx: [], _broken], ids=["dead-ends", "gold-call-fails"])
def test_a_session_that_cannot_be_built_is_reported_and_counts_as_made(monkeypatch, options):
    for coarse in CoarseType:
        monkeypatch.setitem(ledger_builder._OPTIONS, coarse, options)
    provider = LedgerTemplates(seed=3)

    async def make_both():  # 1 starts first and waits for 0
        return await asyncio.gather(provider.make(1), provider.make(0))

    outcomes = asyncio.run(make_both())
    for outcome in outcomes:
        assert outcome.session is None and outcome.reasons
    assert "Nope:Nothing" in outcomes[0].reasons[-1] if options is _broken else "attempts" in outcomes[0].reasons[-1]
    with pytest.raises(GenerationError, match="session 0 could not be built"):
        build_ledger_suite(1, seed=3)
