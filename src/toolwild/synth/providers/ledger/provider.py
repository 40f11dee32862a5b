"""The ledger templates as a session provider: session ``i`` of a suite on the built-in Beancount ledger, or on a
user's own ledger file (``ledger=``: every session starts from a copy of it).

Why blocks: a template is chosen against the counts of what earlier sessions chose (:class:`.builder.Balancer`),
so session ``i`` depends on the sessions before it. Letting it depend on *all* of them would make the suite one
sequential stream. The balance restarts at every index that is a multiple of :data:`BLOCK` (256, the cycle of
the published design): a session depends only on the earlier sessions of its own block, so blocks are independent
(a distributed executor can run them apart) while a suite of up to 256 sessions is exactly what the single stream
made. Inside a block the sessions are still made strictly in index order: :meth:`LedgerTemplates.make` waits until
every earlier index of its block that the provider owns is made (or restored), whatever order the units start in.

Which indices a provider owns: when a suite mixes environments round robin (``--env ledger --env inventory``),
session ``i`` belongs to environment ``i % n_envs``. The provider is told so with ``stride`` (the number of
environments) and ``offset`` (the ledger's place among them); it owns index ``i`` when ``i % stride == offset``
and a session depends only on the owned indices before it in its block. Plain ints, so a provider can be
rebuilt in another process from its constructor arguments.

A model writer (``writer``, ``--model``): once a session is built, and the next one of its block may start, the
model rewords its utterances (:mod:`.rewrite`): each rewording is kept only where the paraphrase rules and the
session's gold checks still hold, the template's words otherwise; who wrote each utterance goes to
``extra["utterance_sources"]``. The balance counts the templates chosen, not the words, so a resumed run (which
restores the reworded sessions of its log) continues exactly. Without a writer nothing is asked and the sessions are
the templates' alone.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

from toolwild.core.patterns import Pattern, published_patterns
from toolwild.core.session import Session
from toolwild.envs.domains.ledger.tools import LedgerEpisode
from toolwild.llm.client import LLM
from toolwild.synth.providers.base import SessionOutcome
from toolwild.synth.providers.ledger.builder import Balancer, OwnBooks, build_session, ledger_seed_for
from toolwild.synth.providers.ledger.rewrite import reword_session

__all__ = ["BLOCK", "LedgerTemplates"]

BLOCK = 256
"""Sessions per balance block: the balance of template choices restarts at every multiple of this index."""


@dataclass
class _Block:
    """The sessions of one block made so far: every owned index below ``frontier``, plus some restored above it."""

    frontier: int
    """The next owned index to make (or past the block's end once all are made)."""
    balancer: Balancer = field(default_factory=Balancer)
    """The counts of every owned index below ``frontier``."""
    ahead: dict[int, Balancer] = field(default_factory=dict)
    """Restored sessions above the frontier (a resumed run whose log lacks an earlier one): counted once reached."""


class LedgerTemplates:
    """Makes ledger sessions from the hand-written templates (see the module docstring).

    Args:
        seed: the suite seed (session ``i`` uses the ledger of seed ``seed * 10000 + i``).
        like_published: every ordering of the four coarse types once per 256 sessions (the published design) instead
            of the default transition-bucket cycle.
        stride: the number of environments the suite's sessions go round (1: every index is the ledger's).
        offset: the ledger's place in that round; the provider owns index ``i`` when ``i % stride == offset``.
        id_prefix: the suite's name, the session ids' prefix.
        ledger: a user's own Beancount file: every session starts from a copy of it (and what it includes), and the
            templates draw accounts, payees, amounts and dates from it (None: a generated ledger per session).
        ledger_ref: how the sessions name that file (``extra["ledger_file"]``, e.g. its path relative to the
            suite's folder; default: ``ledger`` as given).
        writer: a model that rewords each made session's utterances, checked, the template's words kept where it
            fails (None: the templates alone, no model asked).

    Raises:
        ConfigError: ``ledger`` is missing or does not load cleanly (naming the file, line and directive).
    """

    name = "ledger-templates"

    def __init__(
        self,
        seed: int = 0,
        like_published: bool = False,
        *,
        stride: int = 1,
        offset: int = 0,
        id_prefix: str = "ledger",
        ledger: Path | None = None,
        ledger_ref: str | None = None,
        writer: LLM | None = None,
    ) -> None:
        if stride < 1 or not 0 <= offset < stride:
            raise ValueError(f"need stride >= 1 and 0 <= offset < stride, got stride={stride}, offset={offset}")
        self.seed = seed
        self.like_published = like_published
        self.stride = stride
        self.offset = offset
        self.id_prefix = id_prefix
        self.ledger = ledger
        self.ledger_ref = ledger_ref
        self.writer = writer
        self._books = OwnBooks.read(ledger, ledger_ref) if ledger is not None else None
        self._tools = LedgerEpisode.tool_specs()
        self._patterns: list[Pattern] | None = published_patterns(seed) if like_published else None
        self._blocks: dict[int, _Block] = {}
        self._finished: set[int] = set()
        """Blocks whose every owned index is made (their counts are dropped: no later session reads them)."""
        self._condition: asyncio.Condition | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    # -------------------------------------------------------------------------------------------- the protocol
    def owns(self, index: int) -> bool:
        """Whether session ``index`` of the suite is this provider's to make."""
        return index >= 0 and index % self.stride == self.offset

    async def make(self, index: int) -> SessionOutcome:
        """Session ``index``, once every earlier owned index of its block is made (so the result does not depend on
        which units started first); with a writer, reworded after the next session of the block is let go."""
        self._check(index)
        condition = self._wake()
        async with condition:
            await condition.wait_for(lambda: self._ready(index))
        try:
            outcome = self.build(index)
        finally:
            async with condition:
                condition.notify_all()
        if self.writer is not None and outcome.session is not None:
            seed = ledger_seed_for(self.seed, index)
            outcome.session = await reword_session(self.writer, outcome.session, seed=seed)
        return outcome

    def restore(self, index: int, session: Session | None) -> None:
        """Count a session made before a resumed run (None: one that could not be built), so the next :meth:`make`
        gives what an uninterrupted run gives.

        Raises:
            ValueError: the index is not this provider's, or was already made or restored.
            DataError: the session does not list the template of each task (``extra["ledger_templates"]``).
        """
        self._check(index)
        self._advance(index, Balancer.of_session(session))

    # -------------------------------------------------------------------------------------------- making
    def build(self, index: int) -> SessionOutcome:
        """Make session ``index`` now, synchronously (what :meth:`make` does once it is its turn; a caller that
        goes through the indices in order, like :func:`.suite.build_ledger_suite`, calls it directly).

        Raises:
            ValueError: an earlier owned index of the block is not made yet, or this one already is.
        """
        self._check(index)
        block = self._block(index)
        if block.frontier != index:
            raise ValueError(f"ledger session {index} cannot be made before session {block.frontier}")
        fixed = self._patterns[index % len(self._patterns)] if self._patterns else None
        built = build_session(
            index, self.seed, block.balancer, self._tools, fixed, id_prefix=self.id_prefix, books=self._books
        )
        self._advance(index, Balancer.of_session(built.session))
        return SessionOutcome(session=built.session, reasons=built.reasons)

    # -------------------------------------------------------------------------------------------- blocks
    def _check(self, index: int) -> None:
        if not self.owns(index):
            raise ValueError(f"session {index} is not the ledger's (stride {self.stride}, offset {self.offset})")
        if self._made(index):
            raise ValueError(f"ledger session {index} was already made")

    def _made(self, index: int) -> bool:
        number = index // BLOCK
        if number in self._finished:
            return True
        block = self._blocks.get(number)
        return block is not None and (index < block.frontier or index in block.ahead)

    def _ready(self, index: int) -> bool:
        """Its turn has come (or it was made meanwhile: then :meth:`build` says so instead of waiting forever)."""
        return self._made(index) or self._block(index).frontier == index

    def _block(self, index: int) -> _Block:
        number = index // BLOCK
        block = self._blocks.get(number)
        if block is None:
            block = self._blocks[number] = _Block(frontier=self._next_owned(number * BLOCK - 1))
        return block

    def _next_owned(self, index: int) -> int:
        """The first owned index after ``index``."""
        start = index + 1
        return start + (self.offset - start) % self.stride

    def _advance(self, index: int, counted: Balancer) -> None:
        """Record that ``index`` is made; move the frontier over every made index."""
        number = index // BLOCK
        block = self._block(index)
        if index != block.frontier:
            block.ahead[index] = counted
            return
        block.balancer.add(counted)
        block.frontier = self._next_owned(index)
        while block.frontier in block.ahead:
            block.balancer.add(block.ahead.pop(block.frontier))
            block.frontier = self._next_owned(block.frontier)
        if block.frontier >= (number + 1) * BLOCK:
            del self._blocks[number]
            self._finished.add(number)

    def _wake(self) -> asyncio.Condition:
        """The condition the waiting :meth:`make` calls share (one per event loop: a provider may outlive one)."""
        loop = asyncio.get_running_loop()
        if self._condition is None or self._loop is not loop:
            self._condition = asyncio.Condition()
            self._loop = loop
        return self._condition
