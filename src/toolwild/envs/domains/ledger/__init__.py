"""The ledger domain: a write-back personal-finance agent over a real Beancount ledger (see README.md).

What the ledger *is* lives here (episode, tools, data model, seed data, a user's own ledger files); how its sessions
are made lives in :mod:`toolwild.synth.providers.ledger` (the task templates).
"""

from toolwild.envs.domains.ledger.book import LoadedLedger, load_ledger, load_ledger_file
from toolwild.envs.domains.ledger.canonical import canonical_ledger
from toolwild.envs.domains.ledger.environment import ledger_environment
from toolwild.envs.domains.ledger.facts import default_payment_account
from toolwild.envs.domains.ledger.files import LedgerError
from toolwild.envs.domains.ledger.seed import generate_ledger, ledger_today
from toolwild.envs.domains.ledger.store import copy_ledger_tree
from toolwild.envs.domains.ledger.tools import LedgerEpisode

__all__ = [
    "LedgerEpisode",
    "LedgerError",
    "LoadedLedger",
    "canonical_ledger",
    "copy_ledger_tree",
    "default_payment_account",
    "generate_ledger",
    "ledger_environment",
    "ledger_today",
    "load_ledger",
    "load_ledger_file",
]
