"""Environment files: the format, and imports from SynthTools specs and WildToolBench tool lists."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolwild.core.environment import BackendKind, Environment, Recording
from toolwild.core.formats.environment import load_environment, write_environment
from toolwild.core.formats.synthtools import load_synthtools_dir
from toolwild.core.formats.synthtools_envs import (
    environments_from_synthtools,
    load_synthtools_meta,
    parse_environment_yml,
)
from toolwild.core.formats.wtb_envs import environments_from_tool_lists
from toolwild.core.tool import Tool
from toolwild.errors import DataError

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures"
TARBALL = SHARED / "synthtools" / "tool_content.tar.gz"
TOOL_LISTS = SHARED / "wildtoolbench" / "tools_en.jsonl"
needs_fixtures = pytest.mark.skipif(not SHARED.exists(), reason="shared fixtures not present")


def test_round_trip_and_located_errors(tmp_path):
    env = Environment(
        id="shop",
        tools=[Tool(name="t")],
        initial_state={"stock": {"tea": 1}},
        backend=BackendKind.LLM,
        recordings=[Recording(name="t", observation=[1, 2])],
    )
    path = write_environment(env, tmp_path / "a" / "shop.env.json")
    assert load_environment(path) == env
    assert json.loads(path.read_text())["format_version"] == 1
    (tmp_path / "bad.env.json").write_text('{\n "id": "x",\n "tools": [1]\n}')
    with pytest.raises(DataError) as info:
        load_environment(tmp_path / "bad.env.json")
    assert info.value.file.endswith("bad.env.json") and info.value.field == "tools.0"
    (tmp_path / "broken.env.json").write_text('{\n "id": \n')
    with pytest.raises(DataError) as info:
        load_environment(tmp_path / "broken.env.json")
    assert info.value.line == 3
    with pytest.raises(DataError, match="cannot read"):
        load_environment(tmp_path / "missing.env.json")


def test_both_shapes_of_synthtools_environment_yml():
    yaml_shape = (
        "tool_set_yml: |\n  metadata:\n    task: t\n  data:\n    orders:\n      - id: 1\n        day: 2024-01-02\n"
    )
    meta, data = parse_environment_yml(yaml_shape)
    assert meta == {"task": "t"} and data == {"orders": [{"id": 1, "day": "2024-01-02"}]}
    json_shape = 'tool_set_yml: |\n  # comment\n  {"task": "t", "patients": [{"id": "P"}]}\n\n  # Task list\n  text\n'
    meta, data = parse_environment_yml(json_shape)
    assert meta == {"task": "t"} and data == {"patients": [{"id": "P"}]}
    with pytest.raises(DataError, match="tool_set_yml"):
        parse_environment_yml("other: 1\n", file="x.yml")
    with pytest.raises(DataError, match="no seed data"):
        parse_environment_yml("tool_set_yml: just words\n")


@needs_fixtures
def test_synthtools_release_becomes_one_simulated_environment_per_spec():
    tools = load_synthtools_dir(TARBALL).tools
    meta = load_synthtools_meta(TARBALL)
    envs = environments_from_synthtools(tools, meta)
    assert sum(len(e.tools) for e in envs) == len(tools) == 5900
    assert len(envs) == len({(t.extra["field"], t.extra["spec"]) for t in tools})
    assert all(e.backend is BackendKind.LLM for e in envs)
    assert all(" " not in t.name for e in envs for t in e.tools)  # identifiers, callable through any API
    for env in envs:
        assert len({t.name for t in env.tools}) == len(env.tools)
    seeded = {e.id: e for e in envs if e.initial_state}
    # the release seeds two specs, but its tool_json holds no tool of healthcare spec 1: one seeded environment
    assert set(meta.seed_data) == {"ecommerce_and_retail_tool_spec_43", "healthcare_medical_tool_spec_1"}
    assert len(meta.seed_data["healthcare_medical_tool_spec_1"]["patients"]) == 3
    assert set(seeded) == {"ecommerce_and_retail_tool_spec_43"}
    assert {"customers", "orders", "products"} <= set(seeded["ecommerce_and_retail_tool_spec_43"].initial_state)
    shop = seeded["ecommerce_and_retail_tool_spec_43"]
    assert shop.description == "Order Processing and Fulfillment - Returns and refunds processing"


@needs_fixtures
def test_wildtoolbench_tool_lists_become_simulated_environments(tmp_path):
    envs = environments_from_tool_lists(TOOL_LISTS)
    # 1,248 published entries; line 193 lists its 4 tools twice over, and an exact repeat is the same tool
    assert len(envs) == 256 and sum(len(e.tools) for e in envs) == 1248 - 4
    assert [t.name for t in envs[192].tools] == [
        "getFlightInfo",
        "getAirportShops",
        "getParkingInfo",
        "getTransportInfo",
    ]
    bad = tmp_path / "tools.jsonl"
    bad.write_text(TOOL_LISTS.read_text().splitlines()[0] + "\n" + '[{"type": "function"}]\n')
    with pytest.raises(DataError) as info:
        environments_from_tool_lists(bad)
    assert info.value.line == 2 and info.value.file == str(bad)
