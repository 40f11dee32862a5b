"""The ledger templates: hand-written task templates for Beancount ledgers, as a session provider.

The domain folder (:mod:`toolwild.envs.domains.ledger`) holds what the ledger *is* (episode, tools, data model,
seed data); this package holds how its sessions are *made*: one module per coarse task type (:mod:`.single`,
:mod:`.multi`, :mod:`.clarify`, :mod:`.chat`), the shared machinery (:mod:`.scenario`, :mod:`.common`,
:mod:`.phrasing`, :mod:`.catalog`), what the templates know about the books (:mod:`.profile`: the built-in
ledger's constants, or a user's own ledger read by :mod:`.own_books`), one session (:mod:`.builder`), the provider
(:mod:`.provider`) and the whole suite in one call (:mod:`.suite`).
"""

from toolwild.synth.providers.ledger.builder import OwnBooks, ledger_seed_for
from toolwild.synth.providers.ledger.profile import LedgerProfile
from toolwild.synth.providers.ledger.provider import BLOCK, LedgerTemplates
from toolwild.synth.providers.ledger.scenario import GenerationError
from toolwild.synth.providers.ledger.suite import build_ledger_suite, write_ledger_suite

__all__ = [
    "BLOCK",
    "GenerationError",
    "LedgerProfile",
    "LedgerTemplates",
    "OwnBooks",
    "build_ledger_suite",
    "ledger_seed_for",
    "write_ledger_suite",
]
