"""Agents the runner plays: a model (:mod:`.model`), the gold path (:mod:`.oracle`) and behaviour files
(:mod:`.scripted`), all behind one interface (:mod:`.base`): a step for the context the runner gives."""

from toolwild._exports import lazy_exports

_EXPORTS = {
    "Agent": "toolwild.eval.agents.base",
    "AgentContext": "toolwild.eval.agents.base",
    "ModelAgent": "toolwild.eval.agents.model",
    "OracleAgent": "toolwild.eval.agents.oracle",
    "ScriptedAgent": "toolwild.eval.agents.scripted",
    "load_behaviours": "toolwild.eval.agents.scripted",
}
"""Each public name and the module that defines it (see :mod:`toolwild._exports`)."""

__all__ = [
    "Agent",
    "AgentContext",
    "ModelAgent",
    "OracleAgent",
    "ScriptedAgent",
    "load_behaviours",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
