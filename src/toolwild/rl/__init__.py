"""Sessions as reinforcement-learning environments: reset, step with an assistant message, get a reward.

The core needs nothing beyond toolwild; :mod:`toolwild.rl.gymnasium` adapts it to Gymnasium (``pip install
'toolwild[rl]'``)::

    from toolwild.rl import SessionEnv

    with SessionEnv(session, reward="task") as env:
        messages, tools = env.reset()
        result = env.step({"role": "assistant", "content": "", "tool_calls": [...]})
        # result.messages, result.reward, result.done, result.verdict
"""

from toolwild.rl.env import SessionEnv, StepResult
from toolwild.rl.messages import assistant_step
from toolwild.rl.reward import RewardKind, RewardTiming, task_score

__all__ = ["RewardKind", "RewardTiming", "SessionEnv", "StepResult", "assistant_step", "task_score"]
