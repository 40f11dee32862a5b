"""The ledger domain: a write-back personal-finance agent over a real Beancount ledger (see README.md).

What the ledger *is* lives here (episode, tools, data model, seed data); how its sessions are made lives in
:mod:`toolwild.synth.providers.ledger` (the task templates).
"""

from toolwild.envs.domains.ledger.canonical import canonical_ledger
from toolwild.envs.domains.ledger.environment import ledger_environment
from toolwild.envs.domains.ledger.seed import generate_ledger, ledger_today
from toolwild.envs.domains.ledger.tools import LedgerEpisode

__all__ = [
    "LedgerEpisode",
    "canonical_ledger",
    "generate_ledger",
    "ledger_environment",
    "ledger_today",
]
