"""The ledger domain: a write-back personal-finance agent over a real Beancount ledger (see README.md)."""

from toolwild.envs.domains.ledger.canonical import canonical_ledger
from toolwild.envs.domains.ledger.environment import ledger_environment
from toolwild.envs.domains.ledger.seed import generate_ledger, ledger_today
from toolwild.envs.domains.ledger.suite import build_ledger_suite, write_ledger_suite
from toolwild.envs.domains.ledger.tools import LedgerEpisode

__all__ = [
    "LedgerEpisode",
    "build_ledger_suite",
    "canonical_ledger",
    "generate_ledger",
    "ledger_environment",
    "ledger_today",
    "write_ledger_suite",
]
