"""The python backend on the inventory domain: schemas from signatures, validation, isolation, snapshots, diffs."""

from __future__ import annotations

from toolwild.core.tool import Effect
from toolwild.envs.base import ToolErrorKind, diff_states
from toolwild.envs.registry import get_environment


def test_tool_specs_come_from_signatures_and_docstrings():
    env = get_environment("inventory")
    specs = {t.name: t for t in env.tools}
    assert set(specs) == {"get_stock", "list_items", "restock", "place_order"}
    assert specs["restock"].effect is Effect.WRITE and specs["get_stock"].effect is Effect.READ
    params = specs["place_order"].parameters
    assert params["required"] == ["item", "units"]
    assert params["properties"]["units"]["type"] == "integer"
    assert params["properties"]["units"]["description"] == "how many units are sold (at least 1)."
    assert specs["place_order"].description == "Sell units of an item; fails when the stock is too low."
    assert specs["list_items"].parameters["properties"] == {}


def test_invalid_arguments_never_reach_the_tool():
    episode = get_environment("inventory").reset(seed=1)
    before = episode.state()
    item = episode.call("list_items", {}).result[0]
    for bad in ({"item": item, "units": "lots"}, {"item": item}, {"item": item, "units": 1, "extra": True}):
        obs = episode.call("restock", bad)
        assert not obs.ok and obs.error.kind is ToolErrorKind.INVALID_ARGUMENTS
    assert episode.call("nope", {}).error.kind is ToolErrorKind.UNKNOWN_TOOL
    assert episode.state() == before


def test_a_boolean_is_never_a_number_in_any_python_domain():
    """pydantic's lax mode reads ``true`` as 1: ``units: true`` used to restock one unit."""
    episode = get_environment("inventory").reset(seed=1)
    before = episode.state()
    item = episode.call("list_items", {}).result[0]
    for value in (True, False):
        obs = episode.call("restock", {"item": item, "units": value})
        assert not obs.ok and obs.error.kind is ToolErrorKind.INVALID_ARGUMENTS
        assert "units: a boolean is not a number" in obs.error.message
    assert episode.state() == before
    assert episode.call("restock", {"item": item, "units": 2}).ok


def test_typed_errors_from_preconditions():
    episode = get_environment("inventory").reset(seed=1)
    item = episode.call("list_items", {}).result[0]
    units = episode.call("get_stock", {"item": item}).result["units"]
    obs = episode.call("place_order", {"item": item, "units": units + 1})
    assert obs.error.kind is ToolErrorKind.PRECONDITION_FAILED
    assert episode.call("get_stock", {"item": "unobtainium"}).error.kind is ToolErrorKind.NOT_FOUND


def test_episodes_are_isolated_and_reads_see_earlier_writes():
    env = get_environment("inventory")
    a, b = env.reset(seed=3), env.reset(seed=3)
    assert a.state() == b.state()
    item = a.call("list_items", {}).result[0]
    start = a.call("get_stock", {"item": item}).result["units"]
    a.call("restock", {"item": item, "units": 5})
    assert a.call("get_stock", {"item": item}).result["units"] == start + 5
    assert b.call("get_stock", {"item": item}).result["units"] == start
    assert env.reset(seed=4).state() != env.reset(seed=3).state()


def test_snapshots_and_diffs():
    episode = get_environment("inventory").reset(seed=2)
    item = episode.call("list_items", {}).result[0]
    before = episode.state()
    episode.call("restock", {"item": item, "units": 2})
    order = episode.call("place_order", {"item": item, "units": 1}).result
    changes = diff_states(before, episode.state())
    assert {"path": f"/stock/{item}", "before": before["stock"][item], "after": before["stock"][item] + 1} in changes
    assert any(c["path"] == "/orders" and c["after"] == [order] for c in changes)
    assert diff_states(before, before) == []
