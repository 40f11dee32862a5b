"""The Gymnasium adapter: a scripted policy runs to termination and earns exactly the core's rewards."""

from __future__ import annotations

import json

import pytest
from rl_policies import call, oracle_script, play

from toolwild.rl import SessionEnv

gymnasium = pytest.importorskip("gymnasium")

from toolwild.rl.gymnasium import GymSessionEnv  # noqa: E402 - only with gymnasium installed


def _script_with_a_wrong_write(session):
    script = oracle_script(session)
    arguments = dict(session.tasks[0].gold[0].action.arguments)
    arguments["amount"] = round(float(arguments["amount"]) + 1, 2)
    script[0][0] = call("add_transaction", arguments)
    return script


def _gym_play(env: GymSessionEnv, script) -> list[tuple[str, float, bool, bool, dict]]:
    """The same scripted policy as rl_policies.play, through Gymnasium's API (actions as JSON text)."""
    observation, info = env.reset(seed=7)
    assert env.observation_space.contains(observation)
    task, k, out = info["task_index"], 0, []
    while True:
        messages = script[task]
        action = json.dumps(messages[k] if k < len(messages) else {"role": "assistant", "content": ""})
        observation, reward, terminated, truncated, info = env.step(action)
        assert env.observation_space.contains(observation) and not truncated
        out.append((observation, float(reward), terminated, truncated, info))
        if terminated:
            return out
        task, k = (task, k + 1) if info["task_index"] == task else (info["task_index"], 0)


@pytest.mark.parametrize("reward", ["task", "state", "progress"])
def test_a_scripted_policy_runs_to_termination_with_the_cores_rewards(rl_ledger_suite, reward):
    session = next(s for s in rl_ledger_suite.sessions if s.tasks[0].gold[0].name == "add_transaction")
    script = _script_with_a_wrong_write(session)
    env = GymSessionEnv(session, reward=reward)
    try:
        steps = _gym_play(env, script)
    finally:
        env.close()
    with SessionEnv(session, reward=reward) as core:
        expected = play(core, script)
    assert [r for _, r, _, _, _ in steps] == [r.reward for r in expected]
    assert [json.loads(o)["messages"] for o, *_ in steps] == [r.messages for r in expected]
    assert steps[-1][4]["verdict"] == [v.model_dump(mode="json") for v in expected[-1].verdict]
    assert steps[-1][4]["verdict"][0]["label"] == "error"  # the wrong write


def test_reset_shows_the_conversation_and_the_tools(rl_inventory_suite):
    session = rl_inventory_suite.sessions[0]
    env = GymSessionEnv(session, task=1)
    try:
        observation, info = env.reset()
        shown = json.loads(observation)
        assert shown["messages"][-1] == {"role": "user", "content": session.tasks[1].utterance}
        assert shown["tools"] == info["tools"] and info["session_id"] == session.id and info["task_index"] == 1
        _, reward, terminated, _, info = env.step("not an assistant message")
        assert (reward, terminated, info["verdict"][0]["label"]) == (0.0, True, "error")
    finally:
        env.close()


def test_gymnasiums_own_checker_accepts_the_env(rl_inventory_suite):
    from gymnasium.utils.env_checker import check_env

    env = GymSessionEnv(rl_inventory_suite.sessions[0])
    try:
        check_env(env, skip_render_check=True)
    finally:
        env.close()
