"""The ``replay`` backend over WildToolBench recordings: which recording answers which call."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolwild.core.environment import Environment, Recording
from toolwild.core.formats.wtb import load_wtb_suite
from toolwild.core.formats.wtb_envs import environment_from_session
from toolwild.core.tool import Tool
from toolwild.envs.base import ToolErrorKind
from toolwild.envs.replay import ReplayEnvironment

FIXTURE = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures" / "wildtoolbench"
FLIGHT = Tool(
    name="find_flight",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}, "seats": {"type": "integer"}},
        "required": ["city"],
    },
)
ENV = Environment(
    id="air",
    tools=[FLIGHT],
    recordings=[
        Recording(name="find_flight", arguments={"city": "Las Vegas", "seats": 2}, observation={"flight": "LV1"}),
        Recording(name="find_flight", arguments={"city": "Paris"}, observation={"flight": "P1"}),
        Recording(name="find_flight", arguments={"city": "Paris"}, observation={"flight": "P2"}),
    ],
)


def test_arguments_match_loosely_and_repeated_calls_walk_the_recordings():
    episode = ReplayEnvironment(ENV).reset()
    assert episode.call("find_flight", {"city": "lasvegas", "seats": 2.0}).result == {"flight": "LV1"}
    assert episode.call("find_flight", {"city": "Paris"}).result == {"flight": "P1"}
    assert episode.call("find_flight", {"city": "PARIS"}).result == {"flight": "P2"}
    assert episode.call("find_flight", {"city": "Paris"}).result == {"flight": "P2"}  # then repeats the last
    assert episode.state() == {"replayed": [0, 1, 2, 2]}
    missing = episode.call("find_flight", {"city": "Rome"})
    assert missing.error.kind is ToolErrorKind.NO_RECORDING
    invalid = episode.call("find_flight", {"seats": "two"})
    assert invalid.error.kind is ToolErrorKind.INVALID_ARGUMENTS and "'city' is a required" in invalid.error.message


def test_name_rule_reproduces_the_published_harness():
    episode = ReplayEnvironment(ENV, match="name").reset()
    results = [episode.call("find_flight", {"city": "Rome"}).result for _ in range(3)]
    assert results == [{"flight": "LV1"}, {"flight": "P1"}, {"flight": "P2"}]
    assert episode.call("find_flight", {"city": "Rome"}).error.kind is ToolErrorKind.NO_RECORDING


def test_episodes_do_not_share_what_they_used():
    env = ReplayEnvironment(ENV)
    one, two = env.reset(), env.reset()
    one.call("find_flight", {"city": "Paris"})
    assert two.call("find_flight", {"city": "Paris"}).result == {"flight": "P1"}


@pytest.mark.skipif(not FIXTURE.exists(), reason="shared fixtures not present")
def test_every_gold_call_of_the_fixture_replays_to_its_recorded_observation():
    suite, _ = load_wtb_suite(FIXTURE / "sessions_0_4.reconstructed.jsonl")
    checked = 0
    for session in suite.sessions:
        episode = ReplayEnvironment(environment_from_session(session)).reset()
        for task in session.tasks:
            for node in task.call_nodes:
                obs = episode.call(node.name, dict(node.action.arguments))
                assert obs.ok and obs.result == node.observation, (session.id, node.name)
                checked += 1
    assert checked == sum(len(t.call_nodes) for s in suite.sessions for t in s.tasks) > 0
